/* A kept run's file to corrupt (tests/reproduce/test_kept.c and
 * tests/fuzz/fuzz_kept.c): a run of made-up numbers packed as the study
 * keeps it, and the question both ask of a corrupted copy. */
#ifndef TESTS_KEPT_SAMPLE_H
#define TESTS_KEPT_SAMPLE_H

#include "../../examples/reproduce/files.h"
#include "../../examples/reproduce/runs.h"
#include "../../examples/reproduce/store.h"

#define SAMPLE_ARM "post-grow"
#define SAMPLE_SEED 2
#define SAMPLE_SETTINGS "{\"arm\":{\"spec\":\"post-grow\"},\"preset\":{\"train\":{\"tau\":1}}}"

/* A kept run's file of format 2, as 0.5 to 1.0 wrote them: "LATRUN", 0, 2;
 * kept_head (store.c: the arm's name in 48 bytes, the seed, 4 bytes of 0,
 * the settings' length, the record's and its fixed part's); the settings;
 * the record (run_pack); the XXH64 of every byte before it. */
static inline char *kept_pack_raw(const char *arm, int seed, const char *settings, int32_t job,
                                  const run_result *r, size_t *bytes)
{
    size_t rec_bytes;
    char *rec = run_pack(job, r, &rec_bytes);
    char head[8 + 80] = {'L', 'A', 'T', 'R', 'U', 'N', 0, 2};
    const uint32_t seed32 = (uint32_t)seed;
    const uint64_t sizes[3] = {strlen(settings), rec_bytes,
                               sizeof(int32_t) + sizeof(run_result)};
    snprintf(head + 8, 48, "%s", arm);
    memcpy(head + 8 + 48, &seed32, sizeof seed32);
    memcpy(head + 8 + 56, sizes, sizeof sizes);
    *bytes = sizeof head + sizes[0] + rec_bytes + sizeof(uint64_t);
    char *buf = malloc(*bytes);
    if (!buf)
        abort();
    memcpy(buf, head, sizeof head);
    memcpy(buf + sizeof head, settings, sizes[0]);
    memcpy(buf + sizeof head + sizes[0], rec, rec_bytes);
    const uint64_t sum = xxh_bytes(buf, *bytes - sizeof sum);
    memcpy(buf + *bytes - sizeof sum, &sum, sizeof sum);
    free(rec);
    return buf;
}

/* The file's bytes (malloc'd) and their size: as JSON (format 3), or with
 * raw as the raw record of format 2 that 0.5 to 1.0 kept. */
static inline char *sample_kept_as(int raw, size_t *bytes)
{
    run_result *r = calloc(1, sizeof(*r));
    const int64_t n = 40;
    r->n_steps = n;
    r->losses = calloc((size_t)n, sizeof(double));
    r->step_phase = calloc((size_t)n, sizeof(int));
    r->step_active = calloc((size_t)n, sizeof(int));
    r->step_alt = calloc((size_t)n, sizeof(int64_t));
    if (!r->losses || !r->step_phase || !r->step_active || !r->step_alt)
        abort();
    for (int64_t t = 0; t < n; t++) {
        r->losses[t] = 5.0 - 0.1 * (double)t;
        r->step_phase[t] = (int)(t / 20);
        r->step_active[t] = 3 * (1 + (int)(t / 20));
        r->step_alt[t] = 1000 * t;
    }
    r->final_val = 1.3931;
    r->n_pts = 5;
    for (int k = 0; k < r->n_pts; k++)
        r->pts[k] = (point){8 * (k + 1), 8000 * (k + 1), k / 3, 3, 4.0 - k, 1, 2, 3, 4};
    r->n_appends = 1;
    r->append_steps[0] = 20;
    r->is_append[0] = 1;
    r->seconds = 12.5;
    char *buf = (raw ? kept_pack_raw : kept_pack)(SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, 7, r,
                                                  bytes);
    free_run(r);
    return buf;
}

static inline char *sample_kept(size_t *bytes) { return sample_kept_as(0, bytes); }

/* Whether the study would reuse these bytes as the sample's run. */
static inline int sample_reused(const char *buf, size_t bytes)
{
    run_result *r = NULL;
    char why[2048];
    const int rc = kept_parse(buf, bytes, SAMPLE_ARM, SAMPLE_SEED, SAMPLE_SETTINGS, &r, why,
                              sizeof why);
    free_run(r);
    return rc == KEPT_OK;
}

#endif
