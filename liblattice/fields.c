/* One description of a struct's fields: the setup digest, the JSON write and
 * the JSON read of a table of them (fields.h). */
#include "fields.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int is_int(const lattice__field *f)
{
    return f->type != LATTICE__F_FLOAT && f->type != LATTICE__F_F64;
}

static int64_t get_int(const lattice__field *f, const void *obj)
{
    const char *p = (const char *)obj + f->offset;
    if (f->type == LATTICE__F_I64 || f->type == LATTICE__F_U64) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return f->type == LATTICE__F_FLAG ? v != 0 : v;
}

static void set_int(const lattice__field *f, void *obj, int64_t v)
{
    char *p = (char *)obj + f->offset;
    if (f->type == LATTICE__F_I64 || f->type == LATTICE__F_U64) {
        memcpy(p, &v, sizeof v);
        return;
    }
    int w;
    if (f->type == LATTICE__F_FLAG)
        w = v != 0;
    else if (f->type == LATTICE__F_ENUM)
        w = v < 0 || v > INT32_MAX ? -1 : (int)v;
    else
        w = (int)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
    memcpy(p, &w, sizeof w);
}

static double get_real(const lattice__field *f, const void *obj)
{
    const char *p = (const char *)obj + f->offset;
    return f->type == LATTICE__F_F64 ? *(const double *)p : *(const float *)p;
}

static void set_real(const lattice__field *f, void *obj, double v)
{
    char *p = (char *)obj + f->offset;
    if (f->type == LATTICE__F_F64)
        *(double *)p = v;
    else
        *(float *)p = (float)v;
}

void lattice__fields_setup(const lattice__fields *fs, const void *obj, const char *prefix,
                           lattice__setup *s)
{
    for (int i = 0; i < fs->n; i++) {
        const lattice__field *f = &fs->f[i];
        if (is_int(f)) {
            lattice__setup_add(s, f->type == LATTICE__F_U64 ? LATTICE__SETUP_UINT : LATTICE__SETUP_INT,
                               get_int(f, obj), "%s%s", prefix, f->name);
        } else {
            lattice__setup_add(s, LATTICE__SETUP_REAL, lattice__setup_real_bits(get_real(f, obj)),
                               "%s%s", prefix, f->name);
        }
    }
}

int lattice__fields_to_json(const lattice__fields *fs, const void *obj, json_object *o)
{
    int ok = 1;
    for (int i = 0; ok && i < fs->n; i++) {
        const lattice__field *f = &fs->f[i];
        ok = lattice__json_add(o, f->name, is_int(f) ? json_object_new_int64(get_int(f, obj))
                                                     : json_object_new_double(get_real(f, obj)));
    }
    return ok;
}

/* The field's value in o: 1 when there and of its type, -1 when there and
 * not, 0 when absent. */
static int read_one(const lattice__field *f, json_object *o, int64_t *iv, double *dv)
{
    json_object *x;
    if (!json_object_object_get_ex(o, f->name, &x))
        return 0;
    if (is_int(f)) {
        if (!json_object_is_type(x, json_type_int))
            return -1;
        *iv = json_object_get_int64(x);
        return 1;
    }
    if (!json_object_is_type(x, json_type_double) && !json_object_is_type(x, json_type_int))
        return -1;
    *dv = json_object_get_double(x);
    return 1;
}

int lattice__fields_from_json(const lattice__fields *fs, json_object *o, const char *what,
                              int record_since, void *obj, char *why, size_t n)
{
    const char *dot = what[0] ? "." : ""; /* the top level's keys are named alone */
    if (!o || !json_object_is_type(o, json_type_object)) {
        snprintf(why, n, "the %s is not a JSON object", what);
        return 0;
    }
    for (int i = 0; i < fs->n; i++) {
        const lattice__field *f = &fs->f[i];
        int64_t iv = 0;
        double dv = 0.0;
        const int got = read_one(f, o, &iv, &dv);
        if (got == 0 && f->since > record_since) {
            /* a later release's field: absent with every field of its release */
            for (int k = 0; k < fs->n; k++) {
                if (fs->f[k].since == f->since &&
                    json_object_object_get_ex(o, fs->f[k].name, NULL)) {
                    snprintf(why, n, "has %s%s%s without %s%s%s", what, dot, fs->f[k].name,
                             what, dot, f->name);
                    return 0;
                }
            }
            continue;
        }
        if (got != 1) {
            snprintf(why, n, "lacks %s%s%s, or it is not %s", what, dot, f->name,
                     is_int(f) ? "an integer" : "a number");
            return 0;
        }
        if (f->lo <= f->hi && (is_int(f) ? iv < f->lo || iv > f->hi
                                         : !(isfinite(dv) && dv >= (double)f->lo &&
                                             dv <= (double)f->hi))) {
            if (is_int(f))
                snprintf(why, n, "%s%s%s %lld is out of range (%lld..%lld)", what, dot, f->name,
                         (long long)iv, (long long)f->lo, (long long)f->hi);
            else
                snprintf(why, n, "%s%s%s %g is out of range (a finite number, %lld..%lld)",
                         what, dot, f->name, dv, (long long)f->lo, (long long)f->hi);
            return 0;
        }
        if (is_int(f))
            set_int(f, obj, iv);
        else
            set_real(f, obj, dv);
    }
    return 1;
}
