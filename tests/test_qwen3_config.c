/* config.json: Qwen3 configs loaded (and refused where the model cannot be
 * one), strictly parsed, and written from C by lattice_model_save_config. */
/* It reads the library's insides (model_internal.h), which name the reserved
 * slots of lattice_model_params as the library does. */
#define LATTICE_BUILDING
#include "model_files.h"

#include "model_internal.h"
#include "safetensors.h"

#include <json-c/json.h>
#include <sys/stat.h>

/* Under UBSan, undefined behaviour fails the test instead of printing a line. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

START_TEST(test_qwen3_config)
{
    /* A Qwen3-architecture file with its config.json loads as a model. */
    lattice_model_params p;
    tu_tiny_params(&p);
    p.vocab_size = 13;
    p.head_dim = 6; /* Qwen3's head_dim is independent of hidden_size */
    p.max_seq = 6;
    p.rope_theta = 1e6f;
    p.tie_embeddings = _i;
    p.seed = 9;
    lattice_model *a =
        tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f, &p);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "{\"architectures\": [\"Qwen3ForCausalLM\"], \"hidden_size\": 8, "
               "\"intermediate_size\": 12, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
               "\"num_key_value_heads\": 1, \"head_dim\": 6, \"vocab_size\": 13, "
               "\"rope_theta\": 1000000, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": %s}",
            _i ? "true" : "false");
    fclose(f);
    lattice_model *b;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err) == LATTICE_OK, "%s", err);
    expect_same_logits(a, b);
    lattice_model_destroy(b);
    /* a config that disagrees with the tensors */
    f = fopen(cfg, "w");
    fprintf(f, "{\"hidden_size\": 8, \"intermediate_size\": 16, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 6, "
               "\"vocab_size\": 13, \"tie_word_embeddings\": %s}",
            _i ? "true" : "false");
    fclose(f);
    ck_assert_int_eq(lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err), LATTICE_ERR_FORMAT);
    ck_assert_ptr_null(b);
    ck_assert_ptr_nonnull(strstr(err, "shape"));
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

/* The whole text of a file (the caller frees), or NULL when it does not exist. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    ck_assert_ptr_nonnull(buf);
    fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

/* A model saved from C, weights and config.json, loads back through the
 * Qwen3 path with the same logits; the config is exactly the text Python's
 * save_pretrained wrote before the C writer (json.dump(config, indent=2) and a
 * newline), keys in its order, floats as set. _i: tied. */
START_TEST(test_save_qwen3_config)
{
    lattice_model_params p;
    tu_tiny_params(&p);
    p.vocab_size = 13;
    p.head_dim = 6;
    p.max_seq = 6;
    p.rope_theta = 1e6f;
    p.tie_embeddings = _i;
    p.seed = 10;
    lattice_model *a =
        tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f, &p);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    ck_assert_msg(lattice_model_save_config(a, cfg, 0) == LATTICE_OK, "%s",
                  lattice_model_errmsg(a));
    char want[2048];
    snprintf(want, sizeof want,
             "{\n"
             "  \"architectures\": [\n"
             "    \"Qwen3ForCausalLM\"\n"
             "  ],\n"
             "  \"model_type\": \"qwen3\",\n"
             "  \"vocab_size\": 13,\n"
             "  \"hidden_size\": 8,\n"
             "  \"intermediate_size\": 12,\n"
             "  \"num_hidden_layers\": 2,\n"
             "  \"num_attention_heads\": 2,\n"
             "  \"num_key_value_heads\": 1,\n"
             "  \"head_dim\": 6,\n"
             "  \"hidden_act\": \"silu\",\n"
             "  \"max_position_embeddings\": 6,\n"
             "  \"rms_norm_eps\": 1e-06,\n"
             "  \"rope_theta\": 1000000.0,\n"
             "  \"tie_word_embeddings\": %s,\n"
             "  \"attention_bias\": false,\n"
             "  \"torch_dtype\": \"float32\",\n"
             "  \"lattice\": {\n"
             "    \"placement\": \"pre\",\n"
             "    \"norm\": \"rms\",\n"
             "    \"eps\": 1e-06,\n"
             "    \"residual_scale\": 1.0,\n"
             "    \"qk_norm\": 1,\n"
             "    \"n_active_layers\": 2,\n"
             "    \"version\": \"%s\"\n"
             "  }\n"
             "}\n",
             _i ? "true" : "false", LATTICE_VERSION_STRING);
    char *text = slurp(cfg);
    ck_assert_str_eq(text, want);
    free(text);
    lattice_model *b;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err) == LATTICE_OK, "%s",
                  err);
    lattice_model_params q = {.size = sizeof q};
    ck_assert_int_eq(lattice_model_get_params(b, &q), LATTICE_OK);
    ck_assert_int_eq(q.tie_embeddings, _i);
    ck_assert_int_eq(q.head_dim, 6);
    ck_assert(q.rope_theta == 1e6f);
    expect_same_logits(a, b);
    lattice_model_destroy(b);
    /* saved again over the first: the same bytes, and the bad flag writes nothing */
    ck_assert_int_eq(lattice_model_save_config(a, cfg, LATTICE_MODEL_CONFIG_FLAG_LATTICE),
                     LATTICE_OK);
    text = slurp(cfg);
    ck_assert_str_eq(text, want);
    free(text);
    ck_assert_int_eq(lattice_model_save_config(a, cfg, 6u), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(a), "flags 0x6 has bits"));
    ck_assert_int_eq(lattice_model_save_config(a, NULL, 0), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_save_config(NULL, cfg, 0), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_save_config(a, "/nonexistent/dir/config.json", 0),
                     LATTICE_ERR_IO);
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

/* What a Qwen3 config cannot describe is refused, naming it, and nothing is
 * written; LATTICE_MODEL_CONFIG_FLAG_LATTICE writes model_type "lattice",
 * which the Qwen3 path refuses and the weights' own metadata reopens. */
START_TEST(test_save_config_refused)
{
    static const struct {
        lattice_norm_placement pl;
        lattice_norm_kind kind;
        float scale;
        int qk_norm, block_norm, block_rescale, n_active;
        const char *says, *extra;
    } cases[] = {
        {LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.0f, 1, 0, 0, 4,
         "a post-norm model (Qwen3 is pre-norm)", "\"placement\": \"post\""},
        {LATTICE_NORM_PLACEMENT_PERI, LATTICE_NORM_KIND_RMS, 1.0f, 1, 0, 0, 4,
         "a peri-norm model", "\"placement\": \"peri\""},
        {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_LAYER, 1.0f, 1, 0, 0, 4,
         "a LayerNorm model", "\"norm\": \"layer\""},
        {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 0, 0, 0, 4,
         "without q/k norm", "\"qk_norm\": 0"},
        {LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.25f, 1, 0, 0, 4,
         "a post-norm model", "\"residual_scale\": 1.25"},
        {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 1, 2, 0, 4,
         "block_norm 2 (Qwen3 has no block-entry norm)", "\"block_norm\": 2"},
        {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 1, 0, 2, 4,
         "block_rescale 2", "\"block_rescale\": 2"},
        {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 1, 0, 0, 3,
         "3 of 4 layers active (Qwen3 runs every layer)", "\"n_active_layers\": 3"},
    };
    lattice_model_params p;
    tu_tiny_params(&p);
    p.n_layers = 4;
    p.n_active_layers = cases[_i].n_active;
    p.qk_norm = cases[_i].qk_norm;
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_NORM, cases[_i].block_norm);
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, cases[_i].block_rescale);
    p.max_seq = 6;
    p.rope_theta = 5e5f;
    p.vocab_size = 13;
    p.seed = 11;
    lattice_model *a = tu_model(be, cases[_i].pl, cases[_i].kind, 1e-5f, cases[_i].scale, &p);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save_config(a, cfg, 0), LATTICE_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(lattice_model_errmsg(a), cases[_i].says), "case %d: %s", _i,
                  lattice_model_errmsg(a));
    ck_assert_msg(strstr(lattice_last_error(), "LATTICE_MODEL_CONFIG_FLAG_LATTICE"), "%s",
                  lattice_last_error());
    ck_assert_int_eq(access(cfg, F_OK), -1);
    /* with the flag: model_type "lattice", the settings under "lattice" */
    ck_assert_int_eq(lattice_model_save_config(a, cfg, LATTICE_MODEL_CONFIG_FLAG_LATTICE),
                     LATTICE_OK);
    char *text = slurp(cfg);
    ck_assert_ptr_nonnull(strstr(text, "{\n  \"model_type\": \"lattice\",\n  \"vocab_size\": 13,"));
    ck_assert_ptr_null(strstr(text, "architectures"));
    ck_assert_msg(strstr(text, cases[_i].extra), "case %d: no %s in\n%s", _i, cases[_i].extra, text);
    ck_assert_ptr_nonnull(strstr(text, "\"rms_norm_eps\": 1e-05,\n"));
    ck_assert_ptr_nonnull(strstr(text, "\"rope_theta\": 500000.0,\n"));
    free(text);
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    lattice_model *b = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_int_eq(lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err),
                     LATTICE_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err, "model_type \"lattice\""));
    ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) == LATTICE_OK, "%s",
                  err);
    expect_same_logits(a, b);
    lattice_model_destroy(b);
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

/* A Qwen3 config.json beside weights whose own lattice.config says more: every
 * setting both describe must agree, or the load is refused by name. 0.4 and
 * 1.0 until issue 48 part 5 compared the placement alone: the weights of a
 * block_rescale, massive_offset, eps or rope_theta model loaded as plain
 * Qwen3 and gave other logits. */
START_TEST(test_config_json_agrees_with_file)
{
    static const struct {
        int block_rescale;
        float massive_offset, eps, rope_theta, scale;
        int config_tied;
        const char *says;
    } cases[] = {
        {2, 0.0f, 1e-6f, 1e6f, 1.0f, 0, "the file's block_rescale is 2, the config.json's 0"},
        {0, 4.0f, 1e-6f, 1e6f, 1.0f, 0, "the file's massive_offset is 4, the config.json's 0"},
        {0, 0.0f, 1e-5f, 1e6f, 1.0f, 0, "the file's eps is 9.99999975e-06, the config.json's"},
        {0, 0.0f, 1e-6f, 5e5f, 1.0f, 0, "the file's rope_theta is 500000, the config.json's 1000000"},
        /* a tied config over an untied file: its lm_head was never read */
        {0, 0.0f, 1e-6f, 1e6f, 1.0f, 1, "the file's tie_embeddings is 0, the config.json's 1"},
    };
    lattice_model_params p;
    tu_tiny_params(&p);
    p.vocab_size = 13;
    p.head_dim = 6;
    p.max_seq = 6;
    p.seed = 9;
    p.rope_theta = cases[_i].rope_theta;
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, cases[_i].block_rescale);
    tu_option(&p, LATTICE_MODEL_OPTION_MASSIVE_OFFSET, cases[_i].massive_offset);
    lattice_model *a = tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS,
                                cases[_i].eps, cases[_i].scale, &p);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    /* the plain Qwen3 of the same shape: its settings written out */
    FILE *f = fopen(cfg, "w");
    fprintf(f, "{\"model_type\": \"qwen3\", \"hidden_size\": 8, \"intermediate_size\": 12, "
               "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1, "
               "\"head_dim\": 6, \"vocab_size\": 13, \"rope_theta\": 1000000, "
               "\"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": %s}",
            cases[_i].config_tied ? "true" : "false");
    fclose(f);
    lattice_model *b = NULL;
    char err[LATTICE_ERRMSG_SIZE] = "";
    ck_assert_int_eq(lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err),
                     LATTICE_ERR_FORMAT);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err, cases[_i].says), "case %d: '%s'", _i, err);
    /* the file alone still says what it holds */
    ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) == LATTICE_OK,
                  "%s", err);
    expect_same_logits(a, b);
    lattice_model_destroy(b);
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

START_TEST(test_strict_config_json)
{
    /* config.json files are held to the same rules as the headers */
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"{\"hidden_size\": 8, \"hidden_size\": 16}", "twice"},
        {"{\"hidden_size\\u0000\": 8}", "\\u0000"},
        {"{\"hidden_size\": 8, // a comment\n}", "comment"},
        {"{'hidden_size': 8}", "single-quoted"},
        {"{\"hidden_size\": 8,}", "trailing comma"},
        {"{\"rope_theta\": Infinity}", "Infinity"},
        {"{\"hidden_size\": 8} trailing", "after the object"},
        {"{\"hidden_size\": 8}\n\x00", "after the object"},
    };
    lattice_model *a = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(cfg, "wb");
        const size_t n = strlen(bad[i].text) + (bad[i].text[strlen(bad[i].text) - 1] == '\n');
        fwrite(bad[i].text, 1, n, f); /* the last case ends in a NUL byte */
        fclose(f);
        lattice_model *b = NULL;
        char err[LATTICE_ERRMSG_SIZE];
        lattice_status st = lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err);
        ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(err, bad[i].why), "case %zu: %d '%s'", i,
                      st, err);
        ck_assert_ptr_null(b);
    }
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

/* ---- Qwen3 settings this library does not implement ------------------------------------ */

START_TEST(test_qwen3_unsupported)
{
    static const struct {
        const char *extra;  /* more members of the config */
        lattice_status st;  /* expected */
        const char *why;    /* in the message; for LATTICE_OK: 1 if the logits match a's */
    } cases[] = {
        {"\"rope_theta\": 1000000", LATTICE_OK, "same"},
        {"\"attention_bias\": false, \"rope_theta\": 1000000", LATTICE_OK, "same"},
        {"\"attention_bias\": true, \"rope_theta\": 1000000", LATTICE_ERR_UNSUPPORTED, "attention_bias"},
        {"\"attention_bias\": \"no\", \"rope_theta\": 1000000", LATTICE_ERR_FORMAT, "attention_bias"},
        {"\"rope_scaling\": null, \"rope_theta\": 1000000", LATTICE_OK, "same"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}, \"rope_theta\": 1000000",
         LATTICE_ERR_UNSUPPORTED, "rope_scaling (\"yarn\")"},
        {"\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}", LATTICE_ERR_UNSUPPORTED,
         "rope_scaling (\"linear\")"},
        {"\"use_sliding_window\": false, \"sliding_window\": 4096, \"rope_theta\": 1000000",
         LATTICE_OK, "same"},
        {"\"use_sliding_window\": true, \"sliding_window\": 4096, \"rope_theta\": 1000000",
         LATTICE_ERR_UNSUPPORTED, "use_sliding_window"},
        {"\"layer_types\": [\"full_attention\", \"sliding_attention\"], \"rope_theta\": 1000000",
         LATTICE_ERR_UNSUPPORTED, "layer_types[1]"},
        {"\"layer_types\": [\"full_attention\", \"full_attention\"], \"rope_theta\": 1000000",
         LATTICE_OK, "same"},
        {"\"hidden_act\": \"silu\", \"rope_theta\": 1000000", LATTICE_OK, "same"},
        {"\"hidden_act\": \"gelu\", \"rope_theta\": 1000000", LATTICE_ERR_UNSUPPORTED, "hidden_act \"gelu\""},
        {"\"hidden_act\": 1, \"rope_theta\": 1000000", LATTICE_ERR_FORMAT, "hidden_act"},
        {"\"model_type\": \"qwen3\", \"rope_theta\": 1000000", LATTICE_OK, "same"},
        {"\"model_type\": \"qwen2\", \"rope_theta\": 1000000", LATTICE_ERR_UNSUPPORTED, "model_type \"qwen2\""},
        {"\"partial_rotary_factor\": 0.5, \"rope_theta\": 1000000", LATTICE_ERR_UNSUPPORTED,
         "partial_rotary_factor"},
        /* the newer layout of the RoPE base, alone, beside an equal rope_theta, or not */
        {"\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\"}", LATTICE_OK, "same"},
        {"\"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}, "
         "\"rope_theta\": 1000000", LATTICE_OK, "same"},
        /* read, and then refused: the file says 1e6 (issue 48 part 5) */
        {"\"rope_parameters\": {\"rope_theta\": 10000, \"rope_type\": \"default\"}",
         LATTICE_ERR_FORMAT, "the file's rope_theta is 1000000, the config.json's 10000"},
        {"\"rope_parameters\": {\"rope_theta\": 10000, \"rope_type\": \"default\"}, "
         "\"rope_theta\": 1000000", LATTICE_ERR_FORMAT, "disagree"},
        {"\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"yarn\", \"factor\": 4.0}",
         LATTICE_ERR_UNSUPPORTED, "rope_type \"yarn\""},
        {"\"rope_parameters\": {\"rope_theta\": 1000000}", LATTICE_ERR_UNSUPPORTED, "rope_type"},
        {"\"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1000000, \"rope_type\": "
         "\"default\"}}",
         LATTICE_ERR_UNSUPPORTED, "rope_type"},
        {"\"rope_parameters\": {\"rope_type\": \"default\"}", LATTICE_ERR_FORMAT, "rope_theta"},
        {"\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": \"default\", "
         "\"partial_rotary_factor\": 0.25}",
         LATTICE_ERR_UNSUPPORTED, "partial_rotary_factor"},
    };
    lattice_model_params p;
    tu_tiny_params(&p);
    p.vocab_size = 13;
    p.head_dim = 6;
    p.max_seq = 6;
    p.rope_theta = 1e6f;
    p.seed = 9;
    lattice_model *a =
        tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f, &p);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward(a, toks, 2, 6), LATTICE_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(cfg, "w");
        fprintf(f, "{\"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2, "
                   "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 6, "
                   "\"vocab_size\": 13, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": false, "
                   "%s}",
                cases[i].extra);
        fclose(f);
        lattice_model *b = NULL;
        char err[LATTICE_ERRMSG_SIZE] = "";
        lattice_status st = lattice_model_create_from_file(path, cfg, be, 2, 6, &b, err);
        ck_assert_msg(st == cases[i].st, "%s: status %d, not %d (%s)", cases[i].extra, st,
                      cases[i].st, err);
        if (st != LATTICE_OK) {
            ck_assert_ptr_null(b);
            ck_assert_msg(strstr(err, cases[i].why), "%s: '%s'", cases[i].extra, err);
            continue;
        }
        ck_assert_int_eq(lattice_model_forward(b, toks, 2, 6), LATTICE_OK);
        const int same = memcmp(lattice_model_get_logits(a), lattice_model_get_logits(b),
                                sizeof(float) * 12 * 13) == 0;
        ck_assert_msg(same == (strcmp(cases[i].why, "same") == 0), "%s: logits %s", cases[i].extra,
                      same ? "the same" : "differ");
        lattice_model_destroy(b);
    }
    unlink(path);
    unlink(cfg);
    lattice_model_destroy(a);
}
END_TEST

/* ---- the model's description: each row drives the files by itself ---------------------- */

/* m's weights under the lattice.config text cfg, at path. */
static void save_with_config(lattice_model *m, const char *cfg, const char *path)
{
    const int n = lattice_model_get_n_tensors(m);
    st_entry *e = calloc((size_t)n, sizeof(*e));
    for (int i = 0; i < n; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        e[i] = (st_entry){ti.name, ST_F32, ti.ndim, {ti.shape[0], ti.shape[1]}, ti.data};
    }
    const char *meta[] = {"lattice.config", cfg, NULL};
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice__st_write(path, e, n, meta, err) == LATTICE_OK, "%s", err);
    free(e);
}

/* The lattice.config m's save writes (caller frees). */
static char *config_of(lattice_model *m)
{
    char *path = temp_path(".safetensors"), err[LATTICE_ERRMSG_SIZE];
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    st_file sf;
    ck_assert_msg(lattice__st_open(&sf, path, err) == LATTICE_OK, "%s", err);
    char *text = strdup(lattice__st_meta(&sf, "lattice.config"));
    lattice__st_close(&sf);
    unlink(path);
    return text;
}

/* A model of one of two settings, between them writing every row. */
static lattice_model *rows_model(int k)
{
    lattice_model_params p;
    tu_tiny_params(&p);
    p.n_layers = 4;
    p.n_active_layers = 3;
    p.vocab_size = 13;
    p.max_seq = 6;
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_NORM, k ? 0 : 2);
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, k ? 2 : 0);
    tu_option(&p, LATTICE_MODEL_OPTION_MASSIVE_OFFSET, k ? 0.0f : 3.0f);
    tu_option(&p, LATTICE_MODEL_OPTION_MASSIVE_LAYER, 2);
    tu_option(&p, LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, 1);
    return tu_model(be, LATTICE_NORM_PLACEMENT_PRE, k ? LATTICE_NORM_KIND_LAYER : LATTICE_NORM_KIND_RMS,
                    1e-5f, 1.0f, &p);
}

/* Every row of the model's description (model_desc.c's table) alone drives
 * lattice.config's write, read and comparison: one of two models writes its
 * key; each model made again from its file writes the same lattice.config
 * and has the same setup; and with one written key changed, its file is
 * refused on load naming the key (the active count, where a run stands,
 * loads), as is a value outside the row's range when a model is made from
 * the file. */
START_TEST(test_description_rows)
{
    int seen[64] = {0}, compared, n_rows = 0;
    const char *key;
    while (lattice__model_desc_key(n_rows, &compared))
        n_rows++;
    ck_assert_int_le(n_rows, 64);
    for (int k = 0; k < 2; k++) {
        lattice_model *a = rows_model(k), *b = NULL;
        char *text = config_of(a), *path = temp_path(".safetensors"), err[LATTICE_ERRMSG_SIZE];
        save_with_config(a, text, path);
        ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) == LATTICE_OK,
                      "%s", err);
        char *again = config_of(b);
        ck_assert_str_eq(again, text);
        lattice__setup sa = {0}, sb = {0};
        lattice__model_setup(a, 0, &sa);
        lattice__model_setup(b, 0, &sb);
        ck_assert_int_eq(lattice__setup_first_difference(&sa, &sb), -1);
        json_object *base = json_tokener_parse(text), *x;
        for (int i = 0; (key = lattice__model_desc_key(i, &compared)) != NULL; i++) {
            json_object *o = json_tokener_parse(json_object_to_json_string(base));
            if (!json_object_object_get_ex(o, key, &x)) { /* the other model writes it */
                json_object_put(o);
                continue;
            }
            seen[i] = 1;
            json_object *changed =
                json_object_is_type(x, json_type_string) ? json_object_new_string("sideways")
                : json_object_is_type(x, json_type_double)
                    ? json_object_new_double(2 * json_object_get_double(x))
                    : json_object_new_int(json_object_get_int(x) == 0);
            json_object_object_add(o, key, changed);
            save_with_config(a, json_object_to_json_string(o), path);
            json_object_put(o);
            const lattice_status st = lattice_model_load(a, path);
            char says[96];
            snprintf(says, sizeof says, "the file's %s is ", key);
            if (compared)
                ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(lattice_model_errmsg(a), says),
                              "%s: %d '%s'", key, st, lattice_model_errmsg(a));
            else
                ck_assert_msg(st == LATTICE_OK, "%s: %s", key, lattice_model_errmsg(a));
        }
        /* read: a value outside its row's range is refused, naming the key */
        const char *outside[][2] = {{"vocab_size", "0"}, {"rope_theta", "1e300"},
                                    {"norm", "\"sideways\""}, {"massive_channel", "-1"}};
        for (size_t j = 0; j < sizeof outside / sizeof outside[0]; j++) {
            json_object *o = json_tokener_parse(json_object_to_json_string(base));
            json_object_object_add(o, outside[j][0], json_tokener_parse(outside[j][1]));
            save_with_config(a, json_object_to_json_string(o), path);
            json_object_put(o);
            lattice_model *c = NULL;
            ck_assert_int_eq(lattice_model_create_from_file(path, NULL, be, 2, 6, &c, err),
                             LATTICE_ERR_FORMAT);
            ck_assert_msg(strstr(err, outside[j][0]), "%s: '%s'", outside[j][0], err);
        }
        json_object_put(base);
        lattice__setup_free(&sa);
        lattice__setup_free(&sb);
        free(text);
        free(again);
        unlink(path);
        lattice_model_destroy(b);
        lattice_model_destroy(a);
    }
    for (int i = 0; i < n_rows; i++)
        ck_assert_msg(seen[i], "no model writes %s", lattice__model_desc_key(i, &compared));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("qwen3-config");
    TCase *tc = tcase_create("qwen3-config");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_qwen3_config, 0, 2);
    tcase_add_loop_test(tc, test_save_qwen3_config, 0, 2);
    tcase_add_loop_test(tc, test_save_config_refused, 0, 8);
    tcase_add_loop_test(tc, test_config_json_agrees_with_file, 0, 5);
    tcase_add_test(tc, test_strict_config_json);
    tcase_add_test(tc, test_qwen3_unsupported);
    tcase_add_test(tc, test_description_rows);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
