/* The preset's JSON: read by the library's strict parser, errors by line, typed getters. */
#include "preset_json.h"

#include "json.h" /* the library's strict JSON parser (liblattice/json.h, internal) */

/* ---- the file ------------------------------------------------------------------- */

#define PRESET_MAX_BYTES ((size_t)1 << 26)

static void line_col(const char *text, size_t at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

/* What stands at byte at, for a message: up to 24 printable ASCII bytes of
 * its line ("" at the end of the text or before a byte that is not). */
static void excerpt(const char *text, size_t len, size_t at, char *buf, size_t n)
{
    size_t k = 0;
    while (at + k < len && k < 24 && k + 1 < n && text[at + k] >= ' ' && text[at + k] < 127)
        k++;
    memcpy(buf, text + at, k);
    buf[k] = 0;
}

/* "preset PATH: line L, column C: why, at 'what stands there'", and a
 * reminder of the rules when the text broke one. */
__attribute__((noreturn)) static void json_error(const char *path, const char *text, size_t len,
                                                 size_t at, const char *why, int grammar)
{
    int line, col;
    line_col(text, at, &line, &col);
    char near[32];
    excerpt(text, len, at, near, sizeof near);
    die("preset %s: line %d, column %d: %s%s%s%s%s", path, line, col, why,
        near[0] ? ", at '" : "", near, near[0] ? "'" : "",
        grammar ? " (a preset is strict JSON, RFC 8259: double quotes, no comments, no trailing "
                  "commas, no NaN)"
                : "");
}

/* The first key that appears twice in one object of text, which the
 * library's parser has accepted but for that: its offset and length (0 when
 * none is found byte for byte, e.g. "a" against "\u0061"). Not a second
 * checker: the text is known to be JSON, so a string is a key exactly when
 * a ':' follows it. */
static size_t repeated_key(const char *text, size_t len, size_t *key_len)
{
    enum { MAX_DEPTH = 64 };
    typedef struct key {
        int object; /* which object it belongs to: the count of '{' before it */
        size_t at, len;
    } key;
    key *keys = NULL;
    size_t n_keys = 0, cap = 0, found = 0;
    int open[MAX_DEPTH], depth = 0, n_objects = 0;
    for (size_t i = 0; i < len && !found; i++) {
        const char c = text[i];
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH)
                break;
            open[depth++] = c == '{' ? ++n_objects : 0;
        } else if (c == '}' || c == ']') {
            depth -= depth > 0;
        } else if (c == '"') {
            const size_t start = ++i;
            while (i < len && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            if (i >= len)
                break;
            size_t j = i + 1;
            while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' ||
                               text[j] == '\r'))
                j++;
            if (j >= len || text[j] != ':' || depth == 0 || !open[depth - 1])
                continue;
            const size_t n = i - start;
            for (size_t k = 0; k < n_keys && !found; k++)
                if (keys[k].object == open[depth - 1] && keys[k].len == n &&
                    memcmp(text + keys[k].at, text + start, n) == 0)
                    found = start - 1, *key_len = n;
            if (n_keys == cap) {
                cap = cap ? 2 * cap : 64;
                key *g = realloc(keys, cap * sizeof *keys);
                if (!g)
                    die("out of memory");
                keys = g;
            }
            keys[n_keys++] = (key){open[depth - 1], start, n};
        }
    }
    free(keys);
    return found;
}

/* The offset in the library's message, "... at byte N" (json.h: the reason
 * and its byte offset), with the reason alone into why; 0 when the message
 * is not of that form (the caller then prints it whole). */
static int reason_at(const char *msg, const char *what, char *why, size_t n, size_t *at)
{
    char head[256];
    snprintf(head, sizeof head, "%s is not strict JSON: ", what);
    const char *tail = strstr(msg, " at byte ");
    if (strncmp(msg, head, strlen(head)) != 0 || !tail)
        return 0;
    for (const char *t; (t = strstr(tail + 1, " at byte "));) /* the last one */
        tail = t;
    char *end;
    errno = 0;
    const unsigned long long off = strtoull(tail + 9, &end, 10);
    if (errno || *end || end == tail + 9)
        return 0;
    const char *r = msg + strlen(head);
    snprintf(why, n, "%.*s", (int)(tail - r), r);
    *at = (size_t)off;
    return 1;
}

json_object *read_preset_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot read the preset %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            if (cap > PRESET_MAX_BYTES)
                die("the preset %s is larger than 64 MiB", path);
            char *t = realloc(text, cap);
            if (!t)
                die("out of memory");
            text = t;
        }
        const size_t got = fread(text + n, 1, 4096, f);
        n += got;
        if (got < 4096)
            break;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad)
        die("cannot read the preset %s", path);
    text[n] = 0;
    /* a short name in the library's message, which must hold the offset whole */
    const char *what = "the preset";
    char err[LATTICE_ERRMSG_SIZE], why[LATTICE_ERRMSG_SIZE];
    json_object *o;
    const lattice_status st = lattice__json_parse(text, n, 0, what, &o, err);
    if (st == LATTICE_ERR_OUT_OF_MEMORY)
        die("out of memory reading the preset %s", path);
    if (st != LATTICE_OK) {
        size_t at, key_len = 0;
        if (reason_at(err, what, why, sizeof why, &at) && at <= n)
            json_error(path, text, n, at, why, 1);
        if ((at = repeated_key(text, n, &key_len)) > 0) {
            snprintf(why, sizeof why, "the key \"%.*s\" appears twice in one object",
                     (int)(key_len < 100 ? key_len : 100), text + at + 1);
            json_error(path, text, n, at, why, 0);
        }
        die("preset %s: %s", path, err);
    }
    free(text);
    return o;
}

/* ---- members and getters ------------------------------------------------------------ */

void json_at(json_reader *rd, const char *where)
{
    snprintf(rd->where, sizeof rd->where, "%s", where);
}

const char *json_said_at(json_reader *rd, const char *where, const char *key)
{
    char *buf = rd->said[rd->next++ & 3], path[320];
    snprintf(path, sizeof path, "%s%s%s", where ? where : "", where && where[0] && key && key[0] ? "." : "",
             key ? key : "");
    if (rd->namer)
        rd->namer(rd->namer_ctx, buf, sizeof rd->said[0], path);
    else
        snprintf(buf, sizeof rd->said[0], "%s", path);
    return buf;
}

const char *json_said(json_reader *rd, const char *path) { return json_said_at(rd, path, NULL); }

const char *json_path(json_reader *rd, const char *key) { return json_said_at(rd, rd->where, key); }

json_object *member(json_object *o, const char *path)
{
    /* "a.b" walks nested objects */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_object *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) {
        if (!cur || !json_object_is_type(cur, json_type_object) ||
            !json_object_object_get_ex(cur, tok, &cur))
            return NULL;
    }
    return cur;
}

int get_i(json_reader *rd, json_object *o, const char *path, int fallback, int lo, int hi)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean))
        die("preset: %s must be an integer", json_path(rd, path));
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        die("preset: %s = %lld outside %d..%d", json_path(rd, path), (long long)x, lo, hi);
    return (int)x;
}

double get_d(json_reader *rd, json_object *o, const char *path, double fallback)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        die("preset: %s must be a number", json_path(rd, path));
    double x = json_object_get_double(v);
    if (!isfinite(x) || x < 0)
        die("preset: %s must be finite and >= 0", json_path(rd, path));
    return x;
}

/* A learning rate: > 0 (a zero one trains nothing, which no study means). */
double get_lr(json_reader *rd, json_object *o, const char *path, double fallback)
{
    const double x = get_d(rd, o, path, fallback);
    if (!(x > 0))
        die("preset: %s must be > 0 (a learning rate of 0 trains nothing)", json_path(rd, path));
    return x;
}

void get_s(json_reader *rd, json_object *o, const char *path, char *dst, size_t n, const char *fallback)
{
    json_object *v = member(o, path);
    if (v && !json_object_is_type(v, json_type_string))
        die("preset: %s must be a string", json_path(rd, path));
    const char *s = v ? json_object_get_string(v) : fallback;
    const size_t len = v ? (size_t)json_object_get_string_len(v) : strlen(fallback);
    /* never cut short: a shortened name or path would name something else */
    if (len >= n)
        die("preset: %s is %zu bytes long, at most %zu", json_path(rd, path), len, n - 1);
    if (strlen(s) != len)
        die("preset: %s holds a NUL byte (\\u0000)", json_path(rd, path));
    memcpy(dst, s, len + 1);
}

int get_enum(json_reader *rd, json_object *o, const char *key, const char *where, const char *const *names, int n,
             int fallback)
{
    char s[64];
    if (!member(o, key))
        return fallback;
    get_s(rd, o, key, s, sizeof s, "");
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    char known[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
    die("preset: %s = '%s' is not one of: %s", json_said_at(rd, where, key), s, known);
    return -1;
}

/* ---- the whole object ----------------------------------------------------------------- */

static void keys_under(json_reader *rd, json_object *o, const char *path, const char *pattern,
                       const char *const *known, size_t n_known)
{
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            char p2[256], pat2[256];
            snprintf(p2, sizeof p2, "%s[%zu]", path, i);
            snprintf(pat2, sizeof pat2, "%s.*", pattern);
            keys_under(rd, json_object_array_get_idx(o, i), p2, pat2, known, n_known);
        }
        return;
    }
    if (!json_object_is_type(o, json_type_object))
        return;
    json_object_object_foreach(o, key, val)
    {
        char pat[256], full_path[256];
        snprintf(pat, sizeof pat, "%s%s%s", pattern, pattern[0] ? "." : "", key);
        snprintf(full_path, sizeof full_path, "%s%s%s", path, path[0] ? "." : "", key);
        int ok = 0;
        for (size_t k = 0; k < n_known && !ok; k++)
            ok = strcmp(known[k], pat) == 0;
        if (!ok)
            die("preset: unknown key '%s' (a typo? see examples/reproduce/presets/README.md)",
                json_said(rd, full_path));
        if (strcmp(pat, "design") == 0)
            continue; /* design.c checks its own keys, and its arms' are checked as arms */
        keys_under(rd, val, full_path, pat, known, n_known);
    }
}

void check_keys(json_reader *rd, json_object *o, const char *const *known, size_t n)
{
    keys_under(rd, o, "", "", known, n);
}

static void nulls_under(json_reader *rd, json_object *o, const char *path)
{
    char sub[256];
    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, key, val)
        {
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
            if (!val)
                die("preset: %s is null: give it a value, or leave the key out for its default",
                    json_said(rd, sub));
            nulls_under(rd, val, sub);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            if (!json_object_array_get_idx(o, i))
                die("preset: %s is null", sub);
            nulls_under(rd, json_object_array_get_idx(o, i), sub);
        }
    }
}

void no_nulls(json_reader *rd, json_object *o) { nulls_under(rd, o, ""); }
