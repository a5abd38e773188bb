/* Guest side of the runtime's wasm ABI (version 1); the host side is runtime/backends/wasm/abi.py.
 *
 * Exports every guest has:  memory; rt_alloc(size) -> ptr (0 on failure); rt_oom() -> 1 when the
 * guest trapped because its allocator could not grow memory.  A tool export is
 * f(in_ptr, in_len) -> i64, packed (out_len << 32) | out_ptr.  The input is the call's arguments
 * as a JSON object (UTF-8); the output's first byte is a status (RT_OK, RT_ERROR, RT_EXHAUSTED),
 * the rest the result as JSON (RT_OK) or a UTF-8 message.
 *
 * Memory: a bump allocator, never freed. The host makes a fresh instance per call, so the arena
 * dies with the call and there is nothing to leak or to leave behind for the next call.
 */
#ifndef RT_H
#define RT_H

#include <stddef.h>
#include <stdint.h>

#define RT_EXPORT(name) __attribute__((export_name(name)))

/* RT_CUT: the output buffer could not grow (linear memory is exhausted); the bytes after it
 * are the output's first part. The host sizes it against limits.output_bytes like any output
 * (past it: output_too_large) and otherwise reports resource_limit: a small input that
 * expands (CSV of a wide header, escapes) is reported as the output it would have been. */
enum { RT_OK = 0, RT_ERROR = 1, RT_EXHAUSTED = 2, RT_CUT = 3 };

void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t rt_strlen(const char *s);

/* Never returns NULL: on exhaustion it sets the oom flag and traps (unreachable). */
void *rt_xalloc(size_t n);
/* Grow the block in place when it is the newest allocation, else copy. */
void *rt_xrealloc(void *p, size_t old_n, size_t new_n);

typedef struct {
    char *p;
    size_t len, cap;
} rt_buf;

void buf_init(rt_buf *b, size_t cap);
/* Room for `extra` more bytes: 1, or 0 when b is the call's output buffer and memory could
 * not grow (rt_out_cut is then set, and buf_put / buf_putc write nothing more). Any other
 * buffer traps on exhaustion (rt_xalloc). A caller that writes through b->p itself must
 * check the return. */
int buf_reserve(rt_buf *b, size_t extra);
/* A size hint: 1 with room for `extra` more bytes, else 0 and nothing changed (no trap, no
 * cut). A hint far past what is then written (a fast path's worst case) must not cut an
 * output that, written piece by piece, would have grown further. */
int buf_try_reserve(rt_buf *b, size_t extra);
void buf_put(rt_buf *b, const void *s, size_t n);
void buf_putc(rt_buf *b, char c);
void buf_puts(rt_buf *b, const char *s);
void buf_put_uint(rt_buf *b, uint64_t v);

/* An output buffer starts with the RT_OK status byte; rt_done packs it for the return
 * (status RT_CUT instead when it was cut). One per call: the last one rt_out_init made. */
void rt_out_init(rt_buf *b, size_t cap);
/* Set once the output buffer could not grow: loops that write output stop early. */
extern int rt_out_cut;
uint64_t rt_done(rt_buf *b);
/* A failure result: status RT_ERROR then the message. */
uint64_t rt_fail(const char *msg);
uint64_t rt_fail_buf(rt_buf *msg);

/* The first byte in [p, end) that a JSON string cannot hold as is ('"', '\\' or a control
 * character below 0x20), or end. Built with -msimd128 it tests 16 bytes per step; the vector
 * loads never reach past end (input may sit at the very end of linear memory). */
#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#endif
#ifdef __wasm_simd128__
/* Bit i set when byte i of v is '"', '\\' or below 0x20. */
static inline uint32_t rt_special_mask(v128_t v) {
    v128_t hit = wasm_v128_or(wasm_v128_or(wasm_i8x16_eq(v, wasm_i8x16_splat('"')),
                                           wasm_i8x16_eq(v, wasm_i8x16_splat('\\'))),
                              wasm_u8x16_lt(v, wasm_i8x16_splat(0x20)));
    return (uint32_t)wasm_i8x16_bitmask(hit);
}
#endif
static inline const char *rt_scan_plain(const char *p, const char *end) {
#ifdef __wasm_simd128__
    while (end - p >= 16) {
        uint32_t bits = rt_special_mask(wasm_v128_load(p));
        if (bits) return p + __builtin_ctz(bits);
        p += 16;
    }
#endif
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\' || c < 0x20) break;
        p++;
    }
    return p;
}

/* True when [p, p+n) is valid UTF-8 as Python's strict decoder defines it (no surrogates,
 * no overlong forms, nothing above U+10FFFF). */
int rt_utf8_valid(const unsigned char *p, size_t n);

#endif
