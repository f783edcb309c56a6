/* Where the library's messages go: a sink per VM (the embedding program's
 * mvm_log_fn, or mvm(1)'s stderr printer), never a process-wide stream.
 * Devices get the sink of the VM they belong to; a NULL sink (unit tests
 * that do not care) drops the message. */
#ifndef MVM_LOG_H
#define MVM_LOG_H

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

#endif
