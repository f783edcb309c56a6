#!/usr/bin/env python3
"""coredump_check.py CORE VMLINUX VCPUS MEM_BYTES: what a reader of mvm's
guest core dumps (vm.coredump) relies on, read back from CORE: an x86-64
ELF core; per vCPU an NT_PRSTATUS note and a QEMU CPU state note (version
1) that agree on RIP, in 64-bit paging mode (CR0.PE and PG, a CR3); PT_LOAD
segments covering MEM_BYTES of guest RAM by guest-physical address, their
zero pages left as holes; and the guest kernel's linux_banner (its address
from VMLINUX's symbols) found at its physical address. One line per
finding; exit 1 on the first that fails."""
import os
import struct
import subprocess
import sys

KERNEL_MAP = 0xffffffff80000000   # x86-64 __START_KERNEL_map: the kernel text's phys = virt - this


def fail(msg):
    print("coredump: FAIL: " + msg)
    sys.exit(1)


def main():
    core, vmlinux, vcpus, mem = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    data = open(core, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        fail("not a 64-bit little-endian ELF file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    if e_type != 4 or e_machine != 62:
        fail("e_type %d, e_machine %d: not an x86-64 core (4, 62)" % (e_type, e_machine))
    notes, loads = [], []
    for i in range(phnum):
        p_type, _, off, vaddr, paddr, filesz, memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 4:
            notes.append((off, filesz))
        elif p_type == 1:
            loads.append((off, paddr, filesz, memsz))
    if len(notes) != 1:
        fail("%d PT_NOTE segments, expected 1" % len(notes))
    prstatus, qemu = [], []
    off, size = notes[0]
    at = off
    while at < off + size:
        namesz, descsz, ntype = struct.unpack_from("<III", data, at)
        name = data[at + 12:at + 12 + namesz].rstrip(b"\0")
        desc = at + 12 + ((namesz + 3) & ~3)
        if name == b"CORE" and ntype == 1:
            prstatus.append(struct.unpack_from("<Q", data, desc + 112 + 16 * 8)[0])
        elif name == b"QEMU":
            version, qsize = struct.unpack_from("<II", data, desc)
            rip, = struct.unpack_from("<Q", data, desc + 8 + 16 * 8)
            cr = struct.unpack_from("<5Q", data, desc + 8 + 18 * 8 + 10 * 24)
            qemu.append((version, qsize, rip, cr))
        at = desc + ((descsz + 3) & ~3)
    if len(prstatus) != vcpus or len(qemu) != vcpus:
        fail("%d NT_PRSTATUS and %d QEMU notes, expected %d of each" %
             (len(prstatus), len(qemu), vcpus))
    for i, (version, qsize, rip, cr) in enumerate(qemu):
        if version != 1 or qsize != 440:
            fail("vCPU %d: QEMU note version %d size %d, expected 1 and 440" % (i, version, qsize))
        if rip != prstatus[i]:
            fail("vCPU %d: RIP %#x in NT_PRSTATUS, %#x in the QEMU note" % (i, prstatus[i], rip))
        if cr[0] & 0x80000001 != 0x80000001 or not cr[3]:
            fail("vCPU %d: CR0 %#x, CR3 %#x: not paging" % (i, cr[0], cr[3]))
        print("coredump: vCPU %d: RIP %#x, CR3 %#x" % (i, rip, cr[3]))
    total = sum(memsz for _, _, _, memsz in loads)
    if total != mem or any(f != m for _, _, f, m in loads):
        fail("PT_LOAD segments hold %d bytes of RAM (%s), expected %d" % (total, loads, mem))
    syms = subprocess.run(["nm", vmlinux], capture_output=True, text=True, check=True).stdout
    banner = [int(line.split()[0], 16) for line in syms.splitlines()
              if line.split()[2:] == ["linux_banner"]]
    if len(banner) != 1:
        fail("no linux_banner in %s" % vmlinux)
    phys = banner[0] - KERNEL_MAP
    for off, paddr, filesz, _ in loads:
        if paddr <= phys < paddr + filesz:
            text = data[off + phys - paddr:off + phys - paddr + 64]
            break
    else:
        fail("linux_banner's physical address %#x is in no PT_LOAD" % phys)
    if not text.startswith(b"Linux version "):
        fail("at linux_banner's physical address %#x: %r" % (phys, text[:32]))
    print("coredump: linux_banner at %#x: %s" % (phys, text.split(b"\n")[0][:40].decode()))
    st = os.stat(core)
    if st.st_blocks * 512 >= st.st_size:
        fail("%d bytes allocated for a %d-byte file: zero pages written, not holes" %
             (st.st_blocks * 512, st.st_size))
    print("coredump: %d MiB file, %d MiB allocated" % (st.st_size >> 20, st.st_blocks >> 11))


main()
