/* 8250/16550A UART register model (PC16550D data sheet): interrupt
 * priorities RLS > RDA > THRE > MS, FIFO mode reported in IIR[7:6],
 * loopback wiring of MCR to MSR and THR to RBR. */
#include "devices/serial.h"
#include "vmm/base/json.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned serial_rx_cap(const struct serial *s)
{
	return (s->fcr & UART_FCR_ENABLE) ? SERIAL_FIFO_SIZE : 1;
}

static uint8_t serial_iir(const struct serial *s)
{
	uint8_t fifo = (s->fcr & UART_FCR_ENABLE) ? UART_IIR_FIFO : 0;

	if ((s->ier & UART_IER_RLSI) && s->lsr_err)
		return fifo | UART_IIR_RLSI;
	if ((s->ier & UART_IER_RDI) && s->rx_count)
		return fifo | UART_IIR_RDI;
	if ((s->ier & UART_IER_THRI) && s->thr_ipending)
		return fifo | UART_IIR_THRI;
	if ((s->ier & UART_IER_MSI) && (s->msr & 0x0f))
		return fifo | UART_IIR_MSI;
	return fifo | UART_IIR_NO_INT;
}

static void serial_update_irq(struct serial *s)
{
	bool level = !(serial_iir(s) & UART_IIR_NO_INT);

	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->set_irq)
			s->set_irq(s->irq_opaque, level);
	}
}

/* Modem status lines: in loopback they follow MCR (DTR->DSR, RTS->CTS,
 * OUT1->RI, OUT2->DCD); otherwise a connected terminal (DCD, DSR, CTS). */
static void serial_update_msr(struct serial *s)
{
	uint8_t old = s->msr & 0xf0, now;

	if (s->mcr & UART_MCR_LOOP)
		now = ((s->mcr & UART_MCR_DTR) ? UART_MSR_DSR : 0) |
		      ((s->mcr & UART_MCR_RTS) ? UART_MSR_CTS : 0) |
		      ((s->mcr & UART_MCR_OUT1) ? UART_MSR_RI : 0) |
		      ((s->mcr & UART_MCR_OUT2) ? UART_MSR_DCD : 0);
	else
		now = UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS;
	if ((old ^ now) & UART_MSR_CTS)
		s->msr |= UART_MSR_DCTS;
	if ((old ^ now) & UART_MSR_DSR)
		s->msr |= UART_MSR_DDSR;
	if ((old & UART_MSR_RI) && !(now & UART_MSR_RI))
		s->msr |= UART_MSR_TERI;
	if ((old ^ now) & UART_MSR_DCD)
		s->msr |= UART_MSR_DDCD;
	s->msr = (s->msr & 0x0f) | now;
}

static bool serial_rx_put(struct serial *s, uint8_t b)
{
	if (s->rx_count >= serial_rx_cap(s)) {
		s->lsr_err |= UART_LSR_OE;
		return false;
	}
	s->rx[(s->rx_head + s->rx_count) % SERIAL_FIFO_SIZE] = b;
	s->rx_count++;
	__atomic_add_fetch(&s->con.rx_bytes, 1, __ATOMIC_RELAXED);
	return true;
}

/* Room the buffer must have for THRE (a FIFO load: Linux's 8250 driver
 * writes up to that many bytes per THRE interrupt without reading LSR),
 * and the room at which a busy transmitter frees up again (half the
 * buffer, so a slow reader gets large writes, not a THRE per 16 bytes). */
#define SERIAL_TX_LOW_ROOM SERIAL_FIFO_SIZE
#define SERIAL_TX_RESUME_ROOM (CONSOLE_BUF_SIZE / 2)

/* THR empty, as LSR and the THRE interrupt report it. In loopback the
 * byte goes to RBR at once. */
static bool serial_thre(const struct serial *s)
{
	return (s->mcr & UART_MCR_LOOP) || !s->tx_busy;
}

static void serial_tx(struct serial *s, uint8_t b)
{
	if (s->mcr & UART_MCR_LOOP) {
		serial_rx_put(s, b);
		return;
	}
	/* Without room the guest wrote THR although THRE was clear (the
	 * slack of a FIFO load is gone too): the byte is lost (counted), as
	 * on a real UART's overfull FIFO. */
	console_port_put(&s->con, &b, 1);
	if (!s->tx_busy && console_buf_room(&s->con.tx) < SERIAL_TX_LOW_ROOM) {
		s->tx_busy = true;
		__atomic_add_fetch(&s->tx_waits, 1, __ATOMIC_RELAXED);
	}
}

static uint8_t serial_read_reg(struct serial *s, unsigned reg)
{
	uint8_t v;

	switch (reg) {
	case UART_RBR:
		if (s->lcr & UART_LCR_DLAB)
			return s->dll;
		if (!s->rx_count)
			return 0;
		v = s->rx[s->rx_head];
		s->rx_head = (s->rx_head + 1) % SERIAL_FIFO_SIZE;
		s->rx_count--;
		return v;
	case UART_IER:
		return (s->lcr & UART_LCR_DLAB) ? s->dlm : s->ier;
	case UART_IIR:
		v = serial_iir(s);
		/* Reading IIR while THRE is the reported source clears it. */
		if ((v & 0x0f) == UART_IIR_THRI)
			s->thr_ipending = false;
		return v;
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		/* TEMT with THRE: the host buffer is beyond the UART (the
		 * line), so the transmitter is empty whenever THR is. */
		v = (serial_thre(s) ? UART_LSR_THRE | UART_LSR_TEMT : 0) | s->lsr_err |
		    (s->rx_count ? UART_LSR_DR : 0);
		s->lsr_err = 0;   /* error bits clear on read */
		return v;
	case UART_MSR:
		v = s->msr;
		s->msr &= 0xf0;   /* delta bits clear on read */
		return v;
	default:
		return s->scr;
	}
}

static void serial_write_reg(struct serial *s, unsigned reg, uint8_t v)
{
	switch (reg) {
	case UART_THR:
		if (s->lcr & UART_LCR_DLAB) {
			s->dll = v;
			break;
		}
		serial_tx(s, v);
		/* THR empties at once into the host buffer while it has
		 * room; otherwise THRE (and its interrupt) come back from
		 * the host taking output (serial_port_tx_freed). */
		s->thr_ipending = serial_thre(s);
		break;
	case UART_IER:
		if (s->lcr & UART_LCR_DLAB) {
			s->dlm = v;
			break;
		}
		/* Enabling THRE while THR is empty raises the interrupt. */
		if (!(s->ier & UART_IER_THRI) && (v & UART_IER_THRI) && serial_thre(s))
			s->thr_ipending = true;
		s->ier = v & 0x0f;
		break;
	case UART_FCR:
		if ((v ^ s->fcr) & UART_FCR_ENABLE)
			s->rx_count = 0;   /* toggling FIFO mode resets the FIFOs */
		if (v & UART_FCR_CLEAR_RX)
			s->rx_count = 0;
		s->fcr = v & (UART_FCR_ENABLE | 0xc0);
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		serial_update_msr(s);
		break;
	case UART_LSR:
	case UART_MSR:
		break;  /* read-only (factory test writes ignored) */
	default:
		s->scr = v;
		break;
	}
}

static void serial_io_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct serial *s = opaque;

	memset(data, 0, len);
	pthread_mutex_lock(&s->lock);
	data[0] = serial_read_reg(s, off & 7);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

static void serial_io_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct serial *s = opaque;

	(void)len;
	pthread_mutex_lock(&s->lock);
	serial_write_reg(s, off & 7, data[0]);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

const struct io_ops serial_io_ops = {
	.read = serial_io_read,
	.write = serial_io_write,
};

static const struct console_port_ops serial_port_ops;

int serial_init(struct serial *s, void (*set_irq)(void *, bool), void *opaque)
{
	memset(s, 0, sizeof(*s));
	console_port_init(&s->con, &s->lock, &serial_port_ops, s);
	s->set_irq = set_irq;
	s->irq_opaque = opaque;
	s->mcr = UART_MCR_OUT2;
	s->msr = UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS;
	s->dll = 12;   /* 9600 baud, the reset default */
	return -pthread_mutex_init(&s->lock, NULL);
}

void serial_fini(struct serial *s)
{
	pthread_mutex_destroy(&s->lock);
}

/* The console port's calls, with the lock held. */
static size_t serial_port_rx_room(void *dev)
{
	struct serial *s = dev;

	/* Nothing is accepted in loopback: the line is disconnected. */
	return (s->mcr & UART_MCR_LOOP) ? 0 : serial_rx_cap(s) - s->rx_count;
}

static size_t serial_port_rx_take(void *dev, const uint8_t *buf, size_t len)
{
	struct serial *s = dev;
	size_t i;

	for (i = 0; i < len && serial_rx_put(s, buf[i]); i++)
		;
	serial_update_irq(s);
	return i;
}

static void serial_port_tx_freed(void *dev)
{
	struct serial *s = dev;

	/* THR empties: the THRE interrupt the guest's driver waits for. */
	if (s->tx_busy && console_buf_room(&s->con.tx) >= SERIAL_TX_RESUME_ROOM) {
		s->tx_busy = false;
		s->thr_ipending = true;
	}
	serial_update_irq(s);
}

static const struct console_port_ops serial_port_ops = {
	.rx_room = serial_port_rx_room,
	.rx_take = serial_port_rx_take,
	.tx_freed = serial_port_tx_freed,
};

/* --- COM1 on the VM ------------------------------------------------------ */

struct serial_vm {
	struct serial s;
	struct vm *vm;
	uint16_t port;          /* base I/O port (8 registers) */
	unsigned irq;           /* interrupt line */
};

static void serial_vm_set_irq(void *opaque, bool level)
{
	struct serial_vm *sv = opaque;

	vm_irq_line(sv->vm, sv->irq, level);
}

static void serial_vm_stop(void *dev)
{
	(void)dev;   /* no threads of its own */
}

static void serial_vm_stats(void *dev, struct json *j)
{
	struct serial_vm *sv = dev;

	json_obj_begin(j, NULL);
	json_str(j, "kind", "serial");
	json_u64(j, "port", sv->port);
	json_u64(j, "tx_bytes", __atomic_load_n(&sv->s.con.tx_bytes, __ATOMIC_RELAXED));
	json_u64(j, "rx_bytes", __atomic_load_n(&sv->s.con.rx_bytes, __ATOMIC_RELAXED));
	json_u64(j, "tx_waits", __atomic_load_n(&sv->s.tx_waits, __ATOMIC_RELAXED));
	json_u64(j, "tx_dropped", __atomic_load_n(&sv->s.con.tx_dropped, __ATOMIC_RELAXED));
	json_obj_end(j);
}

static void serial_vm_destroy(void *dev)
{
	struct serial_vm *sv = dev;

	iobus_unregister(&sv->vm->pio, sv->port, &sv->s);
	serial_fini(&sv->s);
	free(sv);
}

/* The registers and the unread input; output the guest wrote before
 * the snapshot belongs to the VM that was snapshotted (its console
 * delivers it), so a restored UART starts with an empty transmitter. */
static int serial_vm_save(void *dev, struct snap_w *w, char *err, size_t errlen)
{
	struct serial *s = &((struct serial_vm *)dev)->s;
	unsigned i;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&s->lock);
	snap_put_u8(w, s->ier);
	snap_put_u8(w, s->lcr);
	snap_put_u8(w, s->mcr);
	snap_put_u8(w, s->lsr_err);
	snap_put_u8(w, s->msr);
	snap_put_u8(w, s->scr);
	snap_put_u8(w, s->fcr);
	snap_put_u8(w, s->dll);
	snap_put_u8(w, s->dlm);
	snap_put_u8(w, s->thr_ipending);
	snap_put_u8(w, (uint8_t)s->rx_count);
	for (i = 0; i < s->rx_count; i++)
		snap_put_u8(w, s->rx[(s->rx_head + i) % SERIAL_FIFO_SIZE]);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int serial_vm_load(void *dev, struct snap_r *r, char *err, size_t errlen)
{
	struct serial *s = &((struct serial_vm *)dev)->s;
	uint8_t regs[10], n, rx[SERIAL_FIFO_SIZE];
	unsigned i;

	snap_get_bytes(r, regs, sizeof(regs));
	n = snap_get_u8(r);
	/* Without its FIFO the UART holds one byte (serial_rx_cap). */
	if (n > ((regs[6] & UART_FCR_ENABLE) ? SERIAL_FIFO_SIZE : 1))
		return err_set(err, errlen, -EINVAL, "snapshot: the UART's receive buffer holds "
			       "%u bytes, more than its %u (FIFO %s)", n,
			       (regs[6] & UART_FCR_ENABLE) ? SERIAL_FIFO_SIZE : 1,
			       (regs[6] & UART_FCR_ENABLE) ? "on" : "off");
	snap_get_bytes(r, rx, n);
	if (r->err)
		return snap_done(r, err, errlen);
	pthread_mutex_lock(&s->lock);
	s->ier = regs[0] & 0x0f;
	s->lcr = regs[1];
	s->mcr = regs[2] & 0x1f;
	/* The error bits only (OE, PE, FE, BI): data ready and THRE are
	 * the FIFO's and the transmitter's. */
	s->lsr_err = regs[3] & 0x1e;
	s->msr = regs[4];
	s->scr = regs[5];
	s->fcr = regs[6] & (UART_FCR_ENABLE | 0xc0);    /* as a guest's write keeps it */
	s->dll = regs[7];
	s->dlm = regs[8];
	s->thr_ipending = regs[9] != 0;
	s->rx_head = 0;
	s->rx_count = n;
	for (i = 0; i < n; i++)
		s->rx[i] = rx[i];
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static const struct vm_device_ops serial_vm_ops = {
	.kind = "serial",
	.stop = serial_vm_stop,
	.stats_json = serial_vm_stats,
	.destroy = serial_vm_destroy,
	.save = serial_vm_save,
	.load = serial_vm_load,
};


int serial_create(struct vm *vm, uint16_t port, unsigned irq, struct serial **out)
{
	struct serial_vm *sv;
	int ret;

	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return -ENOMEM;
	sv->vm = vm;
	sv->port = port;
	sv->irq = irq;
	ret = serial_init(&sv->s, serial_vm_set_irq, sv);
	if (ret)
		goto free_sv;
	ret = iobus_register(&vm->pio, port, 8, &serial_io_ops, &sv->s);
	if (ret)
		goto fini;
	ret = vm_add_device(vm, &serial_vm_ops, sv);
	if (ret)
		goto unregister;
	*out = &sv->s;
	return 0;
unregister:
	iobus_unregister(&vm->pio, port, &sv->s);
fini:
	serial_fini(&sv->s);
free_sv:
	free(sv);
	return ret;
}
