/* A device on an s390 channel subsystem, as the subchannel sees it: the
 * channel (arch/s390/css.c) walks a channel program, checks every CCW and
 * resolves its data area (IDAW lists included) into host memory inside
 * guest RAM; the device executes one command at a time on that data. The
 * device side (e.g. devices/virtio_ccw.c) knows nothing of ORBs, SCHIBs or
 * interrupts of the subchannel; it only answers commands. All CCW data of
 * s390 devices is big-endian unless a device says otherwise. */
#ifndef MVM_CCW_H
#define MVM_CCW_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/* Commands every device answers the same way (the channel handles them). */
#define CCW_CMD_NOOP        0x03
#define CCW_CMD_BASIC_SENSE 0x04
#define CCW_CMD_TIC         0x08
#define CCW_CMD_SENSE_ID    0xe4

/* CCW flags (format 1, byte 1). */
#define CCW_FLAG_CD   0x80      /* chain data */
#define CCW_FLAG_CC   0x40      /* chain command */
#define CCW_FLAG_SLI  0x20      /* suppress length indication */
#define CCW_FLAG_SKIP 0x10
#define CCW_FLAG_PCI  0x08
#define CCW_FLAG_IDA  0x04
#define CCW_FLAG_S    0x02      /* suspend */
#define CCW_FLAG_MIDA 0x01

#define CCW_MAX_SEGS 16         /* data segments of one CCW (IDAWs) */

/* One command's data area: count bytes in up to CCW_MAX_SEGS pieces of
 * guest RAM (host addresses, already bounds-checked). For a write command
 * the guest's bytes, for a read command where the answer goes. */
struct ccw_data {
	uint32_t count;
	unsigned n;
	struct iovec seg[CCW_MAX_SEGS];
};

/* What a command did. */
#define CCW_REJECT        (-1)  /* unit check, sense byte 0 = command reject */
#define CCW_PROGRAM_CHECK (-2)  /* the channel program was wrong (e.g. the
				 * length does not fit and SLI is off) */

struct ccw_dev_ops {
	/* Execute command cmd on d. sli: the CCW suppresses incorrect-length
	 * indication (the device may transfer less than count). Returns the
	 * bytes transferred (count - residual), CCW_REJECT or
	 * CCW_PROGRAM_CHECK. Called with the subchannel's lock held, from a
	 * vCPU thread. */
	int (*command)(void *dev, uint8_t cmd, bool sli, struct ccw_data *d);
	/* The subchannel was enabled or disabled (MSCH), or the whole
	 * channel subsystem reset: the device forgets per-session state. */
	void (*enable)(void *dev, bool on);
};

/* Copy between a command's data area and a flat buffer: len bytes at
 * offset 0. Return the bytes copied (less when the area is shorter). */
uint32_t ccw_data_read(const struct ccw_data *d, void *buf, uint32_t len);
uint32_t ccw_data_write(const struct ccw_data *d, const void *buf, uint32_t len);

#endif
