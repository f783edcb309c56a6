#include "vmm/base/log.h"

#include <stdarg.h>
#include <stdio.h>

void log_msg(const struct log_sink *sink, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!sink || !sink->fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sink->fn(sink->opaque, level, msg);
}

bool log_guest_first(struct log_guest *g, unsigned kind)
{
	__atomic_fetch_add(&g->count, 1, __ATOMIC_RELAXED);
	return !(__atomic_fetch_or(&g->logged, 1u << kind, __ATOMIC_RELAXED) & (1u << kind));
}
