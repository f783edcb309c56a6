#!/usr/bin/python3
"""The benchmark's own logic (tests/bench/guest_bench.py), without KVM or a
VMM: its options, how it counts requests, how it treats a guest that
stalls, and the ratios it reports. One case per behaviour:

    tests/bench/test_guest_bench.py --list
    tests/bench/test_guest_bench.py CASE      exit 0 pass, 1 fail
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import guest_bench as gb  # noqa: E402
from bench_cases import check, run_cases  # noqa: E402

SCRIPT = os.path.join(HERE, "guest_bench.py")


def parse(*argv):
    saved = sys.argv
    sys.argv = ["guest_bench.py"] + list(argv)
    try:
        return gb.parse_args()
    finally:
        sys.argv = saved


def refused(*argv):
    """Runs the script with argv; its exit status and last stderr line."""
    p = subprocess.run([sys.executable, SCRIPT] + list(argv), capture_output=True, text=True)
    return p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def test_bad_block_sizes_and_workloads_are_refused_with_one_line():
    for bs in ("3k", "0k", "8m", "64x"):
        rc, msg = refused("--report", "--bs", bs)
        check(rc != 0 and "--bs" in msg and bs.rstrip("kmx") in msg,
              "--bs %s: %d %r" % (bs, rc, msg))
    for w in ("randread:0:1", "randread:32", "trim:8:1", "randread:8:1,"):
        rc, msg = refused("--report", "--workloads", w)
        check(rc != 0 and "--workloads" in msg, "--workloads %s: %d %r" % (w, rc, msg))


def test_block_sizes_are_kib():
    check(parse().bs == 4, "default")
    check(parse("--bs", "64k").bs == 64, "64k")
    check(parse("--bs", "1m").bs == 1024, "1m")
    check(parse("--bs", "128").bs == 128, "a bare number is KiB")


def test_workloads_replace_the_default_list():
    a = parse("--workloads", "randrw:32:2,read:8:1")
    check(a.workloads == ["randrw:32:2", "read:8:1"], a.workloads)
    d = parse("--qd", "1,32", "--cpus", "2").workloads
    check(d == ["randread:1:1", "randread:32:1", "randread:32:2", "randwrite:1:1",
                "randwrite:32:1", "randwrite:32:2"], d)


def test_requests_follow_the_block_size():
    r = object.__new__(gb.Run)
    r.args = types.SimpleNamespace(bs=64)
    r.marks = {}
    r._snapshot = lambda: None
    r._marker("MVM-BENCH-BEGIN randread:32:1")
    # fio terse fields 6, 8, 47, 49: read KiB, read IOPS, write KiB, write IOPS
    r._marker("MVM-BENCH-FIO 6400;100;640;10")
    m = r.marks["randread:32:1"]
    check(m["iops"] == 110, m)
    check(m["requests"] == 110, "requests = KiB / bs: %r" % m)


def test_the_guest_bench_command_gets_the_block_size():
    cmd = gb.guest_cmd(["read:8:1"], 5, 64)
    script = base64.b64decode(cmd.split()[1]).decode()
    check("--bs=64k" in script and "--runtime=5" in script and "read:8:1" in script, script)


def fake_vmm(script):
    """Makes Run start `sh -c script` instead of a VMM."""
    gb.vmm_argv = lambda config, args, cmd, kernel: ["sh", "-c", script]


def test_a_stalled_guest_is_stopped_and_run_once_more():
    with tempfile.TemporaryDirectory() as d:
        once = os.path.join(d, "once")
        # The first run stalls (and would hang for a minute); the second ends.
        fake_vmm('if [ -e %s ]; then echo fine; exit 0; fi; : >%s; echo booting; '
                 'echo "[   42.000001] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:"; '
                 'exec sleep 60' % (once, once))
        args = types.SimpleNamespace(seconds=1, bs=4, timeout=120, mem=256)
        out = {"stalls": []}
        t0 = time.monotonic()
        r = gb.run_retrying_stalls("mvm-pci", args, [], "bzImage", out, "round 1 mvm-pci boot")
        took = time.monotonic() - t0
    check(took < 30, "the stalled run was not stopped at once (%.0f s)" % took)
    check(len(out["stalls"]) == 1 and "stalled" in out["stalls"][0], out["stalls"])
    check(r.stalled is None and r.rc == 0 and r.failure(0) is None, "the second run: %r" % r.lines)


def test_a_guest_that_stalls_twice_fails():
    fake_vmm('echo "[    9.1] rcu: INFO: rcu_preempt self-detected stall on CPU"; exec sleep 60')
    args = types.SimpleNamespace(seconds=1, bs=4, timeout=120, mem=256)
    out = {"stalls": []}
    r = gb.run_retrying_stalls("qemu-q35", args, [], "bzImage", out, "round 1 qemu-q35 boot")
    check(len(out["stalls"]) == 1, out["stalls"])
    why = r.failure(gb.ok_status("qemu-q35"))
    check(why is not None and "stalled" in why, why)


def test_a_run_that_ends_early_says_what_the_vmm_said():
    # The guest began the first of two workloads, then the VMM ended with
    # status 0 (what a triple fault gives) and one line on stderr.
    fake_vmm('echo "MVM-BENCH-BEGIN randread:1:1"; '
             'echo "{\\"vcpus\\":[]}" >&2; '
             'echo "mvm: vCPU 2 reset the machine with a triple fault" >&2; exit 0')
    args = types.SimpleNamespace(seconds=1, bs=4, timeout=120, mem=256)
    r = gb.Run("mvm-pci", args, ["randread:1:1", "randread:32:1"], "bzImage")
    why = gb.fio_failure(r, "mvm-pci", ["randread:1:1", "randread:32:1"], r.results())
    check(why is not None and "0 of 2 workloads, exit status 0" in why, why)
    check("MVM-BENCH-BEGIN randread:1:1" in why, why)
    check(why.endswith("the VMM's: mvm: vCPU 2 reset the machine with a triple fault"), why)


def round_json(rnd, iops):
    w = lambda v: {"iops": v, "irqs_per_req": 0.1, "exits_per_req": 1.0, "cpu_us_per_req": 100}
    return {"round": rnd, "host_cpus": 4, "failures": [], "stalls": [], "kvm": "nested",
            "load": "0.00", "c": {c: {"w": {"randread:32:1": w(v)}, "nproc": 2, "rss_kb": 2400}
                                  for c, v in iops.items()}}


def test_report_pairs_mvm_with_qemu_by_transport_per_round():
    with tempfile.TemporaryDirectory() as d:
        for k, iops in enumerate([
                {"mvm-pci": 300, "mvm-mmio": 150, "qemu-q35": 100, "qemu-microvm": 100},
                {"mvm-pci": 100, "mvm-mmio": 150, "qemu-q35": 100, "qemu-microvm": 50}]):
            with open(os.path.join(d, "round-%d.json" % k), "w") as f:
                json.dump(round_json(k, iops), f)
        p = subprocess.run([sys.executable, SCRIPT, "--report", "--out", d, "--rounds", "2",
                            "--workloads", "randread:32:1", "--no-boot"],
                           capture_output=True, text=True)
        with open(os.path.join(d, "result.json")) as f:
            res = json.load(f)
    out = p.stdout
    check(p.returncode == 0, out + p.stderr)
    # pci/q35: 3.00 and 1.00; mmio/microvm: 1.50 and 3.00
    check("mvm-pci/qemu-q35         randread:32:1    2.00 (1.00..3.00)" in out, out)
    check("mvm-mmio/qemu-microvm    randread:32:1    2.25 (1.50..3.00)" in out, out)
    check(res["failures"] == [] and res["stalls"] == [], res.keys())


def test_startup_steps_are_read_from_stats_and_reported():
    r = object.__new__(gb.Run)
    r.err = (b'{"vcpus":[],"startup_us":300,"startup_phases_us":{"create":10,"kvm":100,'
             b'"devices":20,"load":150,"vcpus":5,"start":5,"run":10}}\n')
    steps = r.startup_steps()
    check(list(steps) == list(gb.STARTUP_STEPS) and steps["load"] == 150, steps)
    r.err = b'qemu-system-x86_64: no --stats\n'
    check(r.startup_steps() == {}, "QEMU has no steps")
    with tempfile.TemporaryDirectory() as d:
        for k, load in enumerate([150000, 250000, 350000]):
            rj = round_json(k, {"mvm-mmio": 100, "qemu-microvm": 100})
            for c in rj["c"]:
                rj["c"][c].update(init_s=[1.0], wall_s=[2.0])
            rj["c"]["mvm-mmio"].update(startup_us=[load + 60000], startup_load_us=[load],
                                       startup_kvm_us=[50000], startup_create_us=[10000])
            with open(os.path.join(d, "round-%d.json" % k), "w") as f:
                json.dump(rj, f)
        p = subprocess.run([sys.executable, SCRIPT, "--report", "--out", d, "--rounds", "3",
                            "--configs", "mvm-mmio,qemu-microvm", "--kernels", "bzImage",
                            "--workloads", "randread:32:1"], capture_output=True, text=True)
    out = p.stdout
    check(p.returncode == 0, out + p.stderr)
    check("mvm-mmio     bzImage  startup by step, median ms: create 10.0, kvm 50.0, "
          "devices -, load 250.0, vcpus -, start -, run -" in out, out)
    check("qemu-microvm bzImage  startup by step" not in out, out)


if __name__ == "__main__":
    sys.exit(run_cases(globals()))
