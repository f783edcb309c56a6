#include "devices/i8042.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define I8042_KBD_IRQ 1

static void i8042_push(struct i8042 *k, uint8_t v)
{
	if (k->out_count < sizeof(k->out)) {
		k->out[(k->out_head + k->out_count) % sizeof(k->out)] = v;
		k->out_count++;
	}
}

static void i8042_update(struct i8042 *k)
{
	bool level;

	k->status = (k->status & ~I8042_STS_OBF) | (k->out_count ? I8042_STS_OBF : 0);
	level = k->out_count && (k->ctr & I8042_CTR_KBDINT);
	if (level != k->irq_level) {
		k->irq_level = level;
		if (k->vm)
			vm_irq_line(k->vm, I8042_KBD_IRQ, level);
	}
}

static void i8042_reset_line(struct i8042 *k)
{
	k->reset = true;
	if (k->vm)
		vm_request_reboot(k->vm);
}

static void i8042_command(struct i8042 *k, uint8_t cmd)
{
	k->status |= I8042_STS_CMD;
	switch (cmd) {
	case 0x20:                      /* read CTR */
		i8042_push(k, k->ctr);
		break;
	case 0x60:                      /* write CTR: data follows */
	case 0xd1:                      /* write output port: data follows */
	case 0xd2:                      /* write keyboard output buffer */
		k->pending_cmd = cmd;
		break;
	case 0xa7: k->ctr |= 0x20; break;      /* disable aux */
	case 0xa8: k->ctr &= ~0x20; break;     /* enable aux */
	case 0xa9: i8042_push(k, 0xff); break; /* aux test: no aux port */
	case 0xaa: i8042_push(k, 0x55); break; /* self test passed */
	case 0xab: i8042_push(k, 0x00); break; /* keyboard interface OK */
	case 0xad: k->ctr |= 0x10; break;      /* disable keyboard */
	case 0xae: k->ctr &= ~0x10; break;     /* enable keyboard */
	case 0xc0: i8042_push(k, 0x00); break; /* read input port */
	case 0xd0: i8042_push(k, 0x01); break; /* read output port: reset line high */
	default:
		/* 0xF0-0xFF pulse output-port bits low for 6 us; bit 0 is
		 * the CPU reset line (0xFE is what Linux's reboot=k sends). */
		if (cmd >= 0xf0 && !(cmd & 1))
			i8042_reset_line(k);
		break;
	}
}

static void i8042_data(struct i8042 *k, uint8_t v)
{
	uint8_t cmd = k->pending_cmd;

	k->status &= ~I8042_STS_CMD;
	k->pending_cmd = 0;
	switch (cmd) {
	case 0x60:
		k->ctr = v;
		k->status = (k->status & ~I8042_STS_SYS) | (v & I8042_CTR_SYS);
		return;
	case 0xd1:
		if (!(v & 1))
			i8042_reset_line(k);
		return;
	case 0xd2:
		i8042_push(k, v);
		return;
	}
	/* A byte for the keyboard: acknowledge it; reset also reports the
	 * basic assurance test, identify a standard MF2 keyboard. */
	i8042_push(k, 0xfa);
	if (v == 0xff)
		i8042_push(k, 0xaa);
	else if (v == 0xf2) {
		i8042_push(k, 0xab);
		i8042_push(k, 0x83);
	}
}

static void i8042_io_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct i8042 *k = opaque;

	memset(data, 0, len);
	pthread_mutex_lock(&k->lock);
	if (off == 0) {                 /* 0x60: data */
		if (k->out_count) {
			data[0] = k->out[k->out_head];
			k->out_head = (k->out_head + 1) % sizeof(k->out);
			k->out_count--;
			/* The line drops as the buffer empties; the next byte
			 * raises it again: IRQ 1 is edge-triggered, and Linux's
			 * handler reads one byte per interrupt. */
			if (k->irq_level) {
				k->irq_level = false;
				if (k->vm)
					vm_irq_line(k->vm, I8042_KBD_IRQ, false);
			}
		}
	} else if (off == 4) {          /* 0x64: status */
		data[0] = k->status;
	} else {
		data[0] = 0xff;
	}
	i8042_update(k);
	pthread_mutex_unlock(&k->lock);
}

static void i8042_io_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct i8042 *k = opaque;

	(void)len;
	pthread_mutex_lock(&k->lock);
	if (off == 0)
		i8042_data(k, data[0]);
	else if (off == 4)
		i8042_command(k, data[0]);
	i8042_update(k);
	pthread_mutex_unlock(&k->lock);
}

const struct io_ops i8042_io_ops = {
	.read = i8042_io_read,
	.write = i8042_io_write,
};

int i8042_init(struct i8042 *k, struct vm *vm)
{
	memset(k, 0, sizeof(*k));
	k->vm = vm;
	k->ctr = I8042_CTR_KBDINT | I8042_CTR_SYS;
	/* Bit 4 set: keyboard not inhibited (no "keylock"). */
	k->status = I8042_STS_SYS | I8042_STS_UNLOCKED;
	return -pthread_mutex_init(&k->lock, NULL);
}

static void i8042_stop(void *dev)
{
	(void)dev;
}

static void i8042_destroy(void *dev)
{
	struct i8042 *k = dev;

	iobus_unregister(&k->vm->pio, k->port, k);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

static int i8042_save(void *dev, struct snap_w *w, char *err, size_t errlen)
{
	struct i8042 *k = dev;
	unsigned i;

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&k->lock);
	snap_put_u8(w, k->ctr);
	snap_put_u8(w, k->status);
	snap_put_u8(w, k->pending_cmd);
	snap_put_u8(w, (uint8_t)k->out_count);
	for (i = 0; i < k->out_count; i++)
		snap_put_u8(w, k->out[(k->out_head + i) % sizeof(k->out)]);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

static int i8042_load(void *dev, struct snap_r *r, char *err, size_t errlen)
{
	struct i8042 *k = dev;
	uint8_t ctr, status, cmd, n, out[sizeof(k->out)];

	ctr = snap_get_u8(r);
	status = snap_get_u8(r);
	cmd = snap_get_u8(r);
	n = snap_get_u8(r);
	if (n > sizeof(k->out))
		return err_set(err, errlen, -EINVAL, "snapshot: the i8042's output queue holds "
			       "%u bytes, more than its %zu", n, sizeof(k->out));
	snap_get_bytes(r, out, n);
	if (r->err)
		return snap_done(r, err, errlen);
	pthread_mutex_lock(&k->lock);
	k->ctr = ctr;
	k->status = status;
	k->pending_cmd = cmd;
	k->out_head = 0;
	k->out_count = n;
	memcpy(k->out, out, n);
	i8042_update(k);
	pthread_mutex_unlock(&k->lock);
	return 0;
}

static const struct vm_device_ops i8042_vm_ops = {
	.kind = "i8042",
	.stop = i8042_stop,
	.stats_json = NULL,
	.destroy = i8042_destroy,
	.save = i8042_save,
	.load = i8042_load,
};

int i8042_power_key(struct i8042 *k)
{
	/* Set 2, what the keyboard sends; set 1, what the controller makes
	 * of it when it translates (CTR bit 6). */
	static const uint8_t set2[] = { 0xe0, 0x37, 0xe0, 0xf0, 0x37 };
	static const uint8_t set1[] = { 0xe0, 0x5e, 0xe0, 0xde };
	const uint8_t *codes;
	size_t n, i;
	int r = 0;

	pthread_mutex_lock(&k->lock);
	codes = k->ctr & I8042_CTR_XLATE ? set1 : set2;
	n = k->ctr & I8042_CTR_XLATE ? sizeof(set1) : sizeof(set2);
	if (k->ctr & I8042_CTR_KBDDIS)
		r = -ENODEV;
	else if (sizeof(k->out) - k->out_count < n)
		r = -EAGAIN;
	for (i = 0; !r && i < n; i++)
		i8042_push(k, codes[i]);
	i8042_update(k);
	pthread_mutex_unlock(&k->lock);
	return r;
}

int i8042_create(struct vm *vm, uint16_t port, struct i8042 **out)
{
	struct i8042 *k = calloc(1, sizeof(*k));
	int ret;

	if (!k)
		return -ENOMEM;
	ret = i8042_init(k, vm);
	if (ret)
		goto free_k;
	k->port = port;
	/* One range 0x60-0x64; 0x61 (port B) is KVM's PIT speaker port,
	 * handled in the kernel before it reaches us. */
	ret = iobus_register(&vm->pio, port, 5, &i8042_io_ops, k);
	if (ret)
		goto destroy_lock;
	ret = vm_add_device(vm, &i8042_vm_ops, k);
	if (ret)
		goto unregister;
	if (out)
		*out = k;
	return 0;
unregister:
	iobus_unregister(&vm->pio, port, k);
destroy_lock:
	pthread_mutex_destroy(&k->lock);
free_k:
	free(k);
	return ret;
}
