#!/bin/sh
# scripts/man.sh MVM VERSION: mvm(1) on stdout, made from `MVM --help` (the
# one description of the options; the CLI's tables write it) between a
# fixed head and tail. make install installs it; make man builds it.
set -eu
mvm=$1 version=$2
cat <<HEAD
.TH MVM 1 "" "mvm $version" "User Commands"
.SH NAME
mvm \\- a lightweight microVM monitor for Linux KVM
.SH SYNOPSIS
.B mvm
[\\fIoptions\\fR]
.SH DESCRIPTION
mvm boots a Linux guest on KVM with a minimal set of devices: virtio-blk
disks (virtio-pci or virtio-mmio on x86-64, virtio-ccw on s390x), a serial
or SCLP console, the i8042 reset line and an exit port. The guest's console
is mvm's standard input and output; the guest's status (the byte it writes
to the exit port) is mvm's exit status.
.PP
Every thread runs in a seccomp filter of its own; every file, io_uring and
device is opened before the first guest instruction.
.SH OPTIONS
HEAD
# Option lines ("  --name ARGS  text") start a tagged paragraph; indented
# lines continue it, a disk key (",key=VALUE  text") on a line of its own;
# other lines are paragraphs of their own.
"$mvm" --help | sed 1d | awk '
	function esc(s) { gsub(/\\/, "\\\\", s); gsub(/^\./, "\\&.", s); gsub(/-/, "\\-", s); return s }
	/^  --/ {
		line = substr($0, 3)
		n = match(line, /  +/)
		if (n) { tag = substr(line, 1, n - 1); text = substr(line, n); sub(/^ +/, "", text) }
		else { tag = line; text = "" }
		print ".TP"; print "\\fB" esc(tag) "\\fR"; if (text != "") print esc(text); next
	}
	/^ +,[a-z-]+/ { t = $0; sub(/^ +/, "", t); print ".br"; print esc(t); next }
	/^       / { t = $0; sub(/^ +/, "", t); print esc(t); next }
	/^[^ ]/ { print ".PP"; print esc($0); next }'
cat <<'TAIL'
.SH ENVIRONMENT
.TP
.B MVM_KVM
direct, nested or auto (the default): whether \-\-probe\-kvm and the test
scripts run guests on /dev/kvm or inside the nested harness.
.SH FILES
.TP
.I ~/.cache/mvm/kvm\-verdict
the probe's verdict for this host's boot.
.SH SEE ALSO
The documents under docs/ in mvm's source: command\-line.md, sandbox.md,
embedding.md.
TAIL
