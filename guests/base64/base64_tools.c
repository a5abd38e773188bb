/* base64_encode, base64_decode (RFC 4648 §4 standard and §5 URL-safe alphabets). */
#include "../rt/json.h"

static const char STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Chunk of input encoded per reservation: the output grows as it is written, so a text
 * whose encoding memory cannot hold is cut (RT_CUT) after as much as fits, not before. */
#define ENCODE_CHUNK 49152u

static void encode(rt_buf *b, const unsigned char *s, size_t n, const char *abc) {
    buf_try_reserve(b, (n + 2) / 3 * 4); /* the whole, when memory has it */
    char *o = b->p + b->len;
    size_t i = 0;
    while (i + 3 <= n) {
        size_t stop = n - i > ENCODE_CHUNK ? i + ENCODE_CHUNK : n - (n - i) % 3;
        b->len = (size_t)(o - b->p);
        if (!buf_reserve(b, (stop - i) / 3 * 4)) return;
        o = b->p + b->len;
        for (; i < stop; i += 3) {
            uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
            *o++ = abc[v >> 18];
            *o++ = abc[(v >> 12) & 63];
            *o++ = abc[(v >> 6) & 63];
            *o++ = abc[v & 63];
        }
    }
    b->len = (size_t)(o - b->p);
    if (n - i && !buf_reserve(b, 4)) return;
    o = b->p + b->len;
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = abc[v >> 18];
        *o++ = abc[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = abc[v >> 18];
        *o++ = abc[(v >> 12) & 63];
        *o++ = abc[(v >> 6) & 63];
        *o++ = '=';
    }
    b->len = (size_t)(o - b->p);
}

RT_EXPORT("base64_encode") uint64_t base64_encode_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *text = rt_arg_string(args, "text", &err);
    if (!text) return err;
    int url;
    if (json_get_bool(args, "url_safe", &url) < 0) return rt_fail("'url_safe' must be a boolean");
    rt_buf out;
    rt_out_init(&out, (size_t)text->len / 3 * 4 + 32);
    buf_put(&out, "{\"encoded\":\"", 12);
    encode(&out, (const unsigned char *)text->s, text->len, url ? URL : STD);
    buf_put(&out, "\"}", 2);
    return rt_done(&out);
}

static int sextet(unsigned char c, int url) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == (url ? '-' : '+')) return 62;
    if (c == (url ? '_' : '/')) return 63;
    return -1;
}

static uint64_t fail_at(const char *what, size_t pos) {
    rt_buf m;
    buf_init(&m, 96);
    buf_puts(&m, "invalid base64: ");
    buf_puts(&m, what);
    buf_puts(&m, " at offset ");
    buf_put_uint(&m, pos);
    return rt_fail_buf(&m);
}

RT_EXPORT("base64_decode") uint64_t base64_decode_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *enc = rt_arg_string(args, "encoded", &err);
    if (!enc) return err;
    int url;
    if (json_get_bool(args, "url_safe", &url) < 0) return rt_fail("'url_safe' must be a boolean");
    const unsigned char *s = (const unsigned char *)enc->s;
    /* Strict: the alphabet, ASCII whitespace (skipped, as in MIME line breaks) and '=' padding
     * only at the end. Missing padding is accepted; padding that does not complete the last
     * quantum is not. */
    unsigned char *bytes = rt_xalloc((size_t)enc->len / 4 * 3 + 3);
    size_t nb = 0, count = 0, pad = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < enc->len; i++) {
        unsigned char c = s[i];
        /* ASCII whitespace as C's isspace and Python's bytes.isspace have it: \v and \f
         * were refused, though the manifest says whitespace is ignored. */
        if (c == ' ' || (c >= '\t' && c <= '\r')) continue;
        if (c == '=') {
            if (count % 4 < 2) return fail_at("misplaced '=' padding", i);
            pad++;
            count++;
            continue;
        }
        if (pad) return fail_at("data after '=' padding", i);
        int v = sextet(c, url);
        if (v < 0) {
            if (sextet(c, !url) >= 0)
                return fail_at(url ? "'+' or '/' in URL-safe base64 (set url_safe false)"
                                   : "'-' or '_' in standard base64 (set url_safe true)",
                               i);
            return fail_at("character outside the base64 alphabet", i);
        }
        acc = acc << 6 | (uint32_t)v;
        count++;
        if (count % 4 == 0) {
            bytes[nb++] = (unsigned char)(acc >> 16);
            bytes[nb++] = (unsigned char)(acc >> 8);
            bytes[nb++] = (unsigned char)acc;
            acc = 0;
        }
    }
    size_t rem = (count - pad) % 4;
    if (pad && count % 4 != 0) return fail_at("incomplete '=' padding", enc->len);
    if (rem == 1) return fail_at("a single trailing base64 character", enc->len);
    if (rem == 2) {
        acc <<= 12;
        bytes[nb++] = (unsigned char)(acc >> 16);
    } else if (rem == 3) {
        acc <<= 6;
        bytes[nb++] = (unsigned char)(acc >> 16);
        bytes[nb++] = (unsigned char)(acc >> 8);
    }
    rt_buf out;
    rt_out_init(&out, nb + nb / 2 + 48);
    buf_put(&out, "{\"decoded\":", 11);
    if (rt_utf8_valid(bytes, nb)) {
        json_write_string(&out, (const char *)bytes, nb);
        buf_puts(&out, ",\"binary\":false}");
    } else {
        /* Not text: hand the bytes back as canonical standard base64 and say so. */
        buf_putc(&out, '"');
        encode(&out, bytes, nb, STD);
        buf_puts(&out, "\",\"binary\":true}");
    }
    return rt_done(&out);
}
