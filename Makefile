# mvm — top-level Makefile (no autotools).
#   make                         build ./mvm
#   make SANITIZE=address,undefined   sanitizer build (objects kept apart in build/san/)
#   make V=1                     show full commands
#   make lib                     libmvm.a, libmvm.so and mvm.pc in build/plain/
#   make install PREFIX=/usr DESTDIR=...   mvm, libmvm, mvm.h, mvm.pc (LIBDIR, INCDIR,
#                                BINDIR: each directory on its own)
#   make install-lib             libmvm, mvm.h and mvm.pc alone
#   make man                     mvm(1) in build/plain/mvm.1 (make install installs it)
#   make test                    unit tests (plain + sanitizer + s390x big-endian), 20 s
#                                of each fuzz target (where clang is) and system tests
#   make ARCH=s390               cross build for s390x hosts (build/s390/mvm, static)
#   make run                     install deps, build mvm + guest, boot the guest to its shell
#                                (ARCH=s390 on x86: the s390x guest's, in Hercules' KVM)
#   make guest                   build the test guest kernel + initramfs (cached)
#   make guest-s390              the same for the s390x test guest (cross-built)
#   make bench                   device benchmark (no KVM needed)
#   make bench-guest             mvm vs QEMU inside a guest (BENCH_GUEST_ARGS=...)
#   make bench-vsock             mvm's vsock vs QEMU's vhost-vsock (BENCH_VSOCK_ARGS=...)
#   make bench-rate              disk rate limits measured in the guest (BENCH_RATE_ARGS=...)
#   make bench-snapshot          restore vs boot vs QEMU's restore, clones' memory (BENCH_SNAP_ARGS=...)
#   make fuzz-build              libFuzzer targets (tests/fuzz/) with clang, in build/fuzz/
#   make fuzz FUZZ_SECONDS=600   run each fuzz target that long (make test runs 2 s each)
#   make static                  fully static ./mvm with musl, a static PIE (build/static/)
#   make clean

V ?= 0
Q := $(if $(filter 1,$(V)),,@)
E := $(if $(filter 1,$(V)),@true,@echo)

CC      ?= cc
SANITIZE ?=
# FUZZ=1 (set by `make fuzz-build`): the fuzz targets' build, with clang,
# libFuzzer's coverage and ASan+UBSan, in build/fuzz.
FUZZ    ?=
FUZZ_CC ?= clang
ifneq ($(FUZZ),)
CC := $(FUZZ_CC)
endif
# The architecture: the one arch/<ARCH>/ that implements arch/arch.h (x86
# or s390; x86_64 and s390x say the same), from the compiler's target
# unless given.
ARCH    ?= $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))
override ARCH := $(patsubst x86_64,x86,$(patsubst s390x,s390,$(ARCH)))
ifeq ($(wildcard arch/$(ARCH)/arch.c),)
$(error ARCH=$(ARCH): no arch/$(ARCH)/arch.c; give one of: $(patsubst arch/%/arch.c,%,$(wildcard arch/*/arch.c)))
endif
# STATIC=1 (set by `make static`): musl-gcc, a static PIE, in build/static.
STATIC  ?=
# An s390 build on another host is a cross build: Debian's s390x cross
# compiler, liburing from Debian's s390x packages in a sysroot
# (scripts/s390x-deps.sh), linked statically so qemu-s390x-static runs the
# unit tests (big-endian) and the binary runs in any s390x guest.
HOST_ARCH := $(patsubst x86_64,x86,$(patsubst s390x,s390,$(shell uname -m)))
CROSS :=
ifneq ($(ARCH),$(HOST_ARCH))
CROSS := $(ARCH)
ifeq ($(ARCH),s390)
ifeq ($(origin CC),default)
CC := s390x-linux-gnu-gcc
endif
S390X_SYSROOT ?= $(shell scripts/s390x-deps.sh 2>/dev/null)
override S390X_SYSROOT := $(S390X_SYSROOT)
CFLAGS_CROSS := -I$(S390X_SYSROOT)/usr/include
LDFLAGS_CROSS := -static -L$(S390X_SYSROOT)/usr/lib/s390x-linux-gnu
endif
endif
# s390 KVM needs page-status extensions in the VMM's page tables:
# KVM_CREATE_VM fails with EINVAL for a process linked without them.
ifeq ($(ARCH),s390)
LDFLAGS_CROSS += -Wl,--s390-pgste
endif
VARIANT := $(if $(FUZZ),fuzz,$(if $(CROSS),$(CROSS)$(if $(SANITIZE),-san),$(if $(STATIC),static,$(if $(SANITIZE),san,plain))))
BUILD   := build/$(VARIANT)

CFLAGS_BASE := -std=gnu11 -O2 -g -Wall -Wextra -Werror -MMD -MP -D_GNU_SOURCE -pthread -I. $(CFLAGS_CROSS)
CFLAGS_BASE += -fno-strict-aliasing -fPIC
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_SAN := -fsanitize=$(SANITIZE)
endif
ifneq ($(FUZZ),)
# Every object gets libFuzzer's coverage counters; the targets link the
# fuzzer's main. A sanitizer report aborts: a crash, with its input saved.
CFLAGS_BASE += -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
	       -fno-sanitize-recover=all
# gnu11 code that clang calls an extension: KVM's header-plus-array idiom
# (struct { struct kvm_msrs hdr; struct kvm_msr_entry e[16]; }).
CFLAGS_BASE += -Wno-gnu-variable-sized-type-not-at-end
LDFLAGS_SAN := -fsanitize=fuzzer,address,undefined
endif
ifneq ($(STATIC),)
CFLAGS_BASE += -isystem $(MUSL_PREFIX)/kernel-headers -I$(MUSL_PREFIX)/include
LDFLAGS_STATIC := -static -L$(MUSL_PREFIX)/lib
endif
# Hardening, every variant (tests/hardening/elf-check reads the result):
# canaries in functions with arrays or address-taken locals, stack probes
# so that no allocation jumps over the guard page, and on x86 the CET
# markers (endbr64, shadow-stack-compatible returns).
CFLAGS_HARDEN := -fstack-protector-strong -fstack-clash-protection
ifeq ($(ARCH),x86)
CFLAGS_HARDEN += -fcf-protection
endif
# _FORTIFY_SOURCE=3 (gcc 12 and glibc 2.34 or later, Debian 12 has both):
# level 2's checks plus buffer sizes known only at run time
# (__builtin_dynamic_object_size). Not under a sanitizer (a __memcpy_chk
# runs glibc's own memcpy, past ASan's interceptor) nor with musl (it has
# no checked functions).
ifeq ($(SANITIZE)$(FUZZ)$(STATIC),)
CFLAGS_HARDEN += -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=3
endif
CFLAGS_BASE += $(CFLAGS_HARDEN)
# Full RELRO for every link: the GOT and everything relocated once is
# read-only before main runs, no lazy binding.
LDFLAGS_HARDEN := -Wl,-z,relro -Wl,-z,now
# Executables are position independent (the objects are -fPIC already, for
# libmvm.so). The static build is a static PIE: musl's self-relocating
# start file (rcrt1.o; musl-gcc's specs know only -static), the start and
# end files by hand. The s390x cross build stays static and not PIE: the
# cross glibc has no rcrt1.o.
EXE_LDFLAGS := -pie
EXE_LDLIBS :=
ifneq ($(STATIC),)
MUSL_LIBDIR ?= /usr/lib/$(shell uname -m)-linux-musl
ifeq ($(wildcard $(MUSL_LIBDIR)/rcrt1.o),)
$(error static: no $(MUSL_LIBDIR)/rcrt1.o (musl-dev), needed for a static PIE; give MUSL_LIBDIR)
endif
EXE_LDFLAGS := -nostartfiles $(MUSL_LIBDIR)/rcrt1.o $(MUSL_LIBDIR)/crti.o \
	$(shell $(CC) -print-file-name=crtbeginS.o) -Wl,-pie,--no-dynamic-linker,-z,text
EXE_LDLIBS := $(shell $(CC) -print-file-name=crtendS.o) $(MUSL_LIBDIR)/crtn.o
endif
ifneq ($(CROSS),)
EXE_LDFLAGS :=
endif
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS)
LDLIBS  := -luring -lpthread
# The API server's libraries (vmm/api/, part of mvm(1), not of libmvm):
# every executable links them, libmvm.so does not.
EXE_LDLIBS := -lmicrohttpd -ljansson $(EXE_LDLIBS)
ALL_LDFLAGS := $(LDFLAGS_SAN) $(LDFLAGS_STATIC) $(LDFLAGS_CROSS) $(LDFLAGS_HARDEN) $(LDFLAGS)

# Every .c under these folders is part of mvm. libmvm (the library behind
# vmm/mvm.h) is all of it but the command line, vmm/cli/ (main.c, cli.c,
# term.c, jail.c and relro.c: a library leaves its host program's mappings alone),
# and the API server, vmm/api/ (a client of the library, as the CLI is).
# Tests and benchmarks link every object but main.o with their own main().
# mvm-remote (vmm/remote/: a client of the API socket, with libcurl) is
# neither: its commands (remote.c) are linked into the tests, its main.c
# into mvm-remote alone.
REMOTE_MAIN := vmm/remote/main.c
SRCS     := $(filter-out $(REMOTE_MAIN),$(sort $(wildcard vmm/*/*.c devices/*.c arch/$(ARCH)/*.c)))
MAIN_SRC := vmm/cli/main.c
CLI_SRCS := $(filter-out $(MAIN_SRC),$(wildcard vmm/cli/*.c vmm/api/*.c))
REMOTE_SRCS := $(filter-out $(REMOTE_MAIN),$(wildcard vmm/remote/*.c))
LIB_SRCS := $(filter-out $(MAIN_SRC),$(SRCS))
# Assembly: guest payloads that mvm loads (the KVM probe).
ASM_SRCS := $(sort $(wildcard arch/$(ARCH)/*.S))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(ASM_SRCS:%.S=$(BUILD)/%.o)
LIBMVM_OBJS := $(filter-out $(CLI_SRCS:%.c=$(BUILD)/%.o) $(REMOTE_SRCS:%.c=$(BUILD)/%.o),$(LIB_OBJS))
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
MAIN_OBJ := $(MAIN_SRC:%.c=$(BUILD)/%.o)

# One version, written once in vmm/mvm.h (MVM_VERSION_*): the package's,
# mvm --version's, and the soname's major (libmvm.so.MAJOR). The policy is
# the header's: a new major only for an incompatible change.
LIBMVM_VERSION := $(shell sed -n 's/^\#define MVM_VERSION_STRING "\(.*\)"/\1/p' vmm/mvm.h)
LIBMVM_SOVER := $(firstword $(subst ., ,$(LIBMVM_VERSION)))
LIBMVM_A  := $(BUILD)/libmvm.a
LIBMVM_SO := $(BUILD)/libmvm.so.$(LIBMVM_VERSION)
# Where make install puts things: PREFIX, or each directory on its own
# (Debian's multiarch: LIBDIR=/usr/lib/x86_64-linux-gnu). mvm.pc names them
# relative to ${prefix} where they lie under it, so it moves with them.
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man

# Unit tests named test_<other arch>_* test that architecture's code only.
OTHER_ARCHES := $(filter-out $(ARCH),x86 s390)
# The s390 channel subsystem and SCLP (arch/s390/css.c, sclp.c) are models
# without KVM: on another architecture the unit tests and fuzz targets link
# them too, so that the virtio-ccw tests and fuzz targets named for no
# architecture (test_ccw_*, fuzz_ccw_css, fuzz_sclp) run natively, under
# the sanitizers, and with io_uring (which qemu-s390x-static lacks).
S390_MODEL_SRCS := arch/s390/css.c arch/s390/sclp.c
MODEL_OBJS := $(if $(filter s390,$(ARCH)),,$(S390_MODEL_SRCS:%.c=$(BUILD)/%.o))
UNIT_SRCS  := $(filter-out $(foreach a,$(OTHER_ARCHES),tests/unit/test_$(a)_%.c),$(sort $(wildcard tests/unit/test_*.c)))
UNIT_BINS  := $(UNIT_SRCS:%.c=$(BUILD)/%)
CHECK_OBJ  := $(BUILD)/tests/unit/check.o
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BIN  := $(BUILD)/tests/bench/mvm-bench
# Fuzz targets (tests/fuzz/fuzz_*.c, libFuzzer): those named
# fuzz_<other arch>_* fuzz that architecture's code only. Built by the FUZZ=1
# variant into build/fuzz/fuzz_<name>, linked against an archive of every
# object but main.o, so a target may replace a module with a fake of its
# own (fuzz_blkq.h: the queue worker) and the linker leaves the real one out.
FUZZ_SRCS  := $(filter-out $(foreach a,$(OTHER_ARCHES),tests/fuzz/fuzz_$(a)_%.c),$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_NAMES := $(FUZZ_SRCS:tests/fuzz/fuzz_%.c=%)
FUZZ_BINS  := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
FUZZ_SECONDS ?= 600
# The embedding example and test: built against an installed copy of the
# library (make install into EMBED_ROOT, flags from pkg-config), so it can
# use nothing but the public header and the exported symbols.
EMBED_ROOT := $(abspath $(BUILD))/embed-root
EMBED_BIN  := $(BUILD)/tests/embed/mvm-embed
CONTROL_BIN := $(BUILD)/tests/embed/mvm-control

.SECONDARY:
.PHONY: all clean test test-long unit-tests run guest guest-s390 bench deps lib install install-lib man embed static static-bin bench-guest bench-vsock bench-rate bench-snapshot FORCE
.PHONY: fuzz fuzz-build fuzz-bins fuzz-seeds
# mvm-remote needs libcurl: the native build makes it, the static and
# cross builds (mvm alone, one file to copy) do not.
NATIVE := $(if $(CROSS)$(STATIC),,1)
all: mvm $(if $(CROSS),$(BUILD)/mvm) lib $(if $(NATIVE),mvm-remote)

# mvm(1) links libmvm statically: one file to copy, no library path.
$(BUILD)/mvm: $(MAIN_OBJ) $(CLI_OBJS) $(LIBMVM_A)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS) $(EXE_LDLIBS)

# The ground's keyval.c (word-wrapped help) comes from libmvm.a.
$(BUILD)/mvm-remote: $(REMOTE_MAIN:%.c=$(BUILD)/%.o) $(REMOTE_SRCS:%.c=$(BUILD)/%.o) $(LIBMVM_A)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ -lcurl -ljansson $(LDLIBS) $(EXE_LDLIBS)

lib: $(LIBMVM_A) $(LIBMVM_SO) $(BUILD)/mvm.pc

# A fully static mvm with musl (liburing built for musl by
# scripts/musl-deps.sh, once, into the cache). static-bin leaves it in
# build/static/mvm; static also makes it ./mvm, the variant built last.
static-bin:
	$(Q)prefix=$$(scripts/musl-deps.sh) && \
		$(MAKE) --no-print-directory STATIC=1 CC=musl-gcc MUSL_PREFIX=$$prefix build/static/mvm
static: static-bin
	$(Q)cp build/static/mvm mvm

$(LIBMVM_A): $(LIBMVM_OBJS)
	$(E) "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

# Only mvm_* is exported (vmm/lib/libmvm.map); everything else binds locally.
$(LIBMVM_SO): $(LIBMVM_OBJS) vmm/lib/libmvm.map
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -shared -Wl,-soname,libmvm.so.$(LIBMVM_SOVER) \
		-Wl,--version-script=vmm/lib/libmvm.map -Wl,--no-undefined -o $@ $(LIBMVM_OBJS) $(LDLIBS)
	$(Q)ln -sf $(notdir $@) $(BUILD)/libmvm.so.$(LIBMVM_SOVER)
	$(Q)ln -sf libmvm.so.$(LIBMVM_SOVER) $(BUILD)/libmvm.so

PC_REL = $(if $(filter $(PREFIX)/%,$(1)),$${prefix}$(patsubst $(PREFIX)%,%,$(1)),$(1))
PC_SUBST = -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(call PC_REL,$(LIBDIR))|; s|@INCDIR@|$(call PC_REL,$(INCDIR))|; s|@VERSION@|$(LIBMVM_VERSION)|'
$(BUILD)/mvm.pc: vmm/lib/mvm.pc.in Makefile
	$(Q)sed $(PC_SUBST) $< >$@

# install: mvm(1) and the library; install-lib: the library, its header
# and mvm.pc alone, for a program that embeds it.
install: install-lib $(BUILD)/mvm $(BUILD)/mvm.1 $(if $(NATIVE),$(BUILD)/mvm-remote)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/mvm $(DESTDIR)$(BINDIR)/mvm
	$(if $(NATIVE),install -m 755 $(BUILD)/mvm-remote $(DESTDIR)$(BINDIR)/mvm-remote)
	install -m 644 $(BUILD)/mvm.1 $(DESTDIR)$(MANDIR)/man1/mvm.1

# mvm(1), from mvm --help (scripts/man.sh): the options are described once.
man: $(BUILD)/mvm.1
$(BUILD)/mvm.1: $(BUILD)/mvm scripts/man.sh
	$(E) "  MAN     $@"
	$(Q)scripts/man.sh $(BUILD)/mvm $(LIBMVM_VERSION) >$@

install-lib: lib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)
	install -m 644 vmm/mvm.h $(DESTDIR)$(INCDIR)/mvm.h
	install -m 644 $(LIBMVM_A) $(DESTDIR)$(LIBDIR)/libmvm.a
	install -m 755 $(LIBMVM_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIBMVM_SO)) $(DESTDIR)$(LIBDIR)/libmvm.so.$(LIBMVM_SOVER)
	ln -sf libmvm.so.$(LIBMVM_SOVER) $(DESTDIR)$(LIBDIR)/libmvm.so
	sed $(PC_SUBST) vmm/lib/mvm.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/mvm.pc

# ./mvm is always the native variant built last; a cross build stays in
# its build directory (build/s390/mvm), which is what an s390x host runs.
ifeq ($(CROSS),)
mvm: $(BUILD)/mvm FORCE
	$(Q)cmp -s $< $@ || cp $< $@
mvm-remote: $(BUILD)/mvm-remote FORCE
	$(Q)cmp -s $< $@ || cp $< $@
else
# Named directly: with .SECONDARY, a missing build/s390/mvm behind an
# up-to-date ./mvm would not be made.
mvm: $(BUILD)/mvm FORCE
endif

# Every object depends on the flags it was built with: a build directory
# from before a flag changed (the hardening flags, say) is rebuilt, not
# linked as it was. The line is rewritten only when it changes.
FLAGS_STAMP := $(BUILD)/flags
FLAGS_LINE := $(CC) $(ALL_CFLAGS) | $(ALL_LDFLAGS) | $(EXE_LDFLAGS) $(EXE_LDLIBS)
ifneq ($(FLAGS_LINE),$(file <$(FLAGS_STAMP)))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_LINE))
endif

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(E) "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.S $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(E) "  AS      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# test_vsock stands in for s390x's filters, which refuse every mmap: it
# refuses mmap to the device's thread (tests/unit/test_vsock.c).
$(BUILD)/tests/unit/test_vsock: EXE_LDFLAGS += -Wl,--wrap=mmap
# test_x86_nmi answers KVM_SIGNAL_MSI itself (tests/unit/test_x86_nmi.c).
$(BUILD)/tests/unit/test_x86_nmi: EXE_LDFLAGS += -Wl,--wrap=ioctl

$(BUILD)/tests/unit/test_%: $(BUILD)/tests/unit/test_%.o $(CHECK_OBJ) $(LIB_OBJS) $(MODEL_OBJS)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS) $(EXE_LDLIBS)

$(BENCH_BIN): $(BENCH_SRCS:%.c=$(BUILD)/%.o) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS) $(EXE_LDLIBS)

unit-tests: $(UNIT_BINS)

# --- fuzzing (clang + libFuzzer) ---
fuzz-build:
	$(Q)$(MAKE) --no-print-directory FUZZ=1 fuzz-bins

ifneq ($(FUZZ),)
fuzz-bins: $(FUZZ_BINS)

$(BUILD)/libmvm-fuzz.a: $(LIB_OBJS) $(MODEL_OBJS)
	$(E) "  AR      $@"
	$(Q)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/libmvm-fuzz.a
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS) $(EXE_LDLIBS)
endif

# Each target FUZZ_SECONDS (default 600) on its corpus in build/fuzz/corpus/,
# seeded from tests/fuzz/corpus/; a crash stops and saves its input in
# build/test-logs/.
fuzz: fuzz-build
	$(Q)FUZZ_SECONDS=$(FUZZ_SECONDS) tests/run '^fuzz/'

# (Re)write the checked-in seeds from each target's fuzz_seeds().
fuzz-seeds: fuzz-build
	$(Q)for n in $(FUZZ_NAMES); do \
		mkdir -p tests/fuzz/corpus/$$n && \
		build/fuzz/fuzz_$$n -write_seeds=tests/fuzz/corpus/$$n || exit 1; \
	done

embed: $(EMBED_BIN) $(CONTROL_BIN)

# Both against one installed copy (EMBED_ROOT), made by whichever builds first.
$(EMBED_ROOT)/usr/lib/pkgconfig/mvm.pc: $(LIBMVM_A) $(LIBMVM_SO) $(BUILD)/mvm.pc vmm/mvm.h
	$(Q)rm -rf $(EMBED_ROOT)
	$(Q)$(MAKE) --no-print-directory install DESTDIR=$(EMBED_ROOT) PREFIX=/usr >/dev/null

$(BUILD)/tests/embed/mvm-%: tests/embed/%.c $(EMBED_ROOT)/usr/lib/pkgconfig/mvm.pc
	@mkdir -p $(dir $@)
	$(E) "  CC      $@ (against the installed libmvm.so)"
	$(Q)$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread $(LDFLAGS_SAN) \
		$(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer) -o $@ $< \
		$$(PKG_CONFIG_PATH=$(EMBED_ROOT)/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$(EMBED_ROOT) \
		   pkg-config --cflags --libs mvm) -Wl,-rpath,$(EMBED_ROOT)/usr/lib

# A guest that runs a guest of its own with AMD SVM (system/snapshot_nested),
# loaded by mvm as a PVH kernel: no C library, its own linker script.
$(BUILD)/tests/nested_guest/svm-nest.elf: tests/nested_guest/svm_nest.S tests/nested_guest/svm_nest.ld
	@mkdir -p $(dir $@)
	$(E) "  AS      $@"
	$(Q)$(CC) -c -o $@.o $<
	$(Q)$(LD) -m elf_x86_64 -T tests/nested_guest/svm_nest.ld -o $@ $@.o

deps:
	$(Q)scripts/install-deps.sh

guest: deps
	$(Q)guest/build.sh

guest-s390: deps
	$(Q)guest/build-s390.sh >/dev/null

# make test: both variants' unit tests, short fuzz runs (where clang can
# build them), then system tests (real KVM or the nested harness), all
# through one runner that prints "N passed, N failed".
# Each step's time goes to build/test-phases (scripts/phase); tests/run
# adds its own and prints them all before its last line.
# make test-long: the same, with the system tests marked long too
# ("# mvm-test: long": the harness's own checks, second variants).
test test-long:
	$(Q)mkdir -p build && : >build/test-phases
	$(Q)scripts/phase deps scripts/install-deps.sh
	$(Q)scripts/phase build-plain $(MAKE) --no-print-directory all unit-tests
	$(Q)scripts/phase build-san $(MAKE) --no-print-directory SANITIZE=address,undefined unit-tests
	$(Q)scripts/phase build-s390 $(MAKE) --no-print-directory ARCH=s390 all unit-tests
	$(Q)if tests/fuzz/have-libfuzzer >/dev/null; then \
		scripts/phase build-fuzz $(MAKE) --no-print-directory fuzz-build; fi
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/phase guest guest/build.sh
	$(Q)scripts/phase guest-s390 sh -c 'guest/build-s390.sh >/dev/null'
	$(Q)MVM_PHASES_FROM=build/test-phases $(if $(filter test-long,$@),MVM_TEST_LONG=1) tests/run

# make run ARCH=s390 on another host: the s390x guest's shell through the
# Hercules harness (tests/s390/run --shell).
run: deps
	$(Q)$(MAKE) --no-print-directory all
ifeq ($(CROSS),s390)
	$(Q)guest/build-s390.sh >/dev/null
	$(Q)tests/s390/run --shell
else
	$(Q)guest/build.sh
	$(Q)scripts/run-guest.sh
endif

bench: $(BENCH_BIN)
	$(Q)$(BENCH_BIN)

# mvm against QEMU inside a guest (nested where /dev/kvm cannot run it).
bench-guest: all
	$(Q)guest/build.sh
	$(Q)tests/bench/guest-bench $(BENCH_GUEST_ARGS)

# mvm's virtio-vsock against QEMU's vhost-vsock (nested where /dev/kvm cannot
# run the guest).
bench-vsock: all
	$(Q)guest/build.sh
	$(Q)tests/bench/vsock-bench $(BENCH_VSOCK_ARGS)

bench-rate: all
	$(Q)guest/build.sh
	$(Q)tests/bench/rate-bench $(BENCH_RATE_ARGS)

bench-snapshot: all
	$(Q)guest/build.sh
	$(Q)tests/bench/snap-bench $(BENCH_SNAP_ARGS)

clean:
	rm -rf build mvm mvm-remote

-include $(shell find build -name '*.d' 2>/dev/null)
