# mvm — top-level Makefile (no autotools).
#   make                         build ./mvm
#   make SANITIZE=address,undefined   sanitizer build (objects kept apart in build/san/)
#   make V=1                     show full commands
#   make test                    unit tests (plain + sanitizer) and system tests
#   make run                     install deps, build mvm + guest, boot the guest to its shell
#   make guest                   build the test guest kernel + initramfs (cached)
#   make bench                   device benchmark (no KVM needed)
#   make clean

V ?= 0
Q := $(if $(filter 1,$(V)),,@)
E := $(if $(filter 1,$(V)),@true,@echo)

CC      ?= cc
SANITIZE ?=
VARIANT := $(if $(SANITIZE),san,plain)
BUILD   := build/$(VARIANT)

CFLAGS_BASE := -std=gnu11 -O2 -g -Wall -Wextra -Werror -MMD -MP -D_GNU_SOURCE -pthread -I.
CFLAGS_BASE += -fno-strict-aliasing
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_SAN := -fsanitize=$(SANITIZE)
endif
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS)
LDLIBS  := -luring -lpthread
ALL_LDFLAGS := $(LDFLAGS_SAN) $(LDFLAGS)

# Every .c under these folders is part of mvm; main.c holds only main() so
# tests and benchmarks link everything else against their own main().
SRCS     := $(sort $(wildcard vmm/*.c devices/*.c arch/x86/*.c))
MAIN_SRC := vmm/main.c
LIB_SRCS := $(filter-out $(MAIN_SRC),$(SRCS))
# Assembly: guest payloads that mvm loads (the KVM probe).
ASM_SRCS := $(sort $(wildcard arch/x86/*.S))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(ASM_SRCS:%.S=$(BUILD)/%.o)
MAIN_OBJ := $(MAIN_SRC:%.c=$(BUILD)/%.o)

UNIT_SRCS  := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS  := $(UNIT_SRCS:%.c=$(BUILD)/%)
CHECK_OBJ  := $(BUILD)/tests/unit/check.o
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BIN  := $(BUILD)/tests/bench/mvm-bench

.SECONDARY:
.PHONY: all clean test unit-tests run guest bench deps FORCE
all: mvm

$(BUILD)/mvm: $(MAIN_OBJ) $(LIB_OBJS)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

# ./mvm is always the variant built last.
mvm: $(BUILD)/mvm FORCE
	$(Q)cmp -s $< $@ || cp $< $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(E) "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.S
	@mkdir -p $(dir $@)
	$(E) "  AS      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/tests/unit/test_%: $(BUILD)/tests/unit/test_%.o $(CHECK_OBJ) $(LIB_OBJS)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BENCH_BIN): $(BENCH_SRCS:%.c=$(BUILD)/%.o) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(E) "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

unit-tests: $(UNIT_BINS)

deps:
	$(Q)scripts/install-deps.sh

guest: deps
	$(Q)guest/build.sh

# make test: both variants' unit tests, then system tests (real KVM or the
# nested harness), all through one runner that prints "N passed, N failed".
test: deps
	$(Q)$(MAKE) --no-print-directory all unit-tests
	$(Q)$(MAKE) --no-print-directory SANITIZE=address,undefined unit-tests
	$(Q)$(MAKE) --no-print-directory all
	$(Q)guest/build.sh
	$(Q)tests/run

run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)guest/build.sh
	$(Q)scripts/run-guest.sh

bench: $(BENCH_BIN)
	$(Q)$(BENCH_BIN)

clean:
	rm -rf build mvm

-include $(shell find build -name '*.d' 2>/dev/null)
