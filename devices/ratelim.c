/* I/O rate limits: see ratelim.h. */
#include "devices/ratelim.h"
#include "devices/virtq_worker.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ULL

/* RATELIM_KEYS names a member of a struct: limits alone are one. */
struct ratelim_holder {
	struct mvm_rate_limit r;
};

void ratelim_bucket_set(struct ratelim_bucket *b, const struct mvm_token_bucket *cfg,
			uint64_t now_ns, bool fresh)
{
	/* A limit set where there was none starts full, as a new one. */
	fresh = fresh || !b->size;
	if (!fresh)
		ratelim_bucket_refill(b, now_ns);
	b->size = cfg->refill_time_ms ? cfg->size : 0;
	b->refill_ns = cfg->refill_time_ms * NS_PER_MS;
	b->burst = b->size ? cfg->one_time_burst : 0;
	if (fresh || b->tokens > (int64_t)b->size)
		b->tokens = (int64_t)b->size;
	b->frac = 0;
	b->last_ns = now_ns;
}

void ratelim_bucket_refill(struct ratelim_bucket *b, uint64_t now_ns)
{
	unsigned __int128 earned;
	uint64_t dt;

	if (!b->size || now_ns <= b->last_ns) {
		/* A clock that went back (it cannot, but callers' clocks are
		 * theirs) earns nothing. */
		return;
	}
	dt = now_ns - b->last_ns;
	b->last_ns = now_ns;
	if (b->tokens >= (int64_t)b->size) {
		b->frac = 0;
		return;
	}
	/* size tokens per refill_ns: dt * size / refill_ns, the remainder
	 * kept so that many short steps earn what one long one would. A dt
	 * longer than what fills the bucket from its debt is cut there (it
	 * would only overflow). */
	earned = (unsigned __int128)dt * b->size + b->frac;
	if (earned / b->refill_ns >= (unsigned __int128)((int64_t)b->size - b->tokens)) {
		b->tokens = (int64_t)b->size;
		b->frac = 0;
		return;
	}
	b->tokens += (int64_t)(earned / b->refill_ns);
	b->frac = (uint64_t)(earned % b->refill_ns);
}

uint64_t ratelim_bucket_wait(const struct ratelim_bucket *b, uint64_t cost)
{
	uint64_t need;
	unsigned __int128 missing, ns;

	if (!b->size)
		return 0;
	need = MIN(cost, b->size);
	if (b->burst >= need || (int64_t)(need - b->burst) <= b->tokens)
		return 0;
	/* The tokens missing, in token*ns, less the part already earned. */
	missing = (unsigned __int128)((int64_t)(need - b->burst) - b->tokens) * b->refill_ns -
		  b->frac;
	ns = (missing + b->size - 1) / b->size;
	return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

void ratelim_bucket_take(struct ratelim_bucket *b, uint64_t cost)
{
	uint64_t from_burst;

	if (!b->size)
		return;
	from_burst = MIN(cost, b->burst);
	b->burst -= from_burst;
	cost -= from_burst;
	/* cost <= MVM_RATE_SIZE_MAX-sized requests: far from int64's end. */
	b->tokens -= (int64_t)MIN(cost, (uint64_t)INT64_MAX / 2);
}

static bool bucket_limits(const struct mvm_token_bucket *b)
{
	return b->size && b->refill_time_ms;
}

bool ratelim_limits(const struct mvm_rate_limit *rate)
{
	return bucket_limits(&rate->bw) || bucket_limits(&rate->ops);
}

static const struct kv_key ratelim_key_list[] = { RATELIM_KEYS(struct ratelim_holder, r) };

static const struct kv_key ratelim_group_key_list[] = {
	{ "id", KV_STRING, KV_OFF(struct mvm_rate_group_config, id, const char *),
	  .max = MVM_ID_MAX, .required = true, .meta = "ID",
	  .help = "the group's name, which disks give as rate_limit_group=ID" },
	RATELIM_KEYS(struct mvm_rate_group_config, rate),
};

const struct kv_table ratelim_group_keys = {
	.what = "rate-limit-group",
	.keys = ratelim_group_key_list,
	.nkeys = sizeof(ratelim_group_key_list) / sizeof(ratelim_group_key_list[0]),
};

/* The combination a table cannot say: size and refill time go together,
 * and a burst needs a bucket. */
static int bucket_check(const struct mvm_token_bucket *b, const char *prefix, const char *what,
			const char *name, char *err, size_t errlen)
{
	if (!b->size != !b->refill_time_ms)
		return err_set(err, errlen, -EINVAL, "%s %s: %s_size %llu with %s_refill_time %llu "
			      "ms; give both (a limit) or neither", what, name, prefix,
			      (unsigned long long)b->size, prefix,
			      (unsigned long long)b->refill_time_ms);
	if (!b->size && b->one_time_burst)
		return err_set(err, errlen, -EINVAL, "%s %s: %s_one_time_burst %llu without "
			      "%s_size; a burst needs a bucket, give %s_size and %s_refill_time",
			      what, name, prefix, (unsigned long long)b->one_time_burst, prefix,
			      prefix, prefix);
	return 0;
}

int ratelim_check(const struct mvm_rate_limit *rate, const char *what, const char *name,
		  char *err, size_t errlen)
{
	const struct kv_table t = {
		.what = what,
		.keys = ratelim_key_list,
		.nkeys = sizeof(ratelim_key_list) / sizeof(ratelim_key_list[0]),
	};
	const struct ratelim_holder h = { .r = *rate };
	int r;

	r = kv_check(&t, &h, name, err, errlen);
	if (!r)
		r = bucket_check(&rate->bw, "bw", what, name, err, errlen);
	return r ? r : bucket_check(&rate->ops, "ops", what, name, err, errlen);
}

static void ratelim_apply(struct ratelim *rl, const struct mvm_rate_limit *rate, uint64_t now,
			  bool fresh)
{
	rl->rate = *rate;
	ratelim_bucket_set(&rl->bw, &rate->bw, now, fresh);
	ratelim_bucket_set(&rl->ops, &rate->ops, now, fresh);
	__atomic_store_n(&rl->on, ratelim_limits(rate), __ATOMIC_RELAXED);
}

int ratelim_init(struct ratelim *rl, const struct mvm_rate_limit *rate, uint64_t now_ns)
{
	int r;

	memset(rl, 0, sizeof(*rl));
	r = pthread_mutex_init(&rl->lock, NULL);
	if (r)
		return -r;
	ratelim_apply(rl, rate, now_ns, true);
	return 0;
}

void ratelim_fini(struct ratelim *rl)
{
	free(rl->members);
	rl->members = NULL;
	rl->nmembers = rl->cap = 0;
	pthread_mutex_destroy(&rl->lock);
}

void ratelim_set(struct ratelim *rl, const struct mvm_rate_limit *rate, uint64_t now_ns)
{
	unsigned i;

	pthread_mutex_lock(&rl->lock);
	ratelim_apply(rl, rate, now_ns, false);
	/* Under the lock: a worker leaves (its disk's end) before its ring
	 * and its eventfd go, and that takes the lock too. */
	for (i = 0; i < rl->nmembers; i++)
		vqw_poke(rl->members[i]);
	pthread_mutex_unlock(&rl->lock);
}

void ratelim_rate_get(struct ratelim *rl, struct mvm_rate_limit *out)
{
	pthread_mutex_lock(&rl->lock);
	*out = rl->rate;
	pthread_mutex_unlock(&rl->lock);
}

int ratelim_join(struct ratelim *rl, struct vqw *w)
{
	int r = 0;

	pthread_mutex_lock(&rl->lock);
	if (rl->nmembers == rl->cap) {
		unsigned cap = rl->cap ? rl->cap * 2 : 4;
		struct vqw **m = realloc(rl->members, cap * sizeof(*m));

		if (!m) {
			r = -ENOMEM;
			goto unlock;
		}
		rl->members = m;
		rl->cap = cap;
	}
	rl->members[rl->nmembers++] = w;
unlock:
	pthread_mutex_unlock(&rl->lock);
	return r;
}

void ratelim_leave(struct ratelim *rl, struct vqw *w)
{
	unsigned i;

	pthread_mutex_lock(&rl->lock);
	for (i = 0; i < rl->nmembers; i++)
		if (rl->members[i] == w) {
			rl->members[i] = rl->members[--rl->nmembers];
			break;
		}
	pthread_mutex_unlock(&rl->lock);
}

uint64_t ratelim_take(struct ratelim *const *rl, unsigned n, uint64_t bytes, uint64_t now_ns,
		      bool reserve)
{
	uint64_t wait = 0, locked = 0;
	unsigned i;

	for (i = 0; i < n && i < 64; i++) {
		struct ratelim *l = rl[i];

		/* `on` is read unlocked: a limit set meanwhile applies from
		 * the next request. */
		if (!l || !__atomic_load_n(&l->on, __ATOMIC_RELAXED))
			continue;
		pthread_mutex_lock(&l->lock);
		locked |= 1ULL << i;
		ratelim_bucket_refill(&l->bw, now_ns);
		ratelim_bucket_refill(&l->ops, now_ns);
		wait = MAX(wait, ratelim_bucket_wait(&l->bw, bytes));
		wait = MAX(wait, ratelim_bucket_wait(&l->ops, 1));
	}
	for (i = 0; i < n && i < 64; i++) {
		if (!(locked >> i & 1))
			continue;
		if (!wait || reserve) {
			ratelim_bucket_take(&rl[i]->bw, bytes);
			ratelim_bucket_take(&rl[i]->ops, 1);
		}
		pthread_mutex_unlock(&rl[i]->lock);
	}
	return wait;
}

static void bucket_refund(struct ratelim_bucket *b, uint64_t cost)
{
	if (!b->size)
		return;
	b->tokens += (int64_t)MIN(cost, (uint64_t)INT64_MAX / 2);
	if (b->tokens > (int64_t)b->size)
		b->tokens = (int64_t)b->size;
}

static void level_get(const struct ratelim_bucket *live, uint64_t now_ns, uint64_t refund,
		      struct ratelim_level *out)
{
	struct ratelim_bucket b = *live;

	ratelim_bucket_refill(&b, now_ns);
	bucket_refund(&b, refund);
	*out = (struct ratelim_level){ .tokens = b.tokens, .burst = b.burst, .frac = b.frac };
}

void ratelim_levels_get(struct ratelim *rl, uint64_t now_ns, uint64_t bytes, uint64_t ops,
			struct ratelim_levels *out)
{
	pthread_mutex_lock(&rl->lock);
	level_get(&rl->bw, now_ns, bytes, &out->bw);
	level_get(&rl->ops, now_ns, ops, &out->ops);
	pthread_mutex_unlock(&rl->lock);
}

static void level_set(struct ratelim_bucket *b, const struct mvm_token_bucket *cfg,
		      const struct ratelim_level *lv, uint64_t now_ns)
{
	if (!b->size)
		return;
	b->tokens = lv->tokens > (int64_t)b->size ? (int64_t)b->size :
		    lv->tokens < -(int64_t)MVM_RATE_SIZE_MAX ? -(int64_t)MVM_RATE_SIZE_MAX :
		    lv->tokens;
	b->burst = MIN(lv->burst, cfg->one_time_burst);
	/* frac is in token*ns of this refill time and this size's bucket:
	 * under another, what was carried is dropped (less than a token). */
	b->frac = lv->frac < b->refill_ns ? lv->frac : 0;
	b->last_ns = now_ns;
}

void ratelim_levels_set(struct ratelim *rl, const struct ratelim_levels *lv, uint64_t now_ns)
{
	pthread_mutex_lock(&rl->lock);
	level_set(&rl->bw, &rl->rate.bw, &lv->bw, now_ns);
	level_set(&rl->ops, &rl->rate.ops, &lv->ops, now_ns);
	pthread_mutex_unlock(&rl->lock);
}

static void level_put(struct snap_w *w, const struct ratelim_level *lv)
{
	snap_put_u64(w, (uint64_t)lv->tokens);
	snap_put_u64(w, lv->burst);
	snap_put_u64(w, lv->frac);
}

static void level_read(struct snap_r *r, struct ratelim_level *lv)
{
	lv->tokens = (int64_t)snap_get_u64(r);
	lv->burst = snap_get_u64(r);
	lv->frac = snap_get_u64(r);
}

void ratelim_levels_put(struct snap_w *w, const struct ratelim_levels *lv)
{
	level_put(w, &lv->bw);
	level_put(w, &lv->ops);
}

void ratelim_levels_read(struct snap_r *r, struct ratelim_levels *lv)
{
	level_read(r, &lv->bw);
	level_read(r, &lv->ops);
}

void ratelim_refund(struct ratelim *const *rl, unsigned n, uint64_t bytes)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		if (!rl[i])
			continue;
		pthread_mutex_lock(&rl[i]->lock);
		bucket_refund(&rl[i]->bw, bytes);
		bucket_refund(&rl[i]->ops, 1);
		pthread_mutex_unlock(&rl[i]->lock);
	}
}
