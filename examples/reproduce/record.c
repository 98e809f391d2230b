/* A run's record described once: the field table of run_result. */
#include "record.h"

#include <ctype.h>
#include <stddef.h>

#include "runs.h"

typedef enum rtype { RT_I32, RT_I64, RT_F64 } rtype;

/* How a number goes into results.json: not at all; as a number (null when a
 * double is not finite); as a double always; as "append" or "restart". */
enum { RJ_NONE, RJ_NUM, RJ_DOUBLE, RJ_KIND };
/* How it goes into curves.csv: not at all; %d or %lld; %.6f; %.6g; %.6g,
 * empty when not finite. */
enum { RC_NONE, RC_INT, RC_F6, RC_G6, RC_G6_BLANK };

/* One number of run_result: the first of its entries sits off bytes into
 * run_result (for the per-step arrays, their pointer does), the next stride
 * bytes further. */
typedef struct rcol {
    const char *key; /* in the kept record */
    rtype type;
    size_t off, stride;
    const char *res; /* in results.json, or NULL */
    int rj;
    const char *csv; /* in curves.csv, or NULL */
    int rc;
} rcol;

/* The entries of one kind: key names their object in the kept record (NULL:
 * the record's own members, one of each) and res their list in results.json
 * (NULL: none); count_off is where run_result holds how many there are (an
 * int, or an int64_t with count_i64), at most max; indirect: the columns are
 * run_result's pointers to arrays of their own. */
typedef struct rgroup {
    const char *key, *res;
    const rcol *col;
    int n_col;
    size_t count_off;
    int count_i64, indirect;
    int64_t max;
} rgroup;

#define AT(f, type) offsetof(run_result, f), sizeof(type)
#define PT(f) offsetof(run_result, pts) + offsetof(point, f), sizeof(point)
#define SK(f) offsetof(run_result, sinks) + offsetof(sink_point, f), sizeof(sink_point)
#define RS(f) offsetof(run_result, resp) + offsetof(kept_response, f), sizeof(kept_response)
#define RM(f) offsetof(run_result, removal) + offsetof(kept_removal, f), sizeof(kept_removal)
/* rms[k][j]: j 0 regular tokens, 1 boundary tokens, 2 all */
#define SC(j, f)                                                                                 \
    offsetof(run_result, rms) + (j) * sizeof(kept_scale) + offsetof(kept_scale, f),              \
        3 * sizeof(kept_scale)
#define KEPT NULL, RJ_NONE, NULL, RC_NONE /* in the kept record only */

static const rcol SCALARS[] = {
    {"final_val", RT_F64, AT(final_val, double), "val_ce", RJ_NUM, NULL, RC_NONE},
    {"seconds", RT_F64, AT(seconds, double), "seconds", RJ_DOUBLE, NULL, RC_NONE},
    {"tokens_per_s", RT_F64, AT(tokens_per_s, double), "tokens_per_s", RJ_DOUBLE, NULL, RC_NONE},
};

static const rcol BLOCKS[] = {
    {"dce", RT_F64, RM(dce), "dce", RJ_NUM, NULL, RC_NONE},
    {"angle", RT_F64, RM(angle), "angle", RJ_NUM, NULL, RC_NONE},
    {"ce_full", RT_F64, RM(ce_full), KEPT},
    {"ce_removed", RT_F64, RM(ce_removed), KEPT},
};

static const rcol CHANGES[] = {
    {"step", RT_I64, AT(append_steps, int64_t), "step", RJ_NUM, NULL, RC_NONE},
    {"is_append", RT_I32, AT(is_append, int), "kind", RJ_KIND, NULL, RC_NONE},
    {"jump", RT_F64, RS(jump), "jump", RJ_NUM, NULL, RC_NONE},
    {"area2", RT_F64, AT(area2, double), "area_per_step_2pct", RJ_NUM, NULL, RC_NONE},
    {"area10", RT_F64, AT(area10, double), "area_per_step_10pct", RJ_NUM, NULL, RC_NONE},
    {"recovery", RT_I64, RS(recovery), "recovery", RJ_NUM, NULL, RC_NONE},
    {"baseline", RT_F64, RS(baseline), KEPT},
    {"area", RT_F64, RS(area), KEPT},
};

static const rcol BOUNDARIES[] = {
    {"all_std", RT_F64, SC(2, std), "std_all", RJ_NUM, NULL, RC_NONE},
    {"all_kurtosis", RT_F64, SC(2, kurtosis), "kurtosis_all", RJ_NUM, NULL, RC_NONE},
    {"boundary_mean", RT_F64, SC(1, mean), "mean_boundary", RJ_NUM, NULL, RC_NONE},
    {"regular_mean", RT_F64, SC(0, mean), "mean_regular", RJ_NUM, NULL, RC_NONE},
    {"all_count", RT_I64, SC(2, count), KEPT},
    {"all_mean", RT_F64, SC(2, mean), KEPT},
    {"all_max", RT_F64, SC(2, max), KEPT},
    {"boundary_count", RT_I64, SC(1, count), KEPT},
    {"boundary_std", RT_F64, SC(1, std), KEPT},
    {"boundary_kurtosis", RT_F64, SC(1, kurtosis), KEPT},
    {"boundary_max", RT_F64, SC(1, max), KEPT},
    {"regular_count", RT_I64, SC(0, count), KEPT},
    {"regular_std", RT_F64, SC(0, std), KEPT},
    {"regular_kurtosis", RT_F64, SC(0, kurtosis), KEPT},
    {"regular_max", RT_F64, SC(0, max), KEPT},
};

static const rcol POINTS[] = {
    {"step", RT_I64, PT(step), "step", RJ_NUM, NULL, RC_NONE},
    {"active_layers", RT_I32, PT(active), "active_layers", RJ_NUM, NULL, RC_NONE},
    {"val_ce", RT_F64, PT(val_ce), "val_ce", RJ_NUM, "val_ce", RC_F6},
    {"rms_std", RT_F64, PT(rms_std), "rms_std", RJ_NUM, "rms_std", RC_G6},
    {"rms_kurtosis", RT_F64, PT(rms_kurt), "rms_kurtosis", RJ_NUM, "rms_kurtosis", RC_G6},
    {"rms_boundary", RT_F64, PT(rms_boundary), "rms_boundary", RJ_NUM, "rms_boundary", RC_G6},
    {"rms_regular", RT_F64, PT(rms_regular), "rms_regular", RJ_NUM, "rms_regular", RC_G6},
    {"attention_mass_pos0", RT_F64, SK(mass0), "attention_mass_pos0", RJ_NUM,
     "attention_mass_pos0", RC_G6_BLANK},
    {"sink_rate", RT_F64, SK(sink_rate), "max_sink_rate", RJ_NUM, "sink_rate", RC_G6_BLANK},
    {"top_over_median", RT_F64, SK(top_ratio), "max_top_over_median", RJ_NUM, "top_over_median",
     RC_G6_BLANK},
    {"value_norm_ratio_pos0", RT_F64, SK(value_norm0), "min_value_norm_ratio_pos0", RJ_NUM,
     "value_norm_ratio_pos0", RC_G6_BLANK},
    {"active_layer_tokens", RT_I64, PT(active_layer_tokens), KEPT},
    {"phase", RT_I32, PT(phase), KEPT},
};

/* per training step; in curves.csv after its arm, seed and step */
static const rcol STEPS[] = {
    {"phase", RT_I32, AT(step_phase, int), NULL, RJ_NONE, "phase", RC_INT},
    {"active_layers", RT_I32, AT(step_active, int), NULL, RJ_NONE, "active_layers", RC_INT},
    {"active_layer_tokens", RT_I64, AT(step_alt, int64_t), NULL, RJ_NONE, "active_layer_tokens",
     RC_INT},
    {"loss", RT_F64, AT(losses, double), NULL, RJ_NONE, "train_loss", RC_F6},
};

#define N(a) (int)(sizeof a / sizeof a[0])
#define ONE SIZE_MAX /* a group of one entry: the record's own members */
/* the longest run a record holds: 2^24 steps */
#define MAX_STEPS ((int64_t)1 << 24)

/* In results.json's order: the run's own numbers, then its lists. */
static const rgroup GROUPS[] = {
    {NULL, NULL, SCALARS, N(SCALARS), ONE, 0, 0, 1},
    {"blocks", "block_removal", BLOCKS, N(BLOCKS), offsetof(run_result, n_blocks_measured), 0, 0,
     MAX_BLOCKS},
    {"phase_changes", "loss_response", CHANGES, N(CHANGES), offsetof(run_result, n_appends), 0, 0,
     MAX_PHASE_CHANGES},
    {"boundaries", "boundary_scale", BOUNDARIES, N(BOUNDARIES),
     offsetof(run_result, n_boundaries), 0, 0, MAX_BLOCKS},
    {"points", "trajectory", POINTS, N(POINTS), offsetof(run_result, n_pts), 0, 0, MAX_POINTS},
    {"steps", NULL, STEPS, N(STEPS), offsetof(run_result, n_steps), 1, 1, MAX_STEPS},
};
static const rgroup *const G_POINTS = &GROUPS[4], *const G_STEPS = &GROUPS[5];

/* ---- where a number sits ----------------------------------------------------------- */

/* An int, or with is64 an int64_t, at p (of any alignment). */
static int64_t read_int(const void *p, int is64)
{
    int64_t v;
    int i;
    if (is64)
        memcpy(&v, p, sizeof v);
    else
        memcpy(&i, p, sizeof i), v = i;
    return v;
}

static int64_t count(const rgroup *g, const run_result *r)
{
    return g->count_off == ONE ? 1 : read_int((const char *)r + g->count_off, g->count_i64);
}

/* The k-th entry of column c. */
static void *cell(const rgroup *g, const rcol *c, const run_result *r, int64_t k)
{
    char *base = (char *)r + c->off;
    if (g->indirect)
        memcpy(&base, base, sizeof base);
    return base + (size_t)k * c->stride;
}

static int64_t as_int(const rcol *c, const void *p) { return read_int(p, c->type != RT_I32); }

static double as_double(const void *p)
{
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- the kept record ------------------------------------------------------------- */

#define NAN_BITS 0x7ff8000000000000ULL
#define NEG_NAN_BITS 0xfff8000000000000ULL

static json_object *value_json(const rcol *c, const void *p)
{
    if (c->type != RT_F64)
        return json_object_new_int64(as_int(c, p));
    const double x = as_double(p);
    if (isfinite(x))
        return json_object_new_double(x);
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    char name[32];
    if (isinf(x))
        snprintf(name, sizeof name, x > 0 ? "Infinity" : "-Infinity");
    else if (bits == NAN_BITS || bits == NEG_NAN_BITS)
        snprintf(name, sizeof name, bits == NAN_BITS ? "NaN" : "-NaN");
    else
        snprintf(name, sizeof name, "NaN:%016llx", (unsigned long long)bits);
    return json_object_new_string(name);
}

json_object *record_to_json(const run_result *r)
{
    json_object *o = json_object_new_object();
    for (const rgroup *g = GROUPS; g < GROUPS + N(GROUPS); g++) {
        json_object *go = g->key ? json_object_new_object() : o;
        const int64_t n = count(g, r);
        for (const rcol *c = g->col; c < g->col + g->n_col; c++) {
            if (!g->key) {
                json_object_object_add(o, c->key, value_json(c, cell(g, c, r, 0)));
                continue;
            }
            json_object *a = json_object_new_array();
            for (int64_t k = 0; k < n; k++)
                json_object_array_add(a, value_json(c, cell(g, c, r, k)));
            json_object_object_add(go, c->key, a);
        }
        if (g->key)
            json_object_object_add(o, g->key, go);
    }
    return o;
}

/* A double's text as value_json writes one that is not finite: 1 with its bits. */
static int nonfinite(const char *s, double *x)
{
    uint64_t bits;
    char *end;
    if (strcmp(s, "NaN") == 0 || strcmp(s, "-NaN") == 0)
        bits = s[0] == '-' ? NEG_NAN_BITS : NAN_BITS;
    else if (strcmp(s, "Infinity") == 0 || strcmp(s, "-Infinity") == 0)
        bits = s[0] == '-' ? 0xfff0000000000000ULL : 0x7ff0000000000000ULL;
    else if (strncmp(s, "NaN:", 4) == 0 && strlen(s) == 20 && isxdigit((unsigned char)s[4]))
        bits = strtoull(s + 4, &end, 16);
    else
        return 0;
    if (strncmp(s, "NaN:", 4) == 0 && *end)
        return 0;
    memcpy(x, &bits, sizeof bits);
    return strncmp(s, "NaN:", 4) != 0 || isnan(*x);
}

/* v into the entry at p as c's type: 0 when it is not one. */
static int value_from(const rcol *c, json_object *v, void *p)
{
    if (c->type == RT_F64) {
        double x;
        if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int))
            x = json_object_get_double(v);
        else if (!json_object_is_type(v, json_type_string) ||
                 !nonfinite(json_object_get_string(v), &x))
            return 0;
        memcpy(p, &x, sizeof x);
        return 1;
    }
    if (!json_object_is_type(v, json_type_int))
        return 0;
    errno = 0;
    const int64_t x = json_object_get_int64(v);
    if (errno == EINVAL || (c->type == RT_I32 && (x < INT_MIN || x > INT_MAX)))
        return 0;
    if (c->type == RT_I32) {
        const int i = (int)x;
        memcpy(p, &i, sizeof i);
    } else {
        memcpy(p, &x, sizeof x);
    }
    return 1;
}

/* One group's object (or, for the record's own members, the record) into r:
 * 0 with the reason in why. */
static int group_from(const rgroup *g, json_object *o, run_result *r, char *why, size_t n)
{
    const char *where = g->key ? g->key : "record";
    json_object *go = o;
    if (g->key && !json_object_object_get_ex(o, g->key, &go)) {
        snprintf(why, n, "the record lacks %s", g->key);
        return 0;
    }
    if (!json_object_is_type(go, json_type_object)) {
        snprintf(why, n, "the record's %s is not an object", where);
        return 0;
    }
    int64_t len = g->key ? -1 : 1;
    for (const rcol *c = g->col; c < g->col + g->n_col; c++) {
        json_object *v;
        if (!json_object_object_get_ex(go, c->key, &v)) {
            snprintf(why, n, "the record's %s lacks %s", where, c->key);
            return 0;
        }
        if (g->key) {
            const int64_t m = json_object_is_type(v, json_type_array)
                                  ? (int64_t)json_object_array_length(v) : -1;
            if (m < 0 || m > g->max || (len >= 0 && m != len)) {
                snprintf(why, n, "the record's %s.%s is not a list of %s entries", where, c->key,
                         len >= 0 ? "as many" : "at most its number of");
                return 0;
            }
            len = m;
            if (g->indirect) { /* its own array, one entry spare as runs.c allocates them */
                void *a = calloc((size_t)m + 1, c->stride);
                if (!a)
                    die("out of memory");
                memcpy((char *)r + c->off, &a, sizeof a);
            }
        }
        for (int64_t k = 0; k < len; k++)
            if (!value_from(c, g->key ? json_object_array_get_idx(v, (size_t)k) : v,
                            cell(g, c, r, k))) {
                char at[64] = "";
                if (g->key)
                    snprintf(at, sizeof at, "%s.%s[%lld]", g->key, c->key, (long long)k);
                snprintf(why, n, "the record's %s is not %s", g->key ? at : c->key,
                         c->type == RT_F64 ? "a number" : "an integer in range");
                return 0;
            }
    }
    /* every member is one of the group's (all present, so the counts match) */
    if (json_object_object_length(go) != g->n_col + (g->key ? 0 : N(GROUPS) - 1)) {
        snprintf(why, n, "the record's %s has members this build does not know", where);
        return 0;
    }
    if (g->count_i64)
        memcpy((char *)r + g->count_off, &len, sizeof len);
    else if (g->key) {
        const int m = (int)len;
        memcpy((char *)r + g->count_off, &m, sizeof m);
    }
    return 1;
}

run_result *record_from_json(json_object *o, char *why, size_t why_size)
{
    run_result *r = calloc(1, sizeof(*r));
    if (!r)
        die("out of memory");
    if (!json_object_is_type(o, json_type_object)) {
        snprintf(why, why_size, "the record is not an object");
        free(r);
        return NULL;
    }
    for (const rgroup *g = GROUPS; g < GROUPS + N(GROUPS); g++)
        if (!group_from(g, o, r, why, why_size)) {
            free_run(r);
            return NULL;
        }
    return r;
}

int record_settle(run_result *r)
{
    for (const rgroup *g = GROUPS; g < GROUPS + N(GROUPS); g++)
        if (count(g, r) < 0 || count(g, r) > g->max)
            return 0;
    for (const rgroup *g = GROUPS; g < GROUPS + N(GROUPS); g++)
        for (int64_t k = g->key && !g->indirect ? count(g, r) : g->max; k < g->max; k++)
            for (const rcol *c = g->col; c < g->col + g->n_col; c++)
                memset(cell(g, c, r, k), 0, c->type == RT_I32 ? sizeof(int) : sizeof(int64_t));
    return 1;
}

/* ---- results.json and curves.csv ------------------------------------------------------ */

static json_object *result_json(const rcol *c, const void *p)
{
    if (c->rj == RJ_KIND)
        return json_object_new_string(as_int(c, p) ? "append" : "restart");
    if (c->type != RT_F64)
        return json_object_new_int64(as_int(c, p));
    const double x = as_double(p);
    return c->rj == RJ_DOUBLE || isfinite(x) ? json_object_new_double(x) : NULL;
}

json_object *record_results(const run_result *r, int seed)
{
    json_object *ro = json_object_new_object();
    json_object_object_add(ro, "seed", json_object_new_int(seed)); /* curves.csv's */
    for (const rgroup *g = GROUPS; g < GROUPS + N(GROUPS); g++) {
        if (!g->key) {
            for (const rcol *c = g->col; c < g->col + g->n_col; c++)
                if (c->res)
                    json_object_object_add(ro, c->res, result_json(c, cell(g, c, r, 0)));
            continue;
        }
        if (!g->res)
            continue;
        json_object *list = json_object_new_array();
        for (int64_t k = 0; k < count(g, r); k++) {
            json_object *e = json_object_new_object();
            for (const rcol *c = g->col; c < g->col + g->n_col; c++)
                if (c->res)
                    json_object_object_add(e, c->res, result_json(c, cell(g, c, r, k)));
            json_object_array_add(list, e);
        }
        json_object_object_add(ro, g->res, list);
    }
    return ro;
}

/* A group's curves.csv columns of entry k, each after a comma (empty cells
 * when k < 0). */
static void csv_cells(FILE *f, const rgroup *g, const run_result *r, int64_t k)
{
    for (const rcol *c = g->col; c < g->col + g->n_col; c++) {
        const void *p = k >= 0 ? cell(g, c, r, k) : NULL;
        if (c->rc == RC_NONE)
            continue;
        if (!p)
            fputc(',', f);
        else if (c->rc == RC_INT)
            fprintf(f, ",%lld", (long long)as_int(c, p));
        else if (c->rc == RC_F6)
            fprintf(f, ",%.6f", as_double(p));
        else if (c->rc == RC_G6 || isfinite(as_double(p)))
            fprintf(f, ",%.6g", as_double(p));
        else
            fputc(',', f);
    }
}

static void csv_names(FILE *f, const rgroup *g)
{
    for (const rcol *c = g->col; c < g->col + g->n_col; c++)
        if (c->csv)
            fprintf(f, ",%s", c->csv);
}

void record_csv_header(FILE *f)
{
    fprintf(f, "arm,seed,step");
    csv_names(f, G_STEPS);
    csv_names(f, G_POINTS);
    fputc('\n', f);
}

void record_csv_rows(FILE *f, const char *arm, int seed, const run_result *r)
{
    int64_t k = 0;
    for (int64_t t = 0; t < r->n_steps; t++) {
        fprintf(f, "%s,%d,%lld", arm, seed, (long long)t + 1);
        csv_cells(f, G_STEPS, r, t);
        while (k < r->n_pts && r->pts[k].step < t + 1)
            k++;
        csv_cells(f, G_POINTS, r, k < r->n_pts && r->pts[k].step == t + 1 ? k : -1);
        fputc('\n', f);
    }
}
