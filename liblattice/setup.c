/* What a run is set up with, as named values: compared between the ranks of
 * a data-parallel run when a collective is attached, and between a
 * checkpoint and the run that loads it (checkpoint.c). Each object lists its
 * own part behind its own .c (lattice__model_setup in model.c, and so on);
 * here is what lists have in common: building, comparing, digesting and
 * describing them. */
#include "setup.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const part_names[LATTICE__N_PARTS] = {"model", "data", "schedule", "optimizer",
                                                         "trainer"};

const char *lattice__setup_part_name(int part)
{
    return part >= 0 && part < LATTICE__N_PARTS ? part_names[part] : "setup";
}

void lattice__setup_add(lattice__setup *s, lattice__setup_kind kind, int64_t value, const char *fmt,
                        ...)
{
    if (s->failed)
        return;
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 32;
        lattice__setup_field *f = realloc(s->f, sizeof(*f) * (size_t)cap);
        if (!f) {
            s->failed = 1;
            return;
        }
        s->f = f;
        s->cap = cap;
    }
    lattice__setup_field *f = &s->f[s->n++];
    memset(f, 0, sizeof(*f));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->name, sizeof(f->name), fmt, ap);
    va_end(ap);
    f->kind = kind;
    f->value = value;
}

void lattice__setup_free(lattice__setup *s)
{
    free(s->f);
    memset(s, 0, sizeof(*s));
}

int64_t lattice__setup_real_bits(double v)
{
    int64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}


static int same_field(const lattice__setup_field *a, const lattice__setup_field *b)
{
    return a->kind == b->kind && a->value == b->value && !strcmp(a->name, b->name);
}

int lattice__setup_first_difference(const lattice__setup *a, const lattice__setup *b)
{
    const int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        if (!same_field(&a->f[i], &b->f[i]))
            return i;
    return a->n == b->n ? -1 : n;
}

/* Names, kinds and values (never notes): equal digests, equal lists. */
uint64_t lattice__setup_digest(const lattice__setup *s)
{
    uint64_t h = LATTICE__HASH_START;
    for (int i = 0; i < s->n; i++) {
        const lattice__setup_field *f = &s->f[i];
        h = lattice__hash(h, f->name, strlen(f->name) + 1);
        h = lattice__hash(h, &f->kind, sizeof(f->kind));
        h = lattice__hash(h, &f->value, sizeof(f->value));
    }
    return lattice__hash(h, &s->n, sizeof(s->n));
}

/* The enums of a setup, by the last word of their field's name ("phase 2
 * block_init"), so that a refusal names a value as the API spells it
 * ("placement post"), not by number: each list in its enum's order. */
static const char *const placements[] = {"pre", "post", "peri"};
static const char *const norm_kinds[] = {"rms", "layer"};
static const char *const block_inits[] = {"random", "identity", "copy"};
static const char *const lr_shapes[] = {"cosine", "wsd"};
static const char *const directions[] = {"forward", "reverse"};
static const char *const teacher_kinds[] = {"none", "model", "callback", "file"};
#define ENUM_FIELD(field, names) {field, names, (int)(sizeof names / sizeof names[0])}
static const struct {
    const char *field;
    const char *const *names;
    int n;
} enum_fields[] = {
    ENUM_FIELD("placement", placements),   ENUM_FIELD("norm_kind", norm_kinds),
    ENUM_FIELD("block_init", block_inits), ENUM_FIELD("lr_shape", lr_shapes),
    ENUM_FIELD("direction", directions),   ENUM_FIELD("teacher_kind", teacher_kinds),
};
#undef ENUM_FIELD

static const char *enum_name(const lattice__setup_field *f)
{
    const char *last = strrchr(f->name, ' ');
    last = last ? last + 1 : f->name;
    for (size_t i = 0; i < sizeof enum_fields / sizeof enum_fields[0]; i++)
        if (!strcmp(last, enum_fields[i].field))
            return f->value >= 0 && f->value < enum_fields[i].n ? enum_fields[i].names[f->value]
                                                                 : NULL;
    return NULL;
}

void lattice__setup_value(const lattice__setup_field *f, char *buf, size_t n)
{
    double d;
    const char *name = f->kind == LATTICE__SETUP_INT ? enum_name(f) : NULL;
    if (name) {
        snprintf(buf, n, "%s", name);
        return;
    }
    switch (f->kind) {
    case LATTICE__SETUP_UINT:
        snprintf(buf, n, "%" PRIu64, (uint64_t)f->value);
        break;
    case LATTICE__SETUP_REAL:
        memcpy(&d, &f->value, sizeof(d));
        snprintf(buf, n, "%.9g", d);
        break;
    case LATTICE__SETUP_HASH:
        if (f->has_note)
            snprintf(buf, n, "0x%016" PRIx64 " (%s %" PRIu64 ")", (uint64_t)f->value, f->note_name,
                     (uint64_t)f->note);
        else
            snprintf(buf, n, "0x%016" PRIx64, (uint64_t)f->value);
        break;
    default:
        snprintf(buf, n, "%" PRId64, f->value);
        break;
    }
}

void lattice__setup_describe(char *buf, size_t n, const char *a, const char *b, int part,
                             const lattice__setup *have, const lattice__setup *want, int i)
{
    const char *pn = lattice__setup_part_name(part);
    char hv[96], wv[96];
    if (i < have->n && i < want->n) {
        lattice__setup_value(&have->f[i], hv, sizeof hv);
        lattice__setup_value(&want->f[i], wv, sizeof wv);
        if (strcmp(have->f[i].name, want->f[i].name))
            snprintf(buf, n, "%s's %s has %s %s where %s's has %s %s", a, pn, have->f[i].name, hv,
                     b, want->f[i].name, wv);
        else
            snprintf(buf, n, "%s's %s %s %s differs from %s's %s", a, pn, have->f[i].name, hv, b,
                     wv);
    } else {
        snprintf(buf, n, "%s's %s settings (%d values) differ from %s's (%d values)", a, pn,
                 have->n, b, want->n);
    }
}
