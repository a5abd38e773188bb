/* The wasm backend's epoch ticker as a C thread: one engine epoch tick per period.
 *
 * Why: a native call keeps the GIL while its guest runs (the hand-off to another thread cost
 * more than the overlap bought) and gives it up at the guest's first epoch tick (_native.c).
 * A ticker that needed the GIL (a Python thread) could then never tick while a guest holds
 * it, and a runaway guest would stop every thread of the process until its fuel ran out.
 * This thread never touches Python: it only calls wasmtime_engine_increment_epoch (safe from
 * any thread) on its own clone of the engine, so the engine outlives it whatever the host
 * does with its Engine object.
 *
 * The schedule is the host's _TickClock (backend.py), to the letter: ticks are owed by the
 * monotonic clock since the start, a late wake-up pays all that are owed, and after a stall
 * of more than MAX_CATCH_UP ticks that many are paid and the schedule restarts from now.
 *
 * Each tick moves the engine's epoch and `ticks` together under `lock`; rt_ticker_mark sets
 * a store's deadline and reads `ticks` under the same lock, so a call knows which tick its
 * deadline counts from (there is no reading the engine's epoch in wasmtime's C API).
 *
 * Hazard (fork): the child has no ticker thread, and `lock` may have been held by it at the
 * fork. A child handler bumps `generation`; a ticker from an older generation is not live
 * (calls then release the GIL up front, as without a ticker), is never locked, joined or
 * destroyed, and its engine clone is left alone.
 */
#define _POSIX_C_SOURCE 200809L
#include "_ticker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define MAX_CATCH_UP 1000

struct rt_ticker {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    void *engine; /* our clone: non-NULL exactly while the thread exists and is not joined */
    int64_t period_ns;
    uint64_t ticks; /* under lock */
    int stop;       /* under lock */
    atomic_int running;
    unsigned long generation;
};

static rt_ticker_api fns; /* set once, by rt_native_init, before any ticker exists */
static atomic_ulong fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void in_child(void) { atomic_fetch_add(&fork_generation, 1); }
static void register_atfork(void) { pthread_atfork(NULL, NULL, in_child); }

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int same_process(const rt_ticker *t) {
    return t->generation == atomic_load(&fork_generation);
}

static void *tick_loop(void *arg) {
    rt_ticker *t = arg;
    int64_t start = mono_ns(), paid = 0;
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        int64_t due = start + (paid + 1) * t->period_ns;
        struct timespec at = {(time_t)(due / 1000000000), (long)(due % 1000000000)};
        int rc = pthread_cond_timedwait(&t->wake, &t->lock, &at);
        if (t->stop) break;
        if (rc != 0 && rc != ETIMEDOUT) continue; /* a spurious wake-up: the clock decides */
        int64_t now = mono_ns();
        int64_t owed = (now - start) / t->period_ns - paid;
        if (owed <= 0) continue;
        if (owed > MAX_CATCH_UP) {
            start = now;
            paid = 0;
            owed = MAX_CATCH_UP;
        } else {
            paid += owed;
        }
        for (int64_t i = 0; i < owed; i++) fns.increment_epoch(t->engine);
        t->ticks += (uint64_t)owed;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

void rt_ticker_init(const rt_ticker_api *api) {
    if (!fns.engine_clone) fns = *api;
}

/* A running ticker of (a clone of) engine, one epoch tick per period_ns; NULL on failure. */
rt_ticker *rt_native_ticker_start(void *engine, int64_t period_ns) {
    if (period_ns <= 0 || !engine || !fns.engine_clone) return NULL;
    pthread_once(&atfork_once, register_atfork);
    rt_ticker *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->period_ns = period_ns;
    t->generation = atomic_load(&fork_generation);
    pthread_condattr_t attr;
    int ok = pthread_condattr_init(&attr) == 0;
    ok = ok && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0;
    ok = ok && pthread_cond_init(&t->wake, &attr) == 0;
    pthread_condattr_destroy(&attr);
    if (!ok) {
        free(t);
        return NULL;
    }
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        pthread_cond_destroy(&t->wake);
        free(t);
        return NULL;
    }
    t->engine = fns.engine_clone(engine);
    /* The thread takes no signals: they stay with the threads that handle them. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int created = t->engine && pthread_create(&t->thread, NULL, tick_loop, t) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!created) {
        if (t->engine) fns.engine_delete(t->engine);
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->wake);
        free(t);
        return NULL;
    }
    atomic_store(&t->running, 1);
    return t;
}

/* Stops the thread and drops the engine clone (idempotent); the memory stays until free. */
void rt_native_ticker_stop(rt_ticker *t) {
    atomic_store(&t->running, 0);
    if (!t->engine || !same_process(t)) return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    fns.engine_delete(t->engine);
    t->engine = NULL;
}

/* Stops (if running) and frees: only once nothing can reach t any more. */
void rt_native_ticker_free(rt_ticker *t) {
    if (!t) return;
    rt_native_ticker_stop(t);
    if (same_process(t)) {
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->wake);
    }
    free(t);
}

int rt_ticker_live(rt_ticker *t) { return atomic_load(&t->running) && same_process(t); }

uint64_t rt_ticker_mark(rt_ticker *t, void (*set)(void *, uint64_t), void *ctx, uint64_t delta) {
    pthread_mutex_lock(&t->lock);
    set(ctx, delta);
    uint64_t ticks = t->ticks;
    pthread_mutex_unlock(&t->lock);
    return ticks;
}

uint64_t rt_ticker_ticks(rt_ticker *t) {
    pthread_mutex_lock(&t->lock);
    uint64_t ticks = t->ticks;
    pthread_mutex_unlock(&t->lock);
    return ticks;
}
