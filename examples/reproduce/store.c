/* Runs kept: records as bytes, settings checksums, the output folder's runs/. */
#include "store.h"

#include <dirent.h>
#include <stddef.h>
#include <sys/stat.h>

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
    if (header < RUN_HEADER) /* no sinks were measured */
        for (int k = 0; k < MAX_POINTS; k++)
            r->sinks[k] = (sink_point){NAN, NAN, NAN, NAN};
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
    if (r->n_pts < 0 || r->n_pts > MAX_POINTS || r->n_appends < 0 ||
        (size_t)r->n_appends > sizeof r->append_steps / sizeof r->append_steps[0] ||
        (size_t)r->n_appends > sizeof r->is_append / sizeof r->is_append[0] ||
        (size_t)r->n_appends > sizeof r->resp / sizeof r->resp[0] || r->n_boundaries < 0 ||
        (size_t)r->n_boundaries > sizeof r->rms / sizeof r->rms[0] || r->n_blocks_measured < 0 ||
        (size_t)r->n_blocks_measured > sizeof r->removal / sizeof r->removal[0]) {
        snprintf(why, why_size,
                 "counts beyond their arrays (%d points, %d phase changes, %d boundaries, %d "
                 "blocks measured)",
                 r->n_pts, r->n_appends, r->n_boundaries, r->n_blocks_measured);
        free(r);
        return NULL;
    }
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

static uint64_t fnv_int(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }
static uint64_t fnv_dbl(uint64_t h, double v) { return fnv(h, &v, sizeof v); }

uint64_t run_settings(const preset *p, const arm *a, uint64_t teacher_sum)
{
    /* the preset without what does not change a run's numbers */
    json_object *rest = json_object_new_object();
    json_object_object_foreach(p->json, key, val)
    {
        if (strcmp(key, "name") && strcmp(key, "about") && strcmp(key, "seeds") &&
            strcmp(key, "arms") && strcmp(key, "compare") && strcmp(key, "probes") &&
            strcmp(key, "probe_every") && strcmp(key, "require_go") &&
            strcmp(key, "interactions"))
            json_object_object_add(rest, key, json_object_get(val));
    }
    const char *js = json_object_to_json_string_ext(rest, JSON_C_TO_STRING_PLAIN);
    uint64_t h = fnv(FNV_START, js, strlen(js));
    json_object_put(rest);
    h = fnv_int(h, p->threads);
    /* the arm as resolved, field by field (no padding bytes) */
    h = fnv(h, a->name, strlen(a->name) + 1);
    h = fnv_int(h, a->placement);
    h = fnv_dbl(h, a->residual_scale);
    h = fnv_int(h, a->schedule);
    h = fnv_int(h, a->n_phases);
    for (int k = 0; k < a->n_phases; k++) {
        const lattice_schedule_phase *ph = &a->phases[k];
        h = fnv_int(h, ph->steps);
        h = fnv_int(h, ph->tokens);
        h = fnv_int(h, ph->active_layers);
        h = fnv_int(h, ph->train_from);
        h = fnv_int(h, ph->reset_optimizer);
        h = fnv_int(h, ph->block_init);
        h = fnv_int(h, ph->rewind_data);
        h = fnv_int(h, ph->train_boundary);
    }
    h = fnv_int(h, a->block_init);
    h = fnv_int(h, a->train_boundary);
    h = fnv_int(h, a->replay);
    h = fnv_dbl(h, a->init_gain);
    if (a->train_json[0]) /* an arm's own recipe (absent: the preset's, hashed above) */
        h = fnv(h, a->train_json, strlen(a->train_json));
    if (fnv_file(p->train, &h) != 0)
        die("cannot read the training text %s: %s", p->train, strerror(errno));
    if (fnv_file(p->val, &h) != 0)
        die("cannot read the validation text %s: %s", p->val, strerror(errno));
    return fnv_int(h, (int64_t)teacher_sum);
}

/* ---- the output folder's runs/ ------------------------------------------------------ */

/* "LATRUN" and a format number; the settings, the record's size and the size
 * of its fixed part (a build whose run_result differs cannot read it); the
 * record. Points past n_pts are zeros (the record is calloc'd), which git
 * and gzip store in next to nothing. */
static const char MAGIC[8] = {'L', 'A', 'T', 'R', 'U', 'N', 0, 1};

static void run_path(char *buf, size_t n, const char *dir, const char *arm, int seed)
{
    if ((size_t)snprintf(buf, n, "%s/runs/%s.seed%d.run", dir, arm, seed) >= n)
        die("the path of a kept run is too long (output folder %s)", dir);
}

/* The checksum a kept run of arm a, seed index i carries: the arm's settings
 * and the seed. (Runs kept before 0.4 carry the settings alone, and their
 * record's job number stood for the seed: a number that changes whenever the
 * preset's list of arms does.) */
static uint64_t kept_sum(const study *s, int a, int i)
{
    return fnv_int(s->settings[a], (int64_t)i + 1);
}

void keep_run(study *s, int job, run_result *r)
{
    const preset *p = s->p;
    const int a = job % p->n_arms, i = job / p->n_arms;
    s->res[a][i] = r;
    if (!s->dir)
        return;
    char path[2048], tmp[2100];
    snprintf(path, sizeof path, "%s/runs", s->dir);
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die("cannot create %s: %s", path, strerror(errno));
    run_path(path, sizeof path, s->dir, p->arms[a].name, i + 1);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    size_t bytes;
    char *buf = run_pack(job, r, &bytes);
    const uint64_t head[3] = {kept_sum(s, a, i), (uint64_t)bytes, (uint64_t)RUN_HEADER};
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(MAGIC, sizeof MAGIC, 1, f) == 1 && fwrite(head, sizeof head, 1, f) == 1 &&
             fwrite(buf, bytes, 1, f) == 1;
    if (f && fclose(f) != 0)
        ok = 0;
    free(buf);
    if (!ok || rename(tmp, path) != 0)
        die("cannot write %s: %s", path, strerror(errno));
}

/* 1 and *out when a kept run of this job matches its settings; 0 when there
 * is none; -1 with why when there is one that does not. */
static int load_one(const study *s, int job, run_result **out, char *why, size_t why_size)
{
    const preset *p = s->p;
    const int a = job % p->n_arms, i = job / p->n_arms;
    char path[2048];
    run_path(path, sizeof path, s->dir, p->arms[a].name, i + 1);
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char magic[8];
    uint64_t head[3];
    int rc = -1;
    char *buf = NULL;
    if (fread(magic, sizeof magic, 1, f) != 1 || memcmp(magic, MAGIC, sizeof magic) != 0 ||
        fread(head, sizeof head, 1, f) != 1) {
        snprintf(why, why_size, "not a run file of this version");
    } else if (!run_header_known(head[2])) {
        snprintf(why, why_size, "written by a build whose run record differs");
    } else if (head[0] != kept_sum(s, a, i) && head[0] != s->settings[a]) {
        snprintf(why, why_size, "made with other settings (preset, threads, corpus, teacher or "
                                "seed)");
    } else if (head[1] > ((uint64_t)1 << 34) || !(buf = malloc(head[1] ? head[1] : 1)) ||
               fread(buf, head[1], 1, f) != 1 || fgetc(f) != EOF) {
        snprintf(why, why_size, "its record is not the %llu bytes its header says",
                 (unsigned long long)head[1]);
    } else {
        int32_t got;
        char how[256];
        run_result *r = run_unpack_sized(buf, head[1], head[2], &got, how, sizeof how);
        /* the seed is in the checksum; a run kept before 0.4 (the settings
         * alone) is taken for the seed its file name says: its job number
         * counted the preset's arms then, which may have grown since */
        (void)got;
        if (!r) {
            snprintf(why, why_size, "its record is damaged: %s", how);
        } else {
            *out = r;
            rc = 1;
        }
    }
    free(buf);
    fclose(f);
    return rc;
}

int load_kept_runs(study *s, int quiet)
{
    const preset *p = s->p;
    int loaded = 0;
    for (int i = 0; i < p->seeds; i++)
        for (int a = 0; a < p->n_arms; a++) {
            run_result *r = NULL;
            char why[512];
            const int job = i * p->n_arms + a;
            const int rc = load_one(s, job, &r, why, sizeof why);
            if (rc == 1) {
                s->res[a][i] = r;
                loaded++;
            } else if (rc < 0 && !quiet) {
                say("runs/%s.seed%d.run: %s: %s\n", p->arms[a].name, i + 1, why,
                    p->arms[a].selected ? "running it again" : "not used");
            }
        }
    return loaded;
}

void clear_kept_runs(const char *dir)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/runs", dir);
    DIR *d = opendir(path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".run") == 0) {
            char f[2400];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            if (unlink(f) != 0)
                die("--fresh: cannot remove %s: %s", f, strerror(errno));
        }
    }
    closedir(d);
}
