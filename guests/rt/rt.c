#include "rt.h"

extern unsigned char __heap_base;

static uintptr_t heap_top;
static uintptr_t last_block;
static int oom_flag;
static rt_buf *out_buf; /* the call's output buffer (rt_out_init), which may be cut */
int rt_out_cut;

/* With -mbulk-memory these builtins lower to memory.copy / memory.fill, so they cannot recurse
 * into the functions being defined. */
void *memcpy(void *dst, const void *src, size_t n) {
    __builtin_memcpy(dst, src, n);
    return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
    __builtin_memmove(dst, src, n);
    return dst;
}

void *memset(void *dst, int c, size_t n) {
    __builtin_memset(dst, c, n);
    return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

size_t rt_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

static void *bump(size_t n) {
    if (!heap_top) heap_top = (uintptr_t)&__heap_base;
    uintptr_t p = (heap_top + 7u) & ~(uintptr_t)7u;
    if (n > 0xFFFFFFFFu - p) return 0;
    uintptr_t end = p + n;
    size_t have = __builtin_wasm_memory_size(0) * 65536u;
    if (end > have) {
        size_t pages = (end - have + 65535u) / 65536u;
        if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return 0;
    }
    heap_top = end;
    last_block = p;
    return (void *)p;
}

RT_EXPORT("rt_alloc") void *rt_alloc(uint32_t n) { return bump(n ? n : 1); }

RT_EXPORT("rt_oom") int rt_oom(void) { return oom_flag; }

void *rt_xalloc(size_t n) {
    void *p = bump(n ? n : 1);
    if (!p) {
        oom_flag = 1;
        __builtin_trap();
    }
    return p;
}

/* rt_xrealloc without the trap: 0 when memory cannot grow (p is then unchanged). */
static void *try_realloc(void *p, size_t old_n, size_t new_n) {
    if (p && (uintptr_t)p == last_block) {
        uintptr_t end = (uintptr_t)p + new_n;
        if (new_n > 0xFFFFFFFFu - (uintptr_t)p) return 0;
        size_t have = __builtin_wasm_memory_size(0) * 65536u;
        if (end > have) {
            size_t pages = (end - have + 65535u) / 65536u;
            if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return 0;
        }
        heap_top = end;
        return p;
    }
    void *q = bump(new_n ? new_n : 1);
    if (q && p && old_n) memcpy(q, p, old_n < new_n ? old_n : new_n);
    return q;
}

void *rt_xrealloc(void *p, size_t old_n, size_t new_n) {
    void *q = try_realloc(p, old_n, new_n);
    if (!q) {
        oom_flag = 1;
        __builtin_trap();
    }
    return q;
}

void buf_init(rt_buf *b, size_t cap) {
    b->cap = cap ? cap : 64;
    b->p = rt_xalloc(b->cap);
    b->len = 0;
}

int buf_try_reserve(rt_buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 1;
    if (extra > 0xFFFFFFFFu - b->len) return 0;
    /* Doubling, else exactly what is asked. */
    size_t need = b->len + extra, cap = b->cap * 2;
    if (cap < need) cap = need;
    char *q = try_realloc(b->p, b->len, cap);
    if (!q && cap > need) q = try_realloc(b->p, b->len, cap = need);
    if (!q) return 0;
    b->p = q;
    b->cap = cap;
    return 1;
}

int buf_reserve(rt_buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 1;
    if (b == out_buf && rt_out_cut) return 0;
    if (buf_try_reserve(b, extra)) return 1;
    if (b != out_buf) {
        oom_flag = 1;
        __builtin_trap();
    }
    rt_out_cut = 1; /* the output stops where it stands */
    return 0;
}

void buf_put(rt_buf *b, const void *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void buf_putc(rt_buf *b, char c) {
    if (b->len == b->cap && !buf_reserve(b, 1)) return;
    b->p[b->len++] = c;
}

void buf_puts(rt_buf *b, const char *s) { buf_put(b, s, rt_strlen(s)); }

void buf_put_uint(rt_buf *b, uint64_t v) {
    char tmp[24];
    int i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    buf_put(b, tmp + i, (size_t)(24 - i));
}

void rt_out_init(rt_buf *b, size_t cap) {
    /* The size asked is a guess from the input (csv: twice the text): when memory cannot
     * hold it, start small and let the output grow (or be cut) as it is written. */
    b->cap = cap + 1;
    b->p = cap < 0xFFFFFFF0u ? bump(b->cap) : 0;
    if (!b->p) buf_init(b, 64);
    b->len = 0;
    buf_putc(b, RT_OK);
    out_buf = b;
    rt_out_cut = 0;
}

uint64_t rt_done(rt_buf *b) {
    if (b == out_buf && rt_out_cut) b->p[0] = RT_CUT;
    return ((uint64_t)b->len << 32) | (uint32_t)(uintptr_t)b->p;
}

uint64_t rt_fail(const char *msg) {
    rt_buf b;
    size_t n = rt_strlen(msg);
    buf_init(&b, n + 1);
    buf_putc(&b, RT_ERROR);
    buf_put(&b, msg, n);
    return rt_done(&b);
}

uint64_t rt_fail_buf(rt_buf *msg) {
    rt_buf b;
    buf_init(&b, msg->len + 1);
    buf_putc(&b, RT_ERROR);
    buf_put(&b, msg->p, msg->len);
    return rt_done(&b);
}

int rt_utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        if (n - i <= need) return 0;
        unsigned c1 = s[i + 1];
        if (c1 < lo || c1 > hi) return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += need + 1;
    }
    return 1;
}
