#!/usr/bin/python3
"""mvm against QEMU, inside a guest: the driver of `make bench-guest`.

Runs where /dev/kvm can run the test guest (tests/bench/guest-bench puts it
there: directly, or inside the nested harness's L1). Boots the shipped test
guest (same kernel, initramfs, image, vCPUs and queues) under:

  mvm-pci      ./mvm, virtio-blk over PCI (MSI-X)
  mvm-mmio     ./mvm, virtio-blk over virtio-mmio
  qemu-q35     qemu-system-x86_64 -accel kvm -M q35 (qboot), virtio-blk-pci
  qemu-microvm qemu-system-x86_64 -accel kvm -M microvm, virtio-blk-device

QEMU gets what a user tuning it for speed would give it: an iothread,
aio=io_uring, the same number of queues, cache=writeback like mvm's default
(the image is on tmpfs, which has no O_DIRECT; --cache none gives both
VMMs cache=none, O_DIRECT on an image on a disk's file system: nested, L1's
ext4 scratch disk, else /var/tmp). Rounds alternate the
configurations (A B C D, then B C D A, ...), so drift in the machine's speed
hits all alike. Per round and configuration:

  boot phase: the guest runs `exit 0` (--boots times, with each of
              --kernels: the bzImage, and the vmlinux that both VMMs
              boot through its PVH entry without the decompressor and,
              for QEMU, without firmware): the guest's time to /init
              (its kernel log) and the VMM's wall time from exec to exit;
  fio phase:  one boot (the first of --kernels) runs every workload (fio, io_uring, O_DIRECT in the
              guest, 4 KiB random reads and writes over the whole disk;
              --bs and --workloads choose other sizes and patterns).

Measured per workload: IOPS (fio), guest interrupts per request (the
guest's /proc/interrupts, virtio lines, around each fio run), VM exits per
request (this kernel's debugfs kvm/<pid>-<fd>/exits, around the same
markers) and of them HLT, port I/O, MMIO and external-interrupt exits, and
interrupts injected (KVM_STATS), host CPU time per request of the VMM process (utime+stime), and
per VMM the peak RSS minus the guest RAM it touched (sampled from smaps).

Prints a table (mean over rounds; the mvm/QEMU ratio per round paired by
transport: mvm-pci with qemu-q35, mvm-mmio with qemu-microvm, and its
spread, min..max), and writes build/bench-guest/result.json and an SVG plot
of IOPS against queue depth.
"""
import argparse
import atexit
import base64
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GUEST = os.path.join(ROOT, "build", "guest")
# mvm's own defaults for x86 guests (arch/x86/arch.c), given to QEMU too so
# both guests boot with the same parameters.
BASE_CMDLINE = ("console=ttyS0 reboot=k panic=-1 i8042.noaux i8042.nomux "
                "i8042.nopnp i8042.dumbkbd no_timer_check")
# Where QEMU 7.2's microvm puts its first virtio-mmio device (it fills its
# 24 slots from the top: 512 bytes each from 0xfeb00000, IRQ 5 + slot).
MICROVM_DISK = "virtio_mmio.device=512@0xfeb00e00:12"
# mvm's startup_us by step (--stats startup_phases_us), in order.
STARTUP_STEPS = ("create", "kvm", "devices", "load", "vcpus", "start", "run")
CONFIGS = ["mvm-pci", "mvm-mmio", "qemu-q35", "qemu-microvm"]
PAIRS = [("mvm-pci", "qemu-q35"), ("mvm-mmio", "qemu-microvm")]

# The guest's side: print when /init started (kernel log), then per
# workload the virtio interrupt count around one fio run and fio's totals.
GUEST_SCRIPT = r"""
irqs() { awk '/virtio/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { print s + 0 }' /proc/interrupts; }
echo "MVM-BENCH-INIT $(dmesg | sed -n 's/^\[ *\([0-9.]*\)\] Run \/init.*/\1/p' | head -n 1) $(nproc)"
for w in @WORKLOADS@; do
	rw=${w%%:*}; r=${w#*:}; qd=${r%%:*}; jobs=${r#*:}
	a=$(irqs)
	echo "MVM-BENCH-BEGIN $w"
	fio --name=b --filename=/dev/vda --rw=$rw --bs=@BS@ --ioengine=io_uring --direct=1 \
		--iodepth=$qd --numjobs=$jobs --runtime=@SECONDS@ --time_based --group_reporting \
		--norandommap --randrepeat=0 --output-format=terse --terse-version=3 |
		cut -d';' -f6,8,47,49 | sed 's/^/MVM-BENCH-FIO /'
	echo "MVM-BENCH-END $w $(($(irqs) - a))"
done
"""


def log(msg):
    print(msg, flush=True)


def guest_cmd(workloads, seconds, bs_kib):
    if not workloads:
        script = ('echo "MVM-BENCH-INIT $(dmesg | sed -n \'s/^\\[ *\\([0-9.]*\\)\\] '
                  'Run \\/init.*/\\1/p\' | head -n 1) $(nproc)"')
    else:
        script = GUEST_SCRIPT.replace("@WORKLOADS@", " ".join(workloads)).replace(
            "@SECONDS@", str(seconds)).replace("@BS@", "%dk" % bs_kib)
    b64 = base64.b64encode(script.encode()).decode()
    return "echo %s | base64 -d | sh" % b64


def vmm_argv(config, args, cmd, kernel):
    kernel = os.path.join(args.files, kernel)
    initrd = os.path.join(args.files, "initramfs.cpio.gz")
    if config.startswith("mvm-"):
        transport = config[4:]
        disk = "%s,queues=%d,transport=%s" % (args.image, args.queues, transport)
        if args.io_threads:
            disk += ",io-threads=%d" % args.io_threads
        if args.cache == "none":
            disk += ",cache=none"
        disk += args.disk_opts
        return [os.path.join(args.files, "mvm")] + (["--uid", "0", "--gid", "0"] if os.geteuid() == 0 else []) + ["--stats", "--kernel", kernel, "--initrd", initrd,
                "--cpus", str(args.cpus), "--mem", "%dM" % args.mem, "--disk", disk, "--cmdline", "loglevel=4 -- " + cmd]
    q = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-smp", str(args.cpus),
         "-m", "%dM" % args.mem, "-nodefaults", "-no-user-config", "-display", "none",
         "-serial", "stdio", "-no-reboot", "-kernel", kernel, "-initrd", initrd,
         "-append", BASE_CMDLINE + " loglevel=4 -- " + cmd,
         "-object", "iothread,id=io0",
         "-drive", "file=%s,if=none,id=d0,format=raw,cache=%s,aio=io_uring" % (
             args.image, args.cache),
         "-device", "isa-debug-exit,iobase=0x501,iosize=1"]
    if config == "qemu-q35":
        # qboot (QEMU's bios-microvm.bin) rather than SeaBIOS: SeaBIOS's MP
        # table lists only the boot CPU, and the test kernel, which has no
        # ACPI, would run on one CPU.
        q[q.index("-accel"):q.index("-accel")] = ["-M", "q35", "-bios", "bios-microvm.bin"]
        q += ["-device", "virtio-blk-pci,drive=d0,num-queues=%d,iothread=io0" % args.queues]
    else:
        q[q.index("-accel"):q.index("-accel")] = [
            # acpi=off: the test kernel has no ACPI. QEMU would then list
            # the virtio-mmio device on the kernel command line, but after
            # our " -- command" (init's, not the kernel's): give it before.
            "-M", "microvm,acpi=off,pit=off,pic=off,rtc=off,isa-serial=on,"
            "auto-kernel-cmdline=off"]
        a = q.index("-append") + 1
        q[a] = q[a].replace(" loglevel=4 -- ", " " + MICROVM_DISK + " loglevel=4 -- ")
        q += ["-device", "virtio-blk-device,drive=d0,num-queues=%d,iothread=io0" % args.queues]
    return q


def proc_cpu_s(pid):
    """utime + stime of the whole process (every thread, live or gone)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_rss_kb(pid, mem_mib):
    """The process's RSS minus its guest RAM mapping(s): a mapping at least
    as large as guest RAM and at most 64 MiB larger is guest RAM."""
    total = guest = 0
    size = 0
    lo, hi = mem_mib * 1024, (mem_mib + 64) * 1024
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if line.startswith("Size:"):
                size = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
                total += rss
                if lo <= size <= hi:
                    guest += rss
    return total - guest


# KVM's counters per VM in debugfs (its vCPUs' summed): every exit, and
# the kinds that a virtio request costs: HLT (a vCPU that waits for its
# completion), port I/O and MMIO (kicks, register accesses), external
# interrupts (the host's, e.g. the IPI that makes a running vCPU take an
# injected interrupt), and interrupts injected.
KVM_STATS = ["exits", "halt_exits", "io_exits", "mmio_exits", "irq_exits", "irq_injections"]


def kvm_stats(pid):
    """KVM_STATS of the VMM's VM(s), from debugfs (None when unavailable)."""
    dirs = glob.glob("/sys/kernel/debug/kvm/%d-*" % pid)
    if not dirs:
        return None
    n = dict.fromkeys(KVM_STATS, 0)
    for d in dirs:
        for k in KVM_STATS:
            try:
                with open(os.path.join(d, k)) as f:
                    n[k] += int(f.read())
            except OSError:
                if k == "exits":
                    return None
                n[k] = None
    return n


class Run:
    """One VMM process: its output lines, samples at the guest's markers."""

    def __init__(self, config, args, workloads, kernel):
        self.config, self.args = config, args
        self.lines, self.marks = [], {}
        self.peak_rss = 0
        self.init_s = self.nproc = None
        argv = vmm_argv(config, args, guest_cmd(workloads, args.seconds, args.bs), kernel)
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.err = b""
        errt = threading.Thread(target=self._stderr, daemon=True)
        errt.start()
        sampler = threading.Thread(target=self._sample, daemon=True)
        sampler.start()
        deadline = self.t0 + args.timeout
        self.timed_out = False
        self.stalled = None
        killer = threading.Timer(args.timeout, self._kill)
        killer.start()
        for raw in self.p.stdout:
            line = raw.decode(errors="replace").replace("\r", "").rstrip("\n")
            self.lines.append(line)
            self._marker(line)
            if self.stalled is None and RCU_STALL.search(line):
                # The guest's RCU detector: a CPU of the guest has not run
                # for 21 s. Under the emulated L1 that happens now and then
                # under every VMM, and such a guest has not come back
                # within the 600 s timeout: stop it now (in a thread: the
                # pipe must keep draining while the VMM prints its stats).
                self.stalled = time.monotonic() - self.t0
                threading.Thread(target=self._stop, daemon=True).start()
        self.rc = self.p.wait()
        errt.join(5)
        self.wall_s = time.monotonic() - self.t0
        killer.cancel()
        self.timed_out = self.timed_out or time.monotonic() > deadline

    def _kill(self):
        self.timed_out = True
        self._stop()

    def _stop(self):
        # SIGTERM first: mvm then prints its --stats (which queue got how
        # far) for the failure message.
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()

    def _stderr(self):
        self.err = self.p.stderr.read()

    def _sample(self):
        while self.p.poll() is None:
            try:
                self.peak_rss = max(self.peak_rss, own_rss_kb(self.p.pid, self.args.mem))
            except (OSError, ValueError):
                pass
            time.sleep(0.5)

    def _snapshot(self):
        try:
            return {"cpu": proc_cpu_s(self.p.pid), "kvm": kvm_stats(self.p.pid),
                    "t": time.monotonic()}
        except OSError:
            return None

    def _marker(self, line):
        m = re.search(r"MVM-BENCH-INIT ([0-9.]*) ([0-9]+)", line)
        if m:
            self.init_s = float(m.group(1)) if m.group(1) else None
            self.nproc = int(m.group(2))
        m = re.search(r"MVM-BENCH-BEGIN (\S+)", line)
        if m:
            self.marks[m.group(1)] = {"begin": self._snapshot()}
        m = re.search(r"MVM-BENCH-FIO ([0-9;.]+)", line)
        if m and self.marks:
            last = list(self.marks)[-1]
            f = [float(x) for x in m.group(1).split(";")]
            # read KiB, read IOPS, write KiB, write IOPS (--bs KiB requests)
            self.marks[last]["iops"] = f[1] + f[3]
            self.marks[last]["requests"] = (f[0] + f[2]) / self.args.bs
        m = re.search(r"MVM-BENCH-END (\S+) (-?[0-9]+)", line)
        if m and m.group(1) in self.marks:
            d = self.marks[m.group(1)]
            d["end"] = self._snapshot()
            d["irqs"] = int(m.group(2))

    def results(self):
        out = {}
        for w, d in self.marks.items():
            if "end" not in d or "requests" not in d or not d["requests"]:
                continue
            b, e, n = d["begin"], d["end"], d["requests"]
            r = {"iops": d["iops"], "irqs_per_req": d["irqs"] / n}
            if b and e:
                r["cpu_us_per_req"] = (e["cpu"] - b["cpu"]) * 1e6 / n
                if b["kvm"] is not None and e["kvm"] is not None:
                    r["exits_per_req"] = (e["kvm"]["exits"] - b["kvm"]["exits"]) / n
                    r["kvm_per_req"] = {k: (e["kvm"][k] - b["kvm"][k]) / n for k in KVM_STATS
                                        if e["kvm"][k] is not None and b["kvm"][k] is not None}
            out[w] = r
        return out

    def queue_stats(self):
        """mvm's --stats, summed over its disk queues for the whole run:
        requests, the guest's kicks, waits after a kick and what they
        gathered."""
        m = re.search(rb'"queues":\[(.*?)\]', self.err)
        if not m:
            return None
        tot = {}
        for k in ("requests", "kicks", "gathers", "gathered"):
            tot[k] = sum(int(x) for x in re.findall(rb'"%s":([0-9]+)' % k.encode(), m.group(1)))
        return tot

    def startup_us(self):
        m = re.search(rb'"startup_us":([0-9]+)', self.err)
        return int(m.group(1)) if m else None

    def startup_steps(self):
        """mvm's --stats startup_phases_us: startup_us by step, {} for QEMU."""
        m = re.search(rb'"startup_phases_us":\{([^}]*)\}', self.err)
        if not m:
            return {}
        return {k.decode(): int(v) for k, v in re.findall(rb'"([a-z_]+)":([0-9]+)', m.group(1))}

    def failure(self, want_rc):
        if self.stalled is not None:
            return "the guest stalled (its RCU stall detector fired %.0f s after the VMM " \
                "started; stopped): %s" % (self.stalled, " | ".join(self.lines[-4:]))
        if self.timed_out:
            return "timed out after %d s; the guest's last lines: %s; the VMM's: %s" % (
                self.args.timeout, " | ".join(self.lines[-8:]),
                " | ".join(self.err.decode(errors="replace").splitlines()[-3:]))
        if self.rc != want_rc:
            tail = [l for l in self.lines[-5:]] + self.err.decode(errors="replace").splitlines()[-3:]
            return "exit status %d (expected %d): %s" % (self.rc, want_rc, " | ".join(tail))
        return None


def fio_failure(r, config, workloads, res):
    """Why a fio run of config did not measure every workload, or None."""
    why = r.failure(ok_status(config))
    if why or len(res) == len(workloads):
        return why
    # The VMM's own last words say how it ended (mvm: a triple fault, say);
    # its --stats JSON line is left out.
    said = [l for l in r.err.decode(errors="replace").splitlines()
            if l and not l.startswith("{")][-3:]
    return "%d of %d workloads, exit status %d; the guest's last lines: %s; the VMM's: %s" % (
        len(res), len(workloads), r.rc, " | ".join(r.lines[-8:]), " | ".join(said) or "nothing")


RCU_STALL = re.compile(r"rcu: INFO: rcu_\w+ (detected stalls|self-detected stall)")


def run_retrying_stalls(config, args, workloads, kernel, out, what):
    """A Run; one more where the guest stalled (noted in out["stalls"])."""
    r = Run(config, args, workloads, kernel)
    if r.stalled is not None:
        out["stalls"].append("%s: %s" % (what, r.failure(ok_status(config))))
        log("guest-bench: %s: the guest stalled; running it once more" % what)
        r = Run(config, args, workloads, kernel)
    return r


def ok_status(config):
    # The guest writes its status (0) to port 0x501: mvm exits with it,
    # QEMU's isa-debug-exit with (status << 1) | 1.
    return 0 if config.startswith("mvm-") else 1


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def median(xs):
    """The middle value: boot times under nested emulation are bimodal (a
    boot now and then stalls for a second or more), and a mean of a few
    boots follows the stalls more than the VMM."""
    if not xs:
        return None
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def fmt(x, spec="%.0f"):
    return "-" if x is None else spec % x


def svg_plot(path, series, title):
    """A line chart: series = {name: [(qd, iops), ...]}, log2 x axis."""
    w, h, ml, mr, mt, mb = 640, 400, 70, 150, 40, 50
    qds = sorted({q for pts in series.values() for q, _ in pts})
    ymax = max([v for pts in series.values() for _, v in pts] + [1]) * 1.1
    if len(qds) < 2:
        return
    import math
    lx = [math.log2(q) for q in qds]

    def X(q):
        return ml + (math.log2(q) - lx[0]) / (lx[-1] - lx[0]) * (w - ml - mr)

    def Y(v):
        return h - mb - v / ymax * (h - mt - mb)

    colors = ["#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#8c564b"]
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="14">%s</text>' % (ml, title),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ml, h - mb, w - mr, h - mb),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ml, mt, ml, h - mb)]
    for q in qds:
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(q), h - mb + 16, q))
    o.append('<text x="%d" y="%d" text-anchor="middle">queue depth (fio iodepth, 1 job)</text>'
             % ((ml + w - mr) / 2, h - 10))
    for i in range(5):
        v = ymax * i / 4
        o.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (ml - 6, Y(v) + 4, v))
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                 % (ml, Y(v), w - mr, Y(v)))
    o.append('<text x="15" y="%d" transform="rotate(-90 15 %d)" text-anchor="middle">IOPS</text>'
             % ((mt + h - mb) / 2, (mt + h - mb) / 2))
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = colors[i % len(colors)]
        pts = sorted(pts)
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (c, " ".join("%.1f,%.1f" % (X(q), Y(v)) for q, v in pts)))
        for q, v in pts:
            o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (X(q), Y(v), c))
        o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (w - mr + 10, mt + 20 + 18 * i, c, name))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round", type=int, default=None,
                    help="measure only this round (0-based) into OUT/round-N.json")
    ap.add_argument("--report", action="store_true",
                    help="only aggregate OUT/round-*.json into the table, JSON and plot")
    ap.add_argument("--seconds", type=int, default=5, help="per fio run")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--queues", type=int, default=2)
    ap.add_argument("--io-threads", type=int, default=0, help="mvm's io-threads= (0: its default)")
    ap.add_argument("--disk-opts", default="", help="appended to mvm's --disk (e.g. ,poll=0)")
    ap.add_argument("--mem", type=int, default=256, help="guest RAM, MiB")
    ap.add_argument("--size", type=int, default=256, help="image size, MiB")
    ap.add_argument("--qd", default="1,8,32,128", help="randread depths for the plot (1 job)")
    ap.add_argument("--bs", default="4k", help="fio's block size, KiB (4k, 64k, 1m)")
    ap.add_argument("--cache", choices=["writeback", "none"], default="writeback",
                    help="both VMMs' cache mode; none: O_DIRECT, the image on a disk's "
                    "file system instead of tmpfs")
    ap.add_argument("--workloads", default="",
                    help="instead of the default list: fio RW:QD:JOBS, comma-separated "
                    "(RW: read, write, randread, randwrite, rw, randrw; e.g. randrw:32:2)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--load", action="store_true",
                    help="a CPU-bound process on every CPU of this host while measuring")
    ap.add_argument("--boots", type=int, default=2,
                    help="boots per VMM and kernel per round (boot phase)")
    ap.add_argument("--kernels", default="bzImage,vmlinux",
                    help="the test guest's kernel files (build/guest/) the boot phase boots; "
                    "the fio phase boots the first")
    ap.add_argument("--no-boot", action="store_true", help="skip the boot phase")
    ap.add_argument("--no-fio", action="store_true", help="skip the fio phase")
    ap.add_argument("--timeout", type=int, default=600, help="per VMM run, seconds")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench-guest"))
    args = ap.parse_args()
    args.configs = args.configs.split(",")
    args.kernels = args.kernels.split(",")
    for k in args.kernels:
        if not os.path.isfile(os.path.join(GUEST, k)):
            sys.exit("guest-bench: no kernel build/guest/%s; build the test guest (make guest) "
                     "or name another in --kernels" % k)
    for c in args.configs:
        if c not in CONFIGS:
            sys.exit("guest-bench: unknown configuration '%s'; use %s" % (c, ",".join(CONFIGS)))
    m = re.fullmatch(r"([0-9]+)([kKmM]?)", args.bs)
    if not m or int(m.group(1)) == 0:
        sys.exit("guest-bench: bad --bs '%s'; give KiB as 4k, 64k or 1m" % args.bs)
    args.bs = int(m.group(1)) * (1024 if m.group(2).lower() == "m" else 1)
    if args.bs % 4 or args.bs > 4096:
        sys.exit("guest-bench: --bs %dk is not a multiple of 4k up to 4m; the guest reads "
                 "/dev/vda with O_DIRECT" % args.bs)
    if args.workloads:
        args.workloads = args.workloads.split(",")
        for w in args.workloads:
            if not re.fullmatch(r"(rand)?(read|write|rw):[1-9][0-9]*:[1-9][0-9]*", w):
                sys.exit("guest-bench: bad workload '%s' in --workloads; give RW:QD:JOBS, "
                         "e.g. randread:32:1 or randrw:8:2" % w)
    else:
        qds = [int(q) for q in args.qd.split(",")]
        args.workloads = ["randread:%d:1" % q for q in qds]
        for w in ["randread:32:%d" % args.cpus, "randwrite:1:1", "randwrite:32:1",
                  "randwrite:32:%d" % args.cpus]:
            if w not in args.workloads:
                args.workloads.append(w)
    args.tag = "-load" if args.load else ""
    return args


def setup_host(args):
    # The image on tmpfs (as in the measurement): host I/O cost is
    # the page cache's, so the VMMs' own costs show. Written, not sparse.
    # mvm, the kernels and the initramfs there too: nested, the checkout is
    # a 9p share that L1 does not cache, so every exec and every kernel
    # read would go to the host through emulated virtio (0.06-1.8 s for
    # the vmlinux's 9 MB in one boot), where QEMU's binary and firmware
    # come from L1's page cache. On tmpfs both read from memory, as an
    # installed VMM reads files the page cache holds.
    tmp = os.path.join(os.environ.get("MVM_SCRATCH", "/tmp"), "bench-tmpfs")
    os.makedirs(tmp, exist_ok=True)
    if subprocess.call(["mountpoint", "-q", tmp]) != 0:
        subprocess.check_call(["mount", "-t", "tmpfs", "-o", "size=%dM" % (args.size + 128),
                               "tmpfs", tmp])
    for f in [os.path.join(ROOT, "mvm"), os.path.join(GUEST, "initramfs.cpio.gz")] + [
            os.path.join(GUEST, k) for k in args.kernels]:
        shutil.copy2(f, tmp)
    args.files = tmp
    args.image = os.path.join(tmp, "disk.raw")
    if args.cache == "none":
        # O_DIRECT needs a disk's file system: L1's ext4 scratch disk
        # nested (MVM_SCRATCH), else /var/tmp (not a tmpfs on Debian).
        d = os.environ.get("MVM_SCRATCH", "/var/tmp")
        args.image = os.path.join(d, "mvm-bench-disk.raw")
    subprocess.check_call(["dd", "if=/dev/zero", "of=" + args.image, "bs=1M",
                           "count=%d" % args.size, "status=none"])
    if args.cache == "none":
        atexit.register(os.unlink, args.image)
        try:
            os.close(os.open(args.image, os.O_RDONLY | os.O_DIRECT))
        except OSError as e:
            sys.exit("guest-bench: --cache none: %s cannot be opened with O_DIRECT (%s); "
                     "set MVM_SCRATCH to a directory on a disk's file system" % (
                         args.image, e.strerror))
    if not os.path.isdir("/sys/kernel/debug/kvm"):
        subprocess.call(["mount", "-t", "debugfs", "debugfs", "/sys/kernel/debug"],
                        stderr=subprocess.DEVNULL)


def boot_key(key, kernel):
    """A boot figure's key in a round's JSON: as before for the bzImage,
    suffixed with the kernel's name for another."""
    return key if kernel == "bzImage" else "%s@%s" % (key, kernel)


def measure_round(args, rnd):
    """One round: every configuration boots (exit 0), then runs every
    workload, in an order rotated by the round's number."""
    configs = args.configs
    out = {"round": rnd, "host_cpus": os.cpu_count(), "failures": [], "stalls": [],
           "kvm": os.environ.get("MVM_KVM_PATH", "?"),
           "load": open("/proc/loadavg").read().split()[0], "c": {}}
    order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
    hogs = []
    if args.load:
        for _ in range(os.cpu_count()):
            hogs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
    try:
        for c in order:
            out["c"][c] = {"w": {}}
        for b in range(0 if args.no_boot else args.boots):
            # Kernels alternate too, from boot to boot.
            kernels = args.kernels if b % 2 == 0 else args.kernels[::-1]
            for c in order:
                for kern in kernels:
                    r = run_retrying_stalls(c, args, [], kern, out, "round %d %s boot (%s)" % (
                        rnd + 1, c, kern))
                    why = r.failure(ok_status(c))
                    if why:
                        out["failures"].append("round %d %s boot (%s): %s" % (rnd + 1, c, kern,
                                                                             why))
                        log("guest-bench: " + out["failures"][-1])
                        continue
                    for k, v in [("init_s", r.init_s), ("wall_s", r.wall_s),
                                 ("startup_us", r.startup_us())] + [
                                     ("startup_%s_us" % step, us)
                                     for step, us in r.startup_steps().items()]:
                        if v is not None:
                            out["c"][c].setdefault(boot_key(k, kern), []).append(v)
                    log("guest-bench: round %d %-12s boot (%s): /init at %s s guest time, exit "
                        "after %.2f s wall%s" % (rnd + 1, c, kern, fmt(r.init_s, "%.2f"),
                                                 r.wall_s, ", startup %d us" % r.startup_us()
                                                 if r.startup_us() is not None else ""))
        for c in [] if args.no_fio else order:
            r = run_retrying_stalls(c, args, args.workloads, args.kernels[0], out,
                                    "round %d %s fio" % (rnd + 1, c))
            res = r.results()
            out["c"][c].update(w=res, nproc=r.nproc, rss_kb=r.peak_rss)
            if r.queue_stats():
                out["c"][c]["queue"] = r.queue_stats()
            why = fio_failure(r, c, args.workloads, res)
            if why:
                out["failures"].append("round %d %s fio: %s" % (rnd + 1, c, why))
                log("guest-bench: " + out["failures"][-1])
            log("guest-bench: round %d %-12s fio: %s; own RSS %d KiB"
                % (rnd + 1, c, ", ".join("%s %.0f" % (w, v["iops"]) for w, v in res.items()),
                   r.peak_rss))
    finally:
        for h in hogs:
            h.kill()
    try:
        with open(os.path.join(args.out, "round%s-%d.json" % (args.tag, rnd)), "w") as f:
            json.dump(out, f, indent=1)
    except OSError:
        # Nested, the checkout is read-only: tests/bench/guest-bench takes
        # the round from this line instead.
        pass
    log("MVM-BENCH-ROUND-JSON " + json.dumps(out))
    return out


def report(args, rounds):
    configs, workloads = args.configs, args.workloads
    failures = [x for r in rounds for x in r["failures"]]
    # Rounds written before stalls were retried have no "stalls".
    stalls = [x for r in rounds for x in r.get("stalls", [])]

    def vals(c, w, key):
        return [r["c"][c]["w"][w][key] for r in rounds
                if c in r["c"] and w in r["c"][c].get("w", {}) and key in r["c"][c]["w"][w]]

    def cvals(c, key):
        out = []
        for r in rounds:
            v = r["c"].get(c, {}).get(key)
            if v is not None:
                out += v if isinstance(v, list) else [v]
        return out

    if rounds:
        r0 = rounds[0]
        log("guest-bench: %s KVM; host %d CPUs (load %s at the first round's start); guest "
            "%d vCPUs, %d MiB, %d queues, image %d MiB %s; %d rounds, fio %d s per "
            "workload, %d KiB blocks%s" % (r0["kvm"], r0["host_cpus"], r0["load"], args.cpus,
                                           args.mem, args.queues, args.size,
                                           "on tmpfs" if args.cache == "writeback" else
                                           "with cache=none (O_DIRECT)", len(rounds),
                                           args.seconds, args.bs,
                                           "; a CPU-bound process on each CPU" if args.load else ""))
    log("")
    def table(width, cell):
        log("%-16s" % "workload" + "".join("%-*s" % (width, c) for c in configs))
        for w in workloads:
            log("%-16s" % w + "".join("%-*s" % (width, cell(c, w)) for c in configs))

    def totals(c, w):
        return "%s  %s/%s/%s" % (
            fmt(mean(vals(c, w, "iops"))), fmt(mean(vals(c, w, "irqs_per_req")), "%.2f"),
            fmt(mean(vals(c, w, "exits_per_req")), "%.2f"),
            fmt(mean(vals(c, w, "cpu_us_per_req")), "%.0f"))

    def kinds(c, w):
        ks = [mean([r["c"][c]["w"][w]["kvm_per_req"][k] for r in rounds
                    if k in r["c"].get(c, {}).get("w", {}).get(w, {}).get("kvm_per_req", {})])
              for k in KVM_STATS]
        if ks[0] is None or None in ks[1:5]:
            return "-"
        return "%.2f/%.2f/%.2f/%.2f/%.2f %s" % (ks[1], ks[2], ks[3], ks[4],
                                              ks[0] - sum(ks[1:5]), fmt(ks[5], "%.2f"))

    log("IOPS (mean of rounds) and per request: guest interrupts / VM exits / VMM host CPU us")
    table(27, totals)
    if any(vals(c, w, "kvm_per_req") for c in configs for w in workloads):
        log("")
        log("VM exits per request by kind (KVM's debugfs): HLT / port I/O / MMIO / external")
        log("interrupt / other; then interrupts injected")
        table(32, kinds)
    log("")
    log("mvm/QEMU IOPS ratio, per round, paired by transport: mean (min..max)")
    ratios = {}
    for a, b in PAIRS:
        if a not in configs or b not in configs:
            continue
        for w in workloads:
            rs = []
            for r in rounds:
                x = r["c"].get(a, {}).get("w", {}).get(w)
                y = r["c"].get(b, {}).get("w", {}).get(w)
                if x and y and y["iops"]:
                    rs.append(x["iops"] / y["iops"])
            ratios["%s/%s %s" % (a, b, w)] = rs
            if rs:
                log("  %-24s %-16s %.2f (%.2f..%.2f)" % ("%s/%s" % (a, b), w, mean(rs), min(rs),
                                                         max(rs)))
    for c in configs:
        qs = [r["c"][c]["queue"] for r in rounds if "queue" in r["c"].get(c, {})]
        n = sum(q["requests"] for q in qs)
        if n:
            log("  %-24s per request, all workloads: kicks %.3f, waits after a kick %.3f, "
                "requests they gathered %.3f" % (
                    c, sum(q["kicks"] for q in qs) / n, sum(q["gathers"] for q in qs) / n,
                    sum(q["gathered"] for q in qs) / n))
    log("")
    log("boot (mean, and median, of all boots): guest time to /init, VMM wall time from exec")
    log("to exit; mvm's startup_us; VMM own peak RSS (guest RAM excluded) and CPUs the guest")
    log("saw in the fio phase")
    for c in configs:
        log("  %-12s RSS %s KiB  nproc %s" % (
            c, fmt(mean(cvals(c, "rss_kb"))),
            ",".join(str(x) for x in sorted(set(cvals(c, "nproc"))))))
    best = {}
    for kern in args.kernels:
        key = lambda k: boot_key(k, kern)
        for c in configs:
            if not cvals(c, key("wall_s")):
                continue
            w = mean(cvals(c, key("wall_s")))
            if c not in best or w < best[c][1]:
                best[c] = (kern, w)
            log("  %-12s %-8s /init %s (%s) s  exit %s (%s) s%s" % (
                c, kern, fmt(mean(cvals(c, key("init_s"))), "%.2f"),
                fmt(median(cvals(c, key("init_s"))), "%.2f"), fmt(w, "%.2f"),
                fmt(median(cvals(c, key("wall_s"))), "%.2f"),
                "  startup %s (%s) us" % (fmt(mean(cvals(c, key("startup_us")))),
                                          fmt(median(cvals(c, key("startup_us")))))
                if cvals(c, key("startup_us")) else ""))
            steps = [(st, median(cvals(c, key("startup_%s_us" % st)))) for st in STARTUP_STEPS]
            if any(v is not None for _, v in steps):
                log("  %-12s %-8s startup by step, median ms: %s" % (
                    c, kern, ", ".join("%s %s" % (st, fmt(None if v is None else v / 1000,
                                                           "%.1f")) for st, v in steps)))
        ref = {f: (mean(cvals("qemu-microvm", key(k))), median(cvals("qemu-microvm", key(k))))
               for f, k in (("init", "init_s"), ("wall", "wall_s"))}
        for c in configs:
            if c.startswith("mvm-") and all(ref["init"] + ref["wall"]) and cvals(c, key("init_s")):
                log("  %s/qemu-microvm, both %s: /init %.2f (%.2f), exit %.2f (%.2f) "
                    "(targets: <= 1 and <= 0.5)" % (
                        c, kern, mean(cvals(c, key("init_s"))) / ref["init"][0],
                        median(cvals(c, key("init_s"))) / ref["init"][1],
                        mean(cvals(c, key("wall_s"))) / ref["wall"][0],
                        median(cvals(c, key("wall_s"))) / ref["wall"][1]))
    if "qemu-microvm" in best and len(args.kernels) > 1:
        for c in configs:
            if c.startswith("mvm-") and c in best:
                log("  each with its faster kernel: %s (%s) / qemu-microvm (%s): exit %.2f" % (
                    c, best[c][0], best["qemu-microvm"][0],
                    best[c][1] / best["qemu-microvm"][1]))
    for c in configs:
        for n in set(cvals(c, "nproc")):
            if n != args.cpus:
                log("note: the guest under %s saw %d CPUs of %d (the test kernel has no ACPI: "
                    "it finds CPUs in the firmware's MP table)" % (c, n, args.cpus))
    series = {}
    for c in configs:
        pts = [(int(w.split(":")[1]), mean(vals(c, w, "iops"))) for w in workloads
               if w.startswith("randread:") and w.endswith(":1") and vals(c, w, "iops")]
        if pts:
            series[c] = pts
    svg = os.path.join(args.out, "iops-vs-qd%s.svg" % args.tag)
    svg_plot(svg, series, "%d KiB random read, 1 job, %d vCPUs, %d queues%s" % (
        args.bs, args.cpus, args.queues, ", CPU-bound load on every CPU" if args.load else ""))
    res = os.path.join(args.out, "result%s.json" % args.tag)
    with open(res, "w") as f:
        a = {k: v for k, v in vars(args).items() if k not in ("image", "files")}
        json.dump({"args": a, "rounds": rounds, "ratios": ratios, "failures": failures,
                   "stalls": stalls}, f, indent=1)
    log("")
    log("guest-bench: wrote %s and %s; %d failed runs, %d guest stalls run again" % (
        res, svg, len(failures), len(stalls)))
    for x in stalls:
        log("  stalled: " + x)
    for x in failures:
        log("  failed: " + x)
    return 1 if failures or not rounds else 0


def main():
    args = parse_args()
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError:
        pass
    if args.report:
        rounds = []
        for k in range(args.rounds):
            p = os.path.join(args.out, "round%s-%d.json" % (args.tag, k))
            if os.path.exists(p):
                with open(p) as f:
                    rounds.append(json.load(f))
            else:
                log("guest-bench: round %d is missing (%s)" % (k + 1, p))
        return report(args, rounds)
    setup_host(args)
    if args.round is not None:
        r = measure_round(args, args.round)
        return 1 if r["failures"] else 0
    rounds = [measure_round(args, k) for k in range(args.rounds)]
    return report(args, rounds)


if __name__ == "__main__":
    sys.exit(main())
