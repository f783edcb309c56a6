/* The board's console on s390x: the SCLP (sclp.c) as a device of the VM,
 * whose VT220 console is mvm's console port, with the KVM side sclp.c
 * leaves out: the service-signal interrupt, the test guest's exit, and
 * the device's stats and teardown (arch_board_create). */
#include "arch/arch.h"
#include "arch/s390/s390.h"
#include "arch/s390/sclp.h"
#include "vmm/base/json.h"
#include "vmm/base/log.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>

struct s390_console {
	struct sclp sclp;
	struct vm *vm;
};

/* sclp.c counts a failure and logs the first. */
static int service_signal(void *opaque, uint32_t parm)
{
	struct s390_console *c = opaque;
	struct kvm_s390_interrupt irq = { .type = KVM_S390_INT_SERVICE, .parm = parm };

	return ioctl(c->vm->vm_fd, KVM_S390_INTERRUPT, &irq) < 0 ? -errno : 0;
}

static void guest_exit(void *opaque, int status)
{
	struct s390_console *c = opaque;

	vm_request_stop(c->vm, VM_STOP_GUEST_STATUS, status, NULL);
}

static void console_stop(void *dev)
{
	(void)dev;              /* no threads of its own */
}

static void console_stats(void *dev, struct json *j)
{
	struct s390_console *c = dev;
	uint64_t o, i;

	console_port_counters(&c->sclp.con, &o, &i);
	json_obj_begin(j, NULL);
	json_str(j, "kind", "sclp-console");
	json_u64(j, "tx_bytes", o);
	json_u64(j, "rx_bytes", i);
	json_u64(j, "tx_dropped", __atomic_load_n(&c->sclp.con.tx_dropped, __ATOMIC_RELAXED));
	json_u64(j, "signal_errors", __atomic_load_n(&c->sclp.signal_errors, __ATOMIC_RELAXED));
	json_obj_end(j);
}

static void console_destroy(void *dev)
{
	struct s390_console *c = dev;

	s390_vm(c->vm)->sclp = NULL;
	sclp_fini(&c->sclp);
	free(c);
}

static int console_save(void *dev, struct snap_w *w, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	sclp_save(&((struct s390_console *)dev)->sclp, w);
	return 0;
}

static int console_load(void *dev, struct snap_r *r, char *err, size_t errlen)
{
	return sclp_load(&((struct s390_console *)dev)->sclp, r, err, errlen);
}

static const struct vm_device_ops console_vm_ops = {
	.kind = "sclp-console",
	.stop = console_stop,
	.stats_json = console_stats,
	.destroy = console_destroy,
	.save = console_save,
	.load = console_load,
};

int arch_board_create(struct vm *vm, struct vm_console *con)
{
	struct s390_console *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->vm = vm;
	ret = sclp_init(&c->sclp, &vm->mem, vm->mem.total, vm->ncpus, service_signal, c);
	if (ret)
		goto free_c;
	c->sclp.guest_exit = guest_exit;
	c->sclp.log = &vm->log;
	ret = vm_add_device(vm, &console_vm_ops, c);
	if (ret)
		goto fini;
	s390_vm(vm)->sclp = &c->sclp;
	*con = (struct vm_console){ .ops = &console_port_vm_ops, .dev = &c->sclp.con };
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_S390_COW) <= 0)
		log_warn(&vm->log, "KVM on this host lacks KVM_CAP_S390_COW (no ESOP facility, as "
			 "under Hercules): the guest runs, but its kernel cannot protect "
			 "read-only pages by suppression");
	return 0;
fini:
	sclp_fini(&c->sclp);
free_c:
	free(c);
	return ret;
}
