/* The small models, fixed tokens and temporary paths the model-file tests
 * share (test_safetensors.c, test_qwen3_config.c): a file that includes it
 * gets its own reference backend, made by setup and freed by teardown. */
#ifndef TESTS_MODEL_FILES_H
#define TESTS_MODEL_FILES_H

#include "testutil.h"

#include <unistd.h>

static lattice_backend *be;

static inline void setup(void) { be = tu_backend("ref", 1); }
static inline void teardown(void) { lattice_backend_destroy(be); }

static inline lattice_model *small_model(lattice_norm_placement pl, lattice_norm_kind kind, int tied,
                                  uint64_t seed)
{
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 13;
    p.d_model = 8;
    p.n_layers = 3;
    p.n_active_layers = 2;
    p.n_heads = 2;
    p.n_kv_heads = 1;
    p.head_dim = 4;
    p.d_ff = 12;
    p.max_batch = 2;
    p.max_seq = 6;
    p.tie_embeddings = tied;
    p.seed = seed;
    p.init_std = 0.2f;
    return tu_model(be, pl, kind, 1e-5f, pl == LATTICE_NORM_PLACEMENT_POST ? 1.25f : 1.0f, &p);
}

static const int32_t toks[12] = {1, 5, 2, 12, 0, 7, 3, 3, 9, 11, 4, 6};

static inline void expect_same_logits(lattice_model *a, lattice_model *b)
{
    ck_assert_int_eq(lattice_model_forward(a, toks, 2, 6), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward(b, toks, 2, 6), LATTICE_OK);
    ck_assert_int_eq(memcmp(lattice_model_get_logits(a), lattice_model_get_logits(b), sizeof(float) * 12 * 13),
                     0);
}

static inline char *temp_path(const char *suffix)
{
    static char buf[4][96];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 96, "/tmp/lattice-files-%d-%d%s", (int)getpid(), k, suffix);
    return p;
}

#endif
