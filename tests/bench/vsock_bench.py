#!/usr/bin/python3
"""mvm's virtio-vsock against QEMU's vhost-vsock-pci: the driver of
`make bench-vsock`.

Runs where /dev/kvm can run the test guest (tests/bench/vsock-bench puts it
there: directly, or inside the nested harness's L1, which loads vhost_vsock
for QEMU). Boots the shipped test guest (same kernel, initramfs, one vCPU,
256 MiB) under:

  mvm         ./mvm --vsock cid=3,socket=S (virtio-pci, MSI-X); the host's
              ends are Unix sockets (hybrid vsock: S_PORT, and S with
              "CONNECT PORT\\n")
  mvm-poll    with --poll USEC only: the same with --vsock ...,poll=USEC
              (the device's thread polls for up to USEC before it sleeps)
  qemu-vhost  qemu-system-x86_64 -accel kvm -M q35 (qboot) -device
              vhost-vsock-pci,guest-cid=3: the kernel's vhost worker moves
              the packets; the host's ends are AF_VSOCK sockets. The worker,
              a kernel thread, is held to this script's CPUs as mvm's
              threads are (the harness keeps L1's CPU 0 from the command)

The host's programs are the same for both: socat as the echo (port 5000)
and the sink (port 5001), and this script as the sender to the guest's
sink (port 5002). Rounds alternate the order of the configurations. Per
boot the guest's `mvm-vsock` (guest/mvm-vsock.c) runs three phases:

  rr   one-byte round trips against the host's echo: time per round trip
       (the guest's clock)
  g2h  a stream of 64 KiB writes to the host's sink, until the sink has
       taken all and closed: MiB/s (the guest's clock)
  h2g  the host sends 64 KiB writes to the guest's sink, until the guest
       has taken all and closed: MiB/s (the host's clock)

after --warmup boots of each that are not counted (the first boot of a
VMM in a fresh L1 pays for cold caches: it was the slowest of its kind)

and around each phase the guest's interrupts (its /proc/interrupts,
virtio lines) and, on the host, the device's CPU time: mvm's vsock thread
(ID-vsq0), QEMU's vhost worker (the kernel thread vhost-PID), and the
whole VMM (utime + stime; QEMU's with its vhost worker), per MiB or per
round trip. The report gives the means and, per round, the ratio
mvm / QEMU, and --out DIR/result.json holds every run.
A benchmark, not a test: run it on an otherwise idle machine.
"""
import argparse
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from guest_bench import BASE_CMDLINE, proc_cpu_s  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIGS = ["mvm", "qemu-vhost"]
POLL_CONFIG = "mvm-poll"


def is_mvm(config):
    return config.startswith("mvm")


def configs_for(args):
    """The configurations a run alternates: mvm-poll joins with --poll."""
    return CONFIGS + ([POLL_CONFIG] if args.poll else [])
GUEST_CID = 3
PORT_ECHO, PORT_SINK, PORT_GUEST_SINK = 5000, 5001, 5002
PHASES = ("rr", "g2h", "h2g")
CHUNK = 64 << 10

GUEST_SCRIPT = r"""
irqs() { awk '/virtio/ { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i } END { print s + 0 }' /proc/interrupts; }
phase() { p=$1; shift; a=$(irqs); echo "MVM-VB-BEGIN $p"; "$@"; echo "MVM-VB-END $p $(($(irqs) - a))"; }
phase rr mvm-vsock rr 2 @ECHO@ @RR@
phase g2h mvm-vsock stream 2 @SINK@ @MIB@
phase h2g mvm-vsock listen @GSINK@ sink 1
"""


def log(msg):
    print(msg, flush=True)


def guest_cmd(rr, mib):
    script = (GUEST_SCRIPT.replace("@ECHO@", str(PORT_ECHO)).replace("@SINK@", str(PORT_SINK))
              .replace("@GSINK@", str(PORT_GUEST_SINK)).replace("@RR@", str(rr))
              .replace("@MIB@", str(mib)))
    return "echo %s | base64 -d | sh" % base64.b64encode(script.encode()).decode()


def vmm_argv(config, args, sock):
    kernel = os.path.join(args.files, "build", "guest", "bzImage")
    initrd = os.path.join(args.files, "build", "guest", "initramfs.cpio.gz")
    cmd = guest_cmd(args.rr, args.mib)
    if is_mvm(config):
        ids = ["--uid", "0", "--gid", "0"] if os.geteuid() == 0 else []
        spec = "cid=%d,socket=%s" % (GUEST_CID, sock)
        if config == POLL_CONFIG:
            spec += ",poll=%d" % args.poll
        return [os.path.join(args.files, "mvm")] + ids + [
            "--stats", "--kernel", kernel, "--initrd", initrd, "--cpus", "1", "--mem", "256M",
            "--vsock", spec, "--cmdline", "loglevel=4 -- " + cmd]
    # qboot rather than SeaBIOS, as tests/bench/guest_bench.py boots q35.
    return ["qemu-system-x86_64", "-M", "q35", "-bios", "bios-microvm.bin", "-accel", "kvm",
            "-cpu", "host", "-smp", "1", "-m", "256M", "-nodefaults", "-no-user-config",
            "-display", "none", "-serial", "stdio", "-no-reboot", "-kernel", kernel,
            "-initrd", initrd, "-append", BASE_CMDLINE + " loglevel=4 -- " + cmd,
            "-device", "isa-debug-exit,iobase=0x501,iosize=1",
            "-device", "vhost-vsock-pci,guest-cid=%d" % GUEST_CID]


def host_servers(config, sock):
    """socat as the host's echo and sink, on Unix sockets (mvm's hybrid
    vsock: PATH_PORT) or AF_VSOCK (vhost)."""
    if is_mvm(config):
        echo, sink = "UNIX-LISTEN:%s_%d,fork" % (sock, PORT_ECHO), \
            "UNIX-LISTEN:%s_%d,fork" % (sock, PORT_SINK)
    else:
        echo, sink = "VSOCK-LISTEN:%d,fork" % PORT_ECHO, "VSOCK-LISTEN:%d,fork" % PORT_SINK
    procs = [subprocess.Popen(["socat", echo, "PIPE"]),
             subprocess.Popen(["socat", "-u", sink, "GOPEN:/dev/null"])]
    deadline = time.monotonic() + 30
    while is_mvm(config) and time.monotonic() < deadline and not all(
            os.path.exists("%s_%d" % (sock, p)) for p in (PORT_ECHO, PORT_SINK)):
        time.sleep(0.05)
    if not is_mvm(config):
        time.sleep(1)       # no file to wait for: socat's listen is quick
    return procs


def hybrid_connect(sock, port, timeout=30):
    """A connection to the guest's port through mvm's hybrid vsock socket:
    "CONNECT PORT\n", then mvm's "OK ...\n" (a line read a byte at a time,
    so nothing after it is taken). Raises OSError (ConnectionError: mvm
    closed it, or answered something else) and leaves nothing open."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(sock)
        s.sendall(b"CONNECT %d\n" % port)
        line = b""
        while not line.endswith(b"\n"):
            b = s.recv(1)
            if not b:
                raise ConnectionError("closed before OK")
            line += b
        if not line.startswith(b"OK "):
            raise ConnectionError(line)
        return s
    except OSError:
        s.close()
        raise


def dial_guest(config, sock, port, deadline):
    """A connection to the guest's port, retried until it listens."""
    while time.monotonic() < deadline:
        s = None
        try:
            if is_mvm(config):
                return hybrid_connect(sock, port)
            s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect((GUEST_CID, port))
            return s
        except OSError:
            if s:
                s.close()
            time.sleep(0.1)
    raise TimeoutError("the guest's sink on port %d never answered" % port)


def thread_cpu_s(path):
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pin_like_us(stat_path):
    """Hold a device thread to this script's CPUs: vhost's worker is a
    kernel thread, which the harness's taskset (L1's CPU 0 kept for L1)
    does not reach, while mvm's threads inherit it. True when done."""
    tid = int(stat_path.split("/")[-2])
    try:
        os.sched_setaffinity(tid, os.sched_getaffinity(0))
        return True
    except OSError:
        return False


def device_thread(config, pid):
    """/proc path of the device's thread: mvm's vsock queue thread, or
    QEMU's vhost worker (a kernel thread named vhost-PID)."""
    if is_mvm(config):
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    if f.read().strip().endswith("vsq0"):
                        return "/proc/%d/task/%s/stat" % (pid, tid)
            except OSError:
                pass
        return None
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/comm" % p) as f:
                    if f.read().strip() == "vhost-%d" % pid:
                        return "/proc/%s/stat" % p
            except OSError:
                pass
    return None


class Run:
    """One boot of one configuration: the guest's phases, with the host's
    samples at their markers."""

    def __init__(self, config, args, tmp):
        self.config, self.args = config, args
        self.lines, self.marks, self.h2g_s = [], {}, None
        self.rr = self.stream = None     # the guest's "rr" and "stream" lines
        self.error = None
        sock = os.path.join(tmp, "v.sock")
        servers = host_servers(config, sock)
        self.p = subprocess.Popen(vmm_argv(config, args, sock), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.dev = None
        self.pinned = None      # vhost's worker held to our CPUs (pin_like_us)
        self.err = b""
        errt = threading.Thread(target=self._stderr, daemon=True)
        errt.start()
        killer = threading.Timer(args.timeout, self.p.kill)
        killer.start()
        sender = None
        try:
            for raw in self.p.stdout:
                line = raw.decode(errors="replace").replace("\r", "").rstrip("\n")
                self.lines.append(line)
                m = re.search(r"MVM-VB-BEGIN (\w+)", line)
                if m:
                    self.marks[m.group(1)] = {"begin": self._snapshot()}
                    if m.group(1) == "h2g":
                        sender = threading.Thread(target=self._send, args=(sock,), daemon=True)
                        sender.start()
                m = re.search(r"MVM-VB-END (\w+) (-?[0-9]+)", line)
                if m and m.group(1) in self.marks:
                    self.marks[m.group(1)].update(end=self._snapshot(), irqs=int(m.group(2)))
                m = re.match(r"\s*rr ([0-9]+) ([0-9]+)\s*$", line)
                if m:
                    self.rr = (int(m.group(1)), int(m.group(2)))
                m = re.match(r"\s*stream ([0-9]+) ([0-9]+)\s*$", line)
                if m:
                    self.stream = (int(m.group(1)), int(m.group(2)))
            self.rc = self.p.wait()
            if sender:
                sender.join(30)
        finally:
            killer.cancel()
            for s in servers:
                s.terminate()
                s.wait()
        errt.join(5)

    def _stderr(self):
        self.err = self.p.stderr.read()

    def _send(self, sock):
        try:
            s = dial_guest(self.config, sock, PORT_GUEST_SINK, time.monotonic() + 60)
            buf = b"h" * CHUNK
            t0 = time.monotonic()
            for _ in range(self.args.mib * ((1 << 20) // CHUNK)):
                s.sendall(buf)
            s.shutdown(socket.SHUT_WR)
            while s.recv(CHUNK):
                pass
            self.h2g_s = time.monotonic() - t0
            s.close()
        except (OSError, TimeoutError) as e:
            self.error = "h2g: %s" % e

    def _snapshot(self):
        try:
            if self.dev is None:
                self.dev = device_thread(self.config, self.p.pid)
                if self.dev and not is_mvm(self.config):
                    self.pinned = pin_like_us(self.dev)
            dev = thread_cpu_s(self.dev) if self.dev else None
            vmm = proc_cpu_s(self.p.pid)
            if not is_mvm(self.config) and dev is not None:
                vmm += dev        # QEMU's device work is its vhost worker's
            return {"t": time.monotonic(), "dev": dev, "vmm": vmm}
        except OSError:
            return None

    def failure(self):
        want = 0 if is_mvm(self.config) else 1     # isa-debug-exit: (0 << 1) | 1
        if self.error:
            return self.error
        if self.rc != want:
            return "exit status %d; the guest's last lines: %s; stderr: %s" % (
                self.rc, " | ".join(self.lines[-5:]), self.err[-300:].decode(errors="replace"))
        missing = [p for p in PHASES if "end" not in self.marks.get(p, {})]
        if missing or self.rr is None or self.stream is None or not self.h2g_s:
            return "phases missing (%s); the guest's last lines: %s" % (
                ", ".join(missing) or "their figures", " | ".join(self.lines[-5:]))
        return None

    def results(self):
        r = phase_results(self.marks, self.rr, self.stream, self.h2g_s, self.args.mib)
        if self.pinned is not None:
            r["vhost_worker_pinned"] = self.pinned
        return r


def phase_results(marks, rr, stream, h2g_s, mib):
    """Per phase: its rate and, per unit (a round trip, a MiB), the guest's
    interrupts and the host's CPU (device thread, whole VMM) in µs."""
    n_rt, ns_per_rt = rr
    units = {"rr": n_rt, "g2h": stream[0], "h2g": mib}
    out = {"rr": {"us_per_rt": ns_per_rt / 1000.0},
           "g2h": {"mib_s": stream[1] / 1024.0},
           "h2g": {"mib_s": mib / h2g_s}}
    for p in PHASES:
        d, n = marks[p], units[p]
        out[p]["irqs_per_unit"] = d["irqs"] / n
        b, e = d.get("begin"), d.get("end")
        if b and e:
            for k in ("dev", "vmm"):
                if b[k] is not None and e[k] is not None:
                    out[p][k + "_cpu_us_per_unit"] = (e[k] - b[k]) * 1e6 / n
    return out


METRICS = [("rr", "us_per_rt", "round trip, µs"), ("rr", "irqs_per_unit", "interrupts / round trip"),
           ("rr", "dev_cpu_us_per_unit", "device CPU µs / round trip"),
           ("g2h", "mib_s", "guest→host MiB/s"), ("g2h", "irqs_per_unit", "interrupts / MiB g→h"),
           ("g2h", "dev_cpu_us_per_unit", "device CPU µs / MiB g→h"),
           ("g2h", "vmm_cpu_us_per_unit", "VMM CPU µs / MiB g→h"),
           ("h2g", "mib_s", "host→guest MiB/s"), ("h2g", "irqs_per_unit", "interrupts / MiB h→g"),
           ("h2g", "dev_cpu_us_per_unit", "device CPU µs / MiB h→g"),
           ("h2g", "vmm_cpu_us_per_unit", "VMM CPU µs / MiB h→g")]


def report(rounds, configs=CONFIGS):
    """rounds: [{config: results}]; the table's rows: (label, mean per
    config, per mvm configuration its ratio to qemu-vhost in each round
    where both ran)."""
    rows = []
    for phase, key, label in METRICS:
        means, ratios = {}, {c: [] for c in configs if is_mvm(c)}
        for c in configs:
            v = [r[c][phase][key] for r in rounds if c in r and key in r[c][phase]]
            means[c] = sum(v) / len(v) if v else None
        for r in rounds:
            q = r.get("qemu-vhost", {}).get(phase, {}).get(key)
            for c in ratios:
                if q and c in r and key in r[c][phase]:
                    ratios[c].append(r[c][phase][key] / q)
        rows.append((label, means, ratios))
    return rows


def fmt(v):
    return "-" if v is None else ("%.3g" % v if abs(v) < 100 else "%.0f" % v)


def print_report(rows, nrounds, configs=CONFIGS):
    mvms = [c for c in configs if is_mvm(c)]
    log("%-28s" % ("per %d round(s)" % nrounds) + "".join(" %12s" % c for c in configs) +
        "".join("   %-22s" % ("%s/qemu per round" % c) for c in mvms))
    for label, means, ratios in rows:
        rs = ["%.2f; %.2f..%.2f" % (sum(v) / len(v), min(v), max(v)) if v else "-"
              for v in (ratios[c] for c in mvms)]
        log("%-28s" % label + "".join(" %12s" % fmt(means[c]) for c in configs) +
            "".join("   %-22s" % x for x in rs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rr", type=int, default=2000, help="round trips per run (default 2000)")
    ap.add_argument("--mib", type=int, default=64, help="MiB each way per run (default 64)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="boots of each configuration before round 1, not counted (default 1): "
                    "the L1's first boot of a VMM pays for its cold caches")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per boot (default 600)")
    ap.add_argument("--poll", type=int, default=0,
                    help="also run mvm with --vsock ...,poll=USEC (mvm-poll), 1 to 1000")
    ap.add_argument("--files", default=ROOT, help="the checkout with ./mvm and build/guest")
    ap.add_argument("--out", default=None, help="write result.json there")
    args = ap.parse_args()
    if args.rounds < 1 or args.rr < 1 or args.mib < 1:
        ap.error("--rounds, --rr and --mib must be at least 1")
    if args.warmup < 0:
        ap.error("--warmup must be 0 or more")
    if not 0 <= args.poll <= 1000:
        ap.error("--poll %d: give 1 to 1000 (USEC), or leave it out" % args.poll)
    configs = configs_for(args)
    rounds, failures = [], []
    tmp = tempfile.mkdtemp(prefix="mvm-vsock-bench.")
    for k in range(args.warmup):
        for c in configs:
            why = Run(c, args, tmp).failure()
            log("warm-up %d %s: %s" % (k + 1, c, "FAILED: " + why if why else "done"))
    for k in range(args.rounds):
        n = len(configs)
        order = configs[k % n:] + configs[:k % n]
        r = {}
        for c in order:
            run = Run(c, args, tmp)
            why = run.failure()
            if why:
                failures.append("round %d, %s: %s" % (k + 1, c, why))
                log("round %d %s: FAILED: %s" % (k + 1, c, why))
                continue
            r[c] = run.results()
            log("round %d %-10s rr %.1f µs, g→h %.1f MiB/s, h→g %.1f MiB/s" % (
                k + 1, c, r[c]["rr"]["us_per_rt"], r[c]["g2h"]["mib_s"], r[c]["h2g"]["mib_s"]))
        rounds.append(r)
    rows = report(rounds, configs)
    print_report(rows, len(rounds), configs)
    doc = {"args": {"rounds": args.rounds, "rr": args.rr, "mib": args.mib, "poll": args.poll},
           "rounds": rounds, "failures": failures,
           "summary": [{"metric": label, "mean": means, "ratios": ratios}
                       for label, means, ratios in rows]}
    line = json.dumps(doc, ensure_ascii=False)
    print("MVM-BENCH-VSOCK-JSON " + line, flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "result.json"), "w") as f:
            f.write(line + "\n")
    for x in failures:
        log("  failed: " + x)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
