/* The epoch ticker in C (_ticker.c), shared with _native.c. */
#ifndef RT_TICKER_H
#define RT_TICKER_H

#include <stdint.h>

typedef struct rt_ticker rt_ticker;

/* The wasmtime functions the ticker calls (their addresses come from the host, as rt_api's). */
typedef struct {
    void *(*engine_clone)(void *);
    void (*engine_delete)(void *);
    void (*increment_epoch)(void *);
} rt_ticker_api;

/* A running ticker of (a clone of) engine, one epoch tick per period_ns; NULL on failure. */
rt_ticker *rt_ticker_new(const rt_ticker_api *fns, void *engine, int64_t period_ns);
/* Stops the thread and drops the engine clone (idempotent); the memory stays until free. */
void rt_ticker_stop(rt_ticker *t);
/* Stops (if running) and frees: only once nothing can reach t any more. */
void rt_ticker_free(rt_ticker *t);
/* 1 while its thread ticks in this process (0 once stopped, and in a forked child). */
int rt_ticker_live(rt_ticker *t);
/* set(ctx, delta) and the tick count, together under the ticker's lock: the count then says
 * exactly which engine epoch the deadline was set against. */
uint64_t rt_ticker_mark(rt_ticker *t, void (*set)(void *, uint64_t), void *ctx, uint64_t delta);
/* Ticks since the start; the engine's epoch moved with each, under the same lock. */
uint64_t rt_ticker_ticks(rt_ticker *t);

#endif
