#include "devices/pvpanic.h"
#include "vmm/base/json.h"
#include "vmm/base/snap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

static void pvpanic_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	(void)opaque;
	memset(data, 0, len);
	if (off == 0)
		data[0] = PVPANIC_EVENTS;
}

static void pvpanic_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct pvpanic *p = opaque;
	uint8_t v = data[0];

	(void)len;
	if (off != 0) {
		pci_guest_warn(&p->pci, PVPANIC_GW_OFFSET, "pvpanic: write to BAR0 offset %llu "
			       "ignored (the register is at 0)", (unsigned long long)off);
		return;
	}
	if (v & ~PVPANIC_EVENTS || !v) {
		pci_guest_warn(&p->pci, PVPANIC_GW_VALUE, "pvpanic: event %#x ignored (mvm "
			       "knows panicked 0x1 and crash-loaded 0x2)", v);
		return;
	}
	if (v & PVPANIC_PANICKED) {
		/* Other vCPUs may report too: one line, and the first stop
		 * request wins anyway. */
		if (log_guest_first(&p->panicked, 0))
			log_err(p->pci.log, "the guest's kernel panicked (pvpanic); stopping "
				"the VM");
		vm_request_stop(p->vm, VM_STOP_GUEST_PANIC, MVM_EXIT_PANICKED,
				"the guest's kernel panicked (pvpanic)");
		return;
	}
	if (log_guest_first(&p->crash_loaded, 0))
		log_warn(p->pci.log, "the guest's kernel panicked and runs its crash kernel "
			 "(pvpanic crash-loaded); the VM goes on (any more are only counted, as "
			 "crash_loaded in --stats)");
}

const struct io_ops pvpanic_bar_ops = {
	.read = pvpanic_read,
	.write = pvpanic_write,
};

void pvpanic_init(struct pvpanic *p, struct vm *vm)
{
	memset(p, 0, sizeof(*p));
	p->vm = vm;
	pci_dev_init(&p->pci, "pvpanic", PVPANIC_VENDOR, PVPANIC_DEVICE, PVPANIC_CLASS,
		     PVPANIC_REVISION, PVPANIC_SUBSYS_VENDOR, PVPANIC_SUBSYS_ID, NULL, p);
	/* 16 bytes, the smallest memory BAR; the size is valid, so this
	 * cannot fail. */
	(void)pci_dev_set_bar(&p->pci, 0, PVPANIC_BAR_SIZE, 0, &pvpanic_bar_ops, p);
}

static void pvpanic_stop(void *dev)
{
	(void)dev;
}

static void pvpanic_stats(void *dev, struct json *j)
{
	struct pvpanic *p = dev;

	json_obj_begin(j, NULL);
	json_str(j, "kind", "pvpanic");
	json_u64(j, "slot", p->pci.slot);
	json_u64(j, "panicked", log_guest_count(&p->panicked));
	json_u64(j, "crash_loaded", log_guest_count(&p->crash_loaded));
	json_u64(j, "pci_guest_errors", pci_guest_errors(&p->pci));
	json_obj_end(j);
}

static void pvpanic_destroy(void *dev)
{
	struct pvpanic *p = dev;

	pci_bus_remove(p->bus, &p->pci);
	free(p);
}

static int pvpanic_save(void *dev, struct snap_w *w, char *err, size_t errlen)
{
	return pci_dev_save(&((struct pvpanic *)dev)->pci, w, err, errlen);
}

static int pvpanic_load(void *dev, struct snap_r *r, char *err, size_t errlen)
{
	return pci_dev_load(&((struct pvpanic *)dev)->pci, r, err, errlen);
}

static const struct vm_device_ops pvpanic_vm_ops = {
	.kind = "pvpanic",
	.stop = pvpanic_stop,
	.stats_json = pvpanic_stats,
	.destroy = pvpanic_destroy,
	.save = pvpanic_save,
	.load = pvpanic_load,
};

int pvpanic_attach(struct vm *vm, struct pci_bus *bus)
{
	struct pvpanic *p = malloc(sizeof(*p));
	int ret;

	if (!p)
		return -ENOMEM;
	pvpanic_init(p, vm);
	ret = pci_bus_add(bus, &p->pci);
	if (ret)
		goto free_p;
	p->bus = bus;
	/* No interrupt (pci_bus_add wires INTA# for every function); no
	 * vCPU runs yet, so nothing else reads the header now. */
	p->pci.cfg[PCI_INTERRUPT_PIN] = 0;
	p->pci.cfg[PCI_INTERRUPT_LINE] = 0;
	ret = vm_add_device(vm, &pvpanic_vm_ops, p);
	if (ret)
		goto remove;
	return 0;
remove:
	pci_bus_remove(bus, &p->pci);
free_p:
	free(p);
	return ret;
}
