#!/usr/bin/python3
"""Restoring a snapshot against booting, and against QEMU's restore: the
driver of `make bench-snapshot`.

Runs where /dev/kvm can run the test guest (tests/bench/snap-bench puts it
there: directly, or in the nested harness's L1). The guest (1 vCPU, 256 MiB,
no disk, a vsock device) prints "ready" and then answers each line typed on
its console with "pong LINE"; beside it, an echo listens on vsock port
5000 (mvm-vsock listen). Each measurement starts a VMM process and types
"ping N" every 20 ms (a booting guest: once it printed "ready") until the
first pong: the time from the exec to that pong is the time to an
answering guest. At the same time a second thread connects to the guest's
port 5000 (mvm: through the VMM's hybrid vsock socket, CONNECT 5000; QEMU:
vhost-vsock-pci, an AF_VSOCK socket to the guest's CID), sends a line and
reads its echo, again 20 ms after each failure: the time from the exec to
that echo is the time to an answer over vsock. A snapshot is taken once
both answered (the echo listens in it). Cases, each round in a rotated
order:

  mvm-boot       mvm boots the guest (--kernel, --initrd)
  mvm-restore    mvm --restore of a snapshot taken at "ready" (vm.pause,
                 vm.snapshot), guest memory mapped from the snapshot's file
  qemu-restore   QEMU (q35 with qboot, as make bench-guest runs it) started
                 with -incoming "exec:cat FILE", the file written by its
                 migrate "exec:cat > FILE" at "ready" (the guest idle, so
                 one pass), which it runs once read
  qemu-boot      QEMU booting the same guest
  mvm-restore-huge  (only where --cases names it; needs root) the same
                 snapshot copied (sparse) onto a tmpfs mounted huge=always,
                 whose page cache is in 2 MiB pages the restore maps

mvm's cases also report startup_us from --stats: exec to vCPU 0's first
KVM_RUN, the guest's first instruction (QEMU has no such counter).
Every process runs on a warm page cache (the files were read by the round
before), which is what a host restoring clones sees.

Then the memory of ten VMs at once, each answering: ten mvm --restore of
one snapshot against ten mvm boots, the sum of the processes' PSS
(/proc/PID/smaps_rollup: a page shared by n processes counts 1/n).
And the snapshot's own time: a freshly booted guest's RAM copied into
the snapshot's memory file, against a guest whose RAM is that file from
the boot (--mem-file) and is only synced, in alternating pairs.
A benchmark, not a test: run it on an otherwise idle machine.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from guest_bench import BASE_CMDLINE
from vsock_bench import hybrid_connect

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VSOCK_PORT = 5000
GUEST_CID = 3
# The echo accepts its connections one after the other, each pinged once.
GUEST_SCRIPT = ('mvm-vsock listen %d echo 1000000 & echo ready; '
                'while read l; do echo "pong $l"; done' % VSOCK_PORT)
CASES = ["mvm-boot", "mvm-restore", "qemu-restore", "qemu-boot"]
EXTRA_CASES = ["mvm-restore-huge"]


def log(msg):
    print(msg, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clones", type=int, default=10)
    ap.add_argument("--mem", type=int, default=256, help="guest RAM in MiB")
    ap.add_argument("--snapshot-rounds", type=int, default=3,
                    help="pairs of snapshots taken by copy and by flush (--mem-file)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--mvm", default=os.path.join(ROOT, "mvm"))
    ap.add_argument("--files", default=os.path.join(ROOT, "build", "guest"))
    return ap.parse_args()


def guest_cmd():
    # eval, not "| sh": the loop reads the console, which a piped shell's
    # stdin is not; no double quotes (the kernel takes them for its own).
    return 'eval $(echo %s | base64 -d)' % base64.b64encode(GUEST_SCRIPT.encode()).decode()


def ids():
    return ["--uid", "0", "--gid", "0"] if os.geteuid() == 0 else []


def vsock_arg(sock):
    return ["--vsock", "cid=%d,socket=%s" % (GUEST_CID, sock)]


def mvm_boot_argv(args, sock, extra=()):
    return [args.mvm] + ids() + ["--stats", "--kernel", os.path.join(args.files, "bzImage"),
                                 "--initrd", os.path.join(args.files, "initramfs.cpio.gz"),
                                 "--cpus", "1", "--mem", "%dM" % args.mem,
                                 "--cmdline", "loglevel=4 -- " + guest_cmd()] + \
        vsock_arg(sock) + list(extra)


def mvm_restore_argv(args, snap, sock):
    return [args.mvm] + ids() + ["--stats", "--restore", snap] + vsock_arg(sock)


def qemu_argv(args, extra=()):
    return ["qemu-system-x86_64", "-M", "q35", "-bios", "bios-microvm.bin", "-accel", "kvm",
            "-cpu", "host", "-smp", "1", "-m", "%dM" % args.mem, "-nodefaults",
            "-no-user-config", "-display", "none", "-serial", "stdio", "-no-reboot",
            "-kernel", os.path.join(args.files, "bzImage"),
            "-initrd", os.path.join(args.files, "initramfs.cpio.gz"),
            "-append", BASE_CMDLINE + " loglevel=4 -- " + guest_cmd(),
            "-device", "vhost-vsock-pci,guest-cid=%d" % GUEST_CID] + list(extra)


def vsock_echo(sock):
    """One line through the guest's echo on VSOCK_PORT: True once it came
    back. sock: mvm's hybrid vsock socket, or None for QEMU's vhost-vsock
    (AF_VSOCK to GUEST_CID). A guest not yet listening refuses or resets
    (False: try again)."""
    try:
        if sock:
            s = hybrid_connect(sock, VSOCK_PORT, 10)
        else:
            s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    except OSError:
        return False
    try:
        s.settimeout(10)
        if not sock:
            s.connect((GUEST_CID, VSOCK_PORT))
        s.sendall(b"ping\n")
        got = b""
        while not got.endswith(b"ping\n"):
            b = s.recv(64)
            if not b:
                return False
            got += b
        return True
    except OSError:
        return False
    finally:
        s.close()


class Vm:
    """A VMM process on a pipe console: when it printed ready and pong."""

    def __init__(self, argv, vsock=None):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.ready = self.pong = self.echo = None
        self.vsock = vsock      # mvm's hybrid socket; None: QEMU's AF_VSOCK
        self.out = []
        self.err = b""
        # A VMM that takes no input yet (its UART's FIFO full) must not
        # block the pings: they are dropped instead.
        os.set_blocking(self.p.stdin.fileno(), False)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic()
            s = line.decode(errors="replace").strip()
            self.out.append(s)
            if self.ready is None and s == "ready":
                self.ready = now
            if self.pong is None and s.startswith("pong"):
                self.pong = now

    def _read_err(self):
        self.err = self.p.stderr.read()

    def wait_line(self, what, timeout=300):
        end = time.monotonic() + timeout
        while getattr(self, what) is None and time.monotonic() < end and self.p.poll() is None:
            time.sleep(0.005)
        return getattr(self, what) is not None

    def ping_until_pong(self, timeout=300):
        end, n = time.monotonic() + timeout, 0
        while self.pong is None and time.monotonic() < end and self.p.poll() is None:
            try:
                os.write(self.p.stdin.fileno(), b"ping %d\n" % n)
            except BlockingIOError:
                pass
            except OSError:
                break
            n += 1
            time.sleep(0.02)
        return self.pong is not None

    def echo_until_answer(self, after_ready, timeout=300):
        """vsock_echo every 20 ms after a failure (after "ready" where
        after_ready) until one comes back: self.echo its time."""
        end = time.monotonic() + timeout
        if after_ready and not self.wait_line("ready", timeout):
            return False
        while self.echo is None and time.monotonic() < end and self.p.poll() is None:
            if vsock_echo(self.vsock):
                self.echo = time.monotonic()
                break
            time.sleep(0.02)
        return self.echo is not None

    def answers(self, boot):
        """Both pings, at once: the console's and vsock's."""
        got = {}
        t = threading.Thread(target=lambda: got.update(echo=self.echo_until_answer(boot)),
                             daemon=True)
        t.start()
        ok = (not boot or self.wait_line("ready")) and self.ping_until_pong()
        t.join(320)
        return ok and got.get("echo", False)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        time.sleep(0.05)

    def stats(self):
        try:
            text = self.err.decode(errors="replace")
            return json.JSONDecoder().raw_decode(text[text.index("{"):])[0]
        except ValueError:
            return {}

    def minflt(self):
        """The process's minor page faults so far (the guest's first
        touches of its RAM among them)."""
        try:
            with open("/proc/%d/stat" % self.p.pid) as f:
                return int(f.read().rsplit(")", 1)[1].split()[7])
        except (OSError, IndexError, ValueError):
            return None


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


def api(sock, endpoint, body=None):
    for attempt in range(5):
        c = UnixHTTP(sock)
        try:
            c.request("PUT", "/api/v1/" + endpoint, body=json.dumps(body) if body else None,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
        except ConnectionError as e:
            # The socket is there before mvm's API thread serves it.
            log("snap-bench: %s: %s; again" % (endpoint, e))
            time.sleep(1)
            continue
        finally:
            c.close()
        if r.status >= 300:
            raise RuntimeError("%s: HTTP %d %s" % (endpoint, r.status, data[:300]))
        return
    raise RuntimeError("%s: no answer from the API socket" % endpoint)


def mvm_snapshot(args, scratch, name="mvm-snap", mem_file=False):
    """The guest booted to "ready", paused and snapshotted into scratch/NAME
    (with mem_file, its RAM in NAME/memory from the start: a flush)."""
    sock, snap = os.path.join(scratch, "api.sock"), os.path.join(scratch, name)
    extra = []
    if mem_file:
        os.makedirs(snap, exist_ok=True)
        extra = ["--mem-file", os.path.join(snap, "memory")]
    vs = os.path.join(scratch, "snap.vsock")
    vm = Vm([args.mvm, "--sandbox", "off", "--api-socket", sock] +
            mvm_boot_argv(args, vs)[1:] + extra, vs)
    if not vm.answers(True):
        raise RuntimeError("mvm: the guest did not get ready: %s %s" % (vm.out[-5:],
                                                                      vm.err[-300:]))
    api(sock, "vm.pause")
    t = time.monotonic()
    api(sock, "vm.snapshot", {"destination_url": "file://" + snap})
    took = time.monotonic() - t
    api(sock, "vmm.shutdown")
    vm.stop()
    log("snap-bench: mvm's snapshot%s took %.0f ms: state %d bytes, memory %d MiB (%d MiB on "
        "disk)" % (" (RAM in its memory file)" if mem_file else "", took * 1000,
                   os.path.getsize(os.path.join(snap, "state")), args.mem,
                   os.stat(os.path.join(snap, "memory")).st_blocks * 512 >> 20))
    return snap, took * 1000


def snapshot_ways(args, scratch):
    """The snapshot's own cost, copying guest RAM against flushing the file
    it is in (--mem-file), alternating, args.snapshot_rounds pairs."""
    ms = {"copy": [], "mem-file": []}
    for r in range(args.snapshot_rounds):
        for way in (("copy", "mem-file") if r % 2 == 0 else ("mem-file", "copy")):
            snap, took = mvm_snapshot(args, scratch, "way-%s-%d" % (way, r), way == "mem-file")
            ms[way].append(took)
            shutil.rmtree(snap, ignore_errors=True)
    return ms


def qemu_monitor(path, cmd):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(120)
    s.sendall(cmd.encode() + b"\n")
    data = b""
    # The monitor echoes the command, answers, then prompts "(qemu) ".
    while data.count(b"(qemu)") < 2:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data.decode(errors="replace")


def qemu_snapshot(args, scratch):
    mon, state = os.path.join(scratch, "qemu.mon"), os.path.join(scratch, "qemu.state")
    vm = Vm(qemu_argv(args, ["-monitor", "unix:%s,server,nowait" % mon]))
    if not vm.answers(True):
        raise RuntimeError("qemu: the guest did not get ready: %s" % vm.out[-5:])
    t = time.monotonic()
    # Not stopped first: the state saves the run state, and a QEMU
    # restoring a stopped guest leaves it stopped. An idle guest converges
    # in one pass; the source then stops by itself.
    qemu_monitor(mon, 'migrate "exec:cat > %s"' % state)
    for _ in range(1200):
        if "Migration status: completed" in qemu_monitor(mon, "info migrate"):
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("qemu: migrate to a file did not complete")
    took = time.monotonic() - t
    qemu_monitor(mon, "quit")
    vm.stop()
    log("snap-bench: QEMU's migrate to a file took %.0f ms: %d MiB" % (
        took * 1000, os.path.getsize(state) >> 20))
    return state


def huge_copy(snap, scratch):
    """snap copied, sparse, onto a tmpfs mounted huge=always in scratch."""
    mnt = os.path.join(scratch, "huge")
    os.makedirs(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "huge=always,size=2g", "tmpfs", mnt], check=True)
    subprocess.run(["cp", "-r", "--sparse=always", snap, os.path.join(mnt, "snap")], check=True)
    with open("/proc/meminfo") as f:
        huge = [l.split()[1] for l in f if l.startswith("ShmemHugePages:")]
    log("snap-bench: the snapshot on a huge=always tmpfs: ShmemHugePages %s kB" % huge[0])
    return os.path.join(mnt, "snap")


def run(case, args, snaps, scratch):
    vs = os.path.join(scratch, "run.vsock")
    if case == "mvm-boot":
        vm = Vm(mvm_boot_argv(args, vs), vs)
    elif case == "mvm-restore":
        vm = Vm(mvm_restore_argv(args, snaps["mvm"], vs), vs)
    elif case == "mvm-restore-huge":
        vm = Vm(mvm_restore_argv(args, snaps["huge"], vs), vs)
    elif case == "qemu-restore":
        vm = Vm(qemu_argv(args, ["-incoming", "exec:cat %s" % snaps["qemu"]]))
    else:
        vm = Vm(qemu_argv(args))
    # A booting guest gets its pings once it is ready: QEMU's UART drops
    # or holds input typed before the guest's driver takes it, and then
    # never hands the guest the rest (mvm's waits in its FIFO). Its vsock
    # pings too, alike for both VMMs.
    ok = vm.answers(case.endswith("-boot"))
    flt = vm.minflt()
    vm.stop()
    if not ok:
        raise RuntimeError("%s: no pong or no vsock echo: %s %s" % (case, vm.out[-5:],
                                                                    vm.err[-300:]))
    st = vm.stats() if case.startswith("mvm") else {}
    return {"answer_ms": (vm.pong - vm.t0) * 1000, "vsock_ms": (vm.echo - vm.t0) * 1000,
            "startup_us": st.get("startup_us"), "phases_us": st.get("startup_phases_us"),
            "minflt": flt}


def pss_kib(pid):
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def clones(argv, n, boot, scratch):
    """n VMs from argv(its vsock socket) at once, each answering: the sum of
    their PSS in KiB."""
    vms = [Vm(argv(os.path.join(scratch, "clone%d.vsock" % i))) for i in range(n)]
    try:
        for vm in vms:
            if not ((not boot or vm.wait_line("ready")) and vm.ping_until_pong()):
                raise RuntimeError("a clone did not answer: %s %s" % (vm.out[-3:], vm.err[-300:]))
        time.sleep(1)
        return sum(pss_kib(vm.p.pid) for vm in vms)
    finally:
        for vm in vms:
            vm.stop()


def main():
    args = parse_args()
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES + EXTRA_CASES:
            log("snap-bench: --cases %s: unknown; give some of %s" % (c, ", ".join(CASES + EXTRA_CASES)))
            return 2
    scratch = tempfile.mkdtemp(prefix="mvm-snap-bench.")
    try:
        snaps = {}
        if "mvm-restore" in cases:
            snaps["mvm"] = mvm_snapshot(args, scratch)[0]
        if "mvm-restore-huge" in cases:
            snaps["huge"] = huge_copy(snaps["mvm"], scratch)
        if "qemu-restore" in cases:
            snaps["qemu"] = qemu_snapshot(args, scratch)
        res = {c: [] for c in cases}
        for r in range(args.rounds + 1):
            # Round 0 warms the page cache and is not counted; the order
            # rotates from round to round so drift falls on every case.
            order = cases[r % len(cases):] + cases[:r % len(cases)]
            for c in order:
                got = run(c, args, snaps, scratch)
                if r:
                    res[c].append(got)
                log("snap-bench: round %d %-13s answered in %7.1f ms, over vsock in %7.1f ms%s%s" % (
                    r, c, got["answer_ms"], got["vsock_ms"],
                    "" if got["startup_us"] is None else
                    ", first instruction at %.1f ms" % (got["startup_us"] / 1000),
                    " (warm-up, not counted)" if not r else ""))
        summary = {}
        log("")
        log("snap-bench: %d rounds, guest of %d MiB, 1 vCPU, median (mean)" % (
            args.rounds, args.mem))
        for c in cases:
            a = [x["answer_ms"] for x in res[c]]
            v = [x["vsock_ms"] for x in res[c]]
            s = [x["startup_us"] / 1000 for x in res[c] if x["startup_us"] is not None]
            summary[c] = {"answer_ms_median": statistics.median(a), "answer_ms_mean":
                          statistics.mean(a), "answer_ms": a,
                          "vsock_ms_median": statistics.median(v), "vsock_ms": v}
            if s:
                summary[c]["first_instruction_ms_median"] = statistics.median(s)
                summary[c]["first_instruction_ms"] = s
                phases = {k: statistics.median(x["phases_us"][k] / 1000 for x in res[c])
                          for k in res[c][0]["phases_us"]}
                summary[c]["phases_ms_median"] = phases
                log("  %-13s to the first instruction by step (ms): %s" % (
                    c, ", ".join("%s %.1f" % kv for kv in phases.items())))
            f = [x["minflt"] for x in res[c] if x["minflt"] is not None]
            if f:
                summary[c]["minflt_median"] = statistics.median(f)
            log("  %-13s answers in %8.1f ms (%8.1f), over vsock in %8.1f ms%s%s" % (
                c, statistics.median(a), statistics.mean(a), statistics.median(v),
                ", first instruction at %.1f ms" % statistics.median(s) if s else "",
                ", %d minor faults" % statistics.median(f) if f else ""))
        # Ratios per round (side by side), then their median.
        for num, den in (("mvm-restore", "mvm-boot"), ("mvm-restore", "qemu-restore"),
                         ("qemu-restore", "qemu-boot"), ("mvm-restore-huge", "mvm-restore")):
            if num in res and den in res:
                for key, what in (("answer_ms", ""), ("vsock_ms", ", over vsock")):
                    q = [x[key] / y[key] for x, y in zip(res[num], res[den])]
                    summary["%s/%s%s" % (num, den, "" if not what else ":vsock")] = \
                        statistics.median(q)
                    log("  %s / %s%s: %.3f (median of the rounds' ratios: %s)" % (
                        num, den, what, statistics.median(q),
                        " ".join("%.3f" % x for x in q)))
        if args.snapshot_rounds and "mvm-restore" in cases:
            ways = snapshot_ways(args, scratch)
            summary["snapshot_ms"] = {k: {"median": statistics.median(v), "runs": v}
                                      for k, v in ways.items()}
            log("  snapshot of the paused guest, median of %d: copying RAM %.0f ms (%s), "
                "flushing its file (--mem-file) %.0f ms (%s)" % (
                    args.snapshot_rounds, statistics.median(ways["copy"]),
                    " ".join("%.0f" % x for x in ways["copy"]),
                    statistics.median(ways["mem-file"]),
                    " ".join("%.0f" % x for x in ways["mem-file"])))
        if args.clones and "mvm-restore" in cases:
            def quiet(argv):
                return [a for a in argv if a != "--stats"]

            restored = clones(lambda vs: quiet(mvm_restore_argv(args, snaps["mvm"], vs)),
                              args.clones, False, scratch)
            booted = clones(lambda vs: quiet(mvm_boot_argv(args, vs)), args.clones, True,
                            scratch)
            summary["clones"] = {"n": args.clones, "restored_pss_kib": restored,
                                 "booted_pss_kib": booted, "ratio": restored / booted}
            log("  %d VMs at once, each answering: restored %d MiB PSS in all, booted %d MiB: "
                "%.3f" % (args.clones, restored >> 10, booted >> 10, restored / booted))
        print("MVM-BENCH-SNAP-JSON " + json.dumps(summary), flush=True)
    finally:
        if os.path.ismount(os.path.join(scratch, "huge")):
            subprocess.run(["umount", os.path.join(scratch, "huge")])
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
