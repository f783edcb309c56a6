/* The s390 channel subsystem as the guest's I/O instructions see it (z/Arch
 * Principles of Operation, ch. 14-16, as Linux's cio and QEMU read them).
 * KVM (with KVM_CAP_S390_CSS_SUPPORT) hands every I/O instruction but TPI
 * to user space; css_instruction() answers it: operand checks first (a bad
 * subchannel id is an operand exception, a misaligned operand a
 * specification exception), then the condition code.
 *
 * Devices sit on subchannels 0.0.0000, 0.0.0001, ... in the order they were
 * attached (devno = subchannel number); the first id past them is not
 * operational (cc 3), which ends Linux's scan of subchannel set 0.
 * Hot-plug slots' subchannels (css_attach_slot) come last: an empty one
 * stores a SCHIB without a valid device number, so the scan goes on past
 * it, and answers every other instruction with cc 3; a device put in or
 * taken out queues a channel report (STCRW), which the caller announces
 * with a machine check. A start
 * (SSCH) runs the whole channel program at once on the vCPU that issued
 * it: every CCW, IDAW and data address is checked against guest RAM before
 * the device sees the command, and the end of the program is reported
 * through status pending and an I/O interrupt, as a real channel would
 * after the device finished. SENSE ID, BASIC SENSE, NOOP and TIC are the
 * channel's; other commands go to the device (devices/ccw.h).
 *
 * All structures (SCHIB, ORB, SCSW, IRB, CCW) are big-endian. Operands are
 * logical addresses (struct s390_vmem); CCWs, IDAWs and data are absolute.
 *
 * One lock serialises the subchannels, held for a whole instruction, a
 * channel program included. A device's command may stop the device's queue
 * threads while it is held (VDEV_RESET, WRITE_STATUS 0, MSCH disabling
 * the subchannel); a queue thread's interrupt reaches css_notify, which
 * must therefore never wait for the lock: it leaves an attention bit for
 * the subchannel and serves it only if the lock is free; otherwise whoever
 * holds the lock serves it on its way out (css.c: css_unlock). A device may
 * also call css_notify from inside its own command (NEEDS_RESET); that
 * attention is served when the instruction ends. KVM-free, for unit tests
 * and fuzzing on any architecture. */
#ifndef MVM_S390_CSS_H
#define MVM_S390_CSS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "arch/s390/intercept.h"
#include "devices/ccw.h"
#include "vmm/base/guest_mem.h"

/* The second byte of the B2xx opcodes. */
#define CSS_OP_CSCH  0x30
#define CSS_OP_HSCH  0x31
#define CSS_OP_MSCH  0x32
#define CSS_OP_SSCH  0x33
#define CSS_OP_STSCH 0x34
#define CSS_OP_TSCH  0x35
#define CSS_OP_TPI   0x36
#define CSS_OP_SAL   0x37
#define CSS_OP_RSCH  0x38
#define CSS_OP_STCRW 0x39
#define CSS_OP_STCPS 0x3a
#define CSS_OP_RCHP  0x3b
#define CSS_OP_SCHM  0x3c
#define CSS_OP_CHSC  0x5f
#define CSS_OP_XSCH  0x76

/* CHSC response codes. */
#define CHSC_RC_OK            0x0001
#define CHSC_RC_INVALID_REQ   0x0003
#define CHSC_RC_NOT_SUPPORTED 0x0004

/* SCSW control: function, activity and status control bits. */
#define SCSW_FCTL_START   0x4000
#define SCSW_FCTL_HALT    0x2000
#define SCSW_FCTL_CLEAR   0x1000
#define SCSW_STCTL_ALERT  0x0010
#define SCSW_STCTL_PRIMARY 0x0004
#define SCSW_STCTL_SECONDARY 0x0002
#define SCSW_STCTL_PENDING 0x0001
#define SCSW_DSTAT_CE     0x08
#define SCSW_DSTAT_DE     0x04
#define SCSW_DSTAT_UC     0x02
#define SCSW_CSTAT_PROG   0x20

#define CSS_SCHIB_LEN 52
#define CSS_IRB_LEN   64
#define CSS_MAX_SCH   64
#define CSS_MAX_CCWS  1024      /* per channel program: a TIC loop ends in a check */

/* What an I/O instruction ends with besides a cc or -program code. */
#define CSS_INJECTED   (-1000)  /* an operand access raised an exception, delivered */
#define CSS_HOST_ERROR (-1001)  /* the host could not reach guest memory */

struct css_subchannel {
	const struct ccw_dev_ops *ops;
	void *dev;
	uint16_t cu_type;               /* SENSE ID */
	uint8_t cu_model;
	/* PMCW as the guest set it (MSCH) */
	uint32_t intparm;
	uint16_t pmcw_flags;            /* ISC, ENA, MME, MP (DNV is always on) */
	uint8_t lpm;
	uint16_t mbi;
	uint32_t chars;                 /* MBFC, XMWME, CSENSE */
	/* SCSW */
	uint16_t scsw_flags, scsw_ctrl;
	uint32_t scsw_cpa;
	uint8_t dstat, cstat;
	uint16_t count;
	uint8_t sense[32];
	/* A hot-plug slot's subchannel (css_attach_slot): absent, no device
	 * is installed (STSCH shows the device number not valid, every other
	 * instruction finds it not operational); gone_unseen, its device
	 * went and the guest has not looked at it since (STSCH). */
	bool slot, absent, gone_unseen;
};

/* Channel report words waiting for STCRW: one per hot-plug event. */
#define CSS_MAX_CRW 16

struct css {
	pthread_mutex_t lock;           /* not recursive: see above */
	const struct guest_mem *mem;
	unsigned nsch;
	struct css_subchannel sch[CSS_MAX_SCH];
	/* Atomic: bit n set, subchannel n's device asked for attention
	 * (css_notify) and nobody has served it yet. */
	uint64_t attention;
	/* Channel reports (z/Arch PoP, "Channel-Subsystem Monitoring"):
	 * queued by css_slot_set, stored one per STCRW in order. overflow:
	 * one was lost, the next stored says so (the guest then looks at
	 * every subchannel). */
	uint32_t crw[CSS_MAX_CRW];
	unsigned ncrw;
	bool crw_overflow;
	/* An I/O interrupt for subchannel schno (interruption parameter and
	 * ISC from its PMCW). Called with the lock held; must not block. */
	void (*io_interrupt)(void *opaque, unsigned schno, uint32_t intparm, unsigned isc);
	void *opaque;
};

int css_init(struct css *c, const struct guest_mem *mem,
	     void (*io_interrupt)(void *, unsigned, uint32_t, unsigned), void *opaque);
void css_fini(struct css *c);

/* Put a device on the next subchannel (takes the lock); returns its
 * number, or -ENOSPC. */
int css_attach(struct css *c, const struct ccw_dev_ops *ops, void *dev, uint16_t cu_type,
	       uint8_t cu_model);

/* A hot-plug slot: the device on the next subchannel, absent until
 * css_slot_set installs it. Its number, or -ENOSPC. */
int css_attach_slot(struct css *c, const struct ccw_dev_ops *ops, void *dev, uint16_t cu_type,
		    uint8_t cu_model);

/* Install (present) or take out a slot's device: the subchannel starts
 * afresh (disabled, nothing pending; taken out, its device is disabled
 * first, which resets it) and a channel report for it is queued
 * (reporting source "subchannel", "installed parameters initialized",
 * as Linux's css_process_crw evaluates it). 1: the first report is now
 * pending, the caller makes the channel-report-pending machine check;
 * 0: reports were pending already (the guest stores them all once
 * interrupted); -EINVAL: not a slot, -EALREADY: already so. */
int css_slot_set(struct css *c, unsigned schno, bool present);

/* May the slot take a new device: absent, and the guest looked at it
 * since its last device went (so the two reports cannot merge into
 * "nothing changed" in its view)? */
bool css_slot_free(struct css *c, unsigned schno);

/* Snapshots (docs/snapshot.md): every subchannel's state as the guest's
 * instructions left it (PMCW, SCSW, sense data, a slot's presence) and
 * the channel reports not yet stored, into the open section of w; an
 * attention left by a device is served first. css_load puts them back
 * on a channel subsystem made with the same devices in the same order,
 * before any vCPU runs, without telling the devices (their own state
 * is restored apart): 0, or -EINVAL with a one-line message naming the
 * subchannel and what differs or is damaged, having changed nothing. */
struct snap_w;
struct snap_r;
void css_save(struct css *c, struct snap_w *w);
int css_load(struct css *c, struct snap_r *r, char *err, size_t errlen);

/* Is slot schno's device installed (not absent)? */
bool css_slot_present(struct css *c, unsigned schno);

/* The subchannel-id word of subchannel schno (GPR1's format). */
static inline uint32_t css_schid(unsigned schno)
{
	return 0x00010000u | schno;
}

/* Is gpr1 a valid subchannel-id word (bit 15 one, no multiple-subchannel-
 * set extension: subchannel set 0 only)? */
int css_schid_valid(uint32_t gpr1);

/* The device needs attention (classic virtio indicators, a config
 * change): an unsolicited status and I/O interrupt, unless the subchannel
 * is disabled or already has status pending (the guest's TSCH then finds
 * the indicators anyway). Any thread, any lock held; never blocks: while
 * another thread holds the channel subsystem's lock, that thread raises
 * the status before it lets go of the lock. */
void css_notify(struct css *c, unsigned schno);

/* The guest executed I/O instruction 0xb2<op> (or 0xb276 XSCH) with
 * general register 1 = gpr1 and second-operand address addr in access
 * register ar (for CHSC: the request block's address, from R1), operands
 * reached through vm. Returns the condition code, -code for a program
 * exception to deliver (the instruction is suppressed), CSS_INJECTED or
 * CSS_HOST_ERROR. */
int css_instruction(struct css *c, const struct s390_vmem *vm, unsigned op, uint32_t gpr1,
		    uint64_t addr, unsigned ar);

#endif
