"""The benchmark scripts' own tests (tests/bench/test_*.py) share this:
check() and the case runner, one case per test_ function:

    tests/bench/test_X.py --list
    tests/bench/test_X.py CASE      exit 0 pass, 1 fail
"""
import sys


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def run_cases(namespace):
    """Runs the case sys.argv names among namespace's test_ functions."""
    cases = {n[5:]: f for n, f in namespace.items() if n.startswith("test_")}
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(cases))
        return 0
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print("usage: %s --list | CASE" % sys.argv[0], file=sys.stderr)
        return 2
    try:
        cases[sys.argv[1]]()
    except AssertionError as e:
        print("FAIL: %s" % e)
        return 1
    return 0
