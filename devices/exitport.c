#include "devices/exitport.h"
#include "vmm/kvm/vm.h"

#include <string.h>

static void exitport_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	(void)opaque;
	(void)off;
	memset(data, 0xff, len);
}

static void exitport_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	(void)off;
	/* Only a byte write is a status; wider writes are ignored so a
	 * stray outw cannot masquerade as an exit code. */
	if (len == 1)
		vm_request_stop(opaque, VM_STOP_GUEST_STATUS, data[0], NULL);
}

static void exitport_sink_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	(void)opaque;
	(void)off;
	(void)data;
	(void)len;
}

const struct io_ops exitport_io_ops = {
	.read = exitport_read,
	.write = exitport_write,
};

const struct io_ops exitport_sink_ops = {
	.read = exitport_read,
	.write = exitport_sink_write,
};

int exitport_create(struct vm *vm, uint16_t port, uint16_t sink_port)
{
	int ret;

	ret = iobus_register(&vm->pio, port, 1, &exitport_io_ops, vm);
	if (ret)
		return ret;
	ret = iobus_register(&vm->pio, sink_port, 1, &exitport_sink_ops, vm);
	if (ret)
		iobus_unregister(&vm->pio, port, vm);
	return ret;
}
