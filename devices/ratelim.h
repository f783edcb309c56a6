/* I/O rate limits: token buckets (struct mvm_token_bucket's model) and
 * the limiters made of them that a disk, or a group of disks, shares
 * between its queue threads.
 *
 * Unlike Firecracker's and Cloud Hypervisor's limiters, which look at a
 * blocked queue again on a fixed 100 ms timer (so that small buckets with
 * short refill times give far less than their rate), a queue thread asks
 * ratelim_take when the request would fit and waits exactly that long
 * (vqw_wait_until): the rate it gets is the configured one at any size.
 *
 * The buckets are pure logic on a clock the caller passes (unit tests use
 * their own); struct ratelim adds the lock and the list of queue threads
 * to wake when the limits change. */
#ifndef MVM_RATELIM_H
#define MVM_RATELIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/base/keyval.h"
#include "vmm/mvm.h"

struct vqw;

struct ratelim_bucket {
	uint64_t size;             /* tokens when full; 0: no limit */
	uint64_t refill_ns;        /* from empty to full */
	uint64_t burst;            /* one-time tokens left, used first */
	int64_t tokens;            /* may be negative: a request larger than the
				    * bucket took a full one and left a debt */
	uint64_t frac;             /* refill carried over, in token*ns, < refill_ns */
	uint64_t last_ns;          /* the clock at the last refill */
};

/* Configure b from cfg at now. A fresh bucket starts full with cfg's
 * burst; a bucket that was running keeps its tokens (down to the new
 * size) and gets cfg's burst again. */
void ratelim_bucket_set(struct ratelim_bucket *b, const struct mvm_token_bucket *cfg,
			uint64_t now_ns, bool fresh);
/* Add what the time since the last refill earned (never beyond size). */
void ratelim_bucket_refill(struct ratelim_bucket *b, uint64_t now_ns);
/* After a refill at now: 0 when a request of cost tokens fits now (the
 * burst and the bucket hold min(cost, size)), else the nanoseconds until
 * it will, rounded up. */
uint64_t ratelim_bucket_wait(const struct ratelim_bucket *b, uint64_t cost);
/* Take cost tokens: the burst first, then the bucket (into debt where
 * cost exceeds what it holds). */
void ratelim_bucket_take(struct ratelim_bucket *b, uint64_t cost);

/* The keys of a struct mvm_rate_limit that is member `m` of struct T,
 * with Cloud Hypervisor's names (its DiskConfig's and rate-limit groups'),
 * for the kv tables of every spec that sets limits (a disk's, a group's):
 * their limits and help exist here once. */
#define RATELIM_KEY(T, m, name, field, max_, meta_, unit_, help_)                       \
	{ name, KV_U64, KV_OFF(T, m.field, uint64_t), .max = (max_), .meta = (meta_),     \
	  .unit = (unit_), .help = (help_) }
#define RATELIM_BUCKET_KEYS(T, m, b, meta_, what)                                       \
	RATELIM_KEY(T, m, #b "_size", b.size, MVM_RATE_SIZE_MAX, meta_, NULL,              \
		    "limit " what ": a token bucket of " meta_ " (default: no limit), "     \
		    "refilled in " #b "_refill_time"),                                     \
	RATELIM_KEY(T, m, #b "_one_time_burst", b.one_time_burst, MVM_RATE_SIZE_MAX,       \
		    meta_, NULL, what " allowed once at the start beyond the bucket"),     \
	RATELIM_KEY(T, m, #b "_refill_time", b.refill_time_ms, MVM_RATE_REFILL_MS_MAX,     \
		    "MSEC", "ms", "the time the " #b " bucket takes to refill from empty " \
		    "(needed with " #b "_size)")
#define RATELIM_KEYS(T, m)                                                              \
	RATELIM_BUCKET_KEYS(T, m, bw, "BYTES", "bytes read and written"),                 \
	RATELIM_BUCKET_KEYS(T, m, ops, "N", "requests")

/* --rate-limit-group's keys over struct mvm_rate_group_config: "id=NAME"
 * and the limits. */
extern const struct kv_table ratelim_group_keys;

/* Whether the limits limit anything. */
bool ratelim_limits(const struct mvm_rate_limit *rate);
/* Check limits a program filled (each value in its key's range, each
 * bucket's size and refill time both or neither); what and name start
 * the message ("disk", its path). 0 or -EINVAL. */
int ratelim_check(const struct mvm_rate_limit *rate, const char *what, const char *name,
		  char *err, size_t errlen);

/* A disk's or a group's limits, shared by queue threads. */
struct ratelim {
	pthread_mutex_t lock;      /* the buckets and the members */
	bool on;                   /* limits set: read without the lock (relaxed) */
	struct mvm_rate_limit rate;/* as configured */
	struct ratelim_bucket bw, ops;
	struct vqw **members;      /* workers to wake when the limits change */
	unsigned nmembers, cap;
};

/* The clock is the caller's (mono_ns; tests: their own), as for
 * ratelim_set and ratelim_take. 0 or -errno. */
int ratelim_init(struct ratelim *rl, const struct mvm_rate_limit *rate, uint64_t now_ns);
void ratelim_fini(struct ratelim *rl);
/* New limits from now on; every member worker is woken (vqw_poke) so
 * that a request waiting for tokens is looked at again. Any thread. */
void ratelim_set(struct ratelim *rl, const struct mvm_rate_limit *rate, uint64_t now_ns);
/* The limits as configured now (ratelim_init's, or the last
 * ratelim_set's). Any thread. */
void ratelim_rate_get(struct ratelim *rl, struct mvm_rate_limit *out);
/* Workers that wait on rl (ratelim_set wakes them). 0 or -ENOMEM. */
int ratelim_join(struct ratelim *rl, struct vqw *w);
void ratelim_leave(struct ratelim *rl, struct vqw *w);

/* A request's tokens (bytes and one operation) from each limiter in
 * rl[0..n) (NULL entries and limiters without limits are skipped): 0 when
 * all of them held it, else how long until they would (ns). Without
 * reserve, it takes from all or from none: 0, taken. With reserve it
 * takes in any case, and the caller issues the request after the wait
 * without asking again: tokens earned while it waits go to buckets in
 * debt, so a thread that wakes late loses none of them (asking again,
 * its request would find a full bucket that had dropped what came
 * beyond it, and the rate would fall short by the wake-up latency).
 * Locks them in array order: callers list a disk's own limiter before
 * its group's, always. */
uint64_t ratelim_take(struct ratelim *const *rl, unsigned n, uint64_t bytes, uint64_t now_ns,
		      bool reserve);
/* Give back what a reserving take took (the limits changed while the
 * request waited and it asks again), up to each bucket's size. */
void ratelim_refund(struct ratelim *const *rl, unsigned n, uint64_t bytes);

/* What a snapshot keeps of a limiter: per bucket (bytes, then
 * operations) the tokens (negative: a debt), the one-time burst left and
 * the refill carried over. Without it a restored disk would start with a
 * full bucket and its one-time burst again, on every clone. */
struct ratelim_level {
	int64_t tokens;
	uint64_t burst, frac;
};
struct ratelim_levels {
	struct ratelim_level bw, ops;
};
/* rl's levels refilled to now, with bytes and ops given back: requests
 * that paid and were not started, which a snapshot puts back in their
 * rings and which pay again after the restore. rl is not changed (the
 * VM may resume). */
void ratelim_levels_get(struct ratelim *rl, uint64_t now_ns, uint64_t bytes, uint64_t ops,
			struct ratelim_levels *out);
/* rl's buckets from saved levels, refilling from now on. The limits may
 * differ from the snapshot's (a restore given others): a bucket gets at
 * most what a fresh one holds (its size, its one_time_burst), a debt is
 * kept down to -MVM_RATE_SIZE_MAX, a carried refill only under the same
 * refill time. */
void ratelim_levels_set(struct ratelim *rl, const struct ratelim_levels *lv, uint64_t now_ns);
/* Levels in a snapshot section (a disk's, a group's): each bucket's
 * tokens, burst left and carried refill as u64s. A short section sets
 * r->err (the values then zero). */
struct snap_w;
struct snap_r;
void ratelim_levels_put(struct snap_w *w, const struct ratelim_levels *lv);
void ratelim_levels_read(struct snap_r *r, struct ratelim_levels *lv);

#endif
