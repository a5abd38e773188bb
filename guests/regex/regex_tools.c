/* regex_match: a linear-time regular expression search (Thompson NFA simulated as a Pike VM).
 *
 * No backtracking, so no catastrophic patterns: time is O(len(text) * states), memory
 * O(states), where states is the program size times the nesting of unbounded loops (see vm;
 * bounded by MAX_STATES). Leftmost-first priority is kept thread by thread, and a thread knows
 * which loops began their iteration at the current position, so the match found is the one
 * Python's re.search finds, empty-matching loops included ("(?:a?|b)*" on "ab": "a").
 * Syntax (a subset of Python's): literals, '.', [...] / [^...] with ranges, \d \w \s \D \W \S
 * (ASCII meanings, like re.ASCII), \b \B \A \Z, escapes of metacharacters, \n \t \r \f \v and octal
 * (\0, \012, \101), ^ and $ (Python's: $ also before a final newline), groups (...) and
 * (?:...), alternation |, quantifiers * + ? {m} {m,} {,n} {m,n} (greedy; add ? for lazy).
 * Backreferences and lookaround are refused: they cannot run in linear time.
 */
#include "../rt/json.h"

#define MAX_PATTERN 2000
#define MAX_PROGRAM 20000
#define MAX_REPEAT 1000
/* Thread states of the VM (see vm): 12 bytes each at most, so 12 MB of the 64 MiB default. */
#define MAX_STATES 1000000u
/* Calls of gen() per pattern: a bound on compile time whatever the nesting of repeats (each
 * emitted instruction costs a few calls, so no program within MAX_PROGRAM comes near it). */
#define MAX_GEN_CALLS (10 * MAX_PROGRAM)

enum { I_CHAR, I_ANY, I_CLASS, I_MATCH, I_JMP, I_SPLIT, I_BOL, I_EOL, I_ASSERT };

/* I_ASSERT's kinds: \b \B \A \Z (ASCII \w, as re.ASCII). */
enum { A_WORD_B, A_NOT_WORD_B, A_TEXT_START, A_TEXT_END };

typedef struct {
    uint8_t op;
    uint16_t kmax; /* how many unbounded loops (gen_star) enclose it; once compiled, 0 for
                    * an instruction that consumes (or matches): its last state's offset */
    uint32_t x, y; /* CHAR: code point in x; CLASS: class index in x; ASSERT: kind in x;
                    * JMP/SPLIT: targets; JMP: y = 1 when it is a loop's back edge */
    uint32_t base; /* the VM's first state for this instruction (see vm) */
} inst;

typedef struct {
    uint32_t lo, hi;
} range;

typedef struct {
    range *r;
    uint32_t n;
    int negate;
} cls;

/* The AST: built first so that counted repetition can re-emit a sub-pattern. */
enum { N_EMPTY, N_CHAR, N_ANY, N_CLASS, N_BOL, N_EOL, N_ASSERT, N_CAT, N_ALT, N_REP };

typedef struct node {
    uint8_t t;
    uint8_t greedy;
    uint8_t nullable;    /* can match the empty string (set by set_nullable) */
    uint32_t v;          /* char / class index */
    int min, max;        /* N_REP: max -1 = unbounded */
    struct node *a, *b;  /* children */
} node;

typedef struct {
    const uint32_t *p; /* pattern code points */
    uint32_t n, i;
    const char *err;
    uint32_t err_at; /* where the construct that failed starts (Python's error position) */
    cls *classes;
    uint32_t nclasses, cap_classes;
} rparser;

static node *mk(uint8_t t, node *a, node *b) {
    node *n = rt_xalloc(sizeof(node));
    memset(n, 0, sizeof(node));
    n->t = t;
    n->a = a;
    n->b = b;
    n->greedy = 1;
    return n;
}

static uint32_t *decode_utf8(const char *s, uint32_t n, uint32_t *out_n) {
    uint32_t *cp = rt_xalloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t k = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (uint32_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c < 0x80) {
            cp[k++] = c;
            i++;
        } else if (c < 0xE0 && i + 1 < n) {
            cp[k++] = ((c & 0x1Fu) << 6) | (u[i + 1] & 0x3Fu);
            i += 2;
        } else if (c < 0xF0 && i + 2 < n) {
            cp[k++] = ((c & 0x0Fu) << 12) | ((u[i + 1] & 0x3Fu) << 6) | (u[i + 2] & 0x3Fu);
            i += 3;
        } else if (i + 3 < n) {
            cp[k++] = ((c & 0x07u) << 18) | ((u[i + 1] & 0x3Fu) << 12) | ((u[i + 2] & 0x3Fu) << 6) |
                      (u[i + 3] & 0x3Fu);
            i += 4;
        } else {
            break; /* the host sends valid UTF-8; a torn tail is dropped, not read past */
        }
    }
    *out_n = k;
    return cp;
}

static uint32_t new_class(rparser *ps, int negate) {
    if (ps->nclasses == ps->cap_classes) {
        uint32_t cap = ps->cap_classes ? ps->cap_classes * 2 : 8;
        ps->classes = rt_xrealloc(ps->classes, ps->cap_classes * sizeof(cls), cap * sizeof(cls));
        ps->cap_classes = cap;
    }
    cls *c = &ps->classes[ps->nclasses];
    c->r = rt_xalloc(64 * sizeof(range));
    c->n = 0;
    c->negate = negate;
    return ps->nclasses++;
}

static void add_range(rparser *ps, uint32_t k, uint32_t lo, uint32_t hi) {
    cls *c = &ps->classes[k];
    if (c->n && (c->n & 63) == 0) c->r = rt_xrealloc(c->r, c->n * sizeof(range), (c->n + 64) * sizeof(range));
    c->r[c->n].lo = lo;
    c->r[c->n].hi = hi;
    c->n++;
}

/* \d \w \s and their negations, ASCII meanings. Returns 0 when `e` is not one of them. */
static int add_shorthand(rparser *ps, uint32_t k, uint32_t e) {
    switch (e) {
    case 'd': add_range(ps, k, '0', '9'); return 1;
    case 'w':
        add_range(ps, k, '0', '9');
        add_range(ps, k, 'A', 'Z');
        add_range(ps, k, 'a', 'z');
        add_range(ps, k, '_', '_');
        return 1;
    case 's':
        add_range(ps, k, '\t', '\r');
        add_range(ps, k, ' ', ' ');
        return 1;
    case 'D': add_range(ps, k, 0, '0' - 1); add_range(ps, k, '9' + 1, 0x10FFFF); return 1;
    case 'W':
        add_range(ps, k, 0, '0' - 1);
        add_range(ps, k, '9' + 1, 'A' - 1);
        add_range(ps, k, 'Z' + 1, '_' - 1);
        add_range(ps, k, '_' + 1, 'a' - 1);
        add_range(ps, k, 'z' + 1, 0x10FFFF);
        return 1;
    case 'S':
        add_range(ps, k, 0, '\t' - 1);
        add_range(ps, k, '\r' + 1, ' ' - 1);
        add_range(ps, k, ' ' + 1, 0x10FFFF);
        return 1;
    default: return 0;
    }
}

static int hex_digit(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* Escape results other than a character (all negative). */
#define ESC_UNSUPPORTED (-1)
#define ESC_OCTAL_RANGE (-2)
#define ESC_INCOMPLETE (-3)
#define ESC_PAST_UNICODE (-4)

/* A single escaped character (after '\' and its first character e, the rest read from ps),
 * or one of ESC_*. Python's: \xhh \uhhhh \Uhhhhhhhh take exactly that many hex digits,
 * an escaped non-ASCII character or ASCII punctuation stands for itself. */
static int64_t escape_char(rparser *ps, uint32_t e) {
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        int64_t v = 0;
        for (int k = 0; k < digits; k++) {
            int d = ps->i < ps->n ? hex_digit(ps->p[ps->i]) : -1;
            if (d < 0) return ESC_INCOMPLETE;
            v = v * 16 + d;
            ps->i++;
        }
        return v > 0x10FFFF ? ESC_PAST_UNICODE : v;
    }
    switch (e) {
    case 'a': return 7;
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    default: break;
    }
    if (e >= 0x80 || !((e >= '0' && e <= '9') || (e >= 'A' && e <= 'Z') || (e >= 'a' && e <= 'z')))
        return e;
    return ESC_UNSUPPORTED;
}

static const char *escape_error(int64_t v) {
    switch (v) {
    case ESC_OCTAL_RANGE: return "octal escape value outside of range 0-0o377";
    case ESC_INCOMPLETE: return "incomplete escape (\\x takes 2 hex digits, \\u 4, \\U 8)";
    case ESC_PAST_UNICODE: return "bad escape (a \\U value past U+10FFFF)";
    default: return 0;
    }
}

static int is_octal(uint32_t c) { return c >= '0' && c <= '7'; }

/* An octal escape whose first digit e was just read, with at most two more octal digits taken
 * (Python's \0, \012, \101); -1 past 0o377, which Python refuses. */
static int64_t octal_escape(rparser *ps, uint32_t e) {
    int64_t v = e - '0';
    for (int k = 0; k < 2 && ps->i < ps->n && is_octal(ps->p[ps->i]); k++) v = v * 8 + (ps->p[ps->i++] - '0');
    return v > 0377 ? -1 : v;
}

/* An escape inside [...] after its '\' and first character e: any of \0-\7 starts an octal
 * escape there. A character or one of ESC_*. */
static int64_t class_escape(rparser *ps, uint32_t e) {
    if (is_octal(e)) {
        int64_t v = octal_escape(ps, e);
        return v < 0 ? ESC_OCTAL_RANGE : v;
    }
    if (e == 'b') return '\b';
    return escape_char(ps, e);
}

static node *parse_alt(rparser *ps, int depth);

/* Fails the parse with msg at position at: the start of the construct that failed, as
 * Python's re.error.pos (the '(' of an unterminated group, the '[' of an unterminated class,
 * the '\\' of a bad escape, the start of a bad range, a bad count's first digit, a misplaced
 * quantifier or parenthesis itself); the first failure is kept. */
static node *fail_at(rparser *ps, uint32_t at, const char *msg) {
    if (!ps->err) {
        ps->err = msg;
        ps->err_at = at;
    }
    return 0;
}

static int is_shorthand(uint32_t e) {
    return e == 'd' || e == 'w' || e == 's' || e == 'D' || e == 'W' || e == 'S';
}

/* After the '[' at position open. */
static node *parse_class(rparser *ps, uint32_t open) {
    int negate = 0;
    if (ps->i < ps->n && ps->p[ps->i] == '^') {
        negate = 1;
        ps->i++;
    }
    uint32_t k = new_class(ps, negate);
    int first = 1;
    for (;;) {
        if (ps->i >= ps->n) return fail_at(ps, open, "unterminated character class");
        uint32_t at = ps->i; /* where this item (and a range it starts) begins */
        uint32_t c = ps->p[ps->i++];
        if (c == ']' && !first) break;
        first = 0;
        int64_t lo;
        if (c == '\\') {
            if (ps->i >= ps->n) return fail_at(ps, at, "pattern ends with a backslash");
            uint32_t e = ps->p[ps->i++];
            if (add_shorthand(ps, k, e)) {
                /* Python refuses "[\\d-z]"; read as three items it matched '-' too. */
                if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']')
                    return fail_at(ps, at, "bad character range (a class shorthand cannot bound a range)");
                continue;
            }
            lo = class_escape(ps, e);
            if (escape_error(lo)) return fail_at(ps, at, escape_error(lo));
            if (lo < 0) return fail_at(ps, at, "unsupported escape in a character class");
        } else {
            lo = c;
        }
        int64_t hi = lo;
        if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            ps->i++;
            uint32_t hi_at = ps->i;
            uint32_t h = ps->p[ps->i++];
            if (h == '\\') {
                if (ps->i >= ps->n) return fail_at(ps, hi_at, "pattern ends with a backslash");
                uint32_t e = ps->p[ps->i++];
                if (is_shorthand(e))
                    return fail_at(ps, at, "bad character range (a class shorthand cannot bound a range)");
                hi = class_escape(ps, e);
                if (escape_error(hi)) return fail_at(ps, hi_at, escape_error(hi));
                if (hi < 0) return fail_at(ps, hi_at, "unsupported escape in a character range");
            } else {
                hi = h;
            }
            if (hi < lo) return fail_at(ps, at, "bad character range (end before start)");
        }
        add_range(ps, k, (uint32_t)lo, (uint32_t)hi);
    }
    node *n = mk(N_CLASS, 0, 0);
    n->v = k;
    return n;
}

static int is_dec(uint32_t c) { return c >= '0' && c <= '9'; }

/* Whether a counted repeat starts at i: Python's {m}, {m,}, {,n}, {m,n} and {,} ({,n} is
 * {0,n}). Any other '{' is a literal. */
static int brace_quantifier(const rparser *ps, uint32_t i) {
    if (i >= ps->n || ps->p[i] != '{') return 0;
    uint32_t j = i + 1;
    if (j < ps->n && ps->p[j] == '}') return 0; /* "{}" */
    while (j < ps->n && is_dec(ps->p[j])) j++;
    if (j < ps->n && ps->p[j] == ',') {
        j++;
        while (j < ps->n && is_dec(ps->p[j])) j++;
    }
    return j < ps->n && ps->p[j] == '}';
}

static int parse_int(rparser *ps, int *out) {
    if (ps->i >= ps->n || ps->p[ps->i] < '0' || ps->p[ps->i] > '9') return 0;
    int v = 0;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
        v = v * 10 + (int)(ps->p[ps->i++] - '0');
        if (v > MAX_REPEAT) v = MAX_REPEAT + 1;
    }
    *out = v;
    return 1;
}

static node *parse_atom(rparser *ps, int depth) {
    uint32_t at = ps->i;
    uint32_t c = ps->p[ps->i++];
    switch (c) {
    case '.': return mk(N_ANY, 0, 0);
    case '^': return mk(N_BOL, 0, 0);
    case '$': return mk(N_EOL, 0, 0);
    case '[': return parse_class(ps, at);
    case '(': {
        if (depth > 200) return fail_at(ps, at, "groups nested too deeply (limit 200)");
        if (ps->i < ps->n && ps->p[ps->i] == '?') {
            if (ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':')
                ps->i += 2;
            else
                return fail_at(ps, at, "(?...) groups other than (?:...) are not supported (lookaround is not linear-time; inline flags and named groups are not implemented)");
        }
        node *inner = parse_alt(ps, depth + 1);
        if (!inner) return 0;
        if (ps->i >= ps->n || ps->p[ps->i] != ')') return fail_at(ps, at, "missing ), unterminated group");
        ps->i++;
        return inner;
    }
    case ')': return fail_at(ps, at, "unbalanced parenthesis");
    case '*': case '+': case '?': return fail_at(ps, at, "nothing to repeat");
    case '{':
        if (brace_quantifier(ps, at)) return fail_at(ps, at, "nothing to repeat");
        break;
    case '\\': {
        if (ps->i >= ps->n) return fail_at(ps, at, "pattern ends with a backslash");
        uint32_t e = ps->p[ps->i++];
        /* Python: \0 and a \1-\7 followed by two more octal digits are octal escapes; any
         * other digit starts a group reference. */
        if (e == '0' || (is_octal(e) && ps->i + 1 < ps->n && is_octal(ps->p[ps->i]) &&
                         is_octal(ps->p[ps->i + 1]))) {
            int64_t v = octal_escape(ps, e);
            if (v < 0) return fail_at(ps, at, "octal escape value outside of range 0-0o377");
            node *n = mk(N_CHAR, 0, 0);
            n->v = (uint32_t)v;
            return n;
        }
        /* At the group number, as Python's "invalid group reference". */
        if (e >= '1' && e <= '9') return fail_at(ps, at + 1, "backreferences are not supported (not linear-time)");
        uint32_t k = ps->nclasses;
        if (is_shorthand(e)) {
            k = new_class(ps, 0);
            add_shorthand(ps, k, e);
            node *n = mk(N_CLASS, 0, 0);
            n->v = k;
            return n;
        }
        if (e == 'b' || e == 'B' || e == 'A' || e == 'Z') {
            node *n = mk(N_ASSERT, 0, 0);
            n->v = e == 'b' ? A_WORD_B : e == 'B' ? A_NOT_WORD_B : e == 'A' ? A_TEXT_START : A_TEXT_END;
            return n;
        }
        int64_t ch = escape_char(ps, e);
        if (escape_error(ch)) return fail_at(ps, at, escape_error(ch));
        if (ch < 0) return fail_at(ps, at, "unsupported escape (supported: \\d \\w \\s \\D \\W \\S \\b \\B \\A \\Z \\a \\n \\t \\r \\f \\v, \\xhh \\uhhhh \\Uhhhhhhhh, octal \\0 \\012 \\101 and escaped punctuation)");
        node *n = mk(N_CHAR, 0, 0);
        n->v = (uint32_t)ch;
        return n;
    }
    default: break;
    }
    node *n = mk(N_CHAR, 0, 0);
    n->v = c;
    return n;
}

static int at_quantifier(const rparser *ps) {
    if (ps->i >= ps->n) return 0;
    uint32_t c = ps->p[ps->i];
    if (c == '*' || c == '+' || c == '?') return 1;
    return brace_quantifier(ps, ps->i);
}

static node *parse_repeat(rparser *ps, int depth) {
    int group = ps->p[ps->i] == '(';
    node *a = parse_atom(ps, depth);
    if (!a || ps->i >= ps->n) return a;
    uint32_t at = ps->i; /* the quantifier's start */
    uint32_t c = ps->p[ps->i];
    int min, max;
    if (c == '*') {
        min = 0;
        max = -1;
        ps->i++;
    } else if (c == '+') {
        min = 1;
        max = -1;
        ps->i++;
    } else if (c == '?') {
        min = 0;
        max = 1;
        ps->i++;
    } else if (c == '{') {
        if (!brace_quantifier(ps, ps->i)) return a; /* a literal '{', as in Python */
        ps->i++;
        if (!parse_int(ps, &min)) min = 0;
        max = min;
        if (ps->p[ps->i] == ',') {
            ps->i++;
            if (!parse_int(ps, &max)) max = -1;
        }
        ps->i++; /* the '}' brace_quantifier saw */
        /* Python names the count's first digit, after the '{'. */
        if (min > MAX_REPEAT || max > MAX_REPEAT) return fail_at(ps, at + 1, "repeat count over 1000");
        if (max >= 0 && max < min) return fail_at(ps, at + 1, "min repeat greater than max repeat");
    } else {
        return a;
    }
    /* Python refuses a quantifier straight after an anchor (not after a group holding one). */
    if (!group && (a->t == N_BOL || a->t == N_EOL || a->t == N_ASSERT)) return fail_at(ps, at, "nothing to repeat");
    node *r = mk(N_REP, a, 0);
    r->min = min;
    r->max = max;
    if (ps->i < ps->n && ps->p[ps->i] == '?') {
        r->greedy = 0;
        ps->i++;
    } else if (ps->i < ps->n && ps->p[ps->i] == '+') {
        return fail_at(ps, at, "possessive quantifiers (*+ ++ ?+ {m,n}+) are not supported");
    }
    if (at_quantifier(ps)) return fail_at(ps, ps->i, "multiple repeat");
    return r;
}

static node *parse_cat(rparser *ps, int depth) {
    node *acc = mk(N_EMPTY, 0, 0);
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        node *r = parse_repeat(ps, depth);
        if (!r) return 0;
        acc = acc->t == N_EMPTY ? r : mk(N_CAT, acc, r);
    }
    return acc;
}

static node *parse_alt(rparser *ps, int depth) {
    node *a = parse_cat(ps, depth);
    if (!a) return 0;
    while (ps->i < ps->n && ps->p[ps->i] == '|') {
        ps->i++;
        node *b = parse_cat(ps, depth);
        if (!b) return 0;
        a = mk(N_ALT, a, b);
    }
    return a;
}

typedef struct {
    inst *code;
    uint32_t n, cap;
    uint32_t calls; /* gen() calls so far, against MAX_GEN_CALLS */
    int overflow;
    uint16_t depth; /* unbounded loops around the instructions being emitted */
} prog;

static uint32_t emit(prog *pg, uint8_t op, uint32_t x, uint32_t y) {
    if (pg->n >= MAX_PROGRAM) {
        pg->overflow = 1;
        return pg->n;
    }
    if (pg->n == pg->cap) {
        uint32_t cap = pg->cap ? pg->cap * 2 : 64;
        pg->code = rt_xrealloc(pg->code, pg->cap * sizeof(inst), cap * sizeof(inst));
        pg->cap = cap;
    }
    pg->code[pg->n].op = op;
    pg->code[pg->n].kmax = pg->depth;
    pg->code[pg->n].x = x;
    pg->code[pg->n].y = y;
    return pg->n++;
}

static void gen(prog *pg, const node *n);

static void gen_optional(prog *pg, const node *a, int greedy) {
    uint32_t split = emit(pg, I_SPLIT, 0, 0);
    gen(pg, a);
    if (pg->overflow) return;
    uint32_t next = pg->n;
    pg->code[split].x = greedy ? split + 1 : next;
    pg->code[split].y = greedy ? next : split + 1;
}

/* Whether each node can match the empty string, bottom-up (the AST is a tree: linear). */
static int set_nullable(node *n) {
    switch (n->t) {
    case N_CHAR: case N_ANY: case N_CLASS: n->nullable = 0; break;
    case N_CAT: n->nullable = (uint8_t)(set_nullable(n->a) & set_nullable(n->b)); break;
    case N_ALT: n->nullable = (uint8_t)(set_nullable(n->a) | set_nullable(n->b)); break;
    case N_REP: n->nullable = (uint8_t)(set_nullable(n->a) | (n->min == 0)); break;
    default: n->nullable = 1; /* empty, anchors, assertions */
    }
    return n->nullable;
}

/* A loop whose body can match empty: its body and back edge are one level deeper than the
 * split and the exit, and the back edge is marked (see vm). A body that cannot match empty
 * never ends an iteration where it began, so such a loop needs neither: its instructions
 * keep one VM state per enclosing nullable loop, not per loop ("\\w+", "(?:a|b)*c" run
 * as before the fix). */
static void gen_star(prog *pg, const node *a, int greedy) {
    uint32_t split = emit(pg, I_SPLIT, 0, 0);
    pg->depth = (uint16_t)(pg->depth + a->nullable);
    gen(pg, a);
    emit(pg, I_JMP, split, a->nullable);
    pg->depth = (uint16_t)(pg->depth - a->nullable);
    if (pg->overflow) return;
    uint32_t next = pg->n;
    pg->code[split].x = greedy ? split + 1 : next;
    pg->code[split].y = greedy ? next : split + 1;
}

static void gen(prog *pg, const node *n) {
    if (pg->overflow) return;
    if (++pg->calls > MAX_GEN_CALLS) {
        pg->overflow = 1;
        return;
    }
    switch (n->t) {
    case N_EMPTY: return;
    case N_CHAR: emit(pg, I_CHAR, n->v, 0); return;
    case N_ANY: emit(pg, I_ANY, 0, 0); return;
    case N_CLASS: emit(pg, I_CLASS, n->v, 0); return;
    case N_BOL: emit(pg, I_BOL, 0, 0); return;
    case N_EOL: emit(pg, I_EOL, 0, 0); return;
    case N_ASSERT: emit(pg, I_ASSERT, n->v, 0); return;
    case N_CAT: gen(pg, n->a); gen(pg, n->b); return;
    case N_ALT: {
        uint32_t split = emit(pg, I_SPLIT, 0, 0);
        gen(pg, n->a);
        uint32_t jmp = emit(pg, I_JMP, 0, 0);
        uint32_t second = pg->n;
        gen(pg, n->b);
        if (pg->overflow) return;
        pg->code[split].x = split + 1;
        pg->code[split].y = second;
        pg->code[jmp].x = pg->n;
        return;
    }
    case N_REP: {
        /* A sub-pattern that compiles to nothing does so every time: one copy stands for all
         * (nested, "(?:(?:(?:){1000}){1000}){1000}" was 10^9 calls that emitted nothing). */
        uint32_t before = pg->n;
        for (int i = 0; i < n->min && !pg->overflow; i++) {
            gen(pg, n->a);
            if (pg->n == before) break;
        }
        if (n->max < 0) {
            gen_star(pg, n->a, n->greedy);
        } else {
            for (int i = n->min; i < n->max && !pg->overflow; i++) gen_optional(pg, n->a, n->greedy);
        }
        return;
    }
    default: return;
    }
}

static int in_class(const cls *c, uint32_t ch) {
    int in = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (ch >= c->r[i].lo && ch <= c->r[i].hi) {
            in = 1;
            break;
        }
    return in != c->negate;
}

typedef struct {
    uint32_t *pc, *start;
    uint32_t n;
} tlist;

/* Python's rule for a loop whose iteration matched empty (sre's MAX_UNTIL / MIN_UNTIL
 * compare the position with the one where the iteration began): it does not iterate again,
 * it goes on with what follows the loop, at that path's priority. "(|a)*" on "aa" matches "",
 * "(?:a?|b)*" on "ab" matches "a" (the second iteration's empty a? ends the loop before the
 * alternative b is tried).
 *
 * So a path's future depends on more than its instruction: on which enclosing loops began
 * their current iteration at this very position. Those are always the innermost ones (a loop
 * that began here began its inner loops here too), so one number says it: k, the index
 * (outermost = 0) of the outermost such loop, or the instruction's depth when there is none.
 * A loop at index i has begun here iff k <= i. Moving to an instruction clamps k to its
 * depth; entering a loop's body from its split keeps k, which at the body's depth marks that
 * loop as begun here. Consuming a character resets k (nothing began at the next position).
 *
 * The Pike VM keeps one thread per (instruction, k) and position instead of one per
 * instruction: merging two paths that differ in k was the bug ("(a*|b)*" on "aabb" matched
 * "aabb", Python "aa": the inner a* loop was reached first by the path whose outer iteration
 * began earlier, and the later path, whose empty iteration would have ended the outer loop,
 * was dropped). A consuming instruction (and MATCH) has one state whatever k, since k does
 * not survive the character. Still linear: O(len(text) * states). */
typedef struct {
    const prog *pg;
    uint32_t *mark;  /* per state: the position id that last visited it */
    uint32_t *stack; /* pc | k << 16 (pc < MAX_PROGRAM + 1 < 2^16; k <= the nesting bound) */
    const uint32_t *text;
    uint32_t n;
} vm;

static int is_consuming(uint8_t op) { return op == I_CHAR || op == I_ANY || op == I_CLASS || op == I_MATCH; }

static int is_word(const vm *v, uint32_t pos) {
    uint32_t c = v->text[pos];
    return c < 0x80 && ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_');
}

/* sre's at(): the text is the whole string; an empty text has no word boundary, and no
 * non-boundary either (Python before 3.14). */
static int assert_holds(const vm *v, uint32_t kind, uint32_t pos) {
    if (kind == A_TEXT_START) return pos == 0;
    if (kind == A_TEXT_END) return pos == v->n;
    if (v->n == 0) return 0;
    int before = pos > 0 && is_word(v, pos - 1);
    int after = pos < v->n && is_word(v, pos);
    return kind == A_WORD_B ? before != after : before == after;
}

/* Adds the epsilon closure of (pc0, k0) to l in priority order (an explicit stack: no deep
 * recursion). k0 = 0xFFFF: nothing began here (clamped to each instruction's depth). */
static inline __attribute__((always_inline)) void add_thread_impl(vm *v, tlist *l, uint32_t gen_id,
                                                                 uint32_t pc0, uint32_t k0,
                                                                 uint32_t start, uint32_t pos,
                                                                 int flat) {
    /* Locals, not v->...: stores through mark and stack could alias v's fields, and the
     * compiler would reload them on every step. */
    const inst *code = v->pg->code;
    uint32_t *stack = v->stack, *mark = v->mark;
    uint32_t sp = 0;
    stack[sp++] = flat ? pc0 : pc0 | k0 << 16;
    while (sp) {
        uint32_t e = stack[--sp];
        uint32_t pc = flat ? e : e & 0xFFFFu, k = flat ? 0 : e >> 16;
        const inst *in = &code[pc];
        if (k > in->kmax) k = in->kmax;
        uint32_t s = flat ? pc : in->base + k;
        if (mark[s] == gen_id) continue;
        mark[s] = gen_id;
        uint32_t next = pc + 1;
        switch (in->op) {
        case I_JMP:
            /* A loop's back edge (depth = the split's + 1): when the loop began this
             * iteration here (k <= the split's depth), the iteration matched empty, and
             * Python leaves the loop (its exit is the instruction after the back edge). */
            if (!(in->y && k < in->kmax)) next = in->x;
            break;
        case I_SPLIT:
            stack[sp++] = flat ? in->y : in->y | k << 16; /* pushed first: explored after x, i.e. lower priority */
            next = in->x;
            break;
        case I_BOL:
            if (pos != 0) continue;
            break;
        case I_EOL:
            if (!(pos == v->n || (pos + 1 == v->n && v->text[pos] == '\n'))) continue;
            break;
        case I_ASSERT:
            if (!assert_holds(v, in->x, pos)) continue;
            break;
        default:
            l->pc[l->n] = pc;
            l->start[l->n] = start;
            l->n++;
            continue;
        }
        stack[sp++] = flat ? next : next | k << 16;
    }
}

/* A program without loops that can match empty (most) has one state per instruction and
 * k = 0 throughout: the same walk without k, as the VM was before it had to know. */
static void add_thread_flat(vm *v, tlist *l, uint32_t gen_id, uint32_t pc0, uint32_t start, uint32_t pos) {
    add_thread_impl(v, l, gen_id, pc0, 0, start, pos, 1);
}

static void add_thread(vm *v, tlist *l, uint32_t gen_id, uint32_t pc0, uint32_t k0, uint32_t start,
                       uint32_t pos) {
    add_thread_impl(v, l, gen_id, pc0, k0, start, pos, 0);
}

RT_EXPORT("regex_match") uint64_t regex_match_tool(const char *in, uint32_t n) {
    uint64_t err;
    jv *args = rt_args(in, n, &err);
    if (!args) return err;
    jv *pat = rt_arg_string(args, "pattern", &err);
    if (!pat) return err;
    jv *text = rt_arg_string(args, "text", &err);
    if (!text) return err;
    rparser ps;
    memset(&ps, 0, sizeof ps);
    ps.p = decode_utf8(pat->s, pat->len, &ps.n);
    if (ps.n > MAX_PATTERN) return rt_fail("pattern longer than 2000 characters");
    node *ast = parse_alt(&ps, 0);
    if (ast && ps.i < ps.n) ast = fail_at(&ps, ps.i, "unbalanced parenthesis"); /* a ')' */
    if (!ast) {
        rt_buf m;
        buf_init(&m, 128);
        buf_puts(&m, "invalid pattern: ");
        buf_puts(&m, ps.err ? ps.err : "syntax error");
        buf_puts(&m, " at position ");
        buf_put_uint(&m, ps.err_at);
        return rt_fail_buf(&m);
    }
    prog pg = {0, 0, 0, 0, 0, 0};
    set_nullable(ast);
    gen(&pg, ast);
    emit(&pg, I_MATCH, 0, 0);
    if (pg.overflow) return rt_fail("pattern too large once repeats are expanded (limit 20000 steps)");

    uint32_t tn;
    const uint32_t *t = decode_utf8(text->s, text->len, &tn);
    uint32_t m = pg.n;
    /* States: one per consuming instruction, depth + 1 for the others (see vm). */
    uint64_t states = 0;
    for (uint32_t pc = 0; pc < m; pc++) {
        inst *in = &pg.code[pc];
        in->base = (uint32_t)states;
        if (is_consuming(in->op)) in->kmax = 0;
        states += (uint64_t)in->kmax + 1u;
        if (states > MAX_STATES)
            return rt_fail("pattern too large: its nested unbounded repeats need more than 1000000 automaton states");
    }
    vm v = {&pg, rt_xalloc((size_t)states * sizeof(uint32_t)), 0, t, tn};
    int flat = states == m; /* no instruction has a second state */
    memset(v.mark, 0xFF, (size_t)states * sizeof(uint32_t));
    /* Each state is expanded once per position and pushes at most two entries, of which one
     * replaces it: at most states + 1 entries (pairs) are ever waiting. */
    v.stack = rt_xalloc(((size_t)states + 2) * sizeof(uint32_t));
    tlist a = {rt_xalloc(m * sizeof(uint32_t)), rt_xalloc(m * sizeof(uint32_t)), 0};
    tlist b = {rt_xalloc(m * sizeof(uint32_t)), rt_xalloc(m * sizeof(uint32_t)), 0};
    tlist *cl = &a, *nl = &b;
    int64_t best_start = -1, best_end = -1;
    uint32_t gen_id = 0;
    for (uint32_t pos = 0;; pos++) {
        /* A new attempt starting here has the lowest priority of all live threads. */
        if (best_start < 0) {
            if (flat)
                add_thread_flat(&v, cl, gen_id, 0, pos, pos);
            else
                add_thread(&v, cl, gen_id, 0, 0xFFFF, pos, pos);
        }
        if (cl->n == 0 && (best_start >= 0 || pos >= tn)) break;
        gen_id++;
        nl->n = 0;
        for (uint32_t k = 0; k < cl->n; k++) {
            const inst *ip = &pg.code[cl->pc[k]];
            uint32_t st = cl->start[k];
            if (ip->op == I_MATCH) {
                best_start = st;
                best_end = pos;
                break; /* lower-priority threads lose to this match */
            }
            if (pos >= tn) continue;
            uint32_t ch = t[pos];
            int ok = ip->op == I_CHAR ? ch == ip->x
                     : ip->op == I_ANY ? ch != '\n'
                                       : in_class(&ps.classes[ip->x], ch);
            if (!ok) continue;
            if (flat)
                add_thread_flat(&v, nl, gen_id, cl->pc[k] + 1, st, pos + 1);
            else
                add_thread(&v, nl, gen_id, cl->pc[k] + 1, 0xFFFF, st, pos + 1);
        }
        /* At the end of the text no thread can consume more: everything is decided. */
        if (pos >= tn) break;
        tlist *tmp = cl;
        cl = nl;
        nl = tmp;
    }
    rt_buf out;
    rt_out_init(&out, 64);
    if (best_start < 0) {
        buf_puts(&out, "{\"matched\":false,\"match\":null,\"start\":null,\"end\":null}");
        return rt_done(&out);
    }
    /* Offsets are code points, as Python's str indices are. */
    const unsigned char *u = (const unsigned char *)text->s;
    uint32_t bs = 0, be = 0, cpi = 0;
    for (uint32_t i = 0; i <= text->len; i++) {
        if (i == text->len || (u[i] & 0xC0) != 0x80) {
            if (cpi == (uint32_t)best_start) bs = i;
            if (cpi == (uint32_t)best_end) be = i;
            cpi++;
        }
    }
    buf_puts(&out, "{\"matched\":true,\"match\":");
    json_write_string(&out, text->s + bs, be - bs);
    buf_puts(&out, ",\"start\":");
    buf_put_uint(&out, (uint64_t)best_start);
    buf_puts(&out, ",\"end\":");
    buf_put_uint(&out, (uint64_t)best_end);
    buf_putc(&out, '}');
    return rt_done(&out);
}
