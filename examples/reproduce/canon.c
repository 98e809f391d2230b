/* Settings as canonical JSON, and the keys two settings differ in (see canon.h). */
#include "canon.h"

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *g = realloc(b->s, cap);
        if (!g)
            die("out of memory");
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_number(sbuf *b, double v)
{
    char num[40];
    if (!isfinite(v)) /* JSON has none; a preset cannot hold one either */
        snprintf(num, sizeof num, "\"%s\"", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    else if (v == 0)
        snprintf(num, sizeof num, "0"); /* -0 and 0 alike */
    else
        snprintf(num, sizeof num, "%.17g", v);
    puts_(b, num);
}

static void put_string(sbuf *b, const char *s)
{
    puts_(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char e[8];
        if (*c == '"' || *c == '\\') {
            e[0] = '\\', e[1] = (char)*c, e[2] = 0;
        } else if (*c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", *c);
        } else {
            e[0] = (char)*c, e[1] = 0;
        }
        puts_(b, e);
    }
    puts_(b, "\"");
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void put_value(sbuf *b, json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_null: puts_(b, "null"); break;
    case json_type_boolean: puts_(b, json_object_get_boolean(o) ? "true" : "false"); break;
    case json_type_double: put_number(b, json_object_get_double(o)); break;
    case json_type_int: {
        const int64_t v = json_object_get_int64(o);
        if (v > -(INT64_C(1) << 53) && v < (INT64_C(1) << 53)) {
            put_number(b, (double)v);
        } else {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)v);
            puts_(b, num);
        }
        break;
    }
    case json_type_string: put_string(b, json_object_get_string(o)); break;
    case json_type_array: {
        puts_(b, "[");
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            if (i)
                puts_(b, ",");
            put_value(b, json_object_array_get_idx(o, i));
        }
        puts_(b, "]");
        break;
    }
    case json_type_object: {
        const size_t n = (size_t)json_object_object_length(o);
        const char **keys = malloc((n ? n : 1) * sizeof(*keys));
        if (!keys)
            die("out of memory");
        size_t k = 0;
        json_object_object_foreach(o, key, val)
        {
            (void)val;
            keys[k++] = key;
        }
        qsort(keys, k, sizeof(*keys), key_cmp);
        puts_(b, "{");
        for (size_t i = 0; i < k; i++) {
            if (i)
                puts_(b, ",");
            put_string(b, keys[i]);
            puts_(b, ":");
            json_object *v = NULL;
            json_object_object_get_ex(o, keys[i], &v);
            put_value(b, v);
        }
        puts_(b, "}");
        free(keys);
        break;
    }
    }
}

char *canon_json(json_object *o)
{
    sbuf b = {0};
    put_value(&b, o);
    return b.s;
}

/* ---- the keys two settings differ in ---------------------------------------------- */

typedef struct diff {
    char *out;
    size_t n;
    int found, max;
} diff;

static void note(diff *d, const char *path, json_object *was, json_object *now)
{
    if (d->found++ >= d->max)
        return;
    char *a = was ? canon_json(was) : NULL, *b = now ? canon_json(now) : NULL;
    const size_t at = strlen(d->out);
    snprintf(d->out + at, d->n - at, "%s%s %s -> %s", at ? "; " : "", path[0] ? path : "(all)",
             a ? a : "(absent)", b ? b : "(absent)");
    free(a);
    free(b);
}

static void walk(diff *d, const char *path, json_object *was, json_object *now)
{
    char sub[512];
    const json_type tw = json_object_get_type(was), tn = json_object_get_type(now);
    if (was && now && tw == json_type_object && tn == json_type_object) {
        json_object_object_foreach(was, key, v)
        {
            json_object *w = NULL;
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key);
            json_object_object_get_ex(now, key, &w);
            walk(d, sub, v, w);
        }
        json_object_object_foreach(now, key2, v2)
        {
            if (!json_object_object_get_ex(was, key2, NULL)) {
                snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", key2);
                note(d, sub, NULL, v2);
            }
        }
        return;
    }
    if (was && now && tw == json_type_array && tn == json_type_array &&
        json_object_array_length(was) == json_object_array_length(now)) {
        for (size_t i = 0; i < json_object_array_length(was); i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            walk(d, sub, json_object_array_get_idx(was, i), json_object_array_get_idx(now, i));
        }
        return;
    }
    if (!was || !now) {
        note(d, path, was, now);
        return;
    }
    char *a = canon_json(was), *b = canon_json(now);
    if (strcmp(a, b) != 0)
        note(d, path, was, now);
    free(a);
    free(b);
}

int canon_diff(const char *was, const char *now, char *out, size_t n, int max)
{
    json_object *a = json_tokener_parse(was), *b = json_tokener_parse(now);
    out[0] = 0;
    if (!a || !b) {
        json_object_put(a);
        json_object_put(b);
        return -1;
    }
    diff d = {out, n, 0, max};
    walk(&d, "", a, b);
    if (d.found > max) {
        const size_t at = strlen(out);
        snprintf(out + at, n - at, "; and %d more", d.found - max);
    }
    json_object_put(a);
    json_object_put(b);
    return d.found;
}
