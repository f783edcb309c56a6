/* mvm-power-key: wait for the power key, then exit 0.
 *
 * mvm's power button on x86 (vm.power-button, mvm_power_button) is the
 * i8042 keyboard's Power key: Linux's atkbd reports it as KEY_POWER on an
 * evdev device, where a distribution's systemd-logind (or acpid) takes it
 * as the power button and shuts the guest down. The test guest's /init
 * runs this in the background and shuts down when it returns. It waits up
 * to 10 s for the keyboard to appear (serio probes it after /init has
 * started), then watches every /dev/input/event* there is. Exit 1 when
 * the guest has no input device. Built static into the initramfs. */
#include <fcntl.h>
#include <linux/input.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

#define MAX_DEVICES 8

int main(void)
{
	struct pollfd p[MAX_DEVICES];
	struct input_event ev[16];
	unsigned n = 0, i, tries;
	char path[32];

	for (tries = 0; tries < 100 && !n; tries++) {
		for (i = 0; i < MAX_DEVICES; i++) {
			int fd;

			snprintf(path, sizeof(path), "/dev/input/event%u", i);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				p[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
		}
		if (!n)
			usleep(100000);
	}
	if (!n)
		return 1;
	for (;;) {
		if (poll(p, n, -1) < 0)
			continue;
		for (i = 0; i < n; i++) {
			ssize_t got, k;

			if (!(p[i].revents & POLLIN))
				continue;
			got = read(p[i].fd, ev, sizeof(ev));
			for (k = 0; got > 0 && k < got / (ssize_t)sizeof(ev[0]); k++)
				if (ev[k].type == EV_KEY && ev[k].code == KEY_POWER && ev[k].value == 1)
					return 0;
		}
	}
}
