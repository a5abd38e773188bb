/* The epoch ticker in C (_ticker.c), shared with _native.c. */
#ifndef RT_TICKER_H
#define RT_TICKER_H

#include <stdint.h>

typedef struct rt_ticker rt_ticker;

/* The wasmtime functions the ticker calls (rt_api's, from the host); set once at init. */
typedef struct {
    void *(*engine_clone)(void *);
    void (*engine_delete)(void *);
    void (*increment_epoch)(void *);
} rt_ticker_api;

void rt_ticker_init(const rt_ticker_api *fns);
/* The host's: rt_native_ticker_start(engine, period_ns), _stop(t) and _free(t) (_ticker.c). */
/* 1 while its thread ticks in this process (0 once stopped, and in a forked child). */
int rt_ticker_live(rt_ticker *t);
/* set(ctx, delta) and the tick count, together under the ticker's lock: the count then says
 * exactly which engine epoch the deadline was set against. */
uint64_t rt_ticker_mark(rt_ticker *t, void (*set)(void *, uint64_t), void *ctx, uint64_t delta);
/* Ticks since the start; the engine's epoch moved with each, under the same lock. */
uint64_t rt_ticker_ticks(rt_ticker *t);

#endif
