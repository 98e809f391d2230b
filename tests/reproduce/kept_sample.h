/* A kept run's file to corrupt (tests/reproduce/test_kept.c and
 * tests/fuzz/fuzz_kept.c): a run of made-up numbers packed as the study
 * keeps it, and the question both ask of a corrupted copy. */
#ifndef TESTS_KEPT_SAMPLE_H
#define TESTS_KEPT_SAMPLE_H

#include "../../examples/reproduce/runs.h"
#include "../../examples/reproduce/store.h"

#define SAMPLE_ARM "post-grow"
#define SAMPLE_SEED 2
#define SAMPLE_SETTINGS "{\"arm\":{\"spec\":\"post-grow\"},\"preset\":{\"train\":{\"tau\":1}}}"

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
