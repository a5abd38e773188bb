/* json_parse, json_stringify, json_query: the JSON tools, one module. */
#include "../rt/json.h"

RT_EXPORT("json_parse") uint64_t json_parse_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *text = rt_arg_string(args, "text", &err);
    if (!text) return err;
    /* The host parses the result anyway: hand the checked document back minified, tokens as
     * written, instead of building a DOM and writing it out again. */
    rt_buf out;
    rt_out_init(&out, (size_t)text->len + 16);
    buf_put(&out, "{\"data\":", 8);
    json_error e;
    if (!json_minify(&out, text->s, text->len, JSON_MAX_DEPTH, &e)) {
        /* CPython names a leading BOM (a UTF-8 file read without utf-8-sig) rather than
         * "expecting value"; only on the failure path, so valid documents pay nothing. */
        if (text->len >= 3 && memcmp(text->s, "\xEF\xBB\xBF", 3) == 0)
            return rt_fail("invalid JSON: expecting value, found a UTF-8 byte order mark (U+FEFF; "
                           "decode the file as utf-8-sig): line 1 column 1 (char 0)");
        rt_buf msg;
        json_error_message(&msg, "invalid JSON: ", text->s, text->len, &e);
        return rt_fail_buf(&msg);
    }
    buf_putc(&out, '}');
    return rt_done(&out);
}

RT_EXPORT("json_stringify") uint64_t json_stringify_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *data = json_get(args, "data");
    if (!data) return rt_fail("argument 'data' is required");
    int pretty, sort_keys;
    if (json_get_bool(args, "pretty", &pretty) < 0) return rt_fail("'pretty' must be a boolean");
    if (json_get_bool(args, "sort_keys", &sort_keys) < 0)
        return rt_fail("'sort_keys' must be a boolean");
    /* The text is written first as an output buffer of its own (status byte included): an
     * indented document far larger than its input is cut there, and its first part is the
     * output (the escaped result would only be longer). */
    rt_buf text;
    rt_out_init(&text, n + 16);
    json_write(&text, data, pretty ? 2 : 0, sort_keys);
    if (rt_out_cut) return rt_done(&text);
    rt_buf out;
    rt_out_init(&out, text.len + text.len / 8 + 16);
    buf_put(&out, "{\"text\":", 8);
    json_write_string(&out, text.p + 1, text.len - 1);
    buf_putc(&out, '}');
    return rt_done(&out);
}

/* RFC 6901: "" is the whole document; "/a/0/~1b" walks members and array indices. */
static int pointer_step(const jv *cur, const char *tok, size_t tn, const jv **next) {
    /* Unescape ~1 -> '/', ~0 -> '~' into a scratch copy; any other '~' is malformed. */
    char *key = rt_xalloc(tn ? tn : 1);
    size_t kn = 0;
    for (size_t i = 0; i < tn; i++) {
        if (tok[i] != '~') {
            key[kn++] = tok[i];
            continue;
        }
        if (i + 1 >= tn || (tok[i + 1] != '0' && tok[i + 1] != '1')) return -1;
        key[kn++] = tok[i + 1] == '0' ? '~' : '/';
        i++;
    }
    *next = 0;
    if (cur->t == J_OBJ) {
        for (const jv *c = cur->first; c; c = c->next)
            if (c->klen == kn && memcmp(c->k, key, kn) == 0) *next = c;
        return 0;
    }
    if (cur->t == J_ARR) {
        /* Indices are decimal without leading zeros; "-" (past the end) never exists. */
        if (kn == 0 || (kn > 1 && key[0] == '0') || kn > 9) return 0;
        uint32_t idx = 0;
        for (size_t i = 0; i < kn; i++) {
            if (key[i] < '0' || key[i] > '9') return 0;
            idx = idx * 10 + (uint32_t)(key[i] - '0');
        }
        const jv *c = cur->first;
        for (uint32_t i = 0; c && i < idx; i++) c = c->next;
        *next = c;
    }
    return 0;
}

RT_EXPORT("json_query") uint64_t json_query_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    const jv *cur = json_get(args, "data");
    if (!cur) return rt_fail("argument 'data' is required");
    jv *ptr = rt_arg_string(args, "pointer", &err);
    if (!ptr) return err;
    const char *p = ptr->s, *end = ptr->s + ptr->len;
    if (p < end && *p != '/')
        return rt_fail("a JSON Pointer (RFC 6901) is empty or starts with '/'");
    /* The whole pointer is checked first: the walk below stops at the first missing member,
     * and a malformed token after it must not come back as found=false. */
    for (const char *q = p; q < end; q++)
        if (*q == '~' && (q + 1 >= end || (q[1] != '0' && q[1] != '1')))
            return rt_fail("invalid JSON Pointer: '~' must be followed by '0' or '1'");
    while (cur && p < end) {
        const char *tok = ++p;
        while (p < end && *p != '/') p++;
        if (pointer_step(cur, tok, (size_t)(p - tok), &cur) < 0)
            return rt_fail("invalid JSON Pointer: '~' must be followed by '0' or '1'");
    }
    rt_buf out;
    rt_out_init(&out, 64);
    if (cur) {
        buf_puts(&out, "{\"found\":true,\"value\":");
        json_write(&out, cur, 0, 0);
        buf_putc(&out, '}');
    } else {
        buf_puts(&out, "{\"found\":false,\"value\":null}");
    }
    return rt_done(&out);
}
