/* Strict JSON (json.h): a scan of the text against RFC 8259 before json-c
 * builds a tree from it, and a writer of json-c trees. */
#include "json.h"

#include "safetensors.h" /* a header's bounds: ST_MAX_TENSORS, ST_MAX_VALUES */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 32 /* json-c's default: a deeper text would fail there anyway */
#define BARE_WORD "a bare word (JSON has only true, false and null: no NaN, Infinity or others)"

typedef struct jscan {
    const unsigned char *start, *p, *end;
    int64_t keys; /* object members seen, for the duplicate check */
    int64_t top_keys; /* members of the outermost object */
    int64_t values;   /* JSON values of every kind, containers included */
    int depth;
    const char *why;
} jscan;

static int js_fail(jscan *s, const char *why)
{
    s->why = why;
    return 0;
}

static int js_is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void js_ws(jscan *s)
{
    while (s->p < s->end && js_is_ws(*s->p))
        s->p++;
}

static int js_digit(const jscan *s) { return s->p < s->end && *s->p >= '0' && *s->p <= '9'; }

static int js_hex4(jscan *s, unsigned *u)
{
    *u = 0;
    if (s->end - s->p < 4)
        return js_fail(s, "a truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        const unsigned char c = *s->p++;
        const int v = c >= '0' && c <= '9' ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (v < 0)
            return js_fail(s, "a bad \\u escape");
        *u = *u << 4 | (unsigned)v;
    }
    return 1;
}

static int js_string(jscan *s)
{
    s->p++; /* the opening quote */
    for (;;) {
        if (s->p >= s->end)
            return js_fail(s, "an unterminated string");
        const unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            return 1;
        }
        if (c < 0x20)
            return js_fail(s, "a control character (or NUL) in a string");
        if (c == '\\') {
            if (s->end - s->p < 2)
                return js_fail(s, "an unterminated string");
            const unsigned char e = s->p[1];
            s->p += 2;
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't')
                continue;
            if (e != 'u')
                return js_fail(s, "a bad escape in a string");
            unsigned u, lo;
            if (!js_hex4(s, &u))
                return 0;
            if (u == 0)
                return js_fail(s, "\\u0000 in a string");
            if (u >= 0xdc00 && u < 0xe000)
                return js_fail(s, "a lone low surrogate");
            if (u >= 0xd800 && u < 0xdc00) {
                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
                    return js_fail(s, "a lone high surrogate");
                s->p += 2;
                if (!js_hex4(s, &lo))
                    return 0;
                if (lo < 0xdc00 || lo >= 0xe000)
                    return js_fail(s, "a lone high surrogate");
            }
            continue;
        }
        if (c < 0x80) {
            s->p++;
            continue;
        }
        /* one UTF-8 sequence: shortest form, no surrogates, at most U+10FFFF */
        int more;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            more = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            more = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return js_fail(s, "invalid UTF-8 in a string");
        }
        if (s->end - s->p <= more)
            return js_fail(s, "invalid UTF-8 in a string");
        for (int i = 1; i <= more; i++) {
            if ((s->p[i] & 0xc0) != 0x80)
                return js_fail(s, "invalid UTF-8 in a string");
            cp = cp << 6 | (s->p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
            return js_fail(s, "invalid UTF-8 in a string");
        s->p += more + 1;
    }
}

static int js_number(jscan *s)
{
    if (*s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0') {
        s->p++;
    } else if (js_digit(s)) {
        while (js_digit(s))
            s->p++;
    } else {
        return js_fail(s, "a malformed number");
    }
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!js_digit(s))
            return js_fail(s, "a malformed number");
        while (js_digit(s))
            s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!js_digit(s))
            return js_fail(s, "a malformed number");
        while (js_digit(s))
            s->p++;
    }
    return 1;
}

static int js_literal(jscan *s, const char *word)
{
    const size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return js_fail(s, BARE_WORD);
    s->p += n;
    return 1;
}

static int js_value(jscan *s)
{
    s->values++;
    if (s->p >= s->end)
        return js_fail(s, "a truncated text");
    const unsigned char c = *s->p;
    if (c == '{' || c == '[') {
        const unsigned char close = c == '{' ? '}' : ']';
        if (++s->depth > JSON_MAX_DEPTH)
            return js_fail(s, "nesting deeper than 32");
        s->p++;
        js_ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            s->depth--;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                js_ws(s);
                if (s->p >= s->end)
                    return js_fail(s, "a truncated text");
                if (*s->p != '"')
                    return js_fail(s, *s->p == '/'    ? "a comment"
                                      : *s->p == '\'' ? "a single-quoted key"
                                      : *s->p == '}'  ? "a trailing comma"
                                                      : "an object key that is not a string");
                if (!js_string(s))
                    return 0;
                s->keys++;
                s->top_keys += s->depth == 1;
                js_ws(s);
                if (s->p >= s->end || *s->p != ':')
                    return js_fail(s, "a key without ':'");
                s->p++;
            }
            js_ws(s);
            if (!js_value(s))
                return 0;
            js_ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == close) {
                s->p++;
                s->depth--;
                return 1;
            }
            if (s->p < s->end && *s->p == '/')
                return js_fail(s, "a comment");
            return js_fail(s, c == '{' ? "a member not followed by ',' or '}'"
                                       : "an element not followed by ',' or ']'");
        }
    }
    switch (c) {
    case '"': return js_string(s);
    case 't': return js_literal(s, "true");
    case 'f': return js_literal(s, "false");
    case 'n': return js_literal(s, "null");
    case '/': return js_fail(s, "a comment");
    case '\'': return js_fail(s, "a single-quoted string");
    case ']':
    case '}': return js_fail(s, "a trailing comma or a stray bracket");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return js_number(s);
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
            return js_fail(s, BARE_WORD);
        return js_fail(s, "a character that starts no JSON value");
    }
}

/* Members of every object under o. */
static int64_t json_members(json_object *o)
{
    int64_t n = 0;
    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, k, v)
        {
            (void)k;
            n += 1 + json_members(v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            n += json_members(json_object_array_get_idx(o, i));
    }
    return n;
}

lattice_status lattice__json_parse(const char *text, size_t len, int header, const char *what,
                                   json_object **out, char *err)
{
    *out = NULL;
    jscan s = {(const unsigned char *)text, (const unsigned char *)text,
               (const unsigned char *)text + len, 0, 0, 0, 0, NULL};
    if (!header)
        js_ws(&s);
    const unsigned char *begin = s.p;
    int ok = 1;
    if (s.p >= s.end || *s.p != '{')
        ok = js_fail(&s, "no '{' where the object begins");
    ok = ok && js_value(&s);
    const unsigned char *stop = s.p;
    while (ok && s.p < s.end && (header ? *s.p == ' ' : js_is_ws(*s.p)))
        s.p++;
    if (ok && s.p < s.end)
        ok = js_fail(&s, header ? "bytes other than spaces after the header's object"
                                : "bytes after the object");
    if (!ok)
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is not strict JSON: %s at byte %zu",
                                  what, s.why, (size_t)(s.p - s.start));
    if (stop - begin > INT32_MAX)
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is over 2 GiB", what);
    /* json-c spends a kilobyte or more on an object of a few dozen bytes of
     * text: the counts, not the length, bound what the tree will take */
    if (header && s.top_keys > ST_MAX_TENSORS + 1)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s names %lld tensors, more than the %d a file may hold", what,
                                  (long long)s.top_keys, ST_MAX_TENSORS);
    if (header && s.values > ST_MAX_VALUES)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s holds %lld JSON values, more than the %d its tensors may "
                                  "need", what, (long long)s.values, ST_MAX_VALUES);
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the JSON parser");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, (const char *)begin, (int)(stop - begin));
    const enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!o || jerr != json_tokener_success || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        /* the text passed the check above: json-c failed for want of memory, or
         * disagrees with RFC 8259 somewhere */
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s: json-c cannot parse it (%s)", what,
                                  json_tokener_error_desc(jerr));
    }
    if (json_members(o) != s.keys) {
        json_object_put(o);
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s names a key twice in one object", what);
    }
    *out = o;
    return LATTICE_OK;
}

int lattice__json_add(json_object *obj, const char *key, json_object *val)
{
    if (!obj || !val ||
        json_object_object_add_ex(obj, key, val, JSON_C_OBJECT_ADD_CONSTANT_KEY) != 0) {
        json_object_put(val);
        return 0;
    }
    return 1;
}

int lattice__json_push(json_object *arr, json_object *val)
{
    if (!arr || !val || json_object_array_add(arr, val) != 0) {
        json_object_put(val);
        return 0;
    }
    return 1;
}

/* JSON text into a growing buffer that remembers a failed allocation. */
typedef struct jbuf {
    char *s;
    size_t len, cap;
    int failed;
} jbuf;

static void jb_put(jbuf *b, const char *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->failed = 1;
            return;
        }
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void jb_str(jbuf *b, const char *p, size_t n)
{
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jb_put(b, esc, 6);
        } else {
            jb_put(b, (const char *)&p[i], 1);
        }
    }
    jb_put(b, "\"", 1);
}

/* The shortest decimal that reads back as x, laid out as Python's repr(x)
 * (and so json.dump) lays it out: positional for exponents -4 .. 15, with
 * ".0" when it has no fraction ("1000000.0", "0.0001"), else "1e-06",
 * "1.5e+16". x is finite. */
static int short_double(char *num, size_t size, double x)
{
    int digits = 1;
    for (; digits < 17; digits++) {
        snprintf(num, size, "%.*e", digits - 1, x);
        if (strtod(num, NULL) == x)
            break;
    }
    snprintf(num, size, "%.*e", digits - 1, x);
    const int exp10 = atoi(strchr(num, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16)
        return (int)strlen(num);
    const int decimals = digits - 1 - exp10 > 0 ? digits - 1 - exp10 : 0;
    int n = snprintf(num, size, "%.*f", decimals, x);
    if (!strchr(num, '.'))
        n += snprintf(num + n, size - (size_t)n, ".0");
    return n;
}

/* A line break and the indent of depth levels (pretty output only). */
static void jb_newline(jbuf *b, int indent, int depth)
{
    static const char spaces[] = "                                ";
    if (!indent)
        return;
    jb_put(b, "\n", 1);
    for (int left = indent * depth; left > 0; left -= (int)sizeof spaces - 1)
        jb_put(b, spaces, (size_t)(left < (int)sizeof spaces - 1 ? left : (int)sizeof spaces - 1));
}

/* indent 0: compact, doubles as %.17g. indent > 0: one member or element a
 * line, indented by that many spaces a level, ": " after keys, doubles as
 * short_double (json.dump(o, indent=...)'s layout). */
static void jb_value(jbuf *b, json_object *o, int indent, int depth)
{
    char num[40];
    switch (json_object_get_type(o)) {
    case json_type_object: {
        int first = 1;
        jb_put(b, "{", 1);
        json_object_object_foreach(o, k, v)
        {
            if (!first)
                jb_put(b, ",", 1);
            first = 0;
            jb_newline(b, indent, depth + 1);
            jb_str(b, k, strlen(k));
            jb_put(b, ": ", indent ? 2 : 1);
            jb_value(b, v, indent, depth + 1);
        }
        if (!first)
            jb_newline(b, indent, depth);
        jb_put(b, "}", 1);
        break;
    }
    case json_type_array: {
        const size_t n = json_object_array_length(o);
        jb_put(b, "[", 1);
        for (size_t i = 0; i < n; i++) {
            if (i)
                jb_put(b, ",", 1);
            jb_newline(b, indent, depth + 1);
            jb_value(b, json_object_array_get_idx(o, i), indent, depth + 1);
        }
        if (n)
            jb_newline(b, indent, depth);
        jb_put(b, "]", 1);
        break;
    }
    case json_type_int:
        jb_put(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)json_object_get_int64(o)));
        break;
    case json_type_double: {
        const double x = json_object_get_double(o);
        int n = isnan(x) ? snprintf(num, sizeof num, "NaN")
                : isinf(x) ? snprintf(num, sizeof num, x > 0 ? "Infinity" : "-Infinity")
                : indent   ? short_double(num, sizeof num, x)
                           : snprintf(num, sizeof num, "%.17g", x);
        if (isfinite(x) && !strpbrk(num, ".e")) /* stays a double when read back */
            n += snprintf(num + n, sizeof num - (size_t)n, ".0");
        jb_put(b, num, (size_t)n);
        break;
    }
    case json_type_string:
        jb_str(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        break;
    case json_type_boolean:
        jb_put(b, json_object_get_boolean(o) ? "true" : "false", json_object_get_boolean(o) ? 4 : 5);
        break;
    default:
        jb_put(b, "null", 4);
    }
}

static char *dump(json_object *o, int indent)
{
    jbuf b = {NULL, 0, 0, 0};
    if (!o)
        return NULL;
    jb_value(&b, o, indent, 0);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* Not json-c's serializer: it drops an append whose allocation fails and carries
 * on (json_object_object_to_json_string ignores printbuf_strappend's result), so
 * its text can be silently truncated, and parsing it back to check is no way
 * out, as json-c 0.16's parser crashes when an allocation of a key fails. */
char *lattice__json_dump(json_object *o) { return dump(o, 0); }

char *lattice__json_dump_pretty(json_object *o) { return dump(o, 2); }
