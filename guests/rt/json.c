#include "json.h"

typedef struct {
    const char *s, *p, *end;
    int depth, max_depth;
    json_error *e;
    rt_buf *out; /* json_minify: tokens are copied here and no DOM is built */
} parser;

/* What the parse functions return in minify mode, where there is no node: "no error". */
static jv EMITTED;

static jv *fail(parser *ps, const char *msg, const char *at) {
    if (!ps->e->err) {
        ps->e->err = msg;
        ps->e->pos = (size_t)(at - ps->s);
    }
    return 0;
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            ps->p++;
        else
            break;
    }
}

static jv *node(uint8_t t) {
    jv *v = rt_xalloc(sizeof(jv));
    memset(v, 0, sizeof(jv));
    v->t = t;
    return v;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ps->p is just past the opening quote. Strings without escapes point into the source. */
static int parse_string(parser *ps, const char **out, uint32_t *out_len) {
    const char *start = ps->p;
    const char *q = rt_scan_plain(start, ps->end);
    if (q >= ps->end) return fail(ps, "unterminated string", start - 1) != 0;
    if (*q == '"') {
        *out = start;
        *out_len = (uint32_t)(q - start);
        ps->p = q + 1;
        return 1;
    }
    if ((unsigned char)*q < 0x20) return fail(ps, "invalid control character in string", q) != 0;
    /* Slow path: escapes. Decoded bytes never outnumber source bytes. Plain runs between
     * escapes are copied whole. */
    size_t cap = (size_t)(ps->end - start);
    char *o = rt_xalloc(cap);
    size_t n = (size_t)(q - start);
    memcpy(o, start, n);
    for (;;) {
#ifdef __wasm_simd128__
        /* Copy and scan 16 bytes a step (runs between escapes are short: a separate scan
         * and memcpy per run cost more). The store may write past the plain bytes, which the
         * next writes overwrite, but never past o's capacity: n <= q - start (decoding never
         * lengthens), and it runs only while 16 input bytes remain, so n + 16 <= cap. */
        while (ps->end - q >= 16) {
            v128_t v = wasm_v128_load(q);
            wasm_v128_store(o + n, v);
            uint32_t bits = rt_special_mask(v);
            if (bits) {
                unsigned k = (unsigned)__builtin_ctz(bits);
                q += k;
                n += k;
                goto special;
            }
            q += 16;
            n += 16;
        }
#endif
        while (q < ps->end) {
            unsigned char b = (unsigned char)*q;
            if (b == '"' || b == '\\' || b < 0x20) break;
            o[n++] = (char)b;
            q++;
        }
#ifdef __wasm_simd128__
    special:
#endif
        if (q >= ps->end) break;
        unsigned char c = (unsigned char)*q;
        if (c == '"') {
            /* The buffer was sized for the rest of the document; give the unused tail back
             * (it is the newest block), or a document of many escaped strings would
             * allocate quadratic memory. */
            *out = rt_xrealloc(o, cap, n ? n : 1);
            *out_len = (uint32_t)n;
            ps->p = q + 1;
            return 1;
        }
        if (c < 0x20) return fail(ps, "invalid control character in string", q) != 0;
        if (q + 1 >= ps->end) break;
        char esc = q[1];
        switch (esc) {
        case '"': o[n++] = '"'; q += 2; continue;
        case '\\': o[n++] = '\\'; q += 2; continue;
        case '/': o[n++] = '/'; q += 2; continue;
        case 'b': o[n++] = '\b'; q += 2; continue;
        case 'f': o[n++] = '\f'; q += 2; continue;
        case 'n': o[n++] = '\n'; q += 2; continue;
        case 'r': o[n++] = '\r'; q += 2; continue;
        case 't': o[n++] = '\t'; q += 2; continue;
        case 'u': break;
        default: return fail(ps, "invalid escape in string", q) != 0;
        }
        unsigned cp;
        if (ps->end - q < 6 || !hex4(q + 2, &cp)) return fail(ps, "invalid \\u escape", q) != 0;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return fail(ps, "lone UTF-16 surrogate in \\u escape (not representable as UTF-8)", q) != 0;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (ps->end - q < 12 || q[6] != '\\' || q[7] != 'u' || !hex4(q + 8, &lo) || lo < 0xDC00 ||
                lo > 0xDFFF)
                return fail(ps, "lone UTF-16 surrogate in \\u escape (not representable as UTF-8)", q) != 0;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            q += 12;
        } else {
            q += 6;
        }
        n += put_utf8(o + n, cp);
    }
    return fail(ps, "unterminated string", start - 1) != 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* CPython's float() rounds a decimal to the nearest double: from 2**1024 - 2**970 up (halfway
 * past DBL_MAX, which rounds to even: 2**1024) it gives inf, which JSON cannot carry back. Its
 * 309 digits; a number lexeme with a fraction or an exponent at least this big is refused
 * here, where its line and column are known (the host's check of the result cannot name
 * them). Integers are Python ints, never inf. */
#define FLOAT_INF_DIGITS 309
static const char FLOAT_INF_FROM[] =
    "17976931348623158079372897140530341507993413271003782693617377898044496829276475"
    "09466490179775872070963302864166928879109465555478519404026306574886715058206819"
    "08902000708383676273854845817711531764475730270069855571366959622842914819860834"
    "936475292719074168444365510704342711559699508093042880177904174497792";

/* The exponent's value, with its sign, saturated far past any magnitude that matters (the
 * digits of a number fit in memory, so |exponent| beyond 10**12 decides on its own). */
static int64_t exponent_value(const char *p, const char *end) {
    int neg = p < end && *p == '-';
    if (p < end && (*p == '-' || *p == '+')) p++;
    int64_t v = 0;
    for (; p < end && is_digit(*p); p++)
        if (v < 1000000000000LL) v = v * 10 + (*p - '0');
    return neg ? -v : v;
}

/* Cheap and conservative: whether float() could make this number inf at all. The value is
 * below 10**(int_digits + exp), so below that no digit needs a look. */
static int float_may_overflow(size_t int_digits, int64_t exp) {
    return (int64_t)int_digits + exp >= FLOAT_INF_DIGITS;
}

/* Exact: whether the number with integer digits [i, i + ni), fraction digits [f, f + nf) and
 * exponent exp is at least FLOAT_INF_FROM. */
static int float_overflows(const char *i, size_t ni, const char *f, size_t nf, int64_t exp) {
    size_t total = ni + nf, lz = 0;
#define DIGIT(k) ((k) < ni ? i[k] : f[(k) - ni])
    while (lz < total && DIGIT(lz) == '0') lz++;
    if (lz == total) return 0; /* zero */
    /* The value is 0.d1d2... * 10**mag, d1 its first non-zero digit. */
    int64_t mag = (int64_t)ni - (int64_t)lz + exp;
    if (mag != FLOAT_INF_DIGITS) return mag > FLOAT_INF_DIGITS;
    for (size_t k = 0; k < FLOAT_INF_DIGITS; k++) {
        char d = lz + k < total ? DIGIT(lz + k) : '0';
        if (d != FLOAT_INF_FROM[k]) return d > FLOAT_INF_FROM[k];
    }
#undef DIGIT
    return 1; /* equal to it, or longer with the same first digits */
}

static jv *parse_number(parser *ps) {
    const char *start = ps->p, *q = ps->p, *end = ps->end;
    int integral = 1;
    if (q < end && *q == '-') q++;
    if (q < end && end - q >= 8 && memcmp(q, "Infinity", 8) == 0)
        return fail(ps, "Infinity is not JSON (RFC 8259)", start);
    if (q >= end || !is_digit(*q)) return fail(ps, "expecting value", start);
    const char *digits = q;
    if (*q == '0') {
        q++;
    } else {
        while (q < end && is_digit(*q)) q++;
    }
    size_t int_digits = (size_t)(q - digits);
    const char *frac = q;
    size_t frac_digits = 0;
    int64_t exp = 0;
    if (q < end && *q == '.') {
        integral = 0;
        frac = ++q;
        if (q >= end || !is_digit(*q)) return fail(ps, "expecting digits after the decimal point", q);
        while (q < end && is_digit(*q)) q++;
        frac_digits = (size_t)(q - frac);
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        integral = 0;
        const char *e = ++q;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q)) return fail(ps, "expecting digits in the exponent", q);
        while (q < end && is_digit(*q)) q++;
        exp = exponent_value(e, q);
    }
    if (integral && int_digits > JSON_MAX_INT_DIGITS)
        return fail(ps, "integer has more than 4300 digits (CPython's limit)", start);
    if (!integral && float_may_overflow(int_digits, exp) &&
        float_overflows(digits, int_digits, frac, frac_digits, exp))
        return fail(ps, "number out of the float range (magnitude about 1.8e308 or more: "
                        "CPython's float would be inf)", start);
    if (ps->out) {
        buf_put(ps->out, start, (size_t)(q - start));
        ps->p = q;
        return &EMITTED;
    }
    jv *v = node(J_NUM);
    v->s = start;
    v->len = (uint32_t)(q - start);
    ps->p = q;
    return v;
}

static jv *parse_value(parser *ps);

static jv *parse_container(parser *ps, int is_obj) {
    const char *open = ps->p;
    if (++ps->depth > ps->max_depth) return fail(ps, "nesting too deep (limit " JSON_STR(JSON_MAX_DEPTH) " levels)", open);
    ps->p++;
    rt_buf *out = ps->out;
    jv *v = out ? &EMITTED : node(is_obj ? J_OBJ : J_ARR);
    jv **tail = &v->first;
    char close = is_obj ? '}' : ']';
    if (out) buf_putc(out, *open);
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        if (out) buf_putc(out, close);
        return v;
    }
    for (;;) {
        const char *k = 0;
        uint32_t klen = 0;
        if (is_obj) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "expecting property name enclosed in double quotes", ps->p);
            const char *key_open = ps->p++;
            if (!parse_string(ps, &k, &klen)) return 0;
            const char *key_end = ps->p;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expecting ':' delimiter", ps->p);
            if (out) { /* the key as written (escapes and all: it was checked, and the host's
                        * parser decodes it to the same text), without the space before ':' */
                buf_put(out, key_open, (size_t)(key_end - key_open));
                buf_putc(out, ':');
            }
            ps->p++;
        }
        jv *child = parse_value(ps);
        if (!child) return 0;
        if (!out) {
            child->k = k;
            child->klen = klen;
            *tail = child;
            tail = &child->next;
            v->len++;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            if (out) buf_putc(out, ',');
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            if (out) buf_putc(out, close);
            return v;
        }
        return fail(ps, is_obj ? "expecting ',' delimiter or '}'" : "expecting ',' delimiter or ']'",
                    ps->p);
    }
}

static int lit(parser *ps, const char *word, size_t n) {
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return 1;
    }
    return 0;
}

/* A literal's node, or in minify mode the literal copied out. */
static jv *atom(parser *ps, uint8_t t, const char *text, size_t n) {
    if (!ps->out) return node(t);
    buf_put(ps->out, text, n);
    return &EMITTED;
}

static jv *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "expecting value", ps->p);
    switch (*ps->p) {
    case '{': return parse_container(ps, 1);
    case '[': return parse_container(ps, 0);
    case '"': {
        const char *open = ps->p++;
        if (ps->out) {
            const char *text;
            uint32_t len;
            if (!parse_string(ps, &text, &len)) return 0;
            buf_put(ps->out, open, (size_t)(ps->p - open));
            return &EMITTED;
        }
        jv *v = node(J_STR);
        if (!parse_string(ps, &v->s, &v->len)) return 0;
        return v;
    }
    case 't': if (lit(ps, "true", 4)) return atom(ps, J_TRUE, "true", 4); break;
    case 'f': if (lit(ps, "false", 5)) return atom(ps, J_FALSE, "false", 5); break;
    case 'n': if (lit(ps, "null", 4)) return atom(ps, J_NULL, "null", 4); break;
    case 'N':
        if (lit(ps, "NaN", 3)) return fail(ps, "NaN is not JSON (RFC 8259)", ps->p - 3);
        break;
    default: return parse_number(ps);
    }
    return fail(ps, "expecting value", ps->p);
}

static jv *parse_document(const char *s, size_t n, int max_depth, json_error *e, rt_buf *out) {
    parser ps = {s, s, s + n, 0, max_depth, e, out};
    e->err = 0;
    jv *v = parse_value(&ps);
    if (!v) return 0;
    skip_ws(&ps);
    if (ps.p != ps.end) return fail(&ps, "extra data after the JSON value", ps.p);
    return v;
}

jv *json_parse(const char *s, size_t n, int max_depth, json_error *e) {
    return parse_document(s, n, max_depth, e, 0);
}

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The end (just past the closing quote) of the string whose opening quote is at open, for a
 * string the fast path may copy as written; NULL for anything the general parser should
 * judge: a control character, a malformed escape, any surrogate \u escape, no closing
 * quote. Pointers in and out, not through memory: the caller's cursor stays in a local. */
static const char *fast_string_end(const char *open, const char *end) {
    const char *q = open + 1;
    for (;;) {
        q = rt_scan_plain(q, end);
        if (q >= end) return 0;
        if (*q == '"') return q + 1;
        if (*q != '\\' || end - q < 2) return 0; /* a control character, or a lone '\' */
        switch (q[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            q += 2;
            continue;
        case 'u': {
            unsigned cp;
            if (end - q < 6 || !hex4(q + 2, &cp) || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
            q += 6;
            continue;
        }
        default: return 0;
        }
    }
}

/* json_minify's fast path: the same grammar as parse_document as one loop, cursor and output
 * in locals, no node and no per-token call. It accepts a subset of what parse_document
 * accepts (valid documents without surrogate escapes or integers past the digit limit) and
 * writes exactly what it would; on anything else it returns 0 having changed nothing the
 * caller keeps (out->len stays), and the general parser runs from the start, so every error
 * is still reported by the one parser, at the same place with the same message. */
static int minify_fast(rt_buf *out, const char *s, size_t n, int max_depth) {
    const char *p = s, *end = s + n;
    /* Tokens as written minus whitespace: never longer than the input. Where memory cannot
     * hold that much, the general parser writes (and the output is cut, see buf_reserve). */
    if (!buf_try_reserve(out, n)) return 0;
    char *o = out->p + out->len;
    uint8_t is_obj[JSON_MAX_DEPTH + 1];
    int depth = 0;
    if (max_depth > JSON_MAX_DEPTH) return 0;
value:
    while (p < end && is_ws(*p)) p++;
    if (p >= end) return 0;
    switch (*p) {
    case '{':
    case '[': {
        char open = *p++, close = open == '{' ? '}' : ']';
        if (++depth > max_depth) return 0;
        is_obj[depth] = open == '{';
        *o++ = open;
        while (p < end && is_ws(*p)) p++;
        if (p < end && *p == close) {
            *o++ = close;
            p++;
            depth--;
            goto after_value;
        }
        if (open == '{') goto key;
        goto value;
    }
    case '"': {
        const char *q = fast_string_end(p, end);
        if (!q) return 0;
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        p = q;
        goto after_value;
    }
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0) return 0;
        memcpy(o, p, 4), o += 4, p += 4;
        goto after_value;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0) return 0;
        memcpy(o, p, 5), o += 5, p += 5;
        goto after_value;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0) return 0;
        memcpy(o, p, 4), o += 4, p += 4;
        goto after_value;
    default: {
        /* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as parse_number reads it. */
        const char *start = p;
        int integral = 1;
        if (*p == '-') p++;
        if (p >= end || !is_digit(*p)) return 0;
        const char *digits = p;
        if (*p == '0')
            p++;
        else
            while (p < end && is_digit(*p)) p++;
        size_t int_digits = (size_t)(p - digits);
        int64_t exp = 0;
        if (int_digits > JSON_MAX_INT_DIGITS) integral = 2; /* only an error if integral */
        if (p < end && *p == '.') {
            integral = 0;
            p++;
            if (p >= end || !is_digit(*p)) return 0;
            while (p < end && is_digit(*p)) p++;
        }
        if (p < end && (*p == 'e' || *p == 'E')) {
            integral = 0;
            const char *e = ++p;
            if (p < end && (*p == '+' || *p == '-')) p++;
            if (p >= end || !is_digit(*p)) return 0;
            while (p < end && is_digit(*p)) p++;
            exp = exponent_value(e, p);
        }
        if (integral == 2) return 0;
        /* A float that might be inf: the general parser decides (and names its place). */
        if (!integral && float_may_overflow(int_digits, exp)) return 0;
        memcpy(o, start, (size_t)(p - start));
        o += p - start;
        goto after_value;
    }
    }
after_value:
    while (p < end && is_ws(*p)) p++;
    if (depth == 0) {
        if (p != end) return 0;
        out->len = (size_t)(o - out->p);
        return 1;
    }
    if (p >= end) return 0;
    if (*p == ',') {
        *o++ = ',';
        p++;
        if (is_obj[depth]) goto key;
        goto value;
    }
    if (*p != (is_obj[depth] ? '}' : ']')) return 0;
    *o++ = *p++;
    depth--;
    goto after_value;
key:
    while (p < end && is_ws(*p)) p++;
    if (p >= end || *p != '"') return 0;
    {
        const char *q = fast_string_end(p, end);
        if (!q) return 0;
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        p = q;
    }
    while (p < end && is_ws(*p)) p++;
    if (p >= end || *p != ':') return 0;
    *o++ = ':';
    p++;
    goto value;
}

int json_minify(rt_buf *out, const char *s, size_t n, int max_depth, json_error *e) {
    if (minify_fast(out, s, n, max_depth)) return 1;
    return parse_document(s, n, max_depth, e, out) != 0;
}

void json_error_message(rt_buf *out, const char *prefix, const char *s, size_t n, json_error *e) {
    size_t line = 1, col = 1, chars = 0;
    size_t pos = e->pos < n ? e->pos : n;
    for (size_t i = 0; i < pos; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) == 0x80) continue; /* count characters, as CPython does, not bytes */
        chars++;
        if (c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    buf_init(out, 128);
    buf_puts(out, prefix);
    buf_puts(out, e->err ? e->err : "invalid JSON");
    buf_puts(out, ": line ");
    buf_put_uint(out, line);
    buf_puts(out, " column ");
    buf_put_uint(out, col);
    buf_puts(out, " (char ");
    buf_put_uint(out, chars);
    buf_puts(out, ")");
}

static const char HEX[] = "0123456789abcdef";

void json_write_string(rt_buf *b, const char *s, size_t n) {
    buf_try_reserve(b, n + 2); /* a hint: escapes add more, through buf_put */
    buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        i = (size_t)(rt_scan_plain(s + i, s + n) - s);
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        buf_put(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': buf_put(b, "\\\"", 2); break;
        case '\\': buf_put(b, "\\\\", 2); break;
        case '\n': buf_put(b, "\\n", 2); break;
        case '\r': buf_put(b, "\\r", 2); break;
        case '\t': buf_put(b, "\\t", 2); break;
        case '\b': buf_put(b, "\\b", 2); break;
        case '\f': buf_put(b, "\\f", 2); break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', HEX[c >> 4], HEX[c & 15]};
            buf_put(b, u, 6);
        }
        }
    }
    buf_put(b, s + run, n - run);
    buf_putc(b, '"');
}

static int key_less(const jv *a, const jv *b) {
    uint32_t n = a->klen < b->klen ? a->klen : b->klen;
    int c = memcmp(a->k, b->k, n);
    /* UTF-8 byte order is code point order, which is how Python sorts str keys. */
    return c < 0 || (c == 0 && a->klen < b->klen);
}

/* Stable bottom-up merge sort of the members, like Python's sorted(). */
static const jv **sorted_members(const jv *v) {
    size_t n = v->len;
    const jv **a = rt_xalloc(n * sizeof(jv *));
    const jv **tmp = rt_xalloc(n * sizeof(jv *));
    size_t i = 0;
    for (const jv *c = v->first; c; c = c->next) a[i++] = c;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t x = lo, y = mid, k = lo;
            while (x < mid && y < hi) tmp[k++] = key_less(a[y], a[x]) ? a[y++] : a[x++];
            while (x < mid) tmp[k++] = a[x++];
            while (y < hi) tmp[k++] = a[y++];
        }
        const jv **t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

static void newline(rt_buf *b, int indent, int level) {
    size_t n = (size_t)indent * (size_t)level;
    if (!buf_reserve(b, n + 1)) return;
    b->p[b->len++] = '\n';
    memset(b->p + b->len, ' ', n);
    b->len += n;
}

static void write_value(rt_buf *b, const jv *v, int indent, int sort_keys, int level) {
    switch (v->t) {
    case J_NULL: buf_put(b, "null", 4); return;
    case J_TRUE: buf_put(b, "true", 4); return;
    case J_FALSE: buf_put(b, "false", 5); return;
    case J_NUM: buf_put(b, v->s, v->len); return;
    case J_STR: json_write_string(b, v->s, v->len); return;
    default: break;
    }
    int is_obj = v->t == J_OBJ;
    if (!v->len) {
        buf_put(b, is_obj ? "{}" : "[]", 2);
        return;
    }
    buf_putc(b, is_obj ? '{' : '[');
    const jv **order = is_obj && sort_keys ? sorted_members(v) : 0;
    const jv *c = v->first;
    for (uint32_t i = 0; i < v->len && !rt_out_cut; i++) {
        const jv *item = order ? order[i] : c;
        if (i) buf_putc(b, ',');
        if (indent) newline(b, indent, level + 1);
        if (is_obj) {
            json_write_string(b, item->k, item->klen);
            if (indent)
                buf_put(b, ": ", 2);
            else
                buf_putc(b, ':');
        }
        write_value(b, item, indent, sort_keys, level + 1);
        if (c) c = c->next;
    }
    if (indent) newline(b, indent, level);
    buf_putc(b, is_obj ? '}' : ']');
}

void json_write(rt_buf *b, const jv *v, int indent, int sort_keys) {
    write_value(b, v, indent, sort_keys, 0);
}

jv *json_get(const jv *obj, const char *key) {
    if (!obj || obj->t != J_OBJ) return 0;
    size_t n = rt_strlen(key);
    jv *found = 0;
    /* The last duplicate wins, as in Python's dict. */
    for (jv *c = obj->first; c; c = c->next)
        if (c->klen == n && memcmp(c->k, key, n) == 0) found = c;
    return found;
}

int json_get_bool(const jv *obj, const char *key, int *out) {
    jv *v = json_get(obj, key);
    *out = 0;
    if (!v || v->t == J_NULL) return 0;
    if (v->t == J_TRUE) *out = 1;
    else if (v->t != J_FALSE) return -1;
    return *out;
}

/* The top-level member of the arguments object whose value holds byte pos, as [*k, *k+*kn):
 * 0 when pos is not inside one. The host wrote the text (valid JSON but for what the parser
 * refused at pos), so a scan of strings and brackets is enough. */
static int arg_at(const char *in, size_t pos, const char **k, size_t *kn) {
    int depth = 0, found = 0;
    for (size_t i = 0; i < pos; i++) {
        char c = in[i];
        if (c == '"') {
            size_t j = i + 1;
            while (j < pos && in[j] != '"') j += in[j] == '\\' ? 2 : 1;
            /* A string at depth 1 followed by ':' is a key. */
            size_t after = j + 1;
            while (after < pos && is_ws(in[after])) after++;
            if (depth == 1 && after < pos && in[after] == ':') {
                *k = in + i + 1;
                *kn = j - i - 1;
                found = 1;
            }
            i = j;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return found && depth >= 1;
}

jv *rt_args(const char *in, uint32_t n, uint64_t *fail) {
    json_error e;
    /* The host serialises the arguments; a little headroom over the data depth limit leaves
     * room for the arguments object that wraps the data. */
    jv *v = json_parse(in, n, JSON_MAX_DEPTH + 2, &e);
    if (!v) {
        /* The text is the host's encoding, not the caller's: name the argument and the rule,
         * not a line and column nobody wrote ("argument 'data': nesting too deep"). */
        const char *k;
        size_t kn;
        rt_buf msg;
        if (arg_at(in, e.pos < n ? e.pos : n, &k, &kn)) {
            buf_init(&msg, kn + 96);
            buf_puts(&msg, "argument '");
            buf_put(&msg, k, kn);
            buf_puts(&msg, "': ");
            buf_puts(&msg, e.err);
        } else {
            json_error_message(&msg, "arguments are not valid JSON: ", in, n, &e);
        }
        *fail = rt_fail_buf(&msg);
        return 0;
    }
    if (v->t != J_OBJ) {
        *fail = rt_fail("arguments must be a JSON object");
        return 0;
    }
    return v;
}

jv *rt_arg_string(const jv *args, const char *key, uint64_t *fail) {
    jv *v = json_get(args, key);
    if (!v || v->t != J_STR) {
        rt_buf msg;
        buf_init(&msg, 64);
        buf_puts(&msg, "argument '");
        buf_puts(&msg, key);
        buf_puts(&msg, v ? "' must be a string" : "' is required");
        *fail = rt_fail_buf(&msg);
        return 0;
    }
    return v;
}
