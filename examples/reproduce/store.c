/* Runs kept: records as bytes, their settings as canonical JSON, the output folder's runs/. */
#include "store.h"

#include <stddef.h>
#include <sys/stat.h>

#include "canon.h"
#include "files.h"
#include "json.h" /* the library's strict JSON parser and writer (liblattice/json.h) */
#include "preset.h"
#include "preset_json.h"
#include "record.h"
#include "resume.h"
#include "runs.h"

/* ---- a run's record --------------------------------------------------------------- */

/* The job, the run_result (its pointers meaningless there), then its per-step
 * arrays. Every rank runs the same binary, so the layout is the same on both
 * ends; a file from another build is told apart by the header's sizes. */
#define RUN_HEADER (sizeof(int32_t) + sizeof(run_result))
#define RUN_PER_STEP (sizeof(double) + 2 * sizeof(int) + sizeof(int64_t))

char *run_pack(int32_t job, const run_result *r, size_t *bytes)
{
    const size_t n = (size_t)r->n_steps;
    *bytes = RUN_HEADER + n * RUN_PER_STEP;
    char *buf = malloc(*bytes), *at = buf;
    if (!buf)
        die("out of memory");
    memcpy(at, &job, sizeof job), at += sizeof job;
    memcpy(at, r, sizeof(*r)), at += sizeof(*r);
    memcpy(at, r->losses, n * sizeof(double)), at += n * sizeof(double);
    memcpy(at, r->step_phase, n * sizeof(int)), at += n * sizeof(int);
    memcpy(at, r->step_active, n * sizeof(int)), at += n * sizeof(int);
    memcpy(at, r->step_alt, n * sizeof(int64_t));
    return buf;
}

/* The fixed part of a record written before run_result gained its sinks. */
#define RUN_HEADER_0_3 (sizeof(int32_t) + offsetof(run_result, sinks))

run_result *run_unpack(const char *buf, size_t bytes, int32_t *job, char *why, size_t why_size)
{
    return run_unpack_sized(buf, bytes, RUN_HEADER, job, why, why_size);
}

int run_header_known(uint64_t header)
{
    return header == RUN_HEADER || header == RUN_HEADER_0_3;
}

run_result *run_unpack_sized(const char *buf, size_t bytes, size_t header, int32_t *job,
                             char *why, size_t why_size)
{
    if (!run_header_known(header)) {
        snprintf(why, why_size, "a run record of %zu bytes, which this build does not know",
                 header);
        return NULL;
    }
    if (bytes < header) {
        snprintf(why, why_size, "truncated (%zu bytes)", bytes);
        return NULL;
    }
    run_result *r = calloc(1, sizeof(*r));
    if (!r)
        die("out of memory");
    memcpy(job, buf, sizeof *job);
    memcpy(r, buf + sizeof *job, header - sizeof *job);
    r->losses = NULL;
    r->step_phase = r->step_active = NULL;
    r->step_alt = NULL;
    /* the step count the bytes hold, found by division: n_steps * RUN_PER_STEP
     * could wrap around to match */
    const size_t n = (bytes - header) / RUN_PER_STEP;
    if ((bytes - header) % RUN_PER_STEP != 0 || r->n_steps < 0 || (uint64_t)r->n_steps != n) {
        snprintf(why, why_size, "%zu bytes, which do not hold the %lld steps claimed", bytes,
                 (long long)r->n_steps);
        free(r);
        return NULL;
    }
    /* every count within the array it indexes */
    if (!record_settle(r)) {
        snprintf(why, why_size,
                 "counts beyond their arrays (%d points, %d phase changes, %d boundaries, %d "
                 "blocks measured)",
                 r->n_pts, r->n_appends, r->n_boundaries, r->n_blocks_measured);
        free(r);
        return NULL;
    }
    if (header < RUN_HEADER) /* no sinks were measured */
        for (int k = 0; k < r->n_pts; k++)
            r->sinks[k] = (sink_point){NAN, NAN, NAN, NAN};
    const char *at = buf + header;
    r->losses = calloc(n + 1, sizeof(double));
    r->step_phase = calloc(n + 1, sizeof(int));
    r->step_active = calloc(n + 1, sizeof(int));
    r->step_alt = calloc(n + 1, sizeof(int64_t));
    if (!r->losses || !r->step_phase || !r->step_active || !r->step_alt)
        die("out of memory");
    memcpy(r->losses, at, n * sizeof(double)), at += n * sizeof(double);
    memcpy(r->step_phase, at, n * sizeof(int)), at += n * sizeof(int);
    memcpy(r->step_active, at, n * sizeof(int)), at += n * sizeof(int);
    memcpy(r->step_alt, at, n * sizeof(int64_t));
    return r;
}

/* ---- settings --------------------------------------------------------------------- */

static const char *const NOT_SETTINGS[] = {"name",        "about",    "seeds",      "arms",
                                           "compare",     "probes",   "probe_every", "require_go",
                                           "interactions", "threads", "backend", "design",
                                           "gemm_precision"};

/* The arm's entry in the preset's list: its name, or its object. */
static json_object *arm_spec(const preset *p, const char *name)
{
    json_object *list = member(p->json, "arms");
    for (size_t i = 0; list && i < json_object_array_length(list); i++) {
        json_object *v = json_object_array_get_idx(list, i);
        const char *n = json_object_is_type(v, json_type_string) ? json_object_get_string(v)
                        : json_object_is_type(v, json_type_object)
                            ? json_object_get_string(member(v, "name"))
                            : NULL;
        if (n && strcmp(n, name) == 0)
            return v;
    }
    return NULL;
}

/* An arm's block_norm or block_rescale as kept runs hold it: 0.4 wrote 1 for
 * "every block_size layers", which 1.0 writes as the layer count. */
static int every_as_kept(const preset *p, int layers)
{
    return layers == p->block_size ? 1 : layers;
}

/* The arm's spec as kept runs hold it, in 0.x's spelling where 1.0 renamed a
 * key or changed a value's unit (rewind_data was "data": "replay" or
 * "continue"; block_norm and block_rescale were 1 for every block), so that
 * the runs kept before 1.0 stay this arm's. A new reference. */
static json_object *spec_as_kept(const preset *p, json_object *spec)
{
    if (!json_object_is_type(spec, json_type_object) ||
        !(member(spec, "rewind_data") || member(spec, "block_norm") ||
          member(spec, "block_rescale")))
        return json_object_get(spec);
    json_object *o = json_object_new_object();
    json_object_object_foreach(spec, key, val)
    {
        if (strcmp(key, "rewind_data") == 0)
            json_object_object_add(o, "data", json_object_new_string(
                                                  json_object_get_int(val) ? "replay" : "continue"));
        else if (strcmp(key, "block_norm") == 0 || strcmp(key, "block_rescale") == 0)
            json_object_object_add(o, key,
                                   json_object_new_int(every_as_kept(p, json_object_get_int(val))));
        else
            json_object_object_add(o, key, json_object_get(val));
    }
    return o;
}

static json_object *num(double v) { return json_object_new_double(v); }

/* The arm as resolved, field by field: what its runs are made with, whether
 * the preset said it or a default did. */
static json_object *arm_resolved(const preset *p, const arm *a)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "placement", json_object_new_int(a->placement));
    json_object_object_add(o, "residual_scale", num(a->residual_scale));
    json_object_object_add(o, "schedule", json_object_new_int(a->schedule));
    json_object *ph = json_object_new_array();
    for (int k = 0; k < a->n_phases; k++) {
        const lattice_schedule_phase *f = &a->phases[k];
        json_object *e = json_object_new_object();
        json_object_object_add(e, "steps", json_object_new_int64(f->steps));
        json_object_object_add(e, "tokens", json_object_new_int64(f->tokens));
        json_object_object_add(e, "active_layers", json_object_new_int(f->active_layers));
        json_object_object_add(e, "train_from", json_object_new_int(f->train_from));
        json_object_object_add(e, "reset_optimizer", json_object_new_int(f->reset_optimizer));
        json_object_object_add(e, "block_init", json_object_new_int(f->block_init));
        json_object_object_add(e, "rewind_data", json_object_new_int(f->rewind_data));
        json_object_object_add(e, "train_boundary", json_object_new_int(f->train_boundary));
        json_object_array_add(ph, e);
    }
    json_object_object_add(o, "phases", ph);
    json_object_object_add(o, "block_init", json_object_new_int(a->block_init));
    json_object_object_add(o, "train_boundary", json_object_new_int(a->train_boundary));
    /* "replay": 0.x's name, kept in the settings so that kept runs stay theirs */
    json_object_object_add(o, "replay", json_object_new_int(a->rewind_data));
    json_object_object_add(o, "init_gain", num(a->init_gain));
    if (a->block_norm) /* only when set: the settings of every arm without it stay as they were */
        json_object_object_add(o, "block_norm",
                               json_object_new_int(every_as_kept(p, a->block_norm)));
    if (a->block_rescale) { /* likewise; "rescale" names 0.5's causal rule (a running RMS of
                             * earlier steps), so 0.4's runs (the row's own positions) rerun */
        json_object_object_add(o, "block_rescale",
                               json_object_new_int(every_as_kept(p, a->block_rescale)));
        json_object_object_add(o, "rescale", json_object_new_string("running"));
    }
    if (a->massive_offset > 0) { /* likewise */
        json_object_object_add(o, "massive_offset", num(a->massive_offset));
        json_object_object_add(o, "massive_layer", json_object_new_int(a->massive_layer));
        json_object_object_add(o, "massive_channel", json_object_new_int(a->massive_channel));
    }
    json_object_object_add(o, "lr", num(a->lr));
    json_object_object_add(o, "min_lr", num(a->min_lr));
    json_object_object_add(o, "decay", num(a->decay));
    json_object_object_add(o, "weight_decay", num(a->weight_decay));
    json_object_object_add(o, "beta2", num(a->beta2));
    json_object_object_add(o, "warmup", json_object_new_int(a->warmup));
    json_object_object_add(o, "lr_given", json_object_new_int(a->lr_given));
    if (a->own_settings) { /* only when the arm's train sets one: every other arm's settings
                            * stay as they were (the preset's train section holds them) */
        json_object_object_add(o, "clip", num(a->clip));
        json_object_object_add(o, "alpha", num(a->alpha));
        json_object_object_add(o, "gamma", num(a->gamma));
        json_object_object_add(o, "tau", num(a->tau));
        json_object_object_add(o, "kl_direction", json_object_new_int(a->kl_direction));
        json_object_object_add(o, "steps_per_phase", json_object_new_int(a->steps_per_phase));
    }
    return o;
}

char *run_settings(const preset *p, const arm *a, const char *corpus_hex, const char *teacher_hex)
{
    json_object *o = json_object_new_object(), *rest = json_object_new_object();
    json_object_object_foreach(p->json, key, val)
    {
        int skip = 0;
        for (size_t k = 0; k < sizeof NOT_SETTINGS / sizeof NOT_SETTINGS[0]; k++)
            skip |= strcmp(key, NOT_SETTINGS[k]) == 0;
        if (!skip)
            json_object_object_add(rest, key, json_object_get(val));
    }
    json_object_object_add(o, "preset", rest);
    json_object_object_add(o, "threads", json_object_new_int(p->threads));
    if (strcmp(p->backend, "openblas") != 0) /* only when not OpenBLAS, the backend of every
                                              * run kept through 0.4: their settings stay */
        json_object_object_add(o, "backend", json_object_new_string(p->backend));
    if (strcmp(p->gemm_precision, "fp32") != 0) /* only when not fp32: every fp32 run keeps
                                                 * its key, with the preset's key or without */
        json_object_object_add(o, "gemm_precision", json_object_new_string(p->gemm_precision));
    json_object *am = json_object_new_object();
    json_object *spec = arm_spec(p, a->name);
    json_object_object_add(am, "spec", spec ? spec_as_kept(p, spec) : json_object_new_string(a->name));
    json_object_object_add(am, "resolved", arm_resolved(p, a));
    json_object_object_add(o, "arm", am);
    json_object_object_add(o, "corpus", json_object_new_string(corpus_hex));
    json_object_object_add(o, "teacher", json_object_new_string(teacher_hex));
    char *text = canon_json(o);
    json_object_put(o);
    return text;
}

void corpus_checksum(const preset *p, char *hex)
{
    uint64_t h[2];
    if (xxh_file(p->train, &h[0]) != 0)
        die("cannot read the training text %s: %s", p->train, strerror(errno));
    if (xxh_file(p->val, &h[1]) != 0)
        die("cannot read the validation text %s: %s", p->val, strerror(errno));
    hex64(hex, xxh_bytes(h, sizeof h));
}

/* ---- the output folder's runs/ ------------------------------------------------------ */

/* A kept run's file of format 2 (0.5 to 1.0), still read as it is:
 *   "LATRUN", 0, 2
 *   kept_head: the arm's name and the seed it was run for (the file's name
 *     must say the same), and the sizes of what follows
 *   the settings it was made with, as canonical JSON (run_settings)
 *   the record (run_pack)
 *   XXH64 of every byte before it
 * Files of format 1 (0.4 and before) carry a checksum of settings only:
 * `reproduce --rekey` verifies and converts them.
 *
 * Format 3 (since 1.1), what kept_pack writes: one line of JSON,
 *   {"kept_run":3,"arm":ARM,"seed":N,"job":J,"settings":{...},"record":{...},"xxh64":"HEX"}
 * the settings as run_settings wrote them, the record as record_to_json
 * does, and HEX the XXH64 of every byte before ,"xxh64" as 16 hex digits. */
static const char MAGIC[8] = {'L', 'A', 'T', 'R', 'U', 'N', 0, 2};
const char KEPT_MAGIC_1[8] = {'L', 'A', 'T', 'R', 'U', 'N', 0, 1};

typedef struct kept_head {
    char arm[48];
    uint32_t seed; /* from 1 */
    uint32_t reserved;
    uint64_t settings_len, record_bytes, record_header;
} kept_head;

#define MAX_SETTINGS ((uint64_t)1 << 20)
/* a run of up to 2^24 steps */
#define MAX_RECORD (RUN_HEADER + ((uint64_t)1 << 24) * RUN_PER_STEP)
/* ... as a file of either format: 64 bytes a step in JSON, and 4 MiB for the rest */
#define MAX_KEPT_FILE (((uint64_t)1 << 24) * 64 + ((uint64_t)1 << 22) + MAX_SETTINGS)

#define KEPT_FORMAT 3
#define SUM_KEY ",\"xxh64\":\""
/* the file's end: the checksum's key, 16 hex digits, "}\n */
#define SUM_TAIL (sizeof SUM_KEY - 1 + 16 + 3)

void run_path(char *buf, size_t n, const char *dir, const char *arm, int seed)
{
    if ((size_t)snprintf(buf, n, "%s/runs/%s.seed%d.run", dir, arm, seed) >= n)
        die("the path of a kept run is too long (output folder %s)", dir);
}

/* o's compact JSON text; dies when out of memory. */
static char *dump(json_object *o)
{
    char *t = lattice__json_dump(o);
    json_object_put(o);
    if (!t)
        die("out of memory");
    return t;
}

char *kept_pack(const char *arm_name, int seed, const char *settings, int32_t job,
                const run_result *r, size_t *bytes)
{
    json_object *h = json_object_new_object();
    json_object_object_add(h, "kept_run", json_object_new_int(KEPT_FORMAT));
    json_object_object_add(h, "arm", json_object_new_string(arm_name));
    json_object_object_add(h, "seed", json_object_new_int(seed));
    json_object_object_add(h, "job", json_object_new_int(job));
    char *head = dump(h), *rec = dump(record_to_json(r));
    const size_t n = strlen(head) + strlen(settings) + strlen(rec) + 64;
    char *buf = malloc(n);
    if (!buf)
        die("out of memory");
    /* the head's members, then the settings and the record, then the checksum of them all */
    int at = snprintf(buf, n, "%.*s,\"settings\":%s,\"record\":%s", (int)strlen(head) - 1, head,
                      settings, rec);
    char hex[17];
    hex64(hex, xxh_bytes(buf, (size_t)at));
    at += snprintf(buf + at, n - (size_t)at, SUM_KEY "%s\"}\n", hex);
    *bytes = (size_t)at;
    free(head);
    free(rec);
    return buf;
}

/* The settings a kept run was made with (was, len bytes) against these: 0,
 * or KEPT_STALE with the keys that differ in why. */
static int same_settings(const char *was, size_t len, const char *settings, char *why,
                         size_t why_size)
{
    if (len == strlen(settings) && memcmp(was, settings, len) == 0)
        return 0;
    char *text = malloc(len + 1);
    if (!text)
        die("out of memory");
    memcpy(text, was, len);
    text[len] = 0;
    char keys[1500];
    const int n = canon_diff(text, settings, keys, sizeof keys, 4);
    free(text);
    if (n > 0)
        snprintf(why, why_size, "made with other settings: %s", keys);
    else
        snprintf(why, why_size, "made with other settings (unreadable: a damaged record)");
    return KEPT_STALE;
}

/* Whether a kept run names this arm and seed: 0, or KEPT_BAD with why. */
static int same_run(const char *arm, size_t arm_size, long long seed, const char *arm_name,
                    int want_seed, char *why, size_t why_size)
{
    const int named = arm && memchr(arm, 0, arm_size) != NULL;
    if (named && strcmp(arm, arm_name) == 0 && seed == want_seed)
        return 0;
    snprintf(why, why_size, "it holds arm '%.47s' seed %lld, not %s seed %d (a file renamed?)",
             named ? arm : "?", seed, arm_name, want_seed);
    return KEPT_BAD;
}

/* o's member key as an integer, or fallback when it is absent or not one. */
static long long int_member(json_object *o, const char *key, long long fallback)
{
    json_object *v = member(o, key);
    return json_object_is_type(v, json_type_int) ? (long long)json_object_get_int64(v) : fallback;
}

/* kept_parse of a file of format 3. */
static int kept_parse_json(const char *buf, size_t bytes, const char *arm_name, int seed,
                           const char *settings, run_result **out, char *why, size_t why_size)
{
    const size_t body = bytes - SUM_TAIL;
    char hex[17];
    if (bytes < SUM_TAIL || memcmp(buf + body, SUM_KEY, sizeof SUM_KEY - 1) != 0 ||
        memcmp(buf + bytes - 3, "\"}\n", 3) != 0) {
        snprintf(why, why_size, "damaged: %zu bytes without the checksum that ends a kept run "
                                "(cut short?)", bytes);
        return KEPT_BAD;
    }
    hex64(hex, xxh_bytes(buf, body));
    if (memcmp(buf + body + sizeof SUM_KEY - 1, hex, 16) != 0) {
        snprintf(why, why_size, "damaged: its contents do not match their checksum");
        return KEPT_BAD;
    }
    char err[LATTICE_ERRMSG_SIZE];
    json_object *o = NULL, *v;
    const lattice_status st = lattice__json_parse(buf, bytes, 0, "the kept run", &o, err);
    if (st == LATTICE_ERR_OUT_OF_MEMORY)
        die("out of memory");
    int rc = KEPT_BAD;
    if (st != LATTICE_OK)
        snprintf(why, why_size, "damaged: %s", err);
    else if (int_member(o, "kept_run", -1) != KEPT_FORMAT || int_member(o, "job", LLONG_MIN) == LLONG_MIN ||
             !json_object_object_get_ex(o, "settings", &v) ||
             !json_object_is_type(v, json_type_object))
        snprintf(why, why_size, "not a kept run of format %d (its kept_run, job or settings "
                                "are missing or of another type)", KEPT_FORMAT);
    else if ((rc = same_run(json_object_get_string(member(o, "arm")), 48,
                            int_member(o, "seed", -1), arm_name, seed, why, why_size)) == 0) {
        char *was = canon_json(v);
        rc = same_settings(was, strlen(was), settings, why, why_size);
        free(was);
    }
    char how[300];
    if (rc == 0 && !(*out = record_from_json(member(o, "record"), how, sizeof how))) {
        snprintf(why, why_size, "its record is damaged: %s", how);
        rc = KEPT_BAD;
    }
    json_object_put(o);
    return rc == 0 ? KEPT_OK : rc;
}

int kept_parse(const char *buf, size_t bytes, const char *arm_name, int seed,
               const char *settings, run_result **out, char *why, size_t why_size)
{
    *out = NULL;
    kept_head h;
    if (bytes > 0 && buf[0] == '{')
        return kept_parse_json(buf, bytes, arm_name, seed, settings, out, why, why_size);
    if (bytes >= sizeof MAGIC && memcmp(buf, KEPT_MAGIC_1, sizeof MAGIC) == 0) {
        snprintf(why, why_size, "kept by 0.4 or before, with a checksum of its settings only: "
                                "`" PROG " --rekey` verifies it against the preset it was made "
                                "with and converts it");
        return KEPT_OLD;
    }
    if (bytes < sizeof MAGIC + sizeof h + sizeof(uint64_t) || memcmp(buf, MAGIC, sizeof MAGIC)) {
        snprintf(why, why_size, "not a kept run (%zu bytes, neither JSON nor a LATRUN header of "
                                "format 2)", bytes);
        return KEPT_BAD;
    }
    memcpy(&h, buf + sizeof MAGIC, sizeof h);
    const uint64_t fixed = sizeof MAGIC + sizeof h + sizeof(uint64_t);
    if (h.settings_len > MAX_SETTINGS || h.record_bytes > MAX_RECORD ||
        fixed + h.settings_len + h.record_bytes != bytes) {
        snprintf(why, why_size, "damaged: %zu bytes, where its header implies %llu", bytes,
                 h.settings_len > MAX_SETTINGS || h.record_bytes > MAX_RECORD
                     ? 0ULL
                     : (unsigned long long)(fixed + h.settings_len + h.record_bytes));
        return KEPT_BAD;
    }
    uint64_t sum;
    memcpy(&sum, buf + bytes - sizeof sum, sizeof sum);
    if (sum != xxh_bytes(buf, bytes - sizeof sum)) {
        snprintf(why, why_size, "damaged: its contents do not match their checksum");
        return KEPT_BAD;
    }
    const char *text = buf + sizeof MAGIC + sizeof h;
    int rc = same_run(h.arm, sizeof h.arm, h.seed, arm_name, seed, why, why_size);
    if (rc == 0)
        rc = same_settings(text, h.settings_len, settings, why, why_size);
    if (rc != 0)
        return rc;
    int32_t job;
    char how[300];
    run_result *r = run_unpack_sized(text + h.settings_len, h.record_bytes, h.record_header, &job,
                                     how, sizeof how);
    if (!r) {
        snprintf(why, why_size, "its record is damaged: %s", how);
        return KEPT_BAD;
    }
    *out = r;
    return KEPT_OK;
}

json_object *kept_settings(const char *path)
{
    char *buf;
    size_t n;
    if (read_regular(path, MAX_KEPT_FILE, &buf, &n) != 0)
        return NULL;
    json_object *o = NULL, *all;
    kept_head h;
    char err[LATTICE_ERRMSG_SIZE];
    if (n > 0 && buf[0] == '{') {
        if (lattice__json_parse(buf, n, 0, "a kept run", &all, err) == LATTICE_OK) {
            o = json_object_get(member(all, "settings"));
            json_object_put(all);
        }
    } else if (n >= sizeof MAGIC + sizeof h && memcmp(buf, MAGIC, sizeof MAGIC) == 0) {
        memcpy(&h, buf + sizeof MAGIC, sizeof h);
        if (h.settings_len <= MAX_SETTINGS && sizeof MAGIC + sizeof h + h.settings_len <= n) {
            char *text = strndup(buf + sizeof MAGIC + sizeof h, h.settings_len);
            if (!text)
                die("out of memory");
            o = json_tokener_parse(text);
            free(text);
        }
    }
    free(buf);
    return o;
}

void keep_run(study *s, int job, run_result *r)
{
    const preset *p = s->p;
    const int a = job % p->n_arms, i = job / p->n_arms;
    s->res[a][i] = r;
    if (!s->dir)
        return;
    char path[2048];
    snprintf(path, sizeof path, "%s/runs", s->dir);
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die("cannot create %s: %s", path, strerror(errno));
    run_path(path, sizeof path, s->dir, p->arms[a].name, i + 1);
    size_t bytes;
    char *buf = kept_pack(p->arms[a].name, i + 1, s->settings[a], job, r, &bytes);
    write_file_whole(path, buf, bytes);
    free(buf);
    resume_forget(s->dir, p->arms[a].name, i + 1); /* kept: its checkpoint is done with */
}

/* KEPT_OK and *out when a kept run of this job matches its settings;
 * KEPT_NONE when there is none; otherwise why. */
static int load_one(const study *s, int job, run_result **out, char *why, size_t why_size)
{
    const preset *p = s->p;
    const int a = job % p->n_arms, i = job / p->n_arms;
    char path[2048];
    run_path(path, sizeof path, s->dir, p->arms[a].name, i + 1);
    char *buf;
    size_t n;
    /* bounded by the largest file a record can make */
    if (read_regular(path, MAX_KEPT_FILE, &buf, &n) != 0) {
        if (errno == ENOENT)
            return KEPT_NONE;
        snprintf(why, why_size, "cannot be read: %s",
                 errno == EINVAL  ? "not a regular file"
                 : errno == EFBIG ? "larger than any run record"
                                  : strerror(errno));
        return KEPT_BAD;
    }
    const int rc = kept_parse(buf, n, p->arms[a].name, i + 1, s->settings[a], out, why, why_size);
    free(buf);
    return rc;
}

int load_kept_runs(study *s, int quiet, int fresh)
{
    const preset *p = s->p;
    int loaded = 0;
    for (int i = 0; i < p->seeds; i++)
        for (int a = 0; a < p->n_arms; a++) {
            if (fresh && p->arms[a].selected)
                continue; /* --fresh: this invocation runs it again */
            run_result *r = NULL;
            char why[2048];
            const int job = i * p->n_arms + a;
            const int rc = load_one(s, job, &r, why, sizeof why);
            if (rc == KEPT_OK) {
                s->res[a][i] = r;
                loaded++;
                /* a study stopped between keeping the run and removing its
                 * checkpoint left the checkpoint behind: done with too */
                if (s->dir)
                    resume_forget(s->dir, p->arms[a].name, i + 1);
            } else if (rc == KEPT_OLD) {
                die("runs/%s.seed%d.run was %s (nothing was run)", p->arms[a].name, i + 1, why);
            } else if (rc != KEPT_NONE && !quiet) {
                say("runs/%s.seed%d.run: %s: %s\n", p->arms[a].name, i + 1, why,
                    p->arms[a].selected ? "running it again" : "not used");
            }
        }
    return loaded;
}
