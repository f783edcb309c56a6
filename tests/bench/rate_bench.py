#!/usr/bin/python3
"""mvm's disk rate limits, measured from inside the guest: the driver of
`make bench-rate`.

Runs where /dev/kvm can run the test guest (tests/bench/rate-bench puts it
there: directly, or in the nested harness's L1). Per case two VMs boot side
by side, each with a disk of its own (a sparse image read through the host's
page cache), and run the same fio job for --seconds (random 4 KiB reads,
io_uring, O_DIRECT in the guest, --qd deep):

  limited  its disk limited to N requests/s (ops_size=N/100,
           ops_refill_time=10: a bucket of 10 ms, so the start's full bucket
           adds 0.1% to 10 s) or to B bytes/s (64 KiB reads,
           bw_size=B/100, bw_refill_time=10); --bucket-ms 100 gives mvm
           QEMU's bucket (a tenth of a second of the rate)
  free     no limit: its IOPS against the free VM of the baseline case
           (both free) says whether the neighbour's limit harms it

With --vmm mvm,qemu (the default), every case also runs with both VMs
under QEMU (q35 with qboot, virtio-blk-pci on an iothread, aio=io_uring, as
make bench-guest runs it), its disk limited by QEMU's own throttling:
throttling.iops-total=N or throttling.bps-total=B (QEMU's leaky bucket,
with its default burst of a tenth of a second), the peer that Debian has
(Firecracker's and Cloud Hypervisor's limiters are not packaged).

The report gives per VMM and case the limited VM's rate as fio measured it
against the configured one (error in %), the free VM's IOPS against the
baseline's, and mvm's --stats for the limited disk (requests delayed, time
held). Per round the cases run in the same order, each under every VMM in
turn, the order of the VMMs alternating from round to round.
A benchmark, not a test: run it on an otherwise idle machine.
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading

from guest_bench import BASE_CMDLINE

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

GUEST_SCRIPT = r"""
fio --name=r --filename=/dev/vda --rw=randread --bs=@BS@ --ioengine=io_uring --direct=1 \
	--iodepth=@QD@ --runtime=@SECONDS@ --time_based --norandommap --randrepeat=0 \
	--output-format=terse --terse-version=3 | cut -d';' -f7,8 | sed 's/^/MVM-RATE /'
"""


def log(msg):
    print(msg, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=10, help="per fio run")
    ap.add_argument("--qd", type=int, default=8, help="fio's iodepth")
    ap.add_argument("--iops", default="100,1000,10000",
                    help="request limits to measure, comma-separated")
    ap.add_argument("--bw", default="8388608",
                    help="byte limits (bytes/s) to measure with 64 KiB reads")
    ap.add_argument("--bucket-ms", type=int, default=10,
                    help="mvm's bucket: this many ms of the rate (QEMU's burst is 100)")
    ap.add_argument("--vmm", default="mvm,qemu",
                    help="VMMs to measure, comma-separated: mvm, qemu")
    ap.add_argument("--mvm", default=os.path.join(ROOT, "mvm"))
    ap.add_argument("--files", default=os.path.join(ROOT, "build", "guest"))
    return ap.parse_args()


def guest_cmd(args, bs):
    script = GUEST_SCRIPT.replace("@BS@", bs).replace("@QD@", str(args.qd)).replace(
        "@SECONDS@", str(args.seconds))
    return "echo %s | base64 -d | sh" % base64.b64encode(script.encode()).decode()


def qemu_argv(args, image, limit, bs):
    """QEMU as make bench-guest runs it (q35, qboot, virtio-blk-pci on an
    iothread), limit ("ops"/"bw", value) by its throttling."""
    throttle = ""
    if limit[0] == "ops":
        throttle = ",throttling.iops-total=%d" % limit[1]
    elif limit[0] == "bw":
        throttle = ",throttling.bps-total=%d" % limit[1]
    return ["qemu-system-x86_64", "-M", "q35", "-bios", "bios-microvm.bin", "-accel", "kvm",
            "-cpu", "host", "-smp", "1", "-m", "256M", "-nodefaults", "-no-user-config",
            "-display", "none", "-serial", "stdio", "-no-reboot",
            "-kernel", os.path.join(args.files, "bzImage"),
            "-initrd", os.path.join(args.files, "initramfs.cpio.gz"),
            "-append", BASE_CMDLINE + " loglevel=4 -- " + guest_cmd(args, bs),
            "-object", "iothread,id=io0",
            "-drive", "file=%s,if=none,id=d0,format=raw,cache=writeback,aio=io_uring%s" % (
                image, throttle),
            "-device", "virtio-blk-pci,drive=d0,iothread=io0",
            "-device", "isa-debug-exit,iobase=0x501,iosize=1"]


def mvm_opts(limit, ms):
    """--disk's keys for limit: a bucket of ms of the rate."""
    if limit[0] in ("ops", "bw"):
        return ",%s_size=%d,%s_refill_time=%d" % (limit[0], max(1, limit[1] * ms // 1000),
                                                  limit[0], ms)
    return ""


def boot(args, vmm, image, limit, bs, result):
    """One VM to its end: fio's (KiB/s, IOPS) and, under mvm, the disk's --stats."""
    if vmm == "qemu":
        argv = qemu_argv(args, image, limit, bs)
    else:
        argv = [args.mvm] + (["--uid", "0", "--gid", "0"] if os.geteuid() == 0 else []) + [
            "--stats", "--kernel", os.path.join(args.files, "bzImage"),
            "--initrd", os.path.join(args.files, "initramfs.cpio.gz"), "--cpus", "1",
            "--mem", "256M", "--disk", image + mvm_opts(limit, args.bucket_ms),
            "--cmdline", "loglevel=4 -- " + guest_cmd(args, bs)]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=args.seconds + 600)
    for line in p.stdout.splitlines():
        if line.startswith("MVM-RATE "):
            kib, iops = line.split()[1].split(";")[:2]
            result["kib_s"], result["iops"] = float(kib), float(iops)
    try:
        if vmm == "qemu":
            raise ValueError("no --stats")
        st = json.JSONDecoder().raw_decode(p.stderr[p.stderr.index("{"):])[0]
        # Each entry is a transport's, with its device's counters in "device".
        q = next(d["device"] for d in st["devices"]
                 if d.get("device", {}).get("kind") == "virtio-blk")["queues"]
        result["rate_delayed"] = sum(x.get("rate_delayed", 0) for x in q)
        result["rate_wait_us"] = sum(x.get("rate_wait_us", 0) for x in q)
    except (ValueError, KeyError, StopIteration):
        pass
    result["rc"] = p.returncode
    if "iops" not in result:
        result["error"] = (p.stdout[-400:] + p.stderr[-400:]).strip()


def run_case(args, vmm, images, case):
    bs = "64k" if case[0] == "bw" else "4k"
    res = {"limited": {}, "free": {}}
    ts = [threading.Thread(target=boot, args=(args, vmm, images[0], case, bs, res["limited"])),
          threading.Thread(target=boot, args=(args, vmm, images[1], ("none", 0), bs,
                                              res["free"]))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return res


def main():
    args = parse_args()
    cases = [("none", 0)] + [("ops", int(x)) for x in args.iops.split(",") if x] + \
            [("bw", int(x)) for x in args.bw.split(",") if x]
    scratch = tempfile.mkdtemp(prefix="mvm-rate-bench.")
    images = []
    for name in ("a.img", "b.img"):
        path = os.path.join(scratch, name)
        with open(path, "wb") as f:
            f.truncate(256 << 20)
        images.append(path)
    vmms = [v for v in args.vmm.split(",") if v]
    rounds = []
    for r in range(args.rounds):
        got = {}
        # The VMMs' order alternates from round to round: drift over a
        # run falls on both.
        order = vmms if r % 2 == 0 else vmms[::-1]
        for c in cases:
            for vmm in order:
                res = run_case(args, vmm, images, c)
                got["%s/%s:%d" % ((vmm,) + c)] = res
                lim, free = res["limited"], res["free"]
                log("rate-bench: round %d %-4s %-10s limited %s IOPS %s KiB/s (delayed %s, "
                    "held %s us), free %s IOPS%s" % (
                        r + 1, vmm, "%s:%d" % c, lim.get("iops"), lim.get("kib_s"),
                        lim.get("rate_delayed"), lim.get("rate_wait_us"), free.get("iops"),
                        "" if "error" not in lim and "error" not in free else
                        "; failed: " + (lim.get("error") or free.get("error"))))
        rounds.append(got)
    log("")
    log("rate-bench: %d rounds, %d s of fio per VM, QD %d, two VMs at once" % (
        args.rounds, args.seconds, args.qd))
    log("%-5s %-12s %12s %12s %9s %12s %12s %9s" % (
        "vmm", "case", "configured", "measured", "error", "free IOPS", "baseline",
        "free/base"))
    for vmm in vmms:
        for c in cases:
            key = "%s/%s:%d" % ((vmm,) + c)
            for r, got in enumerate(rounds):
                lim, free = got[key]["limited"], got[key]["free"]
                # 64 KiB reads' IOPS are not the 4 KiB baseline's.
                base = got["%s/none:0" % vmm]["free"].get("iops") if c[0] != "bw" else None
                if c[0] == "ops":
                    conf, meas = c[1], lim.get("iops")
                elif c[0] == "bw":
                    conf, meas = c[1] / 1024.0, lim.get("kib_s")
                else:
                    conf, meas = None, lim.get("iops")
                err = "" if not conf or meas is None else "%+.2f%%" % (
                    100.0 * (meas / conf - 1))
                ratio = "" if not base or free.get("iops") is None else "%.3f" % (
                    free["iops"] / base)
                log("%-5s %-12s %12s %12s %9s %12s %12s %9s" % (
                    vmm if r == 0 else "", "%s:%d" % c if r == 0 else "",
                    "" if conf is None else "%.0f%s" % (conf, " KiB/s" if c[0] == "bw" else ""),
                    "-" if meas is None else "%.0f" % meas, err,
                    "-" if free.get("iops") is None else "%.0f" % free["iops"],
                    "-" if base is None else "%.0f" % base, ratio))
    print("MVM-BENCH-RATE-JSON " + json.dumps({"args": vars(args), "rounds": rounds}),
          flush=True)
    for p in images:
        os.unlink(p)
    os.rmdir(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
