/* struct vm on Linux KVM: VM creation, guest RAM slots, interrupt routing,
 * ioeventfd/irqfd, resource allocation, the device registry and the stop
 * request. */
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"
#include "arch/arch.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

__attribute__((format(printf, 3, 4)))
static int vm_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int e = errno;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return e ? -e : -EIO;
}

/* The pause's lock and condition; the condition's timed waits on
 * CLOCK_MONOTONIC. 0 or -errno. */
static int vm_pause_init(struct kvm_state *ks)
{
	int ret;

	ret = -pthread_mutex_init(&ks->pause_lock, NULL);
	if (ret)
		return ret;
	ret = mono_cond_init(&ks->pause_cond);
	if (ret) {
		pthread_mutex_destroy(&ks->pause_lock);
		return ret;
	}
	atomic_init(&ks->pause_req, false);
	return 0;
}

int vm_init(struct vm *vm, unsigned ncpus)
{
	struct kvm_state *ks;
	unsigned i;
	int ret;

	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = -1;
	vm->vm_fd = -1;
	vm->ncpus = ncpus;
	vm->next_gsi = KVM_MSI_GSI_FIRST;
	ks = calloc(1, sizeof(*ks));
	if (!ks)
		return -ENOMEM;
	ks->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ks->stop_efd < 0) {
		ret = -errno;
		goto free_ks;
	}
	atomic_init(&ks->status, -1);
	atomic_init(&ks->reason, (int)VM_STOP_HOST_ERROR);
	vm->kick_signal = SIGUSR1;
	vm->host_pvm = kvm_host_is_pvm("/sys");
	atomic_init(&ks->stopping, false);
	ks->vcpu_fd_lo = ks->vcpu_fd_hi = -1;
	if (sem_init(&ks->gate, 0, 0)) {
		ret = -errno;
		goto close_efd;
	}
	/* The table KVM gets: the irqchip's routes, then room for every
	 * MSI-range GSI (about 42 KiB, allocated once). */
	ks->route_cap = KVM_CHIP_ROUTES_MAX + KVM_MSI_SLOTS;
	ks->routes = calloc(1, sizeof(*ks->routes) + ks->route_cap * sizeof(ks->routes->entries[0]));
	if (!ks->routes) {
		ret = -ENOMEM;
		goto destroy_gate;
	}
	ks->routes->nr = MIN(arch_irq_routes(ks->routes->entries, KVM_CHIP_ROUTES_MAX),
			     KVM_CHIP_ROUTES_MAX);
	for (i = 0; i < KVM_MSI_SLOTS; i++)
		ks->route_idx[i] = KVM_ROUTE_NONE;
	ret = -pthread_mutex_init(&ks->route_lock, NULL);
	if (ret)
		goto free_routes;
	ret = vm_pause_init(ks);
	if (ret)
		goto destroy_lock;
	ret = iobus_init(&vm->pio);
	if (ret)
		goto destroy_pause;
	ret = iobus_init(&vm->mmio);
	if (ret)
		goto destroy_pio;
	vm->arch = ks;
	return 0;
destroy_pio:
	iobus_destroy(&vm->pio);
destroy_pause:
	pthread_cond_destroy(&ks->pause_cond);
	pthread_mutex_destroy(&ks->pause_lock);
destroy_lock:
	pthread_mutex_destroy(&ks->route_lock);
free_routes:
	free(ks->routes);
destroy_gate:
	sem_destroy(&ks->gate);
close_efd:
	close(ks->stop_efd);
free_ks:
	free(ks);
	return ret;
}

bool kvm_host_is_pvm(const char *sysfs_root)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/module/kvm_pvm", sysfs_root);
	return access(path, F_OK) == 0;
}

void vm_open_gate(struct vm *vm, unsigned n)
{
	while (n--)
		sem_post(&vm_kvm(vm)->gate);
}

void vm_fini(struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	gmem_unmap(&vm->mem);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	if (ks) {
		iobus_destroy(&vm->mmio);
		iobus_destroy(&vm->pio);
		pthread_mutex_destroy(&ks->route_lock);
		pthread_cond_destroy(&ks->pause_cond);
		pthread_mutex_destroy(&ks->pause_lock);
		free(ks->routes);
		sem_destroy(&ks->gate);
		close(ks->stop_efd);
		arch_vm_fini(ks->arch_state);
		free(ks);
	}
	vm->arch = NULL;
	vm->vm_fd = vm->kvm_fd = -1;
}

int kvm_open(char *err, size_t errlen)
{
	static const struct arch_kvm_cap caps[] = {
		{ KVM_CAP_IOEVENTFD, "IOEVENTFD" },
		{ KVM_CAP_IRQFD, "IRQFD" },
		{ KVM_CAP_USER_MEMORY, "USER_MEMORY" },
		{ KVM_CAP_IRQ_ROUTING, "IRQ_ROUTING" },
		{ KVM_CAP_IMMEDIATE_EXIT, "IMMEDIATE_EXIT" },
		{ 0, NULL },
	};
	const struct arch_kvm_cap *lists[] = { caps, arch_kvm_caps }, *c;
	unsigned i;
	int fd, v;

	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT)
			snprintf(err, errlen, "/dev/kvm not found: this host has no KVM; run mvm "
				 "under the nested harness: tests/with-kvm ./mvm ...");
		else
			snprintf(err, errlen, "/dev/kvm: %s; check that you may open it "
				 "(group kvm) or use tests/with-kvm ./mvm ...", strerror(e));
		return -e;
	}
	v = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (v != KVM_API_VERSION) {
		snprintf(err, errlen, "/dev/kvm: API version %d, mvm needs %d", v, KVM_API_VERSION);
		close(fd);
		return -ENOTSUP;
	}
	for (i = 0; i < ARRAY_SIZE(lists); i++) {
		for (c = lists[i]; c->name; c++) {
			if (ioctl(fd, KVM_CHECK_EXTENSION, c->cap) <= 0) {
				snprintf(err, errlen, "KVM on this host lacks KVM_CAP_%s, which "
					 "mvm needs", c->name);
				close(fd);
				return -ENOTSUP;
			}
		}
	}
	return fd;
}

unsigned kvm_max_vcpus(int kvm_fd)
{
	int n = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);

	if (n <= 0)
		n = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_NR_VCPUS);
	if (n <= 0)
		n = 4;  /* KVM API: assume 4 when neither cap exists */
	return n;
}

unsigned kvm_get_routes(struct kvm_state *ks, struct kvm_irq_routing_entry *r, unsigned cap)
{
	unsigned n;

	pthread_mutex_lock(&ks->route_lock);
	n = ks->routes->nr;
	memcpy(r, ks->routes->entries, MIN(n, cap) * sizeof(r[0]));
	pthread_mutex_unlock(&ks->route_lock);
	return n;
}

/* The KVM routing entry of MSI-range slot i. */
static void route_entry(const struct kvm_state *ks, unsigned i, struct kvm_irq_routing_entry *e)
{
	const struct kvm_msi_slot *s = &ks->msi[i];

	memset(e, 0, sizeof(*e));
	e->gsi = KVM_MSI_GSI_FIRST + i;
	if (s->adapter) {
		e->type = KVM_IRQ_ROUTING_S390_ADAPTER;
		e->u.adapter = s->ad;
	} else {
		e->type = KVM_IRQ_ROUTING_MSI;
		e->u.msi.address_lo = (uint32_t)s->addr;
		e->u.msi.address_hi = (uint32_t)(s->addr >> 32);
		e->u.msi.data = s->data;
	}
}

/* Make slot i's entry in the kept table match ks->msi[i]: rewrite it,
 * append it, or remove it (the last entry moves into its place). The
 * table has room for every slot, so appending cannot fail. route_lock held. */
static void route_entry_update(struct kvm_state *ks, unsigned i)
{
	struct kvm_irq_routing *t = ks->routes;
	unsigned e = ks->route_idx[i], last;

	if (ks->msi[i].active) {
		if (e == KVM_ROUTE_NONE)
			e = t->nr++;
		route_entry(ks, i, &t->entries[e]);
		ks->route_idx[i] = (uint16_t)e;
	} else if (e != KVM_ROUTE_NONE) {
		last = --t->nr;
		if (e != last) {
			t->entries[e] = t->entries[last];
			ks->route_idx[t->entries[e].gsi - KVM_MSI_GSI_FIRST] = (uint16_t)e;
		}
		ks->route_idx[i] = KVM_ROUTE_NONE;
	}
}

/* Whether two slots route alike: inactive ones all do, whatever they hold. */
static bool slot_same(const struct kvm_msi_slot *a, const struct kvm_msi_slot *b)
{
	if (a->active != b->active)
		return false;
	if (!a->active)
		return true;
	if (a->adapter != b->adapter)
		return false;
	if (!a->adapter)
		return a->addr == b->addr && a->data == b->data;
	return a->ad.ind_addr == b->ad.ind_addr && a->ad.summary_addr == b->ad.summary_addr &&
	       a->ad.ind_offset == b->ad.ind_offset &&
	       a->ad.summary_offset == b->ad.summary_offset &&
	       a->ad.adapter_id == b->ad.adapter_id;
}

/* Install the kept table; route_lock held. */
static int kvm_set_routes(struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	ks->route_pushes++;
	if (vm->vm_fd < 0)
		return 0;               /* no KVM (unit tests): the table is all there is */
	return ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, ks->routes) < 0 ? -errno : 0;
}

int kvm_vm_create(struct vm *vm, int kvm_fd, uint64_t mem, unsigned ncpus, int mem_fd,
		  bool mem_shared, char *err, size_t errlen)
{
	struct kvm_state *ks;
	unsigned i;
	int ret, n;

	ret = vm_init(vm, ncpus);
	if (ret) {
		close(kvm_fd);
		snprintf(err, errlen, "VM setup: %s", strerror(-ret));
		return ret;
	}
	ks = vm_kvm(vm);
	vm->kvm_fd = kvm_fd;
	ks->max_vcpus = kvm_max_vcpus(kvm_fd);
	n = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (n <= 0) {
		ret = vm_err(err, errlen, "KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		goto fini;
	}
	ks->vcpu_mmap_size = n;
	do
		vm->vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	while (vm->vm_fd < 0 && errno == EINTR);
	if (vm->vm_fd < 0) {
		ret = vm_err(err, errlen, "KVM_CREATE_VM: %s", strerror(errno));
		goto fini;
	}
	ret = arch_vm_init(vm, &ks->arch_state, err, errlen);
	if (ret)
		goto fini;
	pthread_mutex_lock(&ks->route_lock);
	ret = kvm_set_routes(vm);
	pthread_mutex_unlock(&ks->route_lock);
	if (ret) {
		errno = -ret;
		ret = vm_err(err, errlen, "KVM_SET_GSI_ROUTING: %s", strerror(-ret));
		goto fini;
	}
	ret = gmem_map(&vm->mem, mem, arch_layout.ram_hole);
	if (ret) {
		errno = -ret;
		ret = vm_err(err, errlen, "guest RAM of %llu MiB: %s; give a smaller --mem",
			     (unsigned long long)(mem >> 20), strerror(-ret));
		goto fini;
	}
	if (mem_fd >= 0) {
		ret = gmem_map_file(&vm->mem, mem_fd, mem_shared);
		if (ret) {
			errno = -ret;
			ret = vm_err(err, errlen, "guest RAM from %s: %s", mem_shared ?
				     "its file (mem_file)" : "the snapshot's memory file", strerror(-ret));
			goto fini;
		}
	}
	for (i = 0; i < vm->mem.nr; i++) {
		struct kvm_userspace_memory_region r = {
			.slot = i,
			.guest_phys_addr = vm->mem.r[i].gpa,
			.memory_size = vm->mem.r[i].size,
			.userspace_addr = (uintptr_t)vm->mem.r[i].hva,
		};
		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			ret = vm_err(err, errlen, "KVM_SET_USER_MEMORY_REGION %#llx+%#llx: %s",
				     (unsigned long long)r.guest_phys_addr,
				     (unsigned long long)r.memory_size, strerror(errno));
			goto fini;
		}
	}
	return 0;
fini:
	vm_fini(vm);
	return ret;
}

int vm_ioeventfd(struct vm *vm, enum vm_io_space space, uint64_t addr, unsigned len,
		 const uint64_t *datamatch, int fd, bool deassign)
{
	struct kvm_ioeventfd io = {
		.addr = addr,
		.len = len,
		.fd = fd,
	};

	if (space == VM_IO_PIO)
		io.flags |= KVM_IOEVENTFD_FLAG_PIO;
	else if (space == VM_IO_CCW)
		io.flags |= KVM_IOEVENTFD_FLAG_VIRTIO_CCW_NOTIFY;
	if (datamatch) {
		io.flags |= KVM_IOEVENTFD_FLAG_DATAMATCH;
		io.datamatch = *datamatch;
	}
	if (deassign)
		io.flags |= KVM_IOEVENTFD_FLAG_DEASSIGN;
	return ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

int vm_irqfd(struct vm *vm, unsigned gsi, int fd, bool deassign)
{
	struct kvm_irqfd irqfd = {
		.fd = fd,
		.gsi = gsi,
		.flags = deassign ? KVM_IRQFD_FLAG_DEASSIGN : 0,
	};

	return ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0 ? -errno : 0;
}

int vm_irq_line(struct vm *vm, unsigned gsi, bool level)
{
	struct kvm_irq_level l = { .irq = gsi, .level = level };

	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) < 0 ? -errno : 0;
}

int vm_alloc_irq(struct vm *vm, unsigned *gsi)
{
	if (vm->next_virtio_irq >= arch_layout.nvirtio_irqs)
		return -ENOSPC;
	*gsi = arch_layout.virtio_irqs[vm->next_virtio_irq++];
	return 0;
}

int vm_alloc_virtio_mmio(struct vm *vm, uint64_t *base)
{
	if (vm->next_virtio_mmio >= arch_layout.virtio_mmio_max)
		return -ENOSPC;
	*base = arch_layout.virtio_mmio_base + vm->next_virtio_mmio++ * arch_layout.virtio_mmio_size;
	return 0;
}

unsigned vm_virtio_mmio_slot(const struct vm *vm, uint64_t base)
{
	return vm->mem.nr +
	       (unsigned)((base - arch_layout.virtio_mmio_base) / arch_layout.virtio_mmio_size);
}

int vm_map_readonly(struct vm *vm, unsigned slot, uint64_t gpa, void *hva, uint64_t size)
{
	struct kvm_userspace_memory_region r = {
		.slot = slot,
		.flags = KVM_MEM_READONLY,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uintptr_t)hva,
	};
	int n = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_READONLY_MEM);

	if (n < 0)
		return -errno;
	if (n == 0)
		return -EOPNOTSUPP;
	return ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0 ? -errno : 0;
}

void vm_unmap_readonly(struct vm *vm, unsigned slot)
{
	/* Size 0 deletes the slot (KVM API: KVM_SET_USER_MEMORY_REGION). */
	struct kvm_userspace_memory_region r = { .slot = slot };

	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
		/* Only a VM fd gone wrong fails here; the VM is being torn down. */
	}
}

int vm_alloc_msi_gsi(struct vm *vm, unsigned *gsi)
{
	if (vm->next_gsi < KVM_MSI_GSI_FIRST)
		vm->next_gsi = KVM_MSI_GSI_FIRST;
	if (vm->next_gsi >= KVM_MSI_GSI_END)
		return -ENOSPC;
	*gsi = vm->next_gsi++;
	return 0;
}

/* Replace the route of an MSI-range GSI: update its one entry and push the
 * table, unless the route is what it was (then KVM has it already). When
 * KVM refuses the table, the kept one goes back to what KVM still has. */
static int route_set(struct vm *vm, unsigned gsi, const struct kvm_msi_slot *slot)
{
	struct kvm_state *ks = vm_kvm(vm);
	struct kvm_msi_slot old;
	unsigned i;
	int ret = 0;

	if (!ks)
		return -ENODEV;
	if (gsi < KVM_MSI_GSI_FIRST || gsi >= KVM_MSI_GSI_END)
		return -EINVAL;
	i = gsi - KVM_MSI_GSI_FIRST;
	pthread_mutex_lock(&ks->route_lock);
	if (slot_same(&ks->msi[i], slot))
		goto unlock;
	old = ks->msi[i];
	ks->msi[i] = *slot;
	route_entry_update(ks, i);
	ret = kvm_set_routes(vm);
	if (ret) {
		ks->msi[i] = old;
		route_entry_update(ks, i);
	}
unlock:
	pthread_mutex_unlock(&ks->route_lock);
	return ret;
}

int vm_msi_route(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	return route_set(vm, gsi, &(struct kvm_msi_slot){ .active = !masked, .addr = addr,
							  .data = data });
}

int vm_adapter_route(struct vm *vm, unsigned gsi, uint64_t ind_addr, uint64_t summary_addr,
		     uint64_t ind_offset, uint32_t summary_offset, uint32_t adapter_id, bool remove)
{
	return route_set(vm, gsi, &(struct kvm_msi_slot){
		.active = !remove, .adapter = true,
		.ad = { .ind_addr = ind_addr, .summary_addr = summary_addr,
			.ind_offset = ind_offset, .summary_offset = summary_offset,
			.adapter_id = adapter_id },
	});
}

int vm_cmdline_append(struct vm *vm, const char *fmt, ...)
{
	size_t room = sizeof(vm->cmdline_extra) - vm->cmdline_extra_len;
	va_list ap;
	int n;

	if (room < 2)
		return -ENOSPC;
	vm->cmdline_extra[vm->cmdline_extra_len] = ' ';
	va_start(ap, fmt);
	n = vsnprintf(vm->cmdline_extra + vm->cmdline_extra_len + 1, room - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room - 1) {
		vm->cmdline_extra[vm->cmdline_extra_len] = '\0';
		return -ENOSPC;
	}
	vm->cmdline_extra_len += 1 + n;
	return 0;
}

int vm_add_device(struct vm *vm, const struct vm_device_ops *ops, void *dev)
{
	if (vm->ndevices >= VM_MAX_DEVICES)
		return -ENOSPC;
	vm->devices[vm->ndevices].ops = ops;
	vm->devices[vm->ndevices].dev = dev;
	vm->ndevices++;
	return 0;
}

static void vm_stop(struct vm *vm, enum vm_stop_reason why, int status, const char *msg,
		    bool reboot)
{
	struct kvm_state *ks = vm_kvm(vm);
	bool expected = false;
	uint64_t one = 1;

	if (!ks)
		return;
	if (atomic_compare_exchange_strong(&ks->stopping, &expected, true)) {
		atomic_store(&ks->reboot, reboot);
		atomic_store(&ks->status, status);
		atomic_store(&ks->reason, (int)why);
		/* Not snprintf: this may run in a signal handler. */
		if (msg) {
			size_t i;
			for (i = 0; msg[i] && i < sizeof(ks->stop_msg) - 1; i++)
				ks->stop_msg[i] = msg[i];
			ks->stop_msg[i] = '\0';
		}
		/* Wakes the main loop; a full counter (impossible here) would
		 * still leave it readable. */
		if (write(ks->stop_efd, &one, sizeof(one)) < 0) {
			/* nothing to do: the eventfd is non-blocking */
		}
	}
}

void vm_request_stop(struct vm *vm, enum vm_stop_reason why, int status, const char *msg)
{
	vm_stop(vm, why, status, msg, false);
}

void vm_request_reboot(struct vm *vm)
{
	vm_stop(vm, VM_STOP_POWEROFF, MVM_EXIT_OK, NULL, true);
}

bool vm_stop_reboot(const struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	return ks && atomic_load(&ks->reboot);
}

int vm_stop_status(const struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	return ks ? atomic_load(&ks->status) : -1;
}

enum vm_stop_reason vm_stop_reason(const struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	return ks ? (enum vm_stop_reason)atomic_load(&ks->reason) : VM_STOP_HOST_ERROR;
}

const char *vm_stop_message(const struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	return ks ? ks->stop_msg : "";
}

int vm_compose_cmdline(const char *extra, const char *user, char *out, size_t len)
{
	int n;

	while (extra && *extra == ' ')
		extra++;
	n = snprintf(out, len, "%s%s%s%s%s", arch_layout.base_cmdline,
		     extra && *extra ? " " : "", extra ? extra : "",
		     user && *user ? " " : "", user ? user : "");
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return 0;
}
