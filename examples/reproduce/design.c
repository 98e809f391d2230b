/* A preset's factorial design: factors with labelled levels, expanded into
 * arms, the paired comparisons of each factor and the interactions of each
 * pair of factors (design.h). */
#include "design.h"

#include "files.h"
#include "preset_json.h"

#include <stdarg.h>

/* Whether path is an arm key: names joined by dots, none of them empty. */
static int key_ok(const char *path)
{
    if (!path[0] || path[0] == '.' || path[strlen(path) - 1] == '.')
        return 0;
    return strstr(path, "..") == NULL;
}

/* Set key (a path "a.b": nested objects made as needed) of spec to a copy of v. */
static void set_path(json_object *spec, const char *path, json_object *v, const char *where)
{
    char buf[128];
    if (!key_ok(path))
        die("preset: %s: the key '%s' is not an arm key (placement, block_init, train.lr, ...)",
            where, path);
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        die("preset: %s: the key '%s' is too long", where, path);
    json_object *cur = spec;
    char *dot;
    char *key = buf;
    while ((dot = strchr(key, '.')) != NULL) {
        *dot = 0;
        json_object *next;
        if (!json_object_object_get_ex(cur, key, &next)) {
            next = json_object_new_object();
            json_object_object_add(cur, key, next);
        } else if (!json_object_is_type(next, json_type_object)) {
            die("preset: %s: '%s' is set twice, as a value and as an object", where, path);
        }
        cur = next;
        key = dot + 1;
    }
    if (json_object_object_get_ex(cur, key, NULL))
        die("preset: %s sets '%s' twice (two factors, or a factor and design.base)", where, path);
    json_object *copy = NULL;
    json_object_deep_copy(v, &copy, NULL);
    json_object_object_add(cur, key, copy);
}

/* Every key of set (an object of arm keys, "train" nested) into spec. */
static void set_all(json_object *spec, json_object *set, const char *where)
{
    json_object_object_foreach(set, key, val)
    {
        if (json_object_is_type(val, json_type_object) && strcmp(key, "train") == 0) {
            json_object_object_foreach(val, k2, v2)
            {
                char path[96];
                snprintf(path, sizeof path, "train.%s", k2);
                set_path(spec, path, v2, where);
            }
        } else {
            set_path(spec, key, val, where);
        }
    }
}

/* Only these keys in o (where names it). */
static void only_keys(json_object *o, const char *where, const char *const *keys, int n)
{
    json_object_object_foreach(o, key, val)
    {
        (void)val;
        int ok = 0;
        for (int k = 0; k < n && !ok; k++)
            ok = strcmp(keys[k], key) == 0;
        if (!ok)
            die("preset: unknown key '%s.%s' (a typo? see examples/reproduce/presets/README.md, "
                "\"Designs\")", where, key);
    }
}

/* Whether a and b are the same JSON value, numbers by value (1e-3 is 0.001,
 * 2 is 2.0), objects whatever their keys' order. */
static int same_value(json_object *a, json_object *b)
{
    const json_type ta = json_object_get_type(a), tb = json_object_get_type(b);
    const int na = ta == json_type_int || ta == json_type_double;
    const int nb = tb == json_type_int || tb == json_type_double;
    if (na && nb)
        return ta == json_type_int && tb == json_type_int
                   ? json_object_get_int64(a) == json_object_get_int64(b)
                   : json_object_get_double(a) == json_object_get_double(b);
    if (ta != tb)
        return 0;
    switch (ta) {
    case json_type_null:
        return 1;
    case json_type_boolean:
        return json_object_get_boolean(a) == json_object_get_boolean(b);
    case json_type_string:
        return strcmp(json_object_get_string(a), json_object_get_string(b)) == 0;
    case json_type_array:
        if (json_object_array_length(a) != json_object_array_length(b))
            return 0;
        for (size_t i = 0; i < json_object_array_length(a); i++)
            if (!same_value(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i)))
                return 0;
        return 1;
    case json_type_object: {
        if (json_object_object_length(a) != json_object_object_length(b))
            return 0;
        json_object_object_foreach(a, key, val)
        {
            json_object *other;
            if (!json_object_object_get_ex(b, key, &other) || !same_value(val, other))
                return 0;
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* What level l of factor f sets, into spec (where names the place). */
static void level_into(const design *d, int f, int l, json_object *spec, const char *where)
{
    if (d->key[f][0])
        set_path(spec, d->key[f], d->set[f][l], where);
    else
        set_all(spec, d->set[f][l], where);
}

static void read_factor(design *d, json_object *fo, int fi)
{
    char where[64];
    snprintf(where, sizeof where, "design.factors[%d]", fi);
    if (!json_object_is_type(fo, json_type_object))
        die("preset: %s must be an object: {\"name\": ..., \"levels\": [...]}", where);
    static const char *const factor_keys[] = {"name", "key", "levels"};
    only_keys(fo, where, factor_keys, 3);
    json_object *name = member(fo, "name"), *levels = member(fo, "levels"),
                *key = member(fo, "key");
    if (!name || !json_object_is_type(name, json_type_string) ||
        !name_ok(json_object_get_string(name)) ||
        strlen(json_object_get_string(name)) >= sizeof d->factor[0])
        die("preset: %s.name must be a short name (" NAME_RULE ")", where);
    snprintf(d->factor[fi], sizeof d->factor[fi], "%s", json_object_get_string(name));
    if (key && (!json_object_is_type(key, json_type_string) ||
                strlen(json_object_get_string(key)) >= sizeof d->key[0] ||
                !key_ok(json_object_get_string(key))))
        die("preset: %s.key must be an arm key (placement, block_init, train.lr, ...)", where);
    if (!levels || !json_object_is_type(levels, json_type_array) ||
        json_object_array_length(levels) < 2 || json_object_array_length(levels) > MAX_LEVELS)
        die("preset: %s.levels must be a list of 2 to %d levels", where, MAX_LEVELS);
    d->n_levels[fi] = (int)json_object_array_length(levels);
    for (int l = 0; l < d->n_levels[fi]; l++) {
        json_object *lv = json_object_array_get_idx(levels, l);
        char lw[96];
        snprintf(lw, sizeof lw, "%s.levels[%d]", where, l);
        json_object *label = NULL, *set = NULL;
        if (json_object_is_type(lv, json_type_object)) { /* {"label": ..., "set": {...}} */
            static const char *const level_keys[] = {"label", "set"};
            only_keys(lv, lw, level_keys, 2);
            label = member(lv, "label");
            set = member(lv, "set");
            if (!set || !json_object_is_type(set, json_type_object))
                die("preset: %s.set must be an object of arm keys", lw);
            if (key)
                die("preset: %s: a factor with a key takes plain values as levels", lw);
        } else if (key) { /* a value of the factor's key: its label is the value */
            set = lv;
        } else {
            die("preset: %s must be {\"label\": ..., \"set\": {arm keys}} (or the factor needs "
                "a key, and its levels are values of it)", lw);
        }
        char lab[40];
        if (label) {
            if (!json_object_is_type(label, json_type_string))
                die("preset: %s.label must be a string", lw);
            snprintf(lab, sizeof lab, "%s", json_object_get_string(label));
        } else if (json_object_is_type(lv, json_type_string)) {
            snprintf(lab, sizeof lab, "%s", json_object_get_string(lv));
        } else if (json_object_is_type(lv, json_type_int) || json_object_is_type(lv, json_type_double)) {
            snprintf(lab, sizeof lab, "%s", json_object_to_json_string_ext(lv, JSON_C_TO_STRING_PLAIN));
            for (char *c = lab; *c; c++) /* 3e-3 -> 3e-3, 0.003 -> 0p003: a name's characters */
                if (*c == '.')
                    *c = 'p';
        } else {
            die("preset: %s needs a label", lw);
        }
        if (!name_ok(lab) || strlen(lab) >= sizeof d->level[0][0])
            die("preset: %s: the label '%s' is not allowed: a label is part of an arm's name, "
                "and a name is " NAME_RULE, lw, lab);
        for (int k = 0; k < l; k++)
            if (strcmp(d->level[fi][k], lab) == 0)
                die("preset: %s: the label '%s' is given twice", lw, lab);
        snprintf(d->level[fi][l], sizeof d->level[fi][l], "%s", lab);
        d->set[fi][l] = set; /* a part of the preset's JSON, which outlives the design */
        if (key)
            snprintf(d->key[fi], sizeof d->key[fi], "%s", json_object_get_string(key));
    }
    /* two levels that set the same values by value (0.001 and 1e-3, or
     * "train.lr" and "train": {"lr"}) would be two names for one run */
    json_object *effect[MAX_LEVELS];
    for (int l = 0; l < d->n_levels[fi]; l++) {
        effect[l] = json_object_new_object();
        level_into(d, fi, l, effect[l], where);
        for (int k = 0; k < l; k++)
            if (same_value(effect[k], effect[l]))
                die("preset: %s.levels[%d] ('%s') sets what levels[%d] ('%s') sets: two names "
                    "for one run (levels are compared by value: 0.001 and 1e-3 are one level)",
                    where, l, d->level[fi][l], k, d->level[fi][k]);
    }
    for (int l = 0; l < d->n_levels[fi]; l++)
        json_object_put(effect[l]);
}

/* The arm name of levels lv: the labels joined by '-'. */
static void arm_name(const design *d, const int *lv, char *out, size_t n)
{
    out[0] = 0;
    for (int f = 0; f < d->n_factors; f++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", f ? "-" : "", d->level[f][lv[f]]);
}

/* Whether the combination lv is one of the design's arms. */
static int have(const design *d, const int *lv)
{
    for (int k = 0; k < d->n_cells; k++)
        if (!memcmp(d->cell[k], lv, sizeof(int) * (size_t)d->n_factors))
            return 1;
    return 0;
}

/* "init copy, steps 2x": the levels of every factor but skip (and skip2). */
static void context(const design *d, const int *lv, int skip, int skip2, char *out, size_t n)
{
    out[0] = 0;
    for (int f = 0; f < d->n_factors; f++)
        if (f != skip && f != skip2)
            snprintf(out + strlen(out), n - strlen(out), "%s%s %s", out[0] ? ", " : "",
                     d->factor[f], d->level[f][lv[f]]);
}

/* A comparison's or interaction's label (kind) into out, whole: one longer
 * than out holds is refused, for a label cut short could be another's (two
 * interactions got one label, and cross.py kept one of them). */
__attribute__((format(printf, 4, 5)))
static void label(char *out, size_t n, const char *kind, const char *fmt, ...)
{
    char full[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(full, sizeof full, fmt, ap);
    va_end(ap);
    if (strlen(full) >= n)
        die("preset: the design's %s label '%s' is %zu bytes, more than the %zu a label holds: "
            "shorten the factors' names or the levels' labels",
            kind, full, strlen(full), n - 1);
    memcpy(out, full, strlen(full) + 1);
}

static void add_pair(json_object *list, const char *a, const char *b)
{
    json_object *e = json_object_new_array();
    json_object_array_add(e, json_object_new_string(a));
    json_object_array_add(e, json_object_new_string(b));
    json_object_array_add(list, e);
}

/* The cells listed in design.arms (cells): one level label per factor each. */
static void cells_listed(design *d, json_object *cells)
{
    if (!json_object_is_type(cells, json_type_array))
        die("preset: design.arms must be a list of level lists, one label per factor");
    for (size_t k = 0; k < json_object_array_length(cells); k++) {
        json_object *c = json_object_array_get_idx(cells, k);
        if (!json_object_is_type(c, json_type_array) ||
            (int)json_object_array_length(c) != d->n_factors)
            die("preset: design.arms[%zu] must list one level label per factor (%d)", k,
                d->n_factors);
        if (d->n_cells >= MAX_ARMS)
            die("preset: the design has more than %d arms", MAX_ARMS);
        for (int f = 0; f < d->n_factors; f++) {
            json_object *lab = json_object_array_get_idx(c, (size_t)f);
            int found = -1;
            for (int l = 0; lab && json_object_is_type(lab, json_type_string) &&
                            l < d->n_levels[f] && found < 0; l++)
                if (strcmp(d->level[f][l], json_object_get_string(lab)) == 0)
                    found = l;
            if (found < 0)
                die("preset: design.arms[%zu][%d] must be a level of %s", k, f, d->factor[f]);
            d->cell[d->n_cells][f] = found;
        }
        if (have(d, d->cell[d->n_cells]))
            die("preset: design.arms[%zu] is listed twice", k);
        d->n_cells++;
    }
}

/* Every combination of the factors' levels, the last factor's fastest. */
static void cells_product(design *d)
{
    int lv[MAX_FACTORS] = {0};
    for (;;) {
        if (d->n_cells >= MAX_ARMS)
            die("preset: the design's product has more than %d arms: list a subset in "
                "design.arms", MAX_ARMS);
        memcpy(d->cell[d->n_cells++], lv, sizeof lv);
        int f = d->n_factors - 1;
        while (f >= 0 && ++lv[f] == d->n_levels[f])
            lv[f--] = 0;
        if (f < 0)
            break;
    }
}

/* o's list key, added empty where o has none. */
static json_object *list_of(json_object *o, const char *key)
{
    json_object *v = member(o, key);
    if (!v) {
        v = json_object_new_array();
        json_object_object_add(o, key, v);
    }
    return v;
}

/* The cells' arms, after the preset's own: base's keys, then each factor's level. */
static void add_arms(json_object *arms, const design *d, json_object *base)
{
    for (int k = 0; k < d->n_cells; k++) {
        json_object *spec = json_object_new_object();
        char name[48], where[96];
        arm_name(d, d->cell[k], name, sizeof name);
        if (strlen(name) >= 47)
            die("preset: the design's arm '%s' has a name too long (47 bytes at most)", name);
        snprintf(where, sizeof where, "the design's arm %s", name);
        json_object_object_add(spec, "name", json_object_new_string(name));
        if (base)
            set_all(spec, base, where);
        for (int f = 0; f < d->n_factors; f++)
            level_into(d, f, d->cell[k][f], spec, where);
        json_object_array_add(arms, spec);
    }
}

/* Comparisons: each factor's levels against its first, the others held. */
static void add_comparisons(json_object *cmp, design *d)
{
    for (int f = 0; f < d->n_factors; f++)
        for (int k = 0; k < d->n_cells; k++) {
            if (d->cell[k][f] == 0)
                continue;
            int ref[MAX_FACTORS];
            memcpy(ref, d->cell[k], sizeof ref);
            ref[f] = 0;
            if (!have(d, ref))
                continue;
            char a[48], b[48], ctx[256]; /* 3 x (31 + 1 + 31) + 4 at most: never cut */
            arm_name(d, ref, a, sizeof a);
            arm_name(d, d->cell[k], b, sizeof b);
            context(d, d->cell[k], f, -1, ctx, sizeof ctx);
            if (d->n_compare >= MAX_ARMS)
                die("preset: the design has more than %d comparisons: list a subset of its arms",
                    MAX_ARMS);
            label(d->compare_label[d->n_compare++], sizeof d->compare_label[0], "comparison",
                  "%s: %s - %s%s%s", d->factor[f], d->level[f][d->cell[k][f]], d->level[f][0],
                  ctx[0] ? " | " : "", ctx);
            add_pair(cmp, a, b);
        }
}

/* Interactions: each pair of factors, each level against the first, the others held. */
static void add_interactions(json_object *inter, design *d)
{
    for (int f = 0; f < d->n_factors; f++)
        for (int g = f + 1; g < d->n_factors; g++)
            for (int k = 0; k < d->n_cells; k++) {
                const int *c = d->cell[k];
                if (c[f] == 0 || c[g] == 0)
                    continue;
                int q[4][MAX_FACTORS]; /* [f0 g0, f1 g0, f0 g1, f1 g1] */
                for (int j = 0; j < 4; j++) {
                    memcpy(q[j], c, sizeof q[j]);
                    q[j][f] = j & 1 ? c[f] : 0;
                    q[j][g] = j & 2 ? c[g] : 0;
                }
                if (!have(d, q[0]) || !have(d, q[1]) || !have(d, q[2]))
                    continue;
                if (d->n_interact >= MAX_INTERACT)
                    die("preset: the design has more than %d interactions: list a subset of its "
                        "arms", MAX_INTERACT);
                json_object *e = json_object_new_array();
                for (int j = 0; j < 4; j++) {
                    char nm[48];
                    arm_name(d, q[j], nm, sizeof nm);
                    json_object_array_add(e, json_object_new_string(nm));
                }
                json_object_array_add(inter, e);
                char ctx[256];
                context(d, c, f, g, ctx, sizeof ctx);
                label(d->interact_label[d->n_interact++], sizeof d->interact_label[0],
                      "interaction", "%s (%s - %s) x %s (%s - %s)%s%s", d->factor[f],
                      d->level[f][c[f]], d->level[f][0], d->factor[g], d->level[g][c[g]],
                      d->level[g][0], ctx[0] ? " | " : "", ctx);
            }
}

void design_expand(json_object *o, design *d)
{
    memset(d, 0, sizeof(*d));
    json_object *dz = member(o, "design");
    if (!dz)
        return;
    if (!json_object_is_type(dz, json_type_object))
        die("preset: design must be an object: {\"factors\": [...], \"base\": {...}}");
    static const char *const design_keys[] = {"factors", "base", "arms"};
    only_keys(dz, "design", design_keys, 3);
    json_object *factors = member(dz, "factors"), *base = member(dz, "base"),
                *cells = member(dz, "arms");
    if (!factors || !json_object_is_type(factors, json_type_array) ||
        json_object_array_length(factors) < 1 || json_object_array_length(factors) > MAX_FACTORS)
        die("preset: design.factors must be a list of 1 to %d factors", MAX_FACTORS);
    if (base && !json_object_is_type(base, json_type_object))
        die("preset: design.base must be an object of arm keys");
    d->n_factors = (int)json_object_array_length(factors);
    for (int f = 0; f < d->n_factors; f++) {
        read_factor(d, json_object_array_get_idx(factors, f), f);
        for (int g = 0; g < f; g++)
            if (strcmp(d->factor[f], d->factor[g]) == 0)
                die("preset: design.factors[%d]: the factor '%s' is given twice", f, d->factor[f]);
    }
    /* the cells: every combination, or the listed ones */
    if (cells)
        cells_listed(d, cells);
    else
        cells_product(d);
    add_arms(list_of(o, "arms"), d, base);
    json_object *cmp = list_of(o, "compare"), *inter = list_of(o, "interactions");
    d->compare_from = (int)json_object_array_length(cmp);
    d->interact_from = (int)json_object_array_length(inter);
    add_comparisons(cmp, d);
    add_interactions(inter, d);
}


const char *design_compare_label(const preset *p, int k)
{
    const design *d = &p->design;
    return d->n_factors && k >= d->compare_from && k - d->compare_from < d->n_compare
               ? d->compare_label[k - d->compare_from]
               : NULL;
}

const char *design_interact_label(const preset *p, int k)
{
    const design *d = &p->design;
    return d->n_factors && k >= d->interact_from && k - d->interact_from < d->n_interact
               ? d->interact_label[k - d->interact_from]
               : NULL;
}

/* ---- naming a design's keys, for messages -------------------------------------------- */

void design_namer(const void *ctx, char *buf, size_t n, const char *path)
{
    const design_naming *nm = ctx;
    const design *d = nm->d;
    int idx, used = 0;
    if (!d || sscanf(path, "arms[%d]%n", &idx, &used) != 1 || used == 0 || idx < nm->from ||
        idx - nm->from >= d->n_cells || (path[used] && path[used] != '.')) {
        snprintf(buf, n, "%s", path);
        return;
    }
    const int k = idx - nm->from;
    const char *key = path[used] ? path + used + 1 : "";
    char name[64] = "";
    for (int f = 0; f < d->n_factors; f++)
        snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", f ? "-" : "",
                 d->level[f][d->cell[k][f]]);
    if (key[0]) {
        const size_t kl = strlen(key);
        for (int f = 0; f < d->n_factors; f++) {
            const int l = d->cell[k][f];
            const size_t fl = strlen(d->key[f]);
            if (d->key[f][0] && (strcmp(key, d->key[f]) == 0 ||
                                 (kl > fl && strncmp(key, d->key[f], fl) == 0 && key[fl] == '.'))) {
                snprintf(buf, n, "design.factors[%d].levels[%d] (its key %s, in the design's arm "
                         "%s)", f, l, key, name);
                return;
            }
            if (!d->key[f][0] && d->set[f][l] && strchr(key, '[') == NULL &&
                member(d->set[f][l], key)) {
                if (nm->valued[f]) /* a value of the factor's key */
                    snprintf(buf, n, "design.factors[%d].levels[%d] (its key %s, in the design's "
                             "arm %s)", f, l, key, name);
                else
                    snprintf(buf, n, "design.factors[%d].levels[%d].set.%s", f, l, key);
                return;
            }
        }
        if (strchr(key, '[') == NULL && member(nm->base, key)) {
            snprintf(buf, n, "design.base.%s", key);
            return;
        }
    }
    snprintf(buf, n, "the design's arm %s%s%s", name, key[0] ? ": " : "", key);
}

/* the arms of a factor of numeric levels are then named pre-0.001, ... */
void design_label_levels(json_object *o, int valued[MAX_FACTORS])
{
    memset(valued, 0, MAX_FACTORS * sizeof valued[0]);
    json_object *factors = member(o, "design.factors");
    if (!factors || !json_object_is_type(factors, json_type_array))
        return;
    for (size_t f = 0; f < json_object_array_length(factors) && f < MAX_FACTORS; f++) {
        json_object *fo = json_object_array_get_idx(factors, f), *key, *levels;
        if (!json_object_is_type(fo, json_type_object) ||
            !json_object_object_get_ex(fo, "key", &key) ||
            !json_object_is_type(key, json_type_string) ||
            !json_object_object_get_ex(fo, "levels", &levels) ||
            !json_object_is_type(levels, json_type_array) || json_object_array_length(levels) < 1)
            continue;
        int numeric = 1;
        for (size_t l = 0; l < json_object_array_length(levels) && numeric; l++) {
            json_object *v = json_object_array_get_idx(levels, l);
            numeric = json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
        }
        const char *k = json_object_get_string(key);
        if (!numeric || !key_ok(k))
            continue; /* design_expand names what is wrong with it */
        json_object *now = json_object_new_array();
        for (size_t l = 0; l < json_object_array_length(levels); l++) {
            json_object *v = json_object_array_get_idx(levels, l), *set = json_object_new_object(),
                        *at = set, *lv = json_object_new_object();
            char path[128];
            snprintf(path, sizeof path, "%s", k);
            char *part = path, *dot;
            while ((dot = strchr(part, '.')) != NULL) { /* "train.lr": {"train": {"lr": v}} */
                *dot = 0;
                json_object *next = json_object_new_object();
                json_object_object_add(at, part, next);
                at = next;
                part = dot + 1;
            }
            json_object_object_add(at, part, json_object_get(v));
            json_object_object_add(
                lv, "label",
                json_object_new_string(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN)));
            json_object_object_add(lv, "set", set);
            json_object_array_add(now, lv);
        }
        json_object_object_del(fo, "key");
        json_object_object_add(fo, "levels", now);
        valued[f] = 1;
    }
}
