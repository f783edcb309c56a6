/* Where the library's messages go: a sink per VM (the embedding program's
 * mvm_log_fn, or mvm(1)'s stderr printer), never a process-wide stream.
 * Devices get the sink of the VM they belong to; a NULL sink (unit tests
 * that do not care) drops the message. */
#ifndef MVM_LOG_H
#define MVM_LOG_H

#include <stdbool.h>

/* Same values as enum mvm_log_level (vmm/mvm.h). */
enum { LOG_ERROR, LOG_WARNING, LOG_INFO };

struct log_sink {
	void (*fn)(void *opaque, int level, const char *msg);
	void *opaque;
};

/* Format one line (no newline) and hand it to the sink. Any thread. */
__attribute__((format(printf, 3, 4)))
void log_msg(const struct log_sink *sink, int level, const char *fmt, ...);

#define log_warn(sink, ...) log_msg(sink, LOG_WARNING, __VA_ARGS__)
#define log_err(sink, ...) log_msg(sink, LOG_ERROR, __VA_ARGS__)

/* What a guest can repeat at will (a register write per VM exit, a BAR
 * moved back and forth) must not flood the host's log: each kind of it is
 * logged the first time on a device, then only counted. A device keeps
 * one, zeroed at first (nothing logged yet), for up to 32 kinds; both
 * fields are atomic, any thread may report. */
struct log_guest {
	unsigned logged;                /* a bit per kind already logged */
	unsigned long long count;       /* every report, of every kind */
};

/* Count one report of kind: true for the first of its kind, the one the
 * caller logs (saying that the rest are only counted, and where). */
bool log_guest_first(struct log_guest *g, unsigned kind);

static inline unsigned long long log_guest_count(const struct log_guest *g)
{
	return __atomic_load_n(&g->count, __ATOMIC_RELAXED);
}

#endif
