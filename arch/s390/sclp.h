/* The SCLP (service-call logical processor) as Linux on s390 needs it to
 * boot: Read SCP Info (memory and CPUs), the event facility's masks, and
 * the VT220 console events (output through Write Event Data, input through
 * Read Event Data), each command completed with a service-signal external
 * interrupt. KVM-free: the guest's SERVC reaches sclp_service_call() from
 * the intercept handler, the interrupt leaves through a callback, so unit
 * tests drive it on fake guest memory.
 *
 * Only the VT220 console is offered (event type 0x1a): Linux then uses
 * ttysclp0 and its early printk through VT220, and never the line-mode
 * (EBCDIC, MDB/MTO) messages. The SCLP also takes Control-Program
 * Identification events (0x0b, Linux's /sys/firmware/cpi): the one way a
 * stock Linux lets user space tell the hypervisor something. A guest that
 * identifies as system name "MVMEXIT" ends the VM with its system level as
 * exit status: the s390x test guest's counterpart of the x86 exit port
 * (see README). All SCCB fields are big-endian.
 *
 * Threads: SERVC from any vCPU and input from the VM's control thread;
 * one lock. Console output goes into a bounded buffer (devices/
 * console_buf.h) that the control thread writes out, never a host fd from
 * the vCPU. The SCLP has no flow control to offer the guest: output that
 * finds the buffer full is dropped and counted (tx_dropped). */
#ifndef MVM_S390_SCLP_H
#define MVM_S390_SCLP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/console_buf.h"
#include "vmm/base/guest_mem.h"

/* Command words (Linux drivers/s390/char/sclp.h). */
#define SCLP_CMDW_READ_SCP_INFO         0x00020001u
#define SCLP_CMDW_READ_SCP_INFO_FORCED  0x00120001u
#define SCLP_CMDW_WRITE_EVENT_DATA      0x00760005u
#define SCLP_CMDW_READ_EVENT_DATA       0x00770005u
#define SCLP_CMDW_WRITE_EVENT_MASK      0x00780005u

/* Response codes. */
#define SCLP_RC_NORMAL_READ_COMPLETION  0x0010
#define SCLP_RC_NORMAL_COMPLETION       0x0020
#define SCLP_RC_SCCB_BOUNDARY_VIOLATION 0x0100
#define SCLP_RC_INVALID_SCLP_COMMAND    0x01f0
#define SCLP_RC_INSUFFICIENT_SCCB_LENGTH 0x0300
#define SCLP_RC_INVALID_FUNCTION        0x40f0
#define SCLP_RC_NO_EVENT_BUFFERS_STORED 0x60f0
#define SCLP_RC_INVALID_SELECTION_MASK  0x70f0
#define SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR 0x73f0
#define SCLP_RC_INVALID_MASK_LENGTH     0x74f0

/* Event types, and the buffer flag saying one was taken. */
#define SCLP_EVTYP_CTLPROGIDENT         0x0b
#define SCLP_EVTYP_STORE_DATA           0x0c
#define SCLP_EVTYP_VT220                0x1a
#define SCLP_EVTYP_SIGQUIESCE           0x1d    /* the "power button": quiesce */
#define SCLP_EVBUF_ACCEPTED             0x80
#define SCLP_MASK_LEN_MAX               1021

/* SCCB layout: header, then command data. */
#define SCCB_HDR_LEN                    8
#define SCCB_MAX_LEN                    4096    /* one page */
#define SCLP_EVBUF_HDR_LEN              6
/* Control-Program Identification event buffer (Linux sclp_cpi_sys.c). */
#define SCLP_CPI_LEN                    80
#define SCLP_CPI_SYSTEM_NAME            24      /* 8 bytes EBCDIC, blank padded */
#define SCLP_CPI_SYSTEM_LEVEL           40      /* u64 */
/* Signal Quiesce event buffer: the header, u16 timeout, u8 unit. */
#define SCLP_SIGQUIESCE_LEN             9

/* Read SCP Info: fixed part and where the CPU entries (16 bytes) start. */
#define SCLP_INFO_RNMAX      8      /* u16: storage increments (0: see rnmax2) */
#define SCLP_INFO_RNSIZE     10     /* u8: increment size in MiB */
#define SCLP_INFO_NCPURL     16     /* u16: CPU entries */
#define SCLP_INFO_CPUOFF     18     /* u16: offset of the first */
#define SCLP_INFO_RNSIZE2    100    /* u32 */
#define SCLP_INFO_RNMAX2     104    /* u64 */
#define SCLP_INFO_HCPUA      120    /* u16: highest CPU address */
#define SCLP_INFO_CPU_ENTRIES 128
#define SCLP_CPU_ENTRY_LEN   16

/* What a SERVC does to the issuing CPU: a condition code, or a program
 * exception (the instruction is then suppressed and the SCCB untouched). */
#define SCLP_PGM_PRIVILEGED    0x0002
#define SCLP_PGM_ADDRESSING    0x0005
#define SCLP_PGM_SPECIFICATION 0x0006

#define SCLP_RX_SIZE 256

struct log_sink;

struct sclp {
	pthread_mutex_t lock;
	const struct guest_mem *mem;
	uint64_t mem_size;
	unsigned ncpus;
	/* The service signal: parm = SCCB address | 1 while events are
	 * pending (Linux then reads them). Called with the lock held. 0 or
	 * -errno: a signal that could not be injected is counted in
	 * signal_errors and the first one logged (a guest can repeat it
	 * with every SERVC). */
	int (*service_signal)(void *opaque, uint32_t parm);
	void *signal_opaque;
	const struct log_sink *log;     /* the VM's; NULL: messages dropped */
	/* The guest identified as "MVMEXIT": status = its system level & 0xff.
	 * Same opaque; may be NULL. */
	void (*guest_exit)(void *opaque, int status);

	/* Event masks the guest set (first 4 bytes, big-endian bit order:
	 * event type t is bit 0x80000000 >> (t - 1)). */
	uint32_t guest_receive, guest_send;

	/* VT220 console */
	/* Output the host has not taken yet, and the byte counters (rx_bytes:
	 * what the guest read); the host drains it through
	 * console_port_vm_ops. */
	struct console_port con;
	uint8_t rx[SCLP_RX_SIZE];
	unsigned rx_head, rx_count;
	bool pending_signalled;       /* a pending-events signal is outstanding */
	/* A Signal Quiesce the guest has not read yet (sclp_signal_quiesce). */
	bool quiesce_pending;
	uint64_t signal_errors;       /* atomic for readers: service signals not injected */
	bool signal_logged;           /* the first of those was logged */
};

int sclp_init(struct sclp *s, const struct guest_mem *mem, uint64_t mem_size, unsigned ncpus,
	      int (*service_signal)(void *, uint32_t), void *opaque);
void sclp_fini(struct sclp *s);

/* Console output and input for the control thread: s->con, a console
 * port (devices/console_buf.h); input raises a service signal once the
 * guest has enabled VT220 input. */

/* The guest's SERVC: cmd from R1, sccb (real address) from R2, problem:
 * the PSW's problem-state bit. Returns the condition code (0: initiated,
 * the service signal follows) or -code for a program exception. */
int sclp_service_call(struct sclp *s, uint32_t cmd, uint64_t sccb, bool problem);

/* Ask the guest to shut down: a Signal Quiesce event, what QEMU's
 * system_powerdown sends an s390x guest (Linux's sclp_quiesce then runs
 * ctrl_alt_del(): init's orderly shutdown where it asked for Ctrl-Alt-Del
 * as a signal, else the kernel's restart path, which quiesces every CPU
 * into the disabled wait at ...fff that ends the VM as a poweroff). Held
 * until the guest has enabled the event type and read it; a second
 * before it has read the first is the same one. Any thread. */
void sclp_signal_quiesce(struct sclp *s);

/* Snapshots: the SCLP's state into the open section of w; sclp_load
 * puts it back (before any vCPU runs): 0, or -EINVAL with a message
 * where the section is damaged, having changed nothing. */
struct snap_w;
struct snap_r;
void sclp_save(struct sclp *s, struct snap_w *w);
int sclp_load(struct sclp *s, struct snap_r *r, char *err, size_t errlen);

/* Event type t as a bit of a 4-byte mask. */
static inline uint32_t sclp_evtyp_bit(unsigned t)
{
	return t >= 1 && t <= 32 ? 0x80000000u >> (t - 1) : 0;
}

#endif
