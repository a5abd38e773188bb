/* A small RFC 8259 JSON parser (into an arena DOM) and writer shared by the guests.
 *
 * Numbers are kept as their source lexeme and written back verbatim, so the host's CPython json
 * gives them exactly the value CPython would (big ints exact, floats correctly rounded).
 * Deliberate differences from CPython's json.loads, each refused with a clear message:
 * NaN / Infinity / -Infinity (not JSON), lone UTF-16 surrogates in \u escapes, integers with
 * more than 4300 digits (CPython's int limit), and nesting deeper than the depth limit.
 */
#ifndef RT_JSON_H
#define RT_JSON_H

#include "rt.h"

/* Levels of arrays/objects a document may nest. The host refuses any result nested deeper
 * than 128 levels (runtime/_depth.py RESULT_MAX_DEPTH: past ~255 its serialisers fail), and
 * json_parse's result wraps the document in {"data": ...}: one level less. */
#define JSON_MAX_DEPTH 127
#define JSON_STR_(x) #x
#define JSON_STR(x) JSON_STR_(x)
#define JSON_MAX_INT_DIGITS 4300

enum { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    uint8_t t;
    uint32_t len;          /* J_NUM lexeme / J_STR decoded UTF-8 length; child count for J_ARR/J_OBJ */
    const char *s;         /* J_NUM lexeme or J_STR decoded bytes */
    const char *k;         /* member key (decoded UTF-8) when this value sits in an object */
    uint32_t klen;
    struct jv *first, *next;
} jv;

typedef struct {
    const char *err;       /* static description, NULL while fine */
    size_t pos;            /* byte offset of the error */
} json_error;

/* Parses the whole of [s, s+n); NULL and *e filled on error. */
jv *json_parse(const char *s, size_t n, int max_depth, json_error *e);
/* Checks [s, s+n) exactly as json_parse does (same errors at the same places) and appends it
 * to out without whitespace, every token as written; 0 and *e filled on error. No DOM is built:
 * one pass, for a caller that only needs the document back. */
int json_minify(rt_buf *out, const char *s, size_t n, int max_depth, json_error *e);
/* "<what> at line L column C (char N)" into a fresh buffer. */
void json_error_message(rt_buf *out, const char *prefix, const char *s, size_t n, json_error *e);

/* indent 0: compact (",", ":"); indent > 0: one item per line, (",", ": ") as Python does. */
void json_write(rt_buf *b, const jv *v, int indent, int sort_keys);
void json_write_string(rt_buf *b, const char *s, size_t n);

jv *json_get(const jv *obj, const char *key);
/* Member `key` of obj: 1 for true, 0 for false or absent, -1 when present and not a bool. */
int json_get_bool(const jv *obj, const char *key, int *out);



/* The call's arguments object; NULL with *fail set to an RT_ERROR result when unusable. */
jv *rt_args(const char *in, uint32_t n, uint64_t *fail);
/* A required string member; NULL with *fail set when absent or not a string. */
jv *rt_arg_string(const jv *args, const char *key, uint64_t *fail);
#endif
