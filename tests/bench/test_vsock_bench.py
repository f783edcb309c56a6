#!/usr/bin/python3
"""The vsock benchmark's own logic (tests/bench/vsock_bench.py), without KVM
or a VMM: what the guest runs, how a boot's phases become figures per
unit, and the ratios the report gives. One case per behaviour:

    tests/bench/test_vsock_bench.py --list
    tests/bench/test_vsock_bench.py CASE      exit 0 pass, 1 fail
"""
import base64
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import vsock_bench as vb  # noqa: E402
from bench_cases import check, run_cases  # noqa: E402

SCRIPT = os.path.join(HERE, "vsock_bench.py")


def snap(t, dev, vmm):
    return {"t": t, "dev": dev, "vmm": vmm}


def marks():
    return {"rr": {"begin": snap(0, 1.0, 2.0), "end": snap(1, 1.5, 3.0), "irqs": 4000},
            "g2h": {"begin": snap(1, 1.5, 3.0), "end": snap(2, 1.7, 3.4), "irqs": 640},
            "h2g": {"begin": snap(2, 1.7, 3.4), "end": snap(3, 2.0, 4.0), "irqs": 1280}}


def test_guest_runs_the_three_phases_against_the_host_ports():
    cmd = vb.guest_cmd(2000, 64)
    script = base64.b64decode(cmd.split()[1]).decode()
    check("mvm-vsock rr 2 5000 2000" in script, script)
    check("mvm-vsock stream 2 5001 64" in script, script)
    check("mvm-vsock listen 5002 sink 1" in script, script)
    check(script.index("phase rr") < script.index("phase g2h") < script.index("phase h2g"),
          "phases out of order")


def test_phases_become_rates_and_figures_per_unit():
    r = vb.phase_results(marks(), (2000, 150000), (64, 32768), 4.0, 64)
    check(r["rr"]["us_per_rt"] == 150.0, r["rr"])
    check(r["rr"]["irqs_per_unit"] == 2.0, r["rr"])
    check(abs(r["rr"]["dev_cpu_us_per_unit"] - 250.0) < 1e-9, r["rr"])
    check(r["g2h"]["mib_s"] == 32.0, r["g2h"])
    check(r["g2h"]["irqs_per_unit"] == 10.0, r["g2h"])
    check(abs(r["g2h"]["vmm_cpu_us_per_unit"] - 6250.0) < 1e-6, r["g2h"])
    check(r["h2g"]["mib_s"] == 16.0, r["h2g"])
    check(r["h2g"]["irqs_per_unit"] == 20.0, r["h2g"])


def test_a_device_thread_not_found_leaves_its_figure_out():
    m = marks()
    m["g2h"]["begin"]["dev"] = None
    r = vb.phase_results(m, (2000, 150000), (64, 32768), 4.0, 64)
    check("dev_cpu_us_per_unit" not in r["g2h"], r["g2h"])
    check("vmm_cpu_us_per_unit" in r["g2h"], r["g2h"])


def test_report_pairs_each_round_and_skips_a_failed_run():
    fast = vb.phase_results(marks(), (2000, 100000), (64, 65536), 2.0, 64)
    slow = vb.phase_results(marks(), (2000, 200000), (64, 32768), 4.0, 64)
    rounds = [{"mvm": fast, "qemu-vhost": slow}, {"mvm": slow, "qemu-vhost": slow},
              {"qemu-vhost": slow}]
    rows = {label: (means, ratios) for label, means, ratios in vb.report(rounds)}
    means, ratios = rows["round trip, µs"]
    check(ratios == {"mvm": [0.5, 1.0]}, ratios)
    check(means["mvm"] == 150.0 and means["qemu-vhost"] == 200.0, means)
    means, ratios = rows["guest→host MiB/s"]
    check(ratios == {"mvm": [2.0, 1.0]}, ratios)


def test_report_gives_mvm_poll_its_own_ratio():
    fast = vb.phase_results(marks(), (2000, 100000), (64, 65536), 2.0, 64)
    slow = vb.phase_results(marks(), (2000, 200000), (64, 32768), 4.0, 64)
    configs = vb.CONFIGS + [vb.POLL_CONFIG]
    rounds = [{"mvm": slow, "mvm-poll": fast, "qemu-vhost": slow},
              {"mvm": slow, "qemu-vhost": slow}]
    rows = {label: (means, ratios) for label, means, ratios in vb.report(rounds, configs)}
    means, ratios = rows["round trip, µs"]
    check(ratios == {"mvm": [1.0, 1.0], "mvm-poll": [0.5]}, ratios)
    check(means["mvm-poll"] == 100.0, means)


def test_poll_adds_the_mvm_poll_configuration():
    p = subprocess.run([sys.executable, SCRIPT, "--poll", "2000"], capture_output=True, text=True)
    last = (p.stderr.strip().splitlines() or [""])[-1]
    check(p.returncode == 2 and "--poll 2000" in last, "%d %r" % (p.returncode, last))
    args = vb.argparse.Namespace(poll=50)
    check(vb.configs_for(args) == ["mvm", "qemu-vhost", "mvm-poll"], vb.configs_for(args))
    argv = vb.vmm_argv("mvm-poll", vb.argparse.Namespace(files="/x", rr=1, mib=1, poll=50), "/s")
    check(any(a.endswith(",poll=50") for a in argv), argv)


def test_pin_like_us_holds_a_thread_to_our_cpus():
    ready, done = threading.Event(), threading.Event()
    tid = []

    def body():
        tid.append(threading.get_native_id())
        ready.set()
        done.wait(10)
    t = threading.Thread(target=body)
    t.start()
    ready.wait(10)
    ours = os.sched_getaffinity(0)
    os.sched_setaffinity(tid[0], {min(ours)})
    ok = vb.pin_like_us("/proc/%d/task/%d/stat" % (os.getpid(), tid[0]))
    got = os.sched_getaffinity(tid[0])
    done.set()
    t.join()
    check(ok and got == ours, (ok, got, ours))


def test_bad_counts_are_refused_with_one_line():
    for opt in ("--rounds", "--rr", "--mib"):
        p = subprocess.run([sys.executable, SCRIPT, opt, "0"], capture_output=True, text=True)
        last = (p.stderr.strip().splitlines() or [""])[-1]
        check(p.returncode == 2 and "at least 1" in last, "%s 0: %d %r" % (opt, p.returncode, last))


if __name__ == "__main__":
    sys.exit(run_cases(globals()))
