/* csv_to_json: RFC 4180 CSV (quoted fields, "" escapes, CRLF / LF / CR records) to JSON rows. */
#include "../rt/json.h"

typedef struct {
    const char *s;
    uint32_t n;
} field;

typedef struct {
    field *f;
    size_t n, cap;
} record;

static void add_field(record *r, const char *s, size_t n) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        r->f = rt_xrealloc(r->f, r->cap * sizeof(field), cap * sizeof(field));
        r->cap = cap;
    }
    r->f[r->n].s = s;
    r->f[r->n].n = (uint32_t)n;
    r->n++;
}

/* Parses one record at *pp; returns 0 at end of input, -1 on a malformed quote (with *err_at
 * at the opening quote of a field never closed, or at the character after a closing quote
 * that is neither a delimiter nor a line end, whose field is then the last of r). */
static int next_record(const char **pp, const char *end, char delim, record *r, const char **err_at) {
    const char *p = *pp;
    r->n = 0;
    /* Blank lines are skipped, as csv.DictReader does. */
    while (p < end && (*p == '\n' || *p == '\r')) p++;
    if (p >= end) {
        *pp = p;
        return 0;
    }
    for (;;) {
        if (p < end && *p == '"') {
            const char *q = ++p;
            char *o = 0;
            size_t on = 0;
            for (;;) {
                if (q >= end) {
                    *err_at = p - 1;
                    return -1;
                }
                if (*q == '"') {
                    if (q + 1 < end && q[1] == '"') {
                        /* An escaped quote: from here on the field needs its own copy. */
                        if (!o) {
                            o = rt_xalloc((size_t)(end - p));
                            memcpy(o, p, (size_t)(q - p));
                            on = (size_t)(q - p);
                        }
                        o[on++] = '"';
                        q += 2;
                        continue;
                    }
                    break;
                }
                if (o) o[on++] = *q;
                q++;
            }
            if (o) {
                /* The copy was sized for the rest of the text; give the unused tail back (it
                 * is still the newest block), or a text of many such fields would allocate
                 * quadratic memory: 5,000 of them in 35 KB once ran out of 64 MiB. */
                o = rt_xrealloc(o, (size_t)(end - p), on ? on : 1);
                add_field(r, o, on);
            } else
                add_field(r, p, (size_t)(q - p));
            p = q + 1;
            if (p < end && *p != delim && *p != '\n' && *p != '\r') {
                *err_at = p;
                return -1;
            }
        } else {
            const char *q = p;
            while (q < end && *q != delim && *q != '\n' && *q != '\r') q++;
            add_field(r, p, (size_t)(q - p));
            p = q;
        }
        if (p < end && *p == delim) {
            p++;
            continue;
        }
        if (p < end && *p == '\r') {
            p++;
            if (p < end && *p == '\n') p++;
        } else if (p < end && *p == '\n') {
            p++;
        }
        *pp = p;
        return 1;
    }
}

/* A malformed quoted field, named by record, field and character offset in the text: a
 * quote left open, or text after a closing quote ("2"x: RFC 4180 has no such field). */
static uint64_t fail_quote(const char *text, const char *end, const char *at, size_t row,
                           size_t fields_read) {
    rt_buf m;
    buf_init(&m, 160);
    int open = at < end && *at == '"'; /* the char after a closing quote is never one */
    buf_puts(&m, open ? "malformed quoted field: the quote is never closed"
                      : "malformed quoted field: text after its closing quote");
    buf_puts(&m, " (record ");
    buf_put_uint(&m, row);
    buf_puts(&m, ", field ");
    buf_put_uint(&m, open ? fields_read + 1 : fields_read); /* a closed one was added */
    buf_puts(&m, ", character ");
    size_t chars = 0;
    for (const char *q = text; q < at; q++) chars += ((unsigned char)*q & 0xC0) != 0x80;
    buf_put_uint(&m, chars);
    buf_putc(&m, ')');
    return rt_fail_buf(&m);
}

static uint64_t fail_row(const char *what, size_t row, size_t a, size_t b) {
    rt_buf m;
    buf_init(&m, 96);
    buf_puts(&m, what);
    buf_puts(&m, " (record ");
    buf_put_uint(&m, row);
    if (b) {
        buf_puts(&m, ": ");
        buf_put_uint(&m, a);
        buf_puts(&m, " fields, the header has ");
        buf_put_uint(&m, b);
    }
    buf_putc(&m, ')');
    return rt_fail_buf(&m);
}

/* A repeated name in the header, named with its two columns (1-based). Its first 64 bytes
 * are shown (cut at a character boundary): a name may be as long as the text. */
static uint64_t fail_duplicate(const field *f, size_t first, size_t second) {
    rt_buf m;
    buf_init(&m, 256);
    buf_puts(&m, "duplicate column name ");
    size_t n = f->n;
    if (n > 64) {
        n = 64;
        while (n && ((unsigned char)f->s[n] & 0xC0) == 0x80) n--;
    }
    json_write_string(&m, f->s, n);
    if (n < f->n) buf_puts(&m, "...");
    if (!f->n) buf_puts(&m, " (empty)");
    buf_puts(&m, " in the header (columns ");
    buf_put_uint(&m, first);
    buf_puts(&m, " and ");
    buf_put_uint(&m, second);
    buf_puts(&m, "): each row is an object keyed by column name, so names must be unique; "
                 "rename one, or pass header=false for rows as lists");
    return rt_fail_buf(&m);
}

/* FNV-1a over a name: the header's names are checked for repeats in linear time (a header
 * may have as many fields as the text has characters). */
static uint32_t name_hash(const field *f) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < f->n; i++) h = (h ^ (unsigned char)f->s[i]) * 16777619u;
    return h;
}

/* Each row is an object keyed by the header's names: a repeated one kept only its last
 * value ("a,a\n1,2" gave rows [{"a":"2"}], columns ["a","a"]), silently. The first repeat
 * is refused; 0 when every name is unique (one empty name is a name like any other). */
static uint64_t check_names(const record *names) {
    size_t cap = 16;
    while (cap < names->n * 2) cap *= 2;
    uint32_t *slot = rt_xalloc(cap * sizeof(uint32_t)); /* column index + 1; 0: free */
    memset(slot, 0, cap * sizeof(uint32_t));
    for (size_t i = 0; i < names->n; i++) {
        const field *f = &names->f[i];
        size_t j = name_hash(f) & (cap - 1);
        for (; slot[j]; j = (j + 1) & (cap - 1)) {
            const field *g = &names->f[slot[j] - 1];
            if (g->n == f->n && memcmp(g->s, f->s, f->n) == 0)
                return fail_duplicate(f, slot[j], i + 1);
        }
        slot[j] = (uint32_t)(i + 1);
    }
    return 0;
}

RT_EXPORT("csv_to_json") uint64_t csv_to_json_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *text = rt_arg_string(args, "text", &err);
    if (!text) return err;
    int header = 1;
    jv *h = json_get(args, "header");
    if (h && h->t != J_NULL) {
        if (h->t != J_TRUE && h->t != J_FALSE) return rt_fail("'header' must be a boolean");
        header = h->t == J_TRUE;
    }
    char delim = ',';
    jv *d = json_get(args, "delimiter");
    if (d && d->t != J_NULL) {
        if (d->t != J_STR || d->len != 1 || d->s[0] == '"' || d->s[0] == '\n' || d->s[0] == '\r' ||
            (unsigned char)d->s[0] >= 0x80)
            return rt_fail("'delimiter' must be one ASCII character other than a quote or newline");
        delim = d->s[0];
    }
    const char *p = text->s, *end = text->s + text->len;
    /* A leading UTF-8 byte order mark (Excel's "CSV UTF-8") is no part of the first field:
     * it stayed in the first column's name ("\ufeffa"). Only the leading one. */
    if (end - p >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    record names = {0, 0, 0}, rec = {0, 0, 0};
    const char *err_at = 0;
    size_t row = 0;
    if (header) {
        int st = next_record(&p, end, delim, &names, &err_at);
        row++;
        if (st < 0) return fail_quote(text->s, end, err_at, row, names.n);
        uint64_t dup = check_names(&names);
        if (dup) return dup;
    }
    rt_buf out;
    rt_out_init(&out, (size_t)text->len * 2 + 32);
    buf_puts(&out, "{\"rows\":[");
    size_t count = 0;
    /* A cut output (memory could not hold it) ends the rows: what was written is its first
     * part, sized by the host against output_bytes (see RT_CUT). */
    while (!rt_out_cut) {
        int st = next_record(&p, end, delim, &rec, &err_at);
        if (st == 0) break;
        row++;
        if (st < 0) return fail_quote(text->s, end, err_at, row, rec.n);
        if (count++) buf_putc(&out, ',');
        if (header) {
            if (rec.n != names.n)
                return fail_row("record length differs from the header", row, rec.n, names.n);
            buf_putc(&out, '{');
            for (size_t i = 0; i < rec.n; i++) {
                if (i) buf_putc(&out, ',');
                json_write_string(&out, names.f[i].s, names.f[i].n);
                buf_putc(&out, ':');
                json_write_string(&out, rec.f[i].s, rec.f[i].n);
            }
            buf_putc(&out, '}');
        } else {
            buf_putc(&out, '[');
            for (size_t i = 0; i < rec.n; i++) {
                if (i) buf_putc(&out, ',');
                json_write_string(&out, rec.f[i].s, rec.f[i].n);
            }
            buf_putc(&out, ']');
        }
    }
    buf_puts(&out, "],\"columns\":[");
    for (size_t i = 0; i < names.n; i++) {
        if (i) buf_putc(&out, ',');
        json_write_string(&out, names.f[i].s, names.f[i].n);
    }
    buf_puts(&out, "]}");
    return rt_done(&out);
}
