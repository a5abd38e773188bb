/* One wasm call in one foreign call: store, limits, fuel, epoch deadline, pre-linked
 * instantiation, rt_alloc, the input copy, the tool call, usage and the output copy.
 *
 * Why: from Python each of those steps is a ctypes call (~1 us of argument conversion, a GIL
 * release and re-acquire, a Python frame around it); a call made ~20 of them, more time than
 * wasmtime spent on its own work. Here the whole sequence runs with the GIL released once, so
 * two threads' calls overlap almost completely.
 *
 * This file links against nothing. It reaches wasmtime through function pointers the host
 * hands to rt_native_init (the same symbols of the libwasmtime that wasmtime-py loaded, whose
 * C signatures the host checked against wasmtime-py's own declarations), and it declares the
 * few structs it passes around with the layouts of that wasmtime; rt_native_layout reports
 * them so the host refuses this helper when they differ from wasmtime-py's ctypes view.
 *
 * Hazards (everything the guest returns is hostile):
 * - the guest's rt_alloc pointer and its (out_ptr, out_len) are bounds-checked against the
 *   memory's current size, in 64-bit arithmetic (no wrap), before any copy;
 * - the output size is checked against the caller's limit before it is copied or allocated;
 * - the memory's base address is fetched after the last call into the guest (memory.grow
 *   may move it);
 * - the store is deleted on every path out of rt_native_call, exactly once; wasm_trap_t and
 *   wasmtime_error_t objects are handed to the caller, who owns (and frees) them.
 *
 * The GIL (a caller that passes gil_save/gil_restore: the accelerator's wasm_call; the ctypes
 * path passes none, ctypes releases it around the whole call). Handing the GIL to another
 * thread for a guest's ~25 us run cost two threads more than the overlap bought: every call
 * moved both threads' Python objects between cores. So the call keeps the GIL while its
 * guest runs, and gives it up at the guest's first epoch tick, from wasmtime's epoch-deadline
 * callback (on_tick): a short call never hands the GIL over, a long one holds it for at most
 * one tick. This needs a tick source that never needs the GIL: the C ticker (_ticker.c),
 * passed as `ticker`; without a live one (none, stopped, or a forked child's) the GIL is
 * given up before the call starts, as before. The deadline is unchanged: the store's first
 * deadline is one tick, and on_tick extends it to `epoch_deadline` ticks counted from the
 * tick the first one was set against (rt_ticker_mark); at that point it stops the guest with
 * an error, which this file turns into the interrupt trap an epoch deadline has always been.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_ticker.h"

typedef struct { uint64_t store_id; void *priv; } rt_func;
typedef struct { struct { uint64_t store_id; uint32_t priv1; } a; uint32_t priv2; } rt_memory;
typedef struct {
    uint8_t kind;
    union { rt_func func; rt_memory memory; void *shared; uint8_t raw[24]; } of;
} rt_extern;
typedef struct { uint64_t store_id; size_t priv; } rt_instance;
typedef union { int32_t i32; int64_t i64; uint8_t v128[16]; void *ref; } rt_val_raw;

enum { KIND_FUNC = 0, KIND_MEMORY = 3 };

typedef void *(*store_new_fn)(void *, void *, void *);
typedef void *(*store_context_fn)(void *);
typedef void (*store_limiter_fn)(void *, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*store_delete_fn)(void *);
typedef void *(*set_fuel_fn)(void *, uint64_t);
typedef void *(*get_fuel_fn)(void *, uint64_t *);
typedef void (*set_epoch_deadline_fn)(void *, uint64_t);
typedef void *(*instantiate_fn)(void *, void *, rt_instance *, void **);
typedef _Bool (*export_get_fn)(void *, const rt_instance *, const char *, size_t, rt_extern *);
typedef void *(*call_unchecked_fn)(void *, const rt_func *, rt_val_raw *, size_t, void **);
typedef uint8_t *(*memory_data_fn)(void *, const rt_memory *);
typedef size_t (*memory_size_fn)(void *, const rt_memory *);
typedef void (*delete_fn)(void *);
typedef void *(*tick_cb)(void *, void *, uint64_t *, uint8_t *);
typedef void (*epoch_callback_fn)(void *, tick_cb, void *, void (*)(void *));
typedef void *(*error_new_fn)(const char *);
typedef void *(*trap_new_code_fn)(uint8_t);

/* The order of the pointers rt_native_init takes (the host passes them in this order). */
typedef struct {
    store_new_fn store_new;
    store_context_fn store_context;
    store_limiter_fn store_limiter;
    store_delete_fn store_delete;
    set_fuel_fn set_fuel;
    get_fuel_fn get_fuel;
    set_epoch_deadline_fn set_epoch_deadline;
    instantiate_fn instantiate;
    export_get_fn export_get;
    call_unchecked_fn call_unchecked;
    memory_data_fn memory_data;
    memory_size_fn memory_size;
    delete_fn error_delete;
    delete_fn trap_delete;
    epoch_callback_fn epoch_callback;
    error_new_fn error_new;
    trap_new_code_fn trap_new_code;
    void *(*engine_clone)(void *);
    void (*engine_delete)(void *);
    void (*increment_epoch)(void *);
} rt_api;

static rt_api api;

/* Where a call stopped; the host maps each to its typed error. */
enum {
    RT_OK = 0,
    RT_NO_STORE = 1,       /* wasmtime could not create the store */
    RT_FUEL_ERROR = 2,     /* set_fuel failed: error */
    RT_ERROR = 3,          /* a wasmtime error while running: error */
    RT_TRAP = 4,           /* a trap: trap (oom_flag, fuel_left and memory_size are set) */
    RT_NO_EXPORT = 5,      /* memory, rt_alloc or the tool is missing or of the wrong kind */
    RT_ALLOC_FAILED = 6,   /* rt_alloc returned 0 */
    RT_BAD_INPUT_PTR = 7,  /* rt_alloc's pointer + the input does not fit in memory */
    RT_BAD_OUTPUT = 8,     /* empty or out-of-bounds output */
    RT_OUTPUT_TOO_LARGE = 9, /* out_buf holds the body's first body_len (<= RT_PREVIEW) bytes */
    RT_NO_HOST_MEMORY = 10, /* malloc of the output copy failed */
};

/* Bytes of an output too large that are copied for the error's preview. */
#define RT_PREVIEW 1024
/* WASMTIME_TRAP_CODE_INTERRUPT (the host checks it against wasmtime-py's TrapCode). */
#define RT_TRAP_INTERRUPT 10

typedef struct {
    /* in */
    void *engine;
    void *pre;
    int64_t memory_bytes;
    int64_t table_elements;
    uint64_t fuel;
    uint64_t epoch_deadline;
    const char *export_name;
    size_t export_len;
    const uint8_t *input;
    uint64_t input_len;
    uint64_t max_output; /* the largest out_len accepted (status byte included) */
    uint8_t *out_buf;    /* the caller's buffer for the output body ... */
    uint64_t out_cap;    /* ... of this many bytes; a longer body is malloc'd instead */
    int32_t has_oom;
    /* out */
    int32_t status;
    int32_t oom_flag; /* rt_oom() after a trap: 1, 0, or -1 (none, or it failed) */
    int32_t has_memory; /* the instance exports its memory */
    void *error;      /* wasmtime_error_t *, the caller's to free */
    void *trap;       /* wasm_trap_t *, the caller's to free */
    uint64_t fuel_left;
    uint64_t memory_size;
    uint64_t packed;  /* the tool's raw i64 result */
    uint8_t *output;  /* the body (output after its status byte) when it did not fit out_buf:
                       * malloc'd, free with rt_native_free; NULL when it is in out_buf */
    int64_t cpu_ns;   /* this thread's CPU time over the call */
    int64_t wall_ns;  /* monotonic wall time over the call */
    int32_t may_overflow; /* rt_native_may_overflow of the body */
    int32_t out_status;   /* the output's status byte (RT_OK status only) */
    uint64_t body_len;    /* out_len - 1 (RT_OK status only) */
    /* in: the GIL's release and re-take (NULL: the caller released it) and the C ticker */
    void *(*gil_save)(void);
    void (*gil_restore)(void *);
    rt_ticker *ticker;
} rt_call;

/* One call's hold on the GIL (see the top of this file). */
typedef struct {
    void *(*save)(void);
    rt_ticker *ticker; /* live at the call's start: the GIL is held until its first tick */
    void *tstate;      /* the saved thread state once the GIL is given up */
    uint64_t start;    /* the ticker's count when the first deadline was set */
    uint64_t deadline; /* epoch_deadline, in ticks from start */
    int interrupted;   /* on_tick stopped the guest */
} rt_hold;

/* Once per process (the host loads under a lock): every backend passes the same addresses
 * (one libwasmtime per process), and calls already running in other threads read api. */
void rt_native_init(const rt_api *fns) {
    if (api.store_new) return;
    api = *fns;
    rt_ticker_api ticker = {api.engine_clone, api.engine_delete, api.increment_epoch};
    rt_ticker_init(&ticker);
}

void rt_native_free(void *p) { free(p); }

/* sizeof/offsetof of everything shared with wasmtime and with the host's ctypes view. */
size_t rt_native_layout(size_t *out, size_t n) {
    size_t v[] = {
        sizeof(rt_extern), offsetof(rt_extern, of), sizeof(rt_func), sizeof(rt_memory),
        sizeof(rt_instance), sizeof(rt_val_raw), sizeof(rt_api), sizeof(rt_call),
        /* every rt_call field, in declaration order */
        offsetof(rt_call, engine), offsetof(rt_call, pre), offsetof(rt_call, memory_bytes),
        offsetof(rt_call, table_elements), offsetof(rt_call, fuel),
        offsetof(rt_call, epoch_deadline), offsetof(rt_call, export_name),
        offsetof(rt_call, export_len), offsetof(rt_call, input), offsetof(rt_call, input_len),
        offsetof(rt_call, max_output), offsetof(rt_call, out_buf), offsetof(rt_call, out_cap),
        offsetof(rt_call, has_oom), offsetof(rt_call, status), offsetof(rt_call, oom_flag),
        offsetof(rt_call, has_memory), offsetof(rt_call, error), offsetof(rt_call, trap),
        offsetof(rt_call, fuel_left), offsetof(rt_call, memory_size), offsetof(rt_call, packed),
        offsetof(rt_call, output), offsetof(rt_call, cpu_ns), offsetof(rt_call, wall_ns),
        offsetof(rt_call, may_overflow), offsetof(rt_call, out_status),
        offsetof(rt_call, body_len), offsetof(rt_call, gil_save),
        offsetof(rt_call, gil_restore), offsetof(rt_call, ticker), RT_TRAP_INTERRUPT,
    };
    size_t count = sizeof(v) / sizeof(v[0]);
    for (size_t i = 0; i < n && i < count; i++) out[i] = v[i];
    return count;
}

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* _overflow.c: 1 unless no number in [p, p+n) can be a float outside the double range. */
int32_t rt_native_may_overflow(const uint8_t *p, size_t n);

static int get_export(void *ctx, const rt_instance *inst, const char *name, size_t len,
                      int kind, rt_extern *out) {
    return api.export_get(ctx, inst, name, len, out) && out->kind == kind;
}

/* The outcome of a wasmtime call that may fail with an error or a trap: RT_OK, or the
   error/trap kept in c for the host to map and free. */
static int outcome(rt_call *c, void *err, void *trap) {
    if (err) {
        c->error = err;
        return RT_ERROR;
    }
    if (trap) {
        c->trap = trap;
        return RT_TRAP;
    }
    return RT_OK;
}

/* Calls func with up to two i32 arguments; returns RT_OK, RT_ERROR or RT_TRAP. */
static int call2(void *ctx, const rt_func *func, int32_t a, int32_t b, rt_val_raw *res,
                 rt_call *c) {
    rt_val_raw raw[2];
    memset(raw, 0, sizeof raw);
    raw[0].i32 = a;
    raw[1].i32 = b;
    void *trap = NULL;
    int st = outcome(c, api.call_unchecked(ctx, func, raw, 2, &trap), trap);
    if (st == RT_OK) *res = raw[0];
    return st;
}

static int run(void *ctx, rt_call *c, rt_instance *inst, rt_memory *mem, int *have_mem) {
    void *trap = NULL;
    int st = outcome(c, api.instantiate(c->pre, ctx, inst, &trap), trap);
    if (st != RT_OK) return st;
    rt_extern item;
    if (!get_export(ctx, inst, "memory", 6, KIND_MEMORY, &item)) return RT_NO_EXPORT;
    *mem = item.of.memory;
    *have_mem = 1;
    if (!get_export(ctx, inst, "rt_alloc", 8, KIND_FUNC, &item)) return RT_NO_EXPORT;
    rt_func alloc = item.of.func;
    if (!get_export(ctx, inst, c->export_name, c->export_len, KIND_FUNC, &item))
        return RT_NO_EXPORT;
    rt_func tool = item.of.func;

    rt_val_raw res;
    st = call2(ctx, &alloc, (int32_t)(uint32_t)c->input_len, 0, &res, c);
    if (st != RT_OK) return st;
    uint64_t ptr = (uint32_t)res.i32;
    if (!ptr) return RT_ALLOC_FAILED;
    uint64_t size = api.memory_size(ctx, mem);
    if (ptr + c->input_len > size) return RT_BAD_INPUT_PTR;
    if (c->input_len) memcpy(api.memory_data(ctx, mem) + ptr, c->input, c->input_len);

    st = call2(ctx, &tool, (int32_t)(uint32_t)ptr, (int32_t)(uint32_t)c->input_len, &res, c);
    if (st != RT_OK) return st;
    c->packed = (uint64_t)res.i64;
    uint64_t out_ptr = c->packed & 0xFFFFFFFFu, out_len = c->packed >> 32;
    size = api.memory_size(ctx, mem);
    c->memory_size = size;
    if (out_len == 0 || out_ptr + out_len > size) return RT_BAD_OUTPUT;
    const uint8_t *out = api.memory_data(ctx, mem) + out_ptr;
    if (out_len > c->max_output) {
        /* The output's head, for the error's preview (DESIGN: output_too_large carries a
         * truncated preview): at most RT_PREVIEW bytes of the body into the caller's
         * buffer, never malloc'd; out_status and body_len say what was copied. */
        uint64_t head = out_len - 1 < RT_PREVIEW ? out_len - 1 : RT_PREVIEW;
        if (head > c->out_cap) head = c->out_cap;
        memcpy(c->out_buf, out + 1, head);
        c->out_status = out[0];
        c->body_len = head;
        return RT_OUTPUT_TOO_LARGE;
    }
    uint64_t body_len = out_len - 1;
    uint8_t *dst = c->out_buf;
    if (body_len > c->out_cap) {
        dst = malloc(body_len);
        if (!dst) return RT_NO_HOST_MEMORY;
        c->output = dst;
    }
    memcpy(dst, out + 1, body_len);
    c->out_status = out[0];
    c->body_len = body_len;
    c->may_overflow = rt_native_may_overflow(dst, body_len);
    return RT_OK;
}

static int32_t call(rt_call *c, rt_hold *h);

/* Returns c->status. On every status the store is gone when this returns, and the GIL is
 * held again if the caller held it. */
int32_t rt_native_call(rt_call *c) {
    rt_hold h;
    memset(&h, 0, sizeof h);
    if (c->gil_save) {
        if (c->ticker && rt_ticker_live(c->ticker)) {
            h.save = c->gil_save;
            h.ticker = c->ticker;
        } else {
            h.tstate = c->gil_save(); /* nothing would tick: never hold the GIL */
        }
    }
    int64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID), wall0 = now_ns(CLOCK_MONOTONIC);
    int32_t st = call(c, &h);
    c->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    c->wall_ns = now_ns(CLOCK_MONOTONIC) - wall0;
    if (h.tstate) c->gil_restore(h.tstate);
    return st;
}

/* wasmtime's epoch-deadline callback: the guest reached its current deadline. */
static void *on_tick(void *ctx, void *data, uint64_t *delta, uint8_t *kind) {
    (void)ctx;
    rt_hold *h = data;
    if (!h->tstate) h->tstate = h->save(); /* a long run: let the other threads have it */
    uint64_t elapsed = rt_ticker_ticks(h->ticker) - h->start;
    if (elapsed >= h->deadline) {
        h->interrupted = 1;
        return api.error_new("the wasm guest reached its epoch deadline");
    }
    *delta = h->deadline - elapsed;
    *kind = 0; /* WASMTIME_UPDATE_DEADLINE_CONTINUE */
    return NULL;
}

static int32_t call(rt_call *c, rt_hold *h) {
    c->error = c->trap = NULL;
    c->output = NULL;
    c->out_status = -1;
    c->body_len = 0;
    c->may_overflow = 1;
    c->oom_flag = -1;
    c->has_memory = 0;
    c->fuel_left = c->fuel;
    c->memory_size = 0;
    c->packed = 0;
    void *store = api.store_new(c->engine, NULL, NULL);
    if (!store) return c->status = RT_NO_STORE;
    void *ctx = api.store_context(store);
    api.store_limiter(store, c->memory_bytes, c->table_elements, 1, 1, 1);
    void *err = api.set_fuel(ctx, c->fuel);
    if (err) {
        c->error = err;
        api.store_delete(store);
        return c->status = RT_FUEL_ERROR;
    }
    if (h->ticker) {
        api.epoch_callback(store, on_tick, h, NULL);
        h->deadline = c->epoch_deadline;
        h->start = rt_ticker_mark(h->ticker, api.set_epoch_deadline, ctx,
                                  c->epoch_deadline < 1 ? c->epoch_deadline : 1);
    } else {
        api.set_epoch_deadline(ctx, c->epoch_deadline);
    }

    rt_instance inst;
    rt_memory mem;
    int have_mem = 0;
    memset(&inst, 0, sizeof inst);
    memset(&mem, 0, sizeof mem);
    int st = run(ctx, c, &inst, &mem, &have_mem);
    if (st == RT_ERROR && h->interrupted) {
        /* on_tick's error: the interrupt trap the deadline would have raised by itself. */
        void *trap = api.trap_new_code(RT_TRAP_INTERRUPT);
        if (trap) {
            api.error_delete(c->error);
            c->error = NULL;
            c->trap = trap;
            st = RT_TRAP;
        }
    }

    uint64_t left = 0;
    void *fuel_err = api.get_fuel(ctx, &left);
    if (fuel_err) {
        /* Cannot happen with fuel enabled on the engine; if it does, count all fuel as used
         * rather than report a made-up figure. */
        api.error_delete(fuel_err);
        left = 0;
    }
    c->fuel_left = left;
    c->has_memory = have_mem;
    if (have_mem) c->memory_size = api.memory_size(ctx, &mem);
    if (st == RT_TRAP && have_mem && c->has_oom) {
        rt_extern item;
        if (get_export(ctx, &inst, "rt_oom", 6, KIND_FUNC, &item)) {
            rt_val_raw res;
            rt_call scratch;
            memset(&scratch, 0, sizeof scratch);
            if (call2(ctx, &item.of.func, 0, 0, &res, &scratch) == RT_OK)
                c->oom_flag = (uint32_t)res.i32 == 1;
            /* rt_oom's own trap or error is dropped: the first trap is the one reported. */
            if (scratch.trap) api.trap_delete(scratch.trap);
            if (scratch.error) api.error_delete(scratch.error);
        }
    }
    api.store_delete(store);
    return c->status = st;
}

