/* RFC 8785 (JCS) canonical JSON of Python objects, the audit journal line and hash body parts
 * of one record (and its write to the journal), the chained rows of journaled records, audit
 * record times, the call caps walk and the redaction gate, for runtime/_speedups.py.
 *
 * Byte-identical to runtime/audit/_canonical.py's walk (the reference; the differential tests
 * in tests/test_speedups.py compare the two and rfc8785 on generated values) and raising the
 * same exception types. Hazards:
 *
 * - The values walked are caller data: every container is walked under
 *   Py_EnterRecursiveCall and a hard depth cap (the C stack is not the interpreter's); items
 *   are held by strong references while walked, because converting a subclass (int(x),
 *   dict(x), list(x)) runs Python code that may mutate the container being walked.
 * - Lone surrogates cannot be written as UTF-8. The Python walk builds the whole text first
 *   and fails when encoding it, so a value that also holds a NaN raises the NaN's error: the
 *   walk here only notes the surrogate and raises once the walk is done, in the same order.
 * - No global mutable state: the rfc8785 exception classes live in the module state, and
 *   every function holds the GIL throughout (it walks Python objects).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Containers deeper than this raise RecursionError and _canonical hands the value to the
 * Python walk: the interpreter's recursion limit may have been raised past what the C stack
 * of a thread holds (~400 bytes a level here). The default limit (1000) stops it first. */
#define MAX_DEPTH 1000
#define SAFE_INT 9007199254740991LL /* 2**53 - 1 */

typedef struct {
    PyObject *canon_error; /* rfc8785.CanonicalizationError */
    PyObject *int_error;   /* rfc8785.IntegerDomainError */
    PyObject *float_error; /* rfc8785.FloatDomainError */
    PyObject *sha256;      /* hashlib.sha256 */
    PyObject *hexdigest;   /* "hexdigest", interned */
    PyObject *model_names; /* ("__new__", "__dict__", "__pydantic_fields_set__",
                            *  "__pydantic_extra__", "__pydantic_private__"), interned */
} mod_state;

typedef struct {
    char *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
    int bad_text; /* a lone surrogate was seen: raised after the walk */
    int depth;
    mod_state *st;
    char small[1024];
} out_t;

static void out_init(out_t *o, mod_state *st) {
    o->buf = o->small;
    o->len = 0;
    o->cap = (Py_ssize_t)sizeof(o->small);
    o->bad_text = 0;
    o->depth = 0;
    o->st = st;
}

static void out_free(out_t *o) {
    if (o->buf != o->small) {
        PyMem_Free(o->buf);
    }
    o->buf = o->small;
}

static int out_grow(out_t *o, Py_ssize_t need) {
    Py_ssize_t cap = o->cap;
    if (need > PY_SSIZE_T_MAX - o->len) {
        PyErr_NoMemory();
        return -1;
    }
    while (cap < o->len + need) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            cap = o->len + need;
            break;
        }
        cap *= 2;
    }
    char *nb;
    if (o->buf == o->small) {
        nb = PyMem_Malloc((size_t)cap);
        if (nb != NULL) {
            memcpy(nb, o->small, (size_t)o->len);
        }
    } else {
        nb = PyMem_Realloc(o->buf, (size_t)cap);
    }
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = nb;
    o->cap = cap;
    return 0;
}

static inline int out_reserve(out_t *o, Py_ssize_t n) {
    return (o->cap - o->len >= n) ? 0 : out_grow(o, n);
}

static inline int out_put(out_t *o, const char *s, Py_ssize_t n) {
    if (out_reserve(o, n) < 0) {
        return -1;
    }
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static inline int out_char(out_t *o, char c) {
    if (out_reserve(o, 1) < 0) {
        return -1;
    }
    o->buf[o->len++] = c;
    return 0;
}

/* ---- strings -------------------------------------------------------------------------- */

/* 1 for the ASCII characters RFC 8785 §3.2.2.2 escapes: '"', '\\' and U+0000..U+001F. */
static const unsigned char NEEDS_ESCAPE[128] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Bytes an ASCII character's escape adds to it: 1 for the two-character escapes (\" \\ \b
 * \f \n \r \t), 5 for the other control characters (\u00XX), 0 for the rest. */
static const unsigned char ESCAPE_EXTRA[128] = {
    5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 5, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Writes the escape of an ASCII character that needs one at p (room for 6 bytes); returns
 * the position after it. */
static inline char *escape_at(char *p, unsigned int c) {
    static const char hex[] = "0123456789abcdef";
    p[0] = '\\';
    switch (c) {
    case '"': p[1] = '"'; return p + 2;
    case '\\': p[1] = '\\'; return p + 2;
    case '\b': p[1] = 'b'; return p + 2;
    case '\f': p[1] = 'f'; return p + 2;
    case '\n': p[1] = 'n'; return p + 2;
    case '\r': p[1] = 'r'; return p + 2;
    case '\t': p[1] = 't'; return p + 2;
    default:
        p[1] = 'u';
        p[2] = '0';
        p[3] = '0';
        p[4] = hex[(c >> 4) & 0xf];
        p[5] = hex[c & 0xf];
        return p + 6;
    }
}

/* The escape of an ASCII character that needs one; the buffer has room for 6 bytes. */
static inline void put_escape(out_t *o, unsigned int c) {
    o->len = escape_at(o->buf + o->len, c) - o->buf;
}

/* Strings made by deprecated C APIs may not be "ready" (no kind/data yet) before 3.12. */
static inline int str_ready(PyObject *s) {
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(s);
#else
    (void)s;
    return 0;
#endif
}

/* The characters of `s` (a str or a subclass), escaped, without the quotes. */
static int put_str_body(out_t *o, PyObject *s) {
    if (str_ready(s) < 0) {
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (PyUnicode_IS_ASCII(s)) {
        /* Two passes: the escapes' exact extra size, then one tight copy into the space
         * reserved. Why: JSON text inside a string (a json_parse argument, the journal line
         * holding the canonical arguments) has a quote every few characters, and a run-by-run
         * copy (a reserve and a memcpy per run) was several times slower per byte. */
        const unsigned char *p = (const unsigned char *)data;
        Py_ssize_t extra = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            extra += ESCAPE_EXTRA[p[i]];
        }
        if (out_reserve(o, n + extra) < 0) {
            return -1;
        }
        if (extra == 0) {
            memcpy(o->buf + o->len, p, (size_t)n);
            o->len += n;
            return 0;
        }
        char *d = o->buf + o->len;
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = p[i];
            if (ESCAPE_EXTRA[c]) {
                d = escape_at(d, c);
            } else {
                *d++ = (char)c;
            }
        }
        o->len = d - o->buf;
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (out_reserve(o, 6) < 0) {
            return -1;
        }
        char *p = o->buf + o->len;
        if (c < 0x80) {
            if (NEEDS_ESCAPE[c]) {
                put_escape(o, c);
            } else {
                p[0] = (char)c;
                o->len += 1;
            }
        } else if (c < 0x800) {
            p[0] = (char)(0xc0 | (c >> 6));
            p[1] = (char)(0x80 | (c & 0x3f));
            o->len += 2;
        } else if (c < 0x10000) {
            if (c >= 0xd800 && c <= 0xdfff) {
                o->bad_text = 1; /* not UTF-8; raised after the walk */
                continue;
            }
            p[0] = (char)(0xe0 | (c >> 12));
            p[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            p[2] = (char)(0x80 | (c & 0x3f));
            o->len += 3;
        } else {
            p[0] = (char)(0xf0 | (c >> 18));
            p[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            p[2] = (char)(0x80 | ((c >> 6) & 0x3f));
            p[3] = (char)(0x80 | (c & 0x3f));
            o->len += 4;
        }
    }
    return 0;
}

static int put_str(out_t *o, PyObject *s) {
    if (out_char(o, '"') < 0 || put_str_body(o, s) < 0) {
        return -1;
    }
    return out_char(o, '"');
}

/* ---- numbers -------------------------------------------------------------------------- */

/* raise cls(value), as the Python walk does: built now, so that an error inside the
 * constructor (str() of a huge int refused by the digit limit) is the one raised. */
static int raise_with(PyObject *cls, PyObject *value) {
    PyObject *exc = PyObject_CallOneArg(cls, value);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

static int put_ll(out_t *o, long long v) {
    char tmp[24];
    char *end = tmp + sizeof(tmp);
    char *p = end;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + (u % 10));
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        *--p = '-';
    }
    return out_put(o, p, end - p);
}

/* An exact int. Returns 1 when it is outside ±(2**53 - 1) (nothing written), 0 when written. */
static int put_safe_int(out_t *o, PyObject *v, int *err) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    *err = 0;
    if (overflow != 0) {
        return 1;
    }
    if (x == -1 && PyErr_Occurred()) {
        *err = 1;
        return 0;
    }
    if (x > SAFE_INT || x < -SAFE_INT) {
        return 1;
    }
    if (put_ll(o, x) < 0) {
        *err = 1;
    }
    return 0;
}

static int put_int(out_t *o, PyObject *v, int ijson) {
    int err;
    if (put_safe_int(o, v, &err) == 0) {
        return err ? -1 : 0;
    }
    if (!ijson) {
        return raise_with(o->st->int_error, v);
    }
    /* I-JSON: the decimal digits as a string (str() of an exact int is ASCII). */
    PyObject *text = PyObject_Str(v);
    if (text == NULL) {
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = -1;
    if (s != NULL && out_reserve(o, n + 2) == 0) {
        o->buf[o->len++] = '"';
        memcpy(o->buf + o->len, s, (size_t)n);
        o->len += n;
        o->buf[o->len++] = '"';
        rc = 0;
    }
    Py_DECREF(text);
    return rc;
}

/* ECMAScript Number::toString of a finite non-zero double (RFC 8785 §3.2.2.3), from the
 * shortest round-trip digits of repr(): the same digits, placed by ES's rules. */
static int put_es_double(out_t *o, double x) {
    if (x < 0) {
        if (out_char(o, '-') < 0) {
            return -1;
        }
        x = -x;
    }
    char *r = PyOS_double_to_string(x, 'r', 0, 0, NULL);
    if (r == NULL) {
        return -1;
    }
    /* r is "ddd", "ddd.ddd" or "d[.ddd]e±XX". Collect the digits and the place of the
     * decimal point (value = 0.DIGITS * 10**point). */
    char digits[32];
    int k = 0;
    int point = 0;
    int seen_dot = 0;
    int exp10 = 0;
    const char *p = r;
    for (; *p != '\0' && *p != 'e'; p++) {
        if (*p == '.') {
            seen_dot = 1;
            continue;
        }
        if (k == 0 && *p == '0') { /* a leading zero: "0.0001" */
            if (seen_dot) {
                point--;
            }
            continue;
        }
        if (k < (int)sizeof(digits)) {
            digits[k++] = *p;
        }
        if (!seen_dot) {
            point++;
        }
    }
    if (*p == 'e') {
        exp10 = atoi(p + 1);
    }
    PyMem_Free(r);
    while (k > 1 && digits[k - 1] == '0') {
        k--; /* trailing zeros of an integral value: "100" */
    }
    int n = point + exp10;
    char text[64];
    int t = 0;
    if (k <= n && n <= 21) {
        memcpy(text, digits, (size_t)k);
        t = k;
        for (int i = k; i < n; i++) {
            text[t++] = '0';
        }
    } else if (0 < n && n <= 21) {
        memcpy(text, digits, (size_t)n);
        t = n;
        text[t++] = '.';
        memcpy(text + t, digits + n, (size_t)(k - n));
        t += k - n;
    } else if (-6 < n && n <= 0) {
        text[t++] = '0';
        text[t++] = '.';
        for (int i = 0; i < -n; i++) {
            text[t++] = '0';
        }
        memcpy(text + t, digits, (size_t)k);
        t += k;
    } else {
        int e = n - 1;
        text[t++] = digits[0];
        if (k > 1) {
            text[t++] = '.';
            memcpy(text + t, digits + 1, (size_t)(k - 1));
            t += k - 1;
        }
        t += snprintf(text + t, sizeof(text) - (size_t)t, "e%c%d", e < 0 ? '-' : '+', abs(e));
    }
    return out_put(o, text, t);
}

static int put_float(out_t *o, PyObject *f) {
    double x = PyFloat_AS_DOUBLE(f);
    if (!isfinite(x)) {
        return raise_with(o->st->float_error, f);
    }
    if (x == 0) {
        return out_char(o, '0'); /* -0.0 too: JSON has one zero */
    }
    /* An integral value below 2**53 (prices, counts): every double within half a unit of it
     * is itself, so its shortest digits are the integer's, and ES writes them out in full;
     * skips the dtoa. (The bound comes first: the cast is undefined beyond long long.) */
    if (fabs(x) < 9007199254740992.0 && x == (double)(long long)x) {
        return put_ll(o, (long long)x);
    }
    return put_es_double(o, x);
}

/* ---- containers ----------------------------------------------------------------------- */

static int walk(out_t *o, PyObject *obj, int ijson);

typedef struct {
    PyObject *key;
    PyObject *value;
} item_t;

/* The next UTF-16 code unit of s at *i (with *low holding a pending low surrogate), or -1
 * at the end. */
static inline long utf16_next(int kind, const void *data, Py_ssize_t n, Py_ssize_t *i, long *low) {
    if (*low >= 0) {
        long u = *low;
        *low = -1;
        return u;
    }
    if (*i >= n) {
        return -1;
    }
    Py_UCS4 c = PyUnicode_READ(kind, data, *i);
    (*i)++;
    if (c >= 0x10000) {
        c -= 0x10000;
        *low = (long)(0xdc00 | (c & 0x3ff));
        return (long)(0xd800 | (c >> 10));
    }
    return (long)c;
}

/* RFC 8785 key order: UTF-16 code units. Code point order is the same unless a key holds a
 * character outside the BMP (only 4-byte-kind strings do). Keys are distinct. */
static int key_cmp(PyObject *a, PyObject *b) {
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    const void *da = PyUnicode_DATA(a), *db = PyUnicode_DATA(b);
    Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
    if (ka == PyUnicode_1BYTE_KIND && kb == PyUnicode_1BYTE_KIND) {
        int c = memcmp(da, db, (size_t)(na < nb ? na : nb));
        if (c != 0) {
            return c;
        }
        return na < nb ? -1 : (na > nb ? 1 : 0);
    }
    if (ka != PyUnicode_4BYTE_KIND && kb != PyUnicode_4BYTE_KIND) {
        Py_ssize_t m = na < nb ? na : nb;
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_UCS4 x = PyUnicode_READ(ka, da, i), y = PyUnicode_READ(kb, db, i);
            if (x != y) {
                return x < y ? -1 : 1;
            }
        }
        return na < nb ? -1 : (na > nb ? 1 : 0);
    }
    Py_ssize_t i = 0, j = 0;
    long la = -1, lb = -1;
    for (;;) {
        long x = utf16_next(ka, da, na, &i, &la);
        long y = utf16_next(kb, db, nb, &j, &lb);
        if (x != y) {
            return x < y ? -1 : 1; /* -1 (the end) sorts first */
        }
        if (x < 0) {
            return 0;
        }
    }
}

static int item_cmp(const void *a, const void *b) {
    return key_cmp(((const item_t *)a)->key, ((const item_t *)b)->key);
}

static int walk_dict(out_t *o, PyObject *d, int ijson) {
    Py_ssize_t n = PyDict_GET_SIZE(d);
    if (n == 0) {
        return out_put(o, "{}", 2);
    }
    /* Keys are checked before any value is walked, as the Python walk does. */
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_Check(k)) {
            PyErr_SetString(o->st->canon_error, "object keys must be strings");
            return -1;
        }
        if (str_ready(k) < 0) { /* key_cmp reads kind and data and cannot fail */
            return -1;
        }
    }
    item_t stack_items[8];
    item_t *items = stack_items;
    if (n > 8) {
        items = PyMem_Malloc(sizeof(item_t) * (size_t)n);
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t m = 0;
    pos = 0;
    while (m < n && PyDict_Next(d, &pos, &k, &v)) {
        Py_INCREF(k);
        Py_INCREF(v);
        items[m].key = k;
        items[m].value = v;
        m++;
    }
    if (m <= 16) {
        for (Py_ssize_t i = 1; i < m; i++) {
            item_t cur = items[i];
            Py_ssize_t j = i;
            while (j > 0 && key_cmp(items[j - 1].key, cur.key) > 0) {
                items[j] = items[j - 1];
                j--;
            }
            items[j] = cur;
        }
    } else {
        qsort(items, (size_t)m, sizeof(item_t), item_cmp);
    }
    int rc = out_char(o, '{');
    for (Py_ssize_t i = 0; rc == 0 && i < m; i++) {
        if (i > 0 && out_char(o, ',') < 0) {
            rc = -1;
            break;
        }
        if (put_str(o, items[i].key) < 0 || out_char(o, ':') < 0 ||
            walk(o, items[i].value, ijson) < 0) {
            rc = -1;
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_DECREF(items[i].key);
        Py_DECREF(items[i].value);
    }
    if (items != stack_items) {
        PyMem_Free(items);
    }
    return rc == 0 ? out_char(o, '}') : -1;
}

static int walk_seq(out_t *o, PyObject *seq, int ijson) {
    if (out_char(o, '[') < 0) {
        return -1;
    }
    int is_list = PyList_Check(seq);
    for (Py_ssize_t i = 0;; i++) {
        /* The size is read again each time: walking an item may run code that shrinks it. */
        Py_ssize_t n = is_list ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i >= n) {
            break;
        }
        PyObject *item = is_list ? PyList_GET_ITEM(seq, i) : PyTuple_GET_ITEM(seq, i);
        if (i > 0 && out_char(o, ',') < 0) {
            return -1;
        }
        Py_INCREF(item);
        int rc = walk(o, item, ijson);
        Py_DECREF(item);
        if (rc < 0) {
            return -1;
        }
    }
    return out_char(o, ']');
}

static int walk_container(out_t *o, PyObject *obj, int ijson, int is_dict) {
    if (o->depth >= MAX_DEPTH) {
        PyErr_SetString(PyExc_RecursionError, "maximum nesting depth exceeded in canonical JSON");
        return -1;
    }
    if (Py_EnterRecursiveCall(" in canonical JSON")) {
        return -1;
    }
    o->depth++;
    int rc = is_dict ? walk_dict(o, obj, ijson) : walk_seq(o, obj, ijson);
    o->depth--;
    Py_LeaveRecursiveCall();
    return rc;
}

/* A subclass converted to its base type (int(x), float(x), dict(x), list(x)), then walked. */
static int walk_converted(out_t *o, PyObject *converted, int ijson) {
    if (converted == NULL) {
        return -1;
    }
    int rc = walk(o, converted, ijson);
    Py_DECREF(converted);
    return rc;
}

static int walk(out_t *o, PyObject *obj, int ijson) {
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyUnicode_Type) {
        return put_str(o, obj);
    }
    if (t == &PyDict_Type) {
        return walk_container(o, obj, ijson, 1);
    }
    if (obj == Py_None) {
        return out_put(o, "null", 4);
    }
    if (t == &PyBool_Type) {
        return obj == Py_True ? out_put(o, "true", 4) : out_put(o, "false", 5);
    }
    if (t == &PyLong_Type) {
        return put_int(o, obj, ijson);
    }
    if (t == &PyFloat_Type) {
        return put_float(o, obj);
    }
    if (t == &PyList_Type || t == &PyTuple_Type) {
        return walk_container(o, obj, ijson, 0);
    }
    /* Subclasses (StrEnum, IntEnum, OrderedDict...) as their base JSON type; bool cannot be
     * subclassed, so it was handled above. */
    if (PyUnicode_Check(obj)) {
        return put_str(o, obj);
    }
    if (PyLong_Check(obj)) {
        return walk_converted(o, PyNumber_Long(obj), ijson);
    }
    if (PyFloat_Check(obj)) {
        PyObject *f = PyNumber_Float(obj);
        if (f == NULL) {
            return -1;
        }
        int rc = PyFloat_Check(f) ? put_float(o, f) : walk(o, f, ijson);
        Py_DECREF(f);
        return rc;
    }
    if (PyDict_Check(obj)) {
        return walk_converted(o, PyObject_CallOneArg((PyObject *)&PyDict_Type, obj), ijson);
    }
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
        return walk_converted(o, PySequence_List(obj), ijson);
    }
    PyObject *name = PyType_GetName(t);
    if (name != NULL) {
        PyErr_Format(o->st->canon_error, "unsupported type: %U", name);
        Py_DECREF(name);
    }
    return -1;
}

static mod_state *state_of(PyObject *module) {
    return (mod_state *)PyModule_GetState(module);
}

static int finish_check(out_t *o) {
    if (o->bad_text) {
        PyErr_SetString(o->st->canon_error, "input contains non-UTF-8 codepoints");
        return -1;
    }
    return 0;
}

/* canonical(obj, ijson) as bytes, or as str (the same UTF-8 decoded in one step). */
static PyObject *encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                        const char *usage, int as_text) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    int ijson = PyObject_IsTrue(args[1]);
    if (ijson < 0) {
        return NULL;
    }
    out_t o;
    out_init(&o, state_of(module));
    PyObject *res = NULL;
    if (walk(&o, args[0], ijson) == 0 && finish_check(&o) == 0) {
        res = as_text ? PyUnicode_DecodeUTF8(o.buf, o.len, "strict")
                      : PyBytes_FromStringAndSize(o.buf, o.len);
    }
    out_free(&o);
    return res;
}

/* canonical(obj, ijson, /) -> bytes */
static PyObject *canonical(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    return encode(module, args, nargs, "canonical(obj, ijson) takes 2 arguments", 0);
}

/* canonical_text(obj, ijson, /) -> str: canonical(obj, ijson).decode() in one step. */
static PyObject *canonical_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    return encode(module, args, nargs, "canonical_text(obj, ijson) takes 2 arguments", 1);
}

/* ---- audit records -------------------------------------------------------------------- */

/* Why: each audit record is written as a journal line and hashed from its body parts
 * (runtime/audit/_journal.py encode_line, _record.py body_parts); the two Python versions
 * cost ~7 µs per small record, ~15 µs with 1 KiB of arguments, twice per call. These build
 * all four byte strings in one pass over the fields. Anything outside the shapes AuditLog
 * writes (a type other than str/None in a text column, a non-finite float, an integer
 * outside ±(2**53 - 1), a lone surrogate) returns None: the Python code then produces the
 * same bytes or raises its own error. */

enum {
    F_KIND,
    F_CALL_ID,
    F_TIME,
    F_TOOL,
    F_ARGS_DIGEST,
    F_ARGS,
    F_DECISION,
    F_BACKEND,
    F_SANDBOX,
    F_OUTCOME,
    F_ERROR_TYPE,
    F_DURATION,
    F_USAGE,
    F_RESULT_DIGEST,
    F_RESULT_SIZE,
    F_SESSION,
    N_FIELDS
};
/* A record of schema version 1 ends at result_size (no session): the fields of a journal
 * line written before sessions were recorded. Encoded as a record with a null session. */
#define N_FIELDS_V1 F_SESSION

/* 1 when the journal line can be written here: str (any), None, exact int, finite float. */
static int line_value(out_t *o, PyObject *v) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        return put_str(o, v) < 0 ? -1 : 1;
    }
    if (v == Py_None) {
        return out_put(o, "null", 4) < 0 ? -1 : 1;
    }
    if (t == &PyLong_Type) {
        int err;
        if (put_safe_int(o, v, &err) == 0) {
            return err ? -1 : 1;
        }
        PyObject *text = PyObject_Repr(v); /* int.__repr__, as the stdlib encoder writes */
        if (text == NULL) {
            return -1;
        }
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(text, &n);
        int rc = (u == NULL || out_put(o, u, n) < 0) ? -1 : 1;
        Py_DECREF(text);
        return rc;
    }
    if (t == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(v);
        if (!isfinite(x)) {
            return 0; /* the stdlib encoder's ValueError */
        }
        char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__ */
        if (r == NULL) {
            return -1;
        }
        int rc = out_put(o, r, (Py_ssize_t)strlen(r)) < 0 ? -1 : 1;
        PyMem_Free(r);
        return rc;
    }
    return 0;
}

/* A text column of the body: a JSON string or null. */
static int body_text(out_t *o, PyObject *v) {
    if (v == Py_None) {
        return out_put(o, "null", 4) < 0 ? -1 : 1;
    }
    if (Py_TYPE(v) == &PyUnicode_Type) {
        return put_str(o, v) < 0 ? -1 : 1;
    }
    return 0;
}

/* A JSON column of the body: its stored (canonical) text as is, or null. */
static int body_raw(out_t *o, PyObject *v) {
    if (v == Py_None) {
        return out_put(o, "null", 4) < 0 ? -1 : 1;
    }
    if (Py_TYPE(v) != &PyUnicode_Type) {
        return 0;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(v, &n);
    if (u == NULL) {
        PyErr_Clear(); /* a lone surrogate: the Python code raises its own error */
        return 0;
    }
    return out_put(o, u, n) < 0 ? -1 : 1;
}

static int body_key(out_t *o, const char *key) {
    return out_put(o, key, (Py_ssize_t)strlen(key)) < 0 ? -1 : 1;
}

/* Evaluates one step; leaves the function with its status unless it wrote. */
#define STEP(expr)                                                                             \
    do {                                                                                       \
        int step_rc = (expr);                                                                  \
        if (step_rc <= 0) {                                                                    \
            return step_rc;                                                                    \
        }                                                                                      \
    } while (0)

static int record_line(out_t *o, PyObject *const *f, Py_ssize_t nf) {
    STEP(out_char(o, '[') < 0 ? -1 : 1);
    for (Py_ssize_t i = 0; i < nf; i++) {
        if (i > 0) {
            STEP(out_char(o, ',') < 0 ? -1 : 1);
        }
        STEP(line_value(o, f[i]));
    }
    STEP(out_put(o, "]\n", 2) < 0 ? -1 : 1);
    return o->bad_text ? 0 : 1;
}

/* The body before prev_hash, between prev_hash and seq, and after seq (_record.BodyParts). */
static int record_pre(out_t *o, PyObject *const *f) {
    STEP(body_key(o, "{\"arguments\":"));
    STEP(body_raw(o, f[F_ARGS]));
    STEP(body_key(o, ",\"arguments_digest\":"));
    STEP(body_text(o, f[F_ARGS_DIGEST]));
    STEP(body_key(o, ",\"backend\":"));
    STEP(body_text(o, f[F_BACKEND]));
    STEP(body_key(o, ",\"call_id\":"));
    STEP(body_text(o, f[F_CALL_ID]));
    STEP(body_key(o, ",\"decision\":"));
    STEP(body_raw(o, f[F_DECISION]));
    STEP(body_key(o, ",\"duration_ms\":"));
    PyObject *d = f[F_DURATION];
    if (d == Py_None) {
        STEP(body_key(o, "null"));
    } else if (Py_TYPE(d) == &PyFloat_Type && isfinite(PyFloat_AS_DOUBLE(d))) {
        STEP(put_float(o, d) < 0 ? -1 : 1);
    } else {
        return 0;
    }
    STEP(body_key(o, ",\"error_type\":"));
    STEP(body_text(o, f[F_ERROR_TYPE]));
    STEP(body_key(o, ",\"kind\":"));
    STEP(body_text(o, f[F_KIND]));
    STEP(body_key(o, ",\"outcome\":"));
    STEP(body_text(o, f[F_OUTCOME]));
    STEP(body_key(o, ",\"prev_hash\":\""));
    return 1;
}

static int record_mid(out_t *o, PyObject *const *f) {
    STEP(body_key(o, "\",\"result_digest\":"));
    STEP(body_text(o, f[F_RESULT_DIGEST]));
    STEP(body_key(o, ",\"result_size\":"));
    PyObject *n = f[F_RESULT_SIZE];
    if (n == Py_None) {
        STEP(body_key(o, "null"));
    } else if (Py_TYPE(n) == &PyLong_Type) {
        int err;
        if (put_safe_int(o, n, &err) != 0) {
            return 0; /* beyond 2**53 - 1: the Python code raises IntegerDomainError */
        }
        if (err) {
            return -1;
        }
    } else {
        return 0;
    }
    STEP(body_key(o, ",\"sandbox\":"));
    STEP(body_raw(o, f[F_SANDBOX]));
    STEP(body_key(o, ",\"seq\":"));
    return 1;
}

static int record_post(out_t *o, PyObject *const *f, Py_ssize_t nf) {
    /* A null session is not in the body (runtime/audit/_record.py's module doc): records
     * from before sessions were recorded keep their hashes. */
    if (nf > F_SESSION && f[F_SESSION] != Py_None) {
        STEP(body_key(o, ",\"session\":"));
        STEP(body_text(o, f[F_SESSION]));
    }
    STEP(body_key(o, ",\"time\":"));
    STEP(body_text(o, f[F_TIME]));
    STEP(body_key(o, ",\"tool\":"));
    STEP(body_text(o, f[F_TOOL]));
    STEP(body_key(o, ",\"usage\":"));
    STEP(body_raw(o, f[F_USAGE]));
    STEP(out_char(o, '}') < 0 ? -1 : 1);
    return 1;
}

#undef STEP

/* record(fields, /) -> (line, pre, mid, post) | None, for a 16-field journal tuple (or a
 * 15-field one of schema version 1). */
/* The fields of a record() / journal_write() call, or NULL when the tuple is not a record
 * this code encodes: the wrong size, or kind, call_id, time or tool not text in the body
 * (AuditLog checked the first three; a None there takes the Python code, as its fast path
 * does). */
static PyObject *const *record_fields(PyObject *fields) {
    Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    if (nf != N_FIELDS && nf != N_FIELDS_V1) {
        return NULL;
    }
    PyObject *const *f = &PyTuple_GET_ITEM(fields, 0);
    if (Py_TYPE(f[F_KIND]) != &PyUnicode_Type || Py_TYPE(f[F_CALL_ID]) != &PyUnicode_Type ||
        Py_TYPE(f[F_TIME]) != &PyUnicode_Type || Py_TYPE(f[F_TOOL]) != &PyUnicode_Type) {
        return NULL;
    }
    return f;
}

/* A record's four parts into o; cuts[i] is where part i ends. The record_* steps' result:
 * 1 encoded, 0 not a record this code encodes (the caller takes the Python code), -1 an
 * error is set. */
static int record_encode(out_t *o, PyObject *const *f, Py_ssize_t nf, Py_ssize_t cuts[4]) {
    int rc = record_line(o, f, nf);
    if (rc > 0) {
        cuts[0] = o->len;
        rc = record_pre(o, f);
    }
    if (rc > 0) {
        cuts[1] = o->len;
        rc = record_mid(o, f);
    }
    if (rc > 0) {
        cuts[2] = o->len;
        rc = record_post(o, f, nf);
        cuts[3] = o->len;
    }
    if (rc > 0 && o->bad_text) {
        rc = 0;
    }
    return rc;
}

static PyObject *record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "record(fields) takes one tuple");
        return NULL;
    }
    PyObject *fields = args[0];
    PyObject *const *f = record_fields(fields);
    if (f == NULL) {
        Py_RETURN_NONE;
    }
    mod_state *st = state_of(module);
    out_t o;
    out_init(&o, st);
    PyObject *res = NULL;
    Py_ssize_t cuts[4];
    int rc = record_encode(&o, f, PyTuple_GET_SIZE(fields), cuts);
    if (rc > 0) {
        res = Py_BuildValue("(y#y#y#y#)", o.buf, cuts[0], o.buf + cuts[0], cuts[1] - cuts[0],
                            o.buf + cuts[1], cuts[2] - cuts[1], o.buf + cuts[2],
                            cuts[3] - cuts[2]);
    } else if (rc == 0) {
        res = Py_NewRef(Py_None);
    }
    out_free(&o);
    return res;
}

/* ---- writing a journal record ------------------------------------------------------- */

/* Lines up to this size are written with the GIL held. Why: a journal line goes to the
 * page cache in a few microseconds, and the caller holds the log's write lock, so no other
 * thread could journal meanwhile anyway; releasing the GIL around it cost two threads
 * sharing one broker a GIL hand-off per record (a futex wake of the waiting thread, which
 * then ran until it blocked on that write lock, and a wait to take the GIL back): the cause
 * found for two threads on one SyncBroker making fewer calls a second than one on a quiet
 * machine (benchmarks/BROKER-CPU.md, round five). Longer lines (large arguments) release
 * it, as os.write does. */
#define JOURNAL_HOLD_GIL_MAX 65536

/* journal_put's system calls, once (*err: 0 or errno). */
static void journal_syscalls(int fd, int check_link, const char *buf, size_t n, int *status,
                             Py_ssize_t *written, int *err) {
    if (check_link) {
        struct stat sb;
        if (fstat(fd, &sb) != 0) {
            *err = errno;
        } else if (sb.st_nlink == 0) {
            *status = 1;
        }
    }
    if (!*err && *status == 0) {
        *written = write(fd, buf, n);
        if (*written < 0) {
            *err = errno;
        }
    }
}

/* The journal's link check and write of one encoded line, shared by journal_write and
 * journal_append: with ``check_link``, fstat first and nothing written when the file has no
 * link left (*status = 1); then write(2) of ``n`` bytes (*written, possibly short). The GIL
 * is held for lines up to JOURNAL_HOLD_GIL_MAX and released around the system calls for
 * longer ones (``buf`` is the caller's own); EINTR is retried after the signal handlers ran,
 * as os.write does (PEP 475). Returns 0, an errno value, or -1 when a signal handler raised
 * (the exception is set). */
static int journal_put(int fd, int check_link, const char *buf, size_t n, int *status,
                       Py_ssize_t *written) {
    int err = 0;
    for (;;) {
        if (n <= JOURNAL_HOLD_GIL_MAX) {
            journal_syscalls(fd, check_link, buf, n, status, written, &err);
        } else {
            Py_BEGIN_ALLOW_THREADS
            journal_syscalls(fd, check_link, buf, n, status, written, &err);
            Py_END_ALLOW_THREADS
        }
        if (err != EINTR) {
            return err;
        }
        if (PyErr_CheckSignals() < 0) {
            return -1;
        }
        err = 0;
        *written = -1;
    }
}

/* free_blocks(fd, /) -> int: fstatvfs(fd)'s f_bavail (the blocks free for this user), the
 * GIL held, as for a journal line (JOURNAL_HOLD_GIL_MAX): os.fstatvfs released it and built
 * an 11-field result, for the write-ahead record's free-space check. OSError as os.fstatvfs
 * (EINTR retried after the signal handlers ran). */
static PyObject *free_blocks(PyObject *module, PyObject *arg) {
    int fd = PyObject_AsFileDescriptor(arg);
    if (fd < 0) {
        return NULL;
    }
    struct statvfs sv;
    while (fstatvfs(fd, &sv) != 0) {
        if (errno != EINTR) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (PyErr_CheckSignals() < 0) {
            return NULL;
        }
    }
    return PyLong_FromUnsignedLongLong((unsigned long long)sv.f_bavail);
}

/* Why: journaling a record from Python took record(), a tuple slice, Journal.append's frame,
 * os.fstat (a 20-field stat_result built to read st_nlink) and os.write, twice per call.
 * journal_write does record()'s encoding, the st_nlink check and the write in one call.
 * The free-space check (os.fstatvfs) stays in Python, before this call: it is the journal's
 * own seam (runtime/audit/_journal.py), and the rarer error.
 *
 * journal_write(fd, fields, check_link, /) -> (status, written, line_len, pre, mid, post)
 *   | None
 *
 * None: the record is outside record()'s shapes; nothing was written (the caller encodes it
 * in Python). status 0: the line was written, ``written`` bytes of ``line_len`` (a short
 * write is the caller's to repair); 1: ``check_link`` and the file has no link left (its
 * directory entry was removed while open), nothing written. OSError from fstat or write,
 * nothing written; EINTR is retried after the signal handlers ran, as os.write does (PEP
 * 475), and an exception they raise propagates. The GIL is held for short lines and released
 * around the system calls for long ones (journal_put; the line is this call's own buffer). */
static PyObject *journal_write(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "journal_write(fd, fields, check_link) takes an int, a tuple and a flag");
        return NULL;
    }
    long fd_long = PyLong_AsLong(args[0]);
    if (fd_long == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (fd_long < 0 || fd_long > INT32_MAX) {
        errno = EBADF; /* what os.write says of a negative or impossible descriptor */
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    int fd = (int)fd_long;
    int check_link = PyObject_IsTrue(args[2]);
    if (check_link < 0) {
        return NULL;
    }
    PyObject *fields = args[1];
    PyObject *const *f = record_fields(fields);
    if (f == NULL) {
        Py_RETURN_NONE;
    }
    mod_state *st = state_of(module);
    out_t o;
    out_init(&o, st);
    PyObject *res = NULL;
    Py_ssize_t cuts[4];
    int rc = record_encode(&o, f, PyTuple_GET_SIZE(fields), cuts);
    if (rc == 0) {
        res = Py_NewRef(Py_None);
    }
    if (rc <= 0) {
        out_free(&o);
        return res;
    }
    int status = 0;
    Py_ssize_t written = -1;
    int err = journal_put(fd, check_link, o.buf, (size_t)cuts[0], &status, &written);
    if (err < 0) {
        out_free(&o);
        return NULL;
    }
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else {
        res = Py_BuildValue("(inny#y#y#)", status, status == 0 ? written : (Py_ssize_t)0,
                            cuts[0], o.buf + cuts[0], cuts[1] - cuts[0], o.buf + cuts[1],
                            cuts[2] - cuts[1], o.buf + cuts[2], cuts[3] - cuts[2]);
    }
    out_free(&o);
    return res;
}

/* Why: AuditLog._journal_write called Journal.append_fields, which called journal_write and
 * unpacked its six-item answer into the journal's new size and the body parts: a frame, a
 * tuple slice and ~55 Python opcodes per record, twice per call. journal_append does the same
 * encoding, link check and write and answers in the shape the caller keeps.
 *
 * journal_append(fd, fields, check_link, size, /) -> (end, (pre, mid, post)) | None | int
 *
 * (end, parts): the whole line was written; end = size + its length (the journal's size
 * after it, the offset _log keeps per pending record). None: outside record()'s shapes,
 * nothing written (the caller encodes it in Python). 1: check_link and the file has no link
 * left, nothing written. 2: a short write (the caller cuts the file back to ``size`` and
 * raises). OSError as journal_write. */
static PyObject *journal_append(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || Py_TYPE(args[0]) != &PyLong_Type || !PyTuple_Check(args[1]) ||
        Py_TYPE(args[3]) != &PyLong_Type) {
        PyErr_SetString(PyExc_TypeError, "journal_append(fd, fields, check_link, size) takes "
                                         "an int, a tuple, a flag and an int");
        return NULL;
    }
    long fd_long = PyLong_AsLong(args[0]);
    if (fd_long == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (fd_long < 0 || fd_long > INT32_MAX) {
        errno = EBADF; /* what os.write says of a negative or impossible descriptor */
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[3]);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "journal_append: size is negative");
        return NULL;
    }
    int fd = (int)fd_long;
    int check_link = PyObject_IsTrue(args[2]);
    if (check_link < 0) {
        return NULL;
    }
    PyObject *fields = args[1];
    PyObject *const *f = record_fields(fields);
    if (f == NULL) {
        Py_RETURN_NONE;
    }
    mod_state *st = state_of(module);
    out_t o;
    out_init(&o, st);
    Py_ssize_t cuts[4];
    int rc = record_encode(&o, f, PyTuple_GET_SIZE(fields), cuts);
    if (rc <= 0) {
        out_free(&o);
        return rc == 0 ? Py_NewRef(Py_None) : NULL;
    }
    int status = 0;
    Py_ssize_t written = -1;
    int err = journal_put(fd, check_link, o.buf, (size_t)cuts[0], &status, &written);
    if (err < 0) {
        out_free(&o);
        return NULL;
    }
    PyObject *res = NULL;
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (status != 0) {
        res = PyLong_FromLong(status);
    } else if (written != cuts[0]) {
        res = PyLong_FromLong(2);
    } else if (size > PY_SSIZE_T_MAX - written) {
        PyErr_SetString(PyExc_OverflowError, "journal_append: the journal's size overflows");
    } else {
        res = Py_BuildValue("(n(y#y#y#))", size + written, o.buf + cuts[0], cuts[1] - cuts[0],
                            o.buf + cuts[1], cuts[2] - cuts[1], o.buf + cuts[2],
                            cuts[3] - cuts[2]);
    }
    out_free(&o);
    return res;
}

/* ---- chaining journaled records ------------------------------------------------------ */

/* Why: journaled records are chained in batches (runtime/audit/_log.py _chain, _record.py
 * chain_row): per record, its body from the parts and the chain slots, a sha256 and the row
 * tuple, ~200 Python opcodes. This builds the same rows. The hash is hashlib's (the module
 * state holds hashlib.sha256), so the digest is OpenSSL's, as in the Python code. A record or
 * head outside the shape AuditLog builds returns NotImplemented before anything is hashed:
 * the Python code then builds the rows (or raises its own error). */

/* A record's fields: N_FIELDS, or N_FIELDS_V1 for a line of schema version 1. */

/* 1 when ``rec`` is a tuple (fields, ..., (pre, mid, post)) of the shape chain() takes. */
static int chain_record_ok(PyObject *rec) {
    if (Py_TYPE(rec) != &PyTuple_Type || PyTuple_GET_SIZE(rec) < 2) {
        return 0;
    }
    PyObject *fields = PyTuple_GET_ITEM(rec, 0);
    PyObject *parts = PyTuple_GET_ITEM(rec, PyTuple_GET_SIZE(rec) - 1);
    if (Py_TYPE(fields) != &PyTuple_Type ||
        (PyTuple_GET_SIZE(fields) != N_FIELDS && PyTuple_GET_SIZE(fields) != N_FIELDS_V1) ||
        Py_TYPE(parts) != &PyTuple_Type || PyTuple_GET_SIZE(parts) != 3) {
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        if (Py_TYPE(PyTuple_GET_ITEM(parts, i)) != &PyBytes_Type) {
            return 0;
        }
    }
    return 1;
}

/* The row of one record: (seq, *fields, prev, sha256(prev + pre + prev + mid + seq + post)). */
static PyObject *chain_one(mod_state *st, PyObject *rec, long long seq, PyObject *prev) {
    PyObject *fields = PyTuple_GET_ITEM(rec, 0);
    PyObject *parts = PyTuple_GET_ITEM(rec, PyTuple_GET_SIZE(rec) - 1);
    const char *p = (const char *)PyUnicode_DATA(prev);
    Py_ssize_t plen = PyUnicode_GET_LENGTH(prev);
    char digits[24];
    int dlen = snprintf(digits, sizeof digits, "%lld", seq);
    Py_ssize_t total = 2 * plen + dlen;
    for (int i = 0; i < 3; i++) {
        total += PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, i));
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL) {
        return NULL;
    }
    char *w = PyBytes_AS_STRING(data);
#define PUT(src, n)                                                                           \
    do {                                                                                      \
        memcpy(w, (src), (size_t)(n));                                                        \
        w += (n);                                                                             \
    } while (0)
#define PUT_PART(i)                                                                           \
    PUT(PyBytes_AS_STRING(PyTuple_GET_ITEM(parts, i)), PyBytes_GET_SIZE(PyTuple_GET_ITEM(parts, i)))
    PUT(p, plen);
    PUT_PART(0);
    PUT(p, plen);
    PUT_PART(1);
    PUT(digits, dlen);
    PUT_PART(2);
#undef PUT_PART
#undef PUT
    PyObject *h = PyObject_CallOneArg(st->sha256, data);
    Py_DECREF(data);
    if (h == NULL) {
        return NULL;
    }
    PyObject *hex = PyObject_CallMethodNoArgs(h, st->hexdigest);
    Py_DECREF(h);
    if (hex == NULL) {
        return NULL;
    }
    Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    PyObject *row = PyTuple_New(nf + 3);
    PyObject *seq_obj = PyLong_FromLongLong(seq);
    if (row == NULL || seq_obj == NULL) {
        Py_XDECREF(row);
        Py_XDECREF(seq_obj);
        Py_DECREF(hex);
        return NULL;
    }
    PyTuple_SET_ITEM(row, 0, seq_obj);
    for (Py_ssize_t i = 0; i < nf; i++) {
        PyTuple_SET_ITEM(row, i + 1, Py_NewRef(PyTuple_GET_ITEM(fields, i)));
    }
    PyTuple_SET_ITEM(row, nf + 1, Py_NewRef(prev));
    PyTuple_SET_ITEM(row, nf + 2, hex);
    return row;
}

/* chain(records, head_seq, head_hash, /) -> list of rows | NotImplemented */
static PyObject *chain(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "chain(records, head_seq, head_hash) takes 3 arguments");
        return NULL;
    }
    PyObject *records = args[0];
    PyObject *prev = args[2];
    if (Py_TYPE(records) != &PyList_Type || Py_TYPE(args[1]) != &PyLong_Type ||
        Py_TYPE(prev) != &PyUnicode_Type || !PyUnicode_IS_ASCII(prev)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    int overflow = 0;
    long long seq = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (seq == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (overflow || seq < 0 || seq > LLONG_MAX - n) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!chain_record_ok(PyList_GET_ITEM(records, i))) {
            Py_RETURN_NOTIMPLEMENTED;
        }
    }
    mod_state *st = state_of(module);
    /* Records are held while hashing: the hash call runs no Python code of the caller's,
     * but the list is the caller's and another thread could change it between items. */
    PyObject *held = PyList_GetSlice(records, 0, n);
    PyObject *rows = held == NULL ? NULL : PyList_New(n);
    if (rows == NULL) {
        Py_XDECREF(held);
        return NULL;
    }
    Py_INCREF(prev);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = chain_one(st, PyList_GET_ITEM(held, i), seq + 1 + i, prev);
        Py_DECREF(prev);
        if (row == NULL) {
            Py_DECREF(rows);
            Py_DECREF(held);
            return NULL;
        }
        prev = Py_NewRef(PyTuple_GET_ITEM(row, PyTuple_GET_SIZE(row) - 1));
        PyList_SET_ITEM(rows, i, row);
    }
    Py_DECREF(prev);
    Py_DECREF(held);
    return rows;
}

/* ---- the call caps walk ---------------------------------------------------------------- */

/* Why: runtime/shapes.py _violation walks every call's arguments (depth, string length, key
 * types, NaN) in Python, ~150 opcodes for a one-key object. This is the same walk, in the
 * same order, returning the same answer. Hazard: isinstance() in the Python walk can run
 * code (a __class__ property, an overridden __len__ or items()), so anything that is not
 * exactly a JSON type (str, dict, list, int, float, bool, None) makes the whole value go to
 * the Python walk (V_PYTHON); so does nesting past MAX_DEPTH (the C stack), where the Python
 * walk decides (or raises RecursionError, as it always did). An int outside int64..uint64 is
 * the "integer" violation. No Python code runs while a
 * dict is iterated: items are borrowed. */

#define V_PYTHON 2

/* 1 when the exact str ``s`` holds a surrogate code point (U+D800-U+DFFF: a lone UTF-16 half,
 * not Unicode text; runtime/shapes.py _not_text), else 0. ASCII and Latin-1 strings cannot. */
static int has_surrogate(PyObject *s) {
    int kind = PyUnicode_KIND(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        return 0;
    }
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF) {
            return 1;
        }
    }
    return 0;
}

static int viol_key(PyObject *keys, PyObject *key) {
    return PyList_Append(keys, key) < 0 ? -1 : 1;
}

/* 0: nothing; 1: *rule and keys (innermost first) set; V_PYTHON; -1: error. ``depth``: the
 * arrays/objects around ``v``; only arrays and objects are levels (one at level depth + 1
 * past max_depth is refused, a scalar never is), as in the Python walk. */
static int viol(PyObject *v, Py_ssize_t max_depth, Py_ssize_t max_string, Py_ssize_t depth,
                const char **rule, PyObject *keys) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) {
        if (PyUnicode_GET_LENGTH(v) > max_string) {
            *rule = "max_string";
            return 1;
        }
        if (has_surrogate(v)) {
            *rule = "unicode";
            return 1;
        }
        return 0;
    }
    if (t == &PyDict_Type) {
        if (depth >= max_depth) {
            *rule = "max_depth";
            return 1;
        }
        if (depth >= MAX_DEPTH) {
            return V_PYTHON;
        }
        Py_ssize_t pos = 0;
        PyObject *k, *x;
        while (PyDict_Next(v, &pos, &k, &x)) {
            PyTypeObject *kt = Py_TYPE(k);
            if (kt != &PyUnicode_Type) {
                if (kt == &PyLong_Type || kt == &PyFloat_Type || kt == &PyBool_Type ||
                    k == Py_None) {
                    *rule = "key";
                    return 1;
                }
                return V_PYTHON;
            }
            if (has_surrogate(k)) { /* named by the object holding it */
                *rule = "unicode";
                return 1;
            }
            if (Py_TYPE(x) == &PyUnicode_Type) {
                if (PyUnicode_GET_LENGTH(x) > max_string) {
                    *rule = "max_string";
                    return viol_key(keys, k);
                }
                if (has_surrogate(x)) {
                    *rule = "unicode";
                    return viol_key(keys, k);
                }
                continue;
            }
            int rc = viol(x, max_depth, max_string, depth + 1, rule, keys);
            if (rc == 1) {
                return viol_key(keys, k);
            }
            if (rc != 0) {
                return rc;
            }
        }
        return 0;
    }
    if (t == &PyList_Type) {
        if (depth >= max_depth) {
            *rule = "max_depth";
            return 1;
        }
        if (depth >= MAX_DEPTH) {
            return V_PYTHON;
        }
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            int rc = viol(PyList_GET_ITEM(v, i), max_depth, max_string, depth + 1, rule, keys);
            if (rc == 1) {
                PyObject *index = PyLong_FromSsize_t(i);
                if (index == NULL) {
                    return -1;
                }
                rc = viol_key(keys, index);
                Py_DECREF(index);
                return rc;
            }
            if (rc != 0) {
                return rc;
            }
        }
        return 0;
    }
    if (t == &PyFloat_Type) {
        if (!isfinite(PyFloat_AS_DOUBLE(v))) {
            *rule = "nan";
            return 1;
        }
        return 0;
    }
    if (t == &PyLong_Type) {
        /* shapes.INT_MIN..INT_MAX: int64, or past it a uint64 (what msgpack frames carry). */
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow > 0) {
            (void)PyLong_AsUnsignedLongLong(v);
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    return -1;
                }
                PyErr_Clear();
                overflow = -1; /* past uint64 */
            } else {
                overflow = 0;
            }
        }
        if (overflow) {
            *rule = "integer";
            return 1;
        }
        return 0;
    }
    if (t == &PyBool_Type || v == Py_None) {
        return 0;
    }
    return V_PYTHON;
}

/* A cap as a C integer: 1, or 0 when it is not an exact int that fits (the Python walk
 * then compares whatever it is). */
static int cap_of(PyObject *o, Py_ssize_t *out) {
    if (Py_TYPE(o) != &PyLong_Type) {
        return 0;
    }
    *out = PyLong_AsSsize_t(o);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* violation(value, max_depth, max_string, /) -> None | (rule, keys) | NotImplemented */
static PyObject *violation(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "violation(value, max_depth, max_string) takes 3 "
                                         "arguments");
        return NULL;
    }
    Py_ssize_t max_depth, max_string;
    if (!cap_of(args[1], &max_depth) || !cap_of(args[2], &max_string)) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *keys = PyList_New(0);
    if (keys == NULL) {
        return NULL;
    }
    const char *rule = NULL;
    int rc = viol(args[0], max_depth, max_string, 0, &rule, keys);
    PyObject *res = NULL;
    if (rc == 0) {
        res = Py_NewRef(Py_None);
    } else if (rc == V_PYTHON) {
        res = Py_NewRef(Py_NotImplemented);
    } else if (rc == 1) {
        res = Py_BuildValue("(sO)", rule, keys);
    }
    Py_DECREF(keys);
    return res;
}

/* ---- the redaction gate ----------------------------------------------------------------- */

/* Why: runtime/audit/_redact.py _maybe_secret decides, per audited text, whether redaction
 * could change anything: ~180 opcodes of substring tests per call. This is the same test
 * for ASCII text: any of ``exact`` in the text, any of ``lowered`` in its lower-cased form,
 * any of ``squashed`` in its lower-cased letters and digits. Text with other characters
 * returns NotImplemented (Unicode lower-casing can turn them into ASCII letters, e.g. the
 * Kelvin sign into "k"): the Python code decides. A fragment that is not exactly a str also
 * returns NotImplemented (the Python ``in`` raises its TypeError). */

/* 1 when every item of ``frags`` is an exact str, else 0. */
static int all_str(PyObject *frags) {
    if (!PyTuple_Check(frags)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(frags); i++) {
        if (Py_TYPE(PyTuple_GET_ITEM(frags, i)) != &PyUnicode_Type) {
            return 0;
        }
    }
    return 1;
}

/* Whether any of ``frags`` (exact strs) occurs in ``hay``. One pass over the text with the
 * fragments bucketed by first byte: memmem per fragment cost more than the Python ``in``
 * tests on 1 KiB (a dozen short needles, each a full scan). More than GATE_MAX fragments
 * take memmem one by one. A fragment beyond ASCII cannot occur in ASCII text; an empty one
 * occurs in every text. */
#define GATE_MAX 64

static int any_in(const char *hay, Py_ssize_t n, PyObject *frags) {
    Py_ssize_t count = PyTuple_GET_SIZE(frags);
    if (count > GATE_MAX) {
        for (Py_ssize_t k = 0; k < count; k++) {
            PyObject *f = PyTuple_GET_ITEM(frags, k);
            Py_ssize_t m = PyUnicode_GET_LENGTH(f);
            if (m == 0) {
                return 1;
            }
            if (PyUnicode_IS_ASCII(f) && m <= n &&
                memmem(hay, (size_t)n, PyUnicode_DATA(f), (size_t)m) != NULL) {
                return 1;
            }
        }
        return 0;
    }
    signed char head[256];
    signed char next[GATE_MAX];
    const char *data[GATE_MAX];
    Py_ssize_t len[GATE_MAX];
    /* Each fragment's second byte, tested before memcmp: in text made of letters (the
     * squashed pass) most positions start some fragment, and a call to memcmp per candidate
     * was most of the pass. */
    unsigned char second[GATE_MAX];
    memset(head, -1, sizeof head);
    Py_ssize_t shortest = PY_SSIZE_T_MAX;
    for (Py_ssize_t k = count - 1; k >= 0; k--) {
        PyObject *f = PyTuple_GET_ITEM(frags, k);
        Py_ssize_t m = PyUnicode_GET_LENGTH(f);
        if (m == 0) {
            return 1;
        }
        if (!PyUnicode_IS_ASCII(f) || m > n) {
            continue;
        }
        data[k] = (const char *)PyUnicode_DATA(f);
        len[k] = m;
        second[k] = m > 1 ? (unsigned char)data[k][1] : 0;
        unsigned char c = (unsigned char)data[k][0];
        next[k] = head[c];
        head[c] = (signed char)k;
        if (m < shortest) {
            shortest = m;
        }
    }
    if (shortest > n) {
        return 0;
    }
    for (Py_ssize_t i = 0; i <= n - shortest; i++) {
        for (int k = head[(unsigned char)hay[i]]; k >= 0; k = next[k]) {
            /* len[k] <= n - i: hay[i + 1] exists whenever the fragment is longer than 1. */
            if (len[k] <= n - i && (len[k] == 1 || (unsigned char)hay[i + 1] == second[k]) &&
                memcmp(hay + i, data[k], (size_t)len[k]) == 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* JSON string escapes decoded (json_text=True): ``\\uXXXX`` beyond ASCII, or a backslash
 * starting no JSON escape, returns -1 (the Python code decides); else the decoded length.
 * Why decode: an escape spells a separator character with letters ("to\\nken" holds the
 * key name "to", newline, "ken", which the redactor joins into "token"), and a non-canonical
 * text may spell a letter as ``\\u0074``. ``out`` holds at least ``n`` bytes. */
static Py_ssize_t json_unescape(const char *s, Py_ssize_t n, char *out) {
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\') {
            out[m++] = c;
            continue;
        }
        if (i + 1 >= n) {
            return -1;
        }
        char e = s[++i];
        switch (e) {
        case '"':
        case '\\':
        case '/':
            out[m++] = e;
            break;
        case 'b':
            out[m++] = '\b';
            break;
        case 'f':
            out[m++] = '\f';
            break;
        case 'n':
            out[m++] = '\n';
            break;
        case 'r':
            out[m++] = '\r';
            break;
        case 't':
            out[m++] = '\t';
            break;
        case 'u': {
            if (i + 4 >= n) {
                return -1;
            }
            unsigned v = 0;
            for (int k = 1; k <= 4; k++) {
                char h = s[i + k];
                unsigned d;
                if (h >= '0' && h <= '9') {
                    d = (unsigned)(h - '0');
                } else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') {
                    d = (unsigned)((h | 0x20) - 'a' + 10);
                } else {
                    return -1;
                }
                v = v * 16 + d;
            }
            if (v >= 0x80) {
                return -1;
            }
            out[m++] = (char)v;
            i += 4;
            break;
        }
        default:
            return -1;
        }
    }
    return m;
}

static int is_hex(unsigned char c) {
    unsigned char l = c | 0x20;
    return (c >= '0' && c <= '9') || (l >= 'a' && l <= 'f');
}

/* Whether ``s`` holds a percent escape (``%`` and two hex digits). */
static int has_percent_escape(const char *s, Py_ssize_t n) {
    const char *end = s + n;
    for (const char *p = memchr(s, '%', (size_t)n); p != NULL && end - p >= 3;
         p = memchr(p + 1, '%', (size_t)(end - p - 1))) {
        if (is_hex((unsigned char)p[1]) && is_hex((unsigned char)p[2])) {
            return 1;
        }
    }
    return 0;
}

/* The gate's answer for ``text``: 1 a fragment occurs, 0 none does, 2 not decided here
 * (NotImplemented: text beyond ASCII, a fragment that is not a str, an escape this code does
 * not decode, a percent escape and no fragment in clear), -1 an error is set. Shared by
 * maybe_secret and journal_request. */
static int gate_test(PyObject *text, PyObject *exact, PyObject *lowered, PyObject *squashed,
                     int json_text) {
    if (Py_TYPE(text) != &PyUnicode_Type || !PyUnicode_IS_ASCII(text) || !all_str(exact) ||
        !all_str(lowered) || !all_str(squashed)) {
        return 2;
    }
    const char *s = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    char small[1024];
    char *low = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)n + 1);
    if (low == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (json_text && memchr(s, '\\', (size_t)n) != NULL) {
        /* Decoded into ``low`` first; the tests below run on that. */
        Py_ssize_t m = json_unescape(s, n, low);
        if (m < 0) {
            if (low != small) {
                PyMem_Free(low);
            }
            return 2;
        }
        s = low;
        n = m;
    }
    /* A percent escape may spell a fragment (``t%6Fken=``): the Python code decodes it. */
    int escaped = has_percent_escape(s, n);
    int hit = any_in(s, n, exact);
    if (!hit) {
        /* Branch-free, so that the compiler vectorises it: bit 5 set on A-Z only. (In place
         * when ``s`` is ``low`` already.) */
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            low[i] = (char)(c | (unsigned char)(((unsigned char)(c - 'A') < 26) << 5));
        }
        hit = any_in(low, n, lowered);
    }
    if (!hit) {
        /* In place: the squashed text is never longer than the lowered one. */
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            char c = low[i];
            if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
                low[m++] = c;
            }
        }
        hit = any_in(low, m, squashed);
    }
    if (low != small) {
        PyMem_Free(low);
    }
    return hit ? 1 : escaped ? 2 : 0;
}

/* maybe_secret(text, exact, lowered, squashed, json_text=False, /) -> bool | NotImplemented */
static PyObject *maybe_secret(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "maybe_secret(text, exact, lowered, squashed, "
                                         "json_text=False) takes 4 or 5 arguments");
        return NULL;
    }
    int json_text = 0;
    if (nargs == 5) {
        json_text = PyObject_IsTrue(args[4]);
        if (json_text < 0) {
            return NULL;
        }
    }
    int hit = gate_test(args[0], args[1], args[2], args[3], json_text);
    if (hit < 0) {
        return NULL;
    }
    if (hit == 2) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong(hit);
}

/* ---- audit record times ---------------------------------------------------------------- */

/* Why: every audit record takes its time as RFC 3339 UTC text with microseconds
 * (runtime/audit/_log.py _Clock: ``2026-01-02T03:04:05.678901Z``), ~30 Python opcodes a
 * record even with the date part cached per second. utc_now() is that text for the current
 * time, read from the clock time.time_ns() reads (CLOCK_REALTIME); utc_text(ns) formats a
 * given time (the differential tests compare it with _Clock). The date is computed here
 * (days to civil date, proleptic Gregorian as datetime is), not with gmtime: no libc time
 * zone state is touched. Times before 1970, or past what a signed 64-bit count of ns holds
 * (2262), return NotImplemented. */

#define NS_PER_S 1000000000LL

static PyObject *format_utc(long long ns) {
    if (ns < 0) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    long long secs = ns / NS_PER_S;
    int micro = (int)((ns % NS_PER_S) / 1000);
    long long days = secs / 86400;
    int rem = (int)(secs % 86400);
    /* civil_from_days (H. Hinnant), for days >= 0. */
    long long z = days + 719468;
    long long era = z / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned day = doy - (153 * mp + 2) / 5 + 1;
    unsigned month = mp < 10 ? mp + 3 : mp - 9;
    long long year = (long long)yoe + era * 400 + (month <= 2);
    char buf[40];
    int n = snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%06dZ", year, month, day,
                     rem / 3600, rem / 60 % 60, rem % 60, micro);
    if (n < 0 || n >= (int)sizeof buf) {
        PyErr_SetString(PyExc_SystemError, "utc time text did not fit");
        return NULL;
    }
    return PyUnicode_FromStringAndSize(buf, n);
}

/* utc_text(ns, /) -> str | NotImplemented */
static PyObject *utc_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 || !PyLong_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "utc_text(ns) takes one int");
        return NULL;
    }
    int overflow = 0;
    long long ns = PyLong_AsLongLongAndOverflow(args[0], &overflow);
    if (ns == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return format_utc(ns);
}

/* utc_now() -> str */
static PyObject *utc_now(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 0) {
        PyErr_SetString(PyExc_TypeError, "utc_now() takes no arguments");
        return NULL;
    }
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return format_utc((long long)ts.tv_sec * NS_PER_S + ts.tv_nsec);
}

/* ---- a call's two journaled records in one call each ----------------------------------- */

/* Why: the broker's hot path (AuditLog.record_request / record_completion with defer=True)
 * built each record in Python before journal_append encoded and wrote it: the arguments'
 * text and digest, the redaction gate, the time, the 16-field tuple; the usage's canonical
 * text, the result's digest and size (~100 opcodes a record, twice per call). These take the
 * record's parts and do all of it, the journal's link check and write(2) included, and
 * answer the pending entry the log keeps: ``(fields, end, (pre, mid, post))``.
 *
 * They decline (None, nothing written) whatever they do not decide exactly as the Python
 * code does: a redaction gate that hits or cannot decide (text beyond ASCII), a log without
 * a gate, a usage that is not a flat object of plain JSON scalars, any column outside
 * record()'s shapes. The caller then takes its Python path from the start (which redacts,
 * raises its own error, or writes): nothing is written twice. Statuses and OSError as
 * journal_append (1 removed while open, 2 short write). The time is taken here, as the
 * caller's ``_now`` (utc_now) would take it, after every check that may decline. */

/* The journal write of an encoded record and the pending entry, as journal_append answers;
 * ``fields`` is stolen. */
static PyObject *journal_pending(int fd, int check_link, Py_ssize_t size, PyObject *fields,
                                 out_t *o, const Py_ssize_t cuts[4]) {
    int status = 0;
    Py_ssize_t written = -1;
    int err = journal_put(fd, check_link, o->buf, (size_t)cuts[0], &status, &written);
    PyObject *res = NULL;
    if (err < 0) {
        /* a signal handler raised */
    } else if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (status != 0) {
        res = PyLong_FromLong(status);
    } else if (written != cuts[0]) {
        res = PyLong_FromLong(2);
    } else if (size > PY_SSIZE_T_MAX - written) {
        PyErr_SetString(PyExc_OverflowError, "journal: the journal's size overflows");
    } else {
        res = Py_BuildValue("(Nn(y#y#y#))", fields, size + written, o->buf + cuts[0],
                            cuts[1] - cuts[0], o->buf + cuts[1], cuts[2] - cuts[1],
                            o->buf + cuts[2], cuts[3] - cuts[2]);
        return res; /* "N" took fields, even on failure */
    }
    Py_DECREF(fields);
    return res;
}

/* The journal descriptor and size arguments; -1 with an error set. */
static int journal_target(PyObject *fd_obj, PyObject *size_obj, int *fd, Py_ssize_t *size) {
    if (Py_TYPE(fd_obj) != &PyLong_Type || Py_TYPE(size_obj) != &PyLong_Type) {
        PyErr_SetString(PyExc_TypeError, "journal: fd and size must be ints");
        return -1;
    }
    long fd_long = PyLong_AsLong(fd_obj);
    if (fd_long == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (fd_long < 0 || fd_long > INT32_MAX) {
        errno = EBADF; /* what os.write says of a negative or impossible descriptor */
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    *size = PyLong_AsSsize_t(size_obj);
    if (*size == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (*size < 0) {
        PyErr_SetString(PyExc_ValueError, "journal: size is negative");
        return -1;
    }
    *fd = (int)fd_long;
    return 0;
}

/* sha256(data).hexdigest() with hashlib's sha256 (OpenSSL's, as the Python code). */
static PyObject *hex_digest(mod_state *st, PyObject *data) {
    PyObject *h = PyObject_CallOneArg(st->sha256, data);
    if (h == NULL) {
        return NULL;
    }
    PyObject *hex = PyObject_CallMethodNoArgs(h, st->hexdigest);
    Py_DECREF(h);
    return hex;
}

/* The record's time, as utc_now: NULL with an error set, or None to decline. */
static PyObject *record_time(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *now = format_utc((long long)ts.tv_sec * NS_PER_S + ts.tv_nsec);
    if (now == Py_NotImplemented) {
        Py_DECREF(now);
        Py_RETURN_NONE;
    }
    return now;
}

/* Exact str, or (``optional``) None. */
static int text_or_none(PyObject *v, int optional) {
    return Py_TYPE(v) == &PyUnicode_Type || (optional && v == Py_None);
}

/* A prepared object's canonical text: an exact str starting with '{'. */
static int object_text(PyObject *v) {
    return Py_TYPE(v) == &PyUnicode_Type && PyUnicode_GET_LENGTH(v) > 0 &&
           PyUnicode_READ_CHAR(v, 0) == '{';
}

/* Encode ``fields`` (a new tuple, stolen) and journal it. */
static PyObject *journal_fields(mod_state *st, int fd, int check_link, Py_ssize_t size,
                                PyObject *fields) {
    out_t o;
    out_init(&o, st);
    Py_ssize_t cuts[4];
    int rc = record_encode(&o, &PyTuple_GET_ITEM(fields, 0), N_FIELDS, cuts);
    PyObject *res;
    if (rc <= 0) {
        Py_DECREF(fields);
        res = rc == 0 ? Py_NewRef(Py_None) : NULL;
    } else {
        res = journal_pending(fd, check_link, size, fields, &o, cuts);
    }
    out_free(&o);
    return res;
}

/* journal_request(fd, size, call_id, tool, data, decision, backend, sandbox, session, gate, /)
 *   -> (fields, end, (pre, mid, post)) | None | int
 *
 * The write-ahead record of AuditLog.record_request's hot path: ``data`` the canonical
 * arguments (bytes), ``decision`` and ``sandbox`` prepared texts, ``gate`` the log's
 * redaction gate ``(exact, lowered, squashed)`` or None (a log whose extra keys no fragment
 * can rule out: always declined). The journal's link is checked before the write. */
static PyObject *journal_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "journal_request takes 10 arguments");
        return NULL;
    }
    int fd;
    Py_ssize_t size;
    if (journal_target(args[0], args[1], &fd, &size) < 0) {
        return NULL;
    }
    PyObject *call_id = args[2], *tool = args[3], *data = args[4], *decision = args[5];
    PyObject *backend = args[6], *sandbox = args[7], *session = args[8], *gate = args[9];
    if (!text_or_none(call_id, 0) || !text_or_none(tool, 0) || !PyBytes_CheckExact(data) ||
        !object_text(decision) || !text_or_none(backend, 0) || !object_text(sandbox) ||
        !text_or_none(session, 1) || !PyTuple_CheckExact(gate) || PyTuple_GET_SIZE(gate) != 3) {
        Py_RETURN_NONE;
    }
    PyObject *text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data),
                                          "strict");
    if (text == NULL) {
        /* not the encoder's bytes: the Python code raises its own error */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int hit = gate_test(text, PyTuple_GET_ITEM(gate, 0), PyTuple_GET_ITEM(gate, 1),
                        PyTuple_GET_ITEM(gate, 2), 1);
    if (hit != 0) {
        Py_DECREF(text);
        return hit < 0 ? NULL : Py_NewRef(Py_None); /* a hit, or undecided: Python redacts */
    }
    mod_state *st = state_of(module);
    PyObject *digest = hex_digest(st, data);
    if (digest == NULL) {
        Py_DECREF(text);
        return NULL;
    }
    PyObject *now = record_time();
    if (now == NULL || now == Py_None) {
        Py_DECREF(text);
        Py_DECREF(digest);
        return now;
    }
    PyObject *kind = PyUnicode_InternFromString("request");
    if (kind == NULL) {
        Py_DECREF(text);
        Py_DECREF(digest);
        Py_DECREF(now);
        return NULL;
    }
    PyObject *fields = PyTuple_Pack(N_FIELDS, kind, call_id, now, tool, digest, text, decision,
                                    backend, sandbox, Py_None, Py_None, Py_None, Py_None,
                                    Py_None, Py_None, session);
    Py_DECREF(kind);
    Py_DECREF(now);
    Py_DECREF(digest);
    Py_DECREF(text);
    if (fields == NULL) {
        return NULL;
    }
    return journal_fields(st, fd, 1, size, fields);
}

/* 1 when ``usage`` is a dict of exact str keys and exact None/bool/int/finite float/str
 * values: what the backends report, which the canonical walk encodes without running any
 * Python code and without an error (a lone surrogate aside, which the walk reports). */
static int plain_usage(PyObject *usage) {
    if (!PyDict_CheckExact(usage)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(usage, &pos, &key, &value)) {
        PyTypeObject *t = Py_TYPE(value);
        if (Py_TYPE(key) != &PyUnicode_Type) {
            return 0;
        }
        if (t == &PyFloat_Type) {
            if (!isfinite(PyFloat_AS_DOUBLE(value))) {
                return 0;
            }
        } else if (!(value == Py_None || t == &PyBool_Type || t == &PyLong_Type ||
                     t == &PyUnicode_Type)) {
            return 0;
        }
    }
    return 1;
}

/* journal_completion(fd, size, call_id, tool, backend, sandbox, outcome, error_type,
 *                    duration_ms, usage, result, session, /)
 *   -> (fields, end, (pre, mid, post)) | None | int
 *
 * The completion record of AuditLog.record_completion's hot path: ``usage`` a dict (its
 * canonical text is the record's usage) or None, ``result`` the result's canonical bytes or
 * None (no digest, no size). No link check (a completion is written while it fits: the
 * call already ran). ``outcome`` is the caller's to check against OUTCOMES. */
static PyObject *journal_completion(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "journal_completion takes 12 arguments");
        return NULL;
    }
    int fd;
    Py_ssize_t size;
    if (journal_target(args[0], args[1], &fd, &size) < 0) {
        return NULL;
    }
    PyObject *call_id = args[2], *tool = args[3], *backend = args[4], *sandbox = args[5];
    PyObject *outcome = args[6], *error_type = args[7], *duration = args[8], *usage = args[9];
    PyObject *result = args[10], *session = args[11];
    if (!text_or_none(call_id, 0) || !text_or_none(tool, 0) || !text_or_none(backend, 0) ||
        !object_text(sandbox) || !text_or_none(outcome, 0) || !text_or_none(error_type, 1) ||
        Py_TYPE(duration) != &PyFloat_Type || !isfinite(PyFloat_AS_DOUBLE(duration)) ||
        !(usage == Py_None || plain_usage(usage)) ||
        !(result == Py_None || PyBytes_CheckExact(result)) || !text_or_none(session, 1)) {
        Py_RETURN_NONE;
    }
    mod_state *st = state_of(module);
    PyObject *usage_text = Py_NewRef(Py_None);
    if (usage != Py_None) {
        out_t u;
        out_init(&u, st);
        int bad = walk(&u, usage, 1) < 0;
        if (!bad && u.bad_text) {
            bad = 1; /* a lone surrogate: the Python code raises its own error */
        }
        Py_DECREF(usage_text);
        usage_text = bad ? NULL : PyUnicode_DecodeUTF8(u.buf, u.len, "strict");
        out_free(&u);
        if (usage_text == NULL) {
            if (!bad) {
                return NULL;
            }
            if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_MemoryError)) {
                return NULL;
            }
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    PyObject *digest = Py_NewRef(Py_None), *rsize = Py_NewRef(Py_None);
    if (result != Py_None) {
        Py_DECREF(digest);
        Py_DECREF(rsize);
        digest = hex_digest(st, result);
        rsize = PyLong_FromSsize_t(PyBytes_GET_SIZE(result));
        if (digest == NULL || rsize == NULL) {
            Py_DECREF(usage_text);
            Py_XDECREF(digest);
            Py_XDECREF(rsize);
            return NULL;
        }
    }
    PyObject *now = record_time();
    PyObject *kind = now == NULL || now == Py_None ? NULL : PyUnicode_InternFromString("completion");
    PyObject *fields = NULL;
    if (kind != NULL) {
        fields = PyTuple_Pack(N_FIELDS, kind, call_id, now, tool, Py_None, Py_None, Py_None,
                              backend, sandbox, outcome, error_type, duration, usage_text,
                              digest, rsize, session);
    }
    Py_XDECREF(kind);
    Py_DECREF(usage_text);
    Py_DECREF(digest);
    Py_DECREF(rsize);
    if (fields == NULL) {
        if (now == Py_None) {
            return now; /* declined: a clock before 1970 */
        }
        Py_XDECREF(now);
        return NULL;
    }
    Py_DECREF(now);
    return journal_fields(st, fd, 0, size, fields);
}

/* ---- the wasm native helper's call, without ctypes ------------------------------------ */

/* Why: the wasm backend's native call (runtime/backends/wasm/_native.py NativeCaller.run) set
 * twelve fields of a ctypes struct, made a ctypes foreign call (argument conversion, a GIL
 * hand-off) and read seven fields back, ~120 Python opcodes and the ctypes call's own cost
 * per call. wasm_call fills the same struct on this C stack, calls the helper's
 * rt_native_call and answers in the shapes run() answers. The GIL is released by the helper,
 * through gil_save/gil_restore: at the guest's first epoch tick when a live C ticker is
 * passed (a short call keeps it: handing it to another thread for ~25 us cost more than it
 * bought, _native.c), else before the call starts.
 *
 * rt_call here is _native.c's, field for field; wasm_call_layout() reports its size and
 * offsets, which _native.py compares with its ctypes view (itself compared with the helper's
 * own rt_native_layout) before it uses wasm_call: any difference and the ctypes path stays.
 * Hazard: ``call_fn`` and ``free_fn`` are the addresses of the helper's rt_native_call and
 * rt_native_free, taken from the library _native.py loaded and checked; an arbitrary address
 * would be called as code (as any ctypes call of a pointer would: this adds no reach beyond
 * what Python code in the process has). */

typedef struct {
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
    uint64_t max_output;
    uint8_t *out_buf;
    uint64_t out_cap;
    int32_t has_oom;
    int32_t status;
    int32_t oom_flag;
    int32_t has_memory;
    void *error;
    void *trap;
    uint64_t fuel_left;
    uint64_t memory_size;
    uint64_t packed;
    uint8_t *output;
    int64_t cpu_ns;
    int64_t wall_ns;
    int32_t may_overflow;
    int32_t out_status;
    uint64_t body_len;
    void *(*gil_save)(void);
    void (*gil_restore)(void *);
    void *ticker;
} rt_call;

static void *wasm_gil_save(void) { return PyEval_SaveThread(); }
static void wasm_gil_restore(void *tstate) { PyEval_RestoreThread((PyThreadState *)tstate); }

typedef int32_t (*rt_call_fn)(rt_call *);
typedef void (*rt_free_fn)(void *);

/* wasm_call_layout() -> (sizeof(rt_call), offsetof of every field in declaration order) */
static PyObject *wasm_call_layout(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 0) {
        PyErr_SetString(PyExc_TypeError, "wasm_call_layout() takes no arguments");
        return NULL;
    }
    size_t v[] = {
        sizeof(rt_call),
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
        offsetof(rt_call, gil_restore), offsetof(rt_call, ticker),
    };
    Py_ssize_t n = (Py_ssize_t)(sizeof v / sizeof v[0]);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromSize_t(v[i]);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, x);
    }
    return out;
}

/* An address or NULL-able pointer argument: an int (ctypes' c_void_p takes None as NULL). */
static int arg_pointer(PyObject *v, void **out) {
    if (v == Py_None) {
        *out = NULL;
        return 0;
    }
    if (Py_TYPE(v) != &PyLong_Type) {
        return -1;
    }
    *out = PyLong_AsVoidPtr(v);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static int arg_i64(PyObject *v, int64_t *out) {
    if (Py_TYPE(v) != &PyLong_Type) {
        return -1;
    }
    long long x = PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

static int arg_u64(PyObject *v, uint64_t *out) {
    if (Py_TYPE(v) != &PyLong_Type) {
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

/* A pointer result as an int, or None for NULL (as a c_void_p field reads). */
static PyObject *pointer_or_none(void *p) {
    return p == NULL ? Py_NewRef(Py_None) : PyLong_FromVoidPtr(p);
}

/* wasm_call(call_fn, free_fn, engine, pre, export, payload, memory_bytes, table_elements, fuel,
 *           epoch_deadline, max_output, has_oom, out_buf, out_cap, ticker, /)
 *   -> (out_status, body, may_overflow, fuel_left, memory_size, cpu_ns, wall_ns)   status OK
 *    | (status, fuel_left, memory_size, packed, oom_flag, has_memory, cpu_ns, wall_ns,
 *       may_overflow, out_status, body, error, trap)                              any other
 *    | NotImplemented                       an argument ctypes would convert otherwise
 *
 * The second shape is NativeResult's fields in order, ``error`` and ``trap`` the addresses
 * of the wasmtime objects the caller takes ownership of (None: none). ``out_buf`` and
 * ``out_cap``: the address and size of the caller's buffer for the output body (its thread's
 * scratch, which the caller holds, marked busy, for the call); a longer body is malloc'd by
 * the helper, copied and freed here with its rt_native_free. NotImplemented
 * (nothing ran): an argument that is not exactly what the struct's field holds (an int out
 * of its range, which ctypes would wrap, or not an int or bytes): the caller's ctypes path
 * decides. ``ticker``: the address of a live C ticker the caller holds (0: none). */
static PyObject *wasm_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "wasm_call takes 15 arguments");
        return NULL;
    }
    void *call_fn, *free_fn;
    rt_call c;
    memset(&c, 0, sizeof c);
    int64_t has_oom = 0;
    PyObject *export = args[4], *payload = args[5];
    if (arg_pointer(args[0], &call_fn) < 0 || arg_pointer(args[1], &free_fn) < 0 ||
        call_fn == NULL || free_fn == NULL || arg_pointer(args[2], &c.engine) < 0 ||
        arg_pointer(args[3], &c.pre) < 0 || !PyBytes_CheckExact(export) ||
        !PyBytes_CheckExact(payload) || arg_i64(args[6], &c.memory_bytes) < 0 ||
        arg_i64(args[7], &c.table_elements) < 0 || arg_u64(args[8], &c.fuel) < 0 ||
        arg_u64(args[9], &c.epoch_deadline) < 0 || arg_u64(args[10], &c.max_output) < 0 ||
        !(args[11] == Py_True || args[11] == Py_False) ||
        arg_pointer(args[12], (void **)&c.out_buf) < 0 || arg_u64(args[13], &c.out_cap) < 0 ||
        arg_pointer(args[14], &c.ticker) < 0 ||
        (c.out_buf == NULL && c.out_cap != 0)) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                return NULL;
            }
            PyErr_Clear();
        }
        Py_RETURN_NOTIMPLEMENTED;
    }
    has_oom = args[11] == Py_True;
    c.has_oom = (int32_t)has_oom;
    c.export_name = PyBytes_AS_STRING(export);
    c.export_len = (size_t)PyBytes_GET_SIZE(export);
    c.input = (const uint8_t *)PyBytes_AS_STRING(payload);
    c.input_len = (uint64_t)PyBytes_GET_SIZE(payload);
    c.gil_save = wasm_gil_save;
    c.gil_restore = wasm_gil_restore;
    rt_call_fn fn = (rt_call_fn)call_fn;
    /* ``export`` and ``payload`` are held by the caller's argument references for the call;
     * bytes objects are immutable, so their buffers do not move while the GIL is released.
     * The helper hands the GIL back before it returns. */
    int32_t status = fn(&c);
    PyObject *body = NULL;
    if (status == 0) {
        if (c.body_len > (uint64_t)PY_SSIZE_T_MAX) {
            PyErr_SetString(PyExc_OverflowError, "wasm_call: the output body is too large");
        } else {
            body = PyBytes_FromStringAndSize(c.output != NULL ? (const char *)c.output
                                                              : (const char *)c.out_buf,
                                             (Py_ssize_t)c.body_len);
        }
        if (c.output != NULL) {
            ((rt_free_fn)free_fn)(c.output); /* exactly once, whatever happens next */
        }
        if (body == NULL) {
            return NULL;
        }
        return Py_BuildValue("(iNOKKLL)", (int)c.out_status, body,
                             c.may_overflow ? Py_True : Py_False,
                             (unsigned long long)c.fuel_left, (unsigned long long)c.memory_size,
                             (long long)c.cpu_ns, (long long)c.wall_ns);
    }
    /* Not OK: no output was malloc'd (the helper sets output only on OK); an output too
     * large has its head in out_buf (the preview, at most out_cap bytes). The error and the
     * trap pass to the caller as addresses; a failure to answer leaks them rather than
     * freeing what the caller may already own. */
    PyObject *head = Py_None;
    Py_INCREF(head);
    if (status == 9 /* RT_OUTPUT_TOO_LARGE */ && c.body_len <= c.out_cap) {
        Py_DECREF(head);
        head = PyBytes_FromStringAndSize((const char *)c.out_buf, (Py_ssize_t)c.body_len);
        if (head == NULL) {
            return NULL;
        }
    }
    PyObject *error = pointer_or_none(c.error), *trap = pointer_or_none(c.trap);
    if (error == NULL || trap == NULL) {
        Py_DECREF(head);
        Py_XDECREF(error);
        Py_XDECREF(trap);
        return NULL;
    }
    return Py_BuildValue("(iKKKiOLLOiNNN)", (int)status, (unsigned long long)c.fuel_left,
                         (unsigned long long)c.memory_size, (unsigned long long)c.packed,
                         (int)c.oom_flag, c.has_memory ? Py_True : Py_False,
                         (long long)c.cpu_ns, (long long)c.wall_ns,
                         c.may_overflow ? Py_True : Py_False, (int)c.out_status, head, error,
                         trap);
}

/* ---- the broker's own result models ---------------------------------------------------- */

/* Why: the broker builds three pydantic models per call from values it typed itself (the
 * ToolCall, the Usage, the ToolResult: runtime/broker/_fast.py, runtime/shapes.py) without
 * validating them again: ``cls.__new__(cls)`` and four ``object.__setattr__``, ~25 Python
 * opcodes each. model() does the same five steps in one call: the same calls
 * (``__new__`` looked up on the class, the generic setattr object.__setattr__ is), the same
 * objects stored. The Python twin (_fast._py_model) is the reference the tests compare with.
 *
 * model(cls, fields, fields_set, extra, /) -> cls instance
 *
 * ``fields`` (a dict) becomes the instance's __dict__ as is (the caller's fresh dict);
 * __pydantic_fields_set__ is a new set of the items of ``fields_set``; __pydantic_extra__
 * None, or a new dict copied from ``extra`` (a dict); __pydantic_private__ None. */
static PyObject *model(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyType_Check(args[0]) || !PyDict_CheckExact(args[1]) ||
        !(args[3] == Py_None || PyDict_CheckExact(args[3]))) {
        PyErr_SetString(PyExc_TypeError,
                        "model(cls, fields, fields_set, extra) takes a class, a dict, an "
                        "iterable and None or a dict");
        return NULL;
    }
    PyObject *const *names = &PyTuple_GET_ITEM(state_of(module)->model_names, 0);
    PyObject *out = PyObject_CallMethodOneArg(args[0], names[0], args[0]);
    if (out == NULL) {
        return NULL;
    }
    PyObject *fields_set = PySet_New(args[2]);
    PyObject *extra = args[3] == Py_None ? Py_NewRef(Py_None) : PyDict_Copy(args[3]);
    int rc = -1;
    if (fields_set != NULL && extra != NULL &&
        PyObject_GenericSetAttr(out, names[1], args[1]) == 0 &&
        PyObject_GenericSetAttr(out, names[2], fields_set) == 0 &&
        PyObject_GenericSetAttr(out, names[3], extra) == 0 &&
        PyObject_GenericSetAttr(out, names[4], Py_None) == 0) {
        rc = 0;
    }
    Py_XDECREF(fields_set);
    Py_XDECREF(extra);
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* ---- module --------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"canonical", (PyCFunction)(void (*)(void))canonical, METH_FASTCALL,
     "canonical(obj, ijson, /) -> bytes: RFC 8785 canonical JSON (UTF-8)."},
    {"canonical_text", (PyCFunction)(void (*)(void))canonical_text, METH_FASTCALL,
     "canonical_text(obj, ijson, /) -> str: the same as text."},
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(fields, /) -> (line, pre, mid, post) | None: an audit record's journal line and "
     "body parts."},
    {"journal_write", (PyCFunction)(void (*)(void))journal_write, METH_FASTCALL,
     "journal_write(fd, fields, check_link, /) -> (status, written, line_len, pre, mid, "
     "post) | None: record()'s encoding, written to the journal fd (runtime/audit/_log.py)."},
    {"free_blocks", free_blocks, METH_O,
     "free_blocks(fd, /) -> int\n\nfstatvfs(fd).f_bavail, the GIL held."},
    {"journal_append", (PyCFunction)(void (*)(void))journal_append, METH_FASTCALL,
     "journal_append(fd, fields, check_link, size, /) -> (end, (pre, mid, post)) | None | "
     "int: journal_write's work, answered as the audit log keeps it."},
    {"chain", (PyCFunction)(void (*)(void))chain, METH_FASTCALL,
     "chain(records, head_seq, head_hash, /) -> list | NotImplemented: the chained rows of "
     "journaled records (runtime/audit/_record.py chain_rows)."},
    {"utc_now", (PyCFunction)(void (*)(void))utc_now, METH_FASTCALL,
     "utc_now() -> str: the current time as an audit record shows it (RFC 3339, UTC, µs)."},
    {"utc_text", (PyCFunction)(void (*)(void))utc_text, METH_FASTCALL,
     "utc_text(ns, /) -> str | NotImplemented: a time in ns since the epoch as utc_now shows "
     "it."},
    {"violation", (PyCFunction)(void (*)(void))violation, METH_FASTCALL,
     "violation(value, max_depth, max_string, /) -> None | (rule, keys) | NotImplemented: "
     "the first value beyond the call caps (runtime/shapes.py _violation)."},
    {"journal_request", (PyCFunction)(void (*)(void))journal_request, METH_FASTCALL,
     "journal_request(fd, size, call_id, tool, data, decision, backend, sandbox, session, "
     "gate, /) -> (fields, end, parts) | None | int: a write-ahead record, built and "
     "journaled."},
    {"journal_completion", (PyCFunction)(void (*)(void))journal_completion, METH_FASTCALL,
     "journal_completion(fd, size, call_id, tool, backend, sandbox, outcome, error_type, "
     "duration_ms, usage, result, session, /) -> (fields, end, parts) | None | int: a "
     "completion record, built and journaled."},
    {"wasm_call", (PyCFunction)(void (*)(void))wasm_call, METH_FASTCALL,
     "wasm_call(call_fn, free_fn, engine, pre, export, payload, memory_bytes, table_elements, "
     "fuel, epoch_deadline, max_output, has_oom, out_buf, out_cap, ticker, /): the wasm native "
     "helper's call "
     "(runtime/backends/wasm/_native.py)."},
    {"wasm_call_layout", (PyCFunction)(void (*)(void))wasm_call_layout, METH_FASTCALL,
     "wasm_call_layout() -> tuple: sizeof and field offsets of wasm_call's rt_call."},
    {"model", (PyCFunction)(void (*)(void))model, METH_FASTCALL,
     "model(cls, fields, fields_set, extra, /): a pydantic model built from typed values "
     "without validation (runtime/broker/_fast.py)."},
    {"maybe_secret", (PyCFunction)(void (*)(void))maybe_secret, METH_FASTCALL,
     "maybe_secret(text, exact, lowered, squashed, json_text=False, /) -> bool | "
     "NotImplemented: the "
     "redaction gate (runtime/audit/_redact.py _maybe_secret)."},
    {NULL, NULL, 0, NULL},
};

static int mod_exec(PyObject *module) {
    mod_state *st = state_of(module);
    PyObject *rfc = PyImport_ImportModule("rfc8785");
    if (rfc == NULL) {
        return -1;
    }
    st->canon_error = PyObject_GetAttrString(rfc, "CanonicalizationError");
    st->int_error = PyObject_GetAttrString(rfc, "IntegerDomainError");
    st->float_error = PyObject_GetAttrString(rfc, "FloatDomainError");
    Py_DECREF(rfc);
    if (st->canon_error == NULL || st->int_error == NULL || st->float_error == NULL) {
        return -1;
    }
    PyObject *hashlib = PyImport_ImportModule("hashlib");
    if (hashlib == NULL) {
        return -1;
    }
    st->sha256 = PyObject_GetAttrString(hashlib, "sha256");
    Py_DECREF(hashlib);
    st->hexdigest = PyUnicode_InternFromString("hexdigest");
    if (st->sha256 == NULL || st->hexdigest == NULL) {
        return -1;
    }
    st->model_names = Py_BuildValue("(sssss)", "__new__", "__dict__", "__pydantic_fields_set__",
                                    "__pydantic_extra__", "__pydantic_private__");
    if (st->model_names == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(st->model_names); i++) {
        PyUnicode_InternInPlace(&PyTuple_GET_ITEM(st->model_names, i));
    }
    return 0;
}

static int mod_traverse(PyObject *module, visitproc visit, void *arg) {
    mod_state *st = state_of(module);
    Py_VISIT(st->canon_error);
    Py_VISIT(st->int_error);
    Py_VISIT(st->float_error);
    Py_VISIT(st->sha256);
    Py_VISIT(st->hexdigest);
    Py_VISIT(st->model_names);
    return 0;
}

static int mod_clear(PyObject *module) {
    mod_state *st = state_of(module);
    Py_CLEAR(st->canon_error);
    Py_CLEAR(st->int_error);
    Py_CLEAR(st->float_error);
    Py_CLEAR(st->sha256);
    Py_CLEAR(st->hexdigest);
    Py_CLEAR(st->model_names);
    return 0;
}

static void mod_free(void *module) {
    mod_clear((PyObject *)module);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)mod_exec},
    {0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_rt_speedups",
    .m_doc = "RFC 8785 canonical JSON and audit record encoding (runtime/_speedups.py).",
    .m_size = sizeof(mod_state),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = mod_traverse,
    .m_clear = mod_clear,
    .m_free = mod_free,
};

PyMODINIT_FUNC PyInit__rt_speedups(void) {
    return PyModuleDef_Init(&moduledef);
}
