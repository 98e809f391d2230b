/* The guide's program (doc/mainpage.md shows it piece by piece): a tiny
 * post-norm student grown from 2 to 4 layers by the "grow" preset, distilled
 * from a callback teacher, then probed by two diagnostics. The test suite
 * builds and runs it (tests/consumer), so the guide cannot drift from the API. */
#include <lattice/lattice.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

//! [check]
/* Every call returns a status; stop at the first failure and say why. */
#define CHECK(call)                                                                \
    do {                                                                           \
        lattice_status st_ = (call);                                               \
        if (st_ != LATTICE_OK) {                                                   \
            fprintf(stderr, "%s: %s: %s\n", #call, lattice_status_string(st_),    \
                    lattice_last_error());                                         \
            return 1;                                                              \
        }                                                                          \
    } while (0)
//! [check]

enum { VOCAB = 257, BOUNDARY = 256, SEQ = 32, BATCH = 4 };

//! [teacher]
/* A teacher from outside the library: a bigram table of the corpus. Any
 * framework can stand here, as long as it fills logits [batch, seq, vocab]. */
typedef struct bigram {
    float logit[VOCAB][VOCAB];
} bigram;

static int bigram_logits(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                         float *logits)
{
    const bigram *b = user;
    for (int i = 0; i < batch * seq; i++)
        memcpy(logits + (size_t)i * vocab, b->logit[tokens[i]], sizeof(float) * vocab);
    return 0; /* non-zero would fail the step with LATTICE_ERR_BACKEND */
}
//! [teacher]

//! [progress]
typedef struct progress {
    double first_loss, last_loss;
} progress;

static int on_step(void *user, const lattice_trainer_metrics *m)
{
    progress *p = user;
    if (m->step == 1)
        p->first_loss = m->loss;
    p->last_loss = m->loss;
    if (m->step % 5 == 0 || m->phase_end)
        printf("step %2lld  phase %d  layers %d  loss %.3f  kl %.3f\n", (long long)m->step,
               m->phase, m->active_layers, m->loss, m->kl);
    if (!isnan(m->val_ce))
        printf("          validation cross-entropy %.3f\n", m->val_ce);
    return 0; /* non-zero stops lattice_trainer_run */
}
//! [progress]

static const char *const corpus[] = {
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife.",
    "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy "
    "disposition, seemed to unite some of the best blessings of existence.",
    "The family of Dashwood had long been settled in Sussex.",
    "No one who had ever seen Catherine Morland in her infancy would have supposed her "
    "born to be an heroine.",
    "Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, for his own "
    "amusement, never took up any book but the Baronetage.",
    "About thirty years ago Miss Maria Ward, of Huntingdon, with only seven thousand "
    "pounds, had the good luck to captivate Sir Thomas Bertram.",
    "Mr. Bennet was among the earliest of those who paid their attentions to Mr. Bingley.",
    "A single man of large fortune; four or five thousand a year. What a fine thing for "
    "our girls!",
};

int main(void)
{
    static int32_t ids[2048];
    static bigram teacher_table;
    int64_t n = 0;
    /* Each document opens with the boundary token; bytes are the other tokens. */
    for (size_t d = 0; d < sizeof(corpus) / sizeof(corpus[0]); d++) {
        ids[n++] = BOUNDARY;
        for (const char *c = corpus[d]; *c; c++)
            ids[n++] = (unsigned char)*c;
    }
    static float counts[VOCAB][VOCAB];
    for (int64_t i = 0; i + 1 < n; i++)
        counts[ids[i]][ids[i + 1]] += 1.0f;
    for (int a = 0; a < VOCAB; a++)
        for (int b = 0; b < VOCAB; b++)
            teacher_table.logit[a][b] = logf(counts[a][b] + 0.01f);

    //! [model]
    lattice_backend *backend;
    CHECK(lattice_backend_create("default", &backend)); /* chosen from the CPU (backend.h) */
    CHECK(lattice_backend_set_threads(backend, 1));

    lattice_norm *norm; /* the placement: post-norm with RMSNorm */
    CHECK(lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-6f, &norm));

    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.vocab_size = VOCAB;
    mp.d_model = 32;
    mp.n_layers = 4;        /* capacity: all four exist from the start... */
    mp.n_active_layers = 2; /* ...but only two run until the schedule grows the model */
    mp.n_heads = 2;
    mp.n_kv_heads = 2;
    mp.head_dim = 16;
    mp.d_ff = 64;
    mp.max_batch = BATCH;
    mp.max_seq = SEQ;
    mp.seed = 1;
    lattice_model *student;
    CHECK(lattice_model_create(&mp, norm, backend, &student));
    lattice_norm_destroy(norm); /* the model keeps a copy of the placement */
    //! [model]

    //! [data]
    lattice_data_params dp;
    lattice_data_params_init(&dp); /* vocabulary 257, boundary token 256 */
    dp.batch_size = BATCH;
    dp.seq_len = SEQ;
    dp.val_fraction = 0.25f; /* the last quarter of the documents */
    dp.seed = 1;
    lattice_data *data;
    char err[LATTICE_ERRMSG_SIZE];
    if (lattice_data_create_memory(ids, n, &dp, &data, err) != LATTICE_OK) {
        fprintf(stderr, "data: %s\n", err);
        return 1;
    }
    //! [data]

    //! [distill]
    lattice_teacher *teacher;
    CHECK(lattice_teacher_create_callback(bigram_logits, &teacher_table, VOCAB, BATCH, SEQ,
                                          &teacher));
    lattice_distill_params kd;
    lattice_distill_params_init(&kd); /* 0.7 * KL + 0.3 * CE at temperature 1 */
    lattice_distill *distill;
    CHECK(lattice_distill_create(&kd, &distill));
    //! [distill]

    //! [grow]
    /* Two blocks of two layers, 10 steps per phase: 2 layers, then 4. */
    lattice_schedule *schedule;
    CHECK(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 2, 2, 10, LATTICE_SCHEDULE_BLOCK_INIT_RANDOM,
                                         &schedule));
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f; /* each phase restarts warmup and cosine decay over its own steps */
    op.min_lr = 3e-4f;
    op.warmup_steps = 2;
    lattice_optim *optim;
    CHECK(lattice_optim_create(student, &op, &optim));

    progress prog = {0, 0};
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp); /* validation at the end of each phase */
    tp.on_step = on_step;
    tp.user = &prog;
    lattice_trainer *trainer;
    CHECK(lattice_trainer_create(student, teacher, distill, data, optim, schedule, &tp, &trainer));
    if (lattice_trainer_run(trainer) != LATTICE_OK) {
        fprintf(stderr, "training: %s\n", lattice_trainer_errmsg(trainer));
        return 1;
    }
    lattice_schedule_counters counters;
    CHECK(lattice_schedule_get_counters(schedule, &counters));
    printf("%lld steps, %lld tokens, now %d layers\n", (long long)counters.steps,
           (long long)counters.nonpad_tokens, lattice_model_get_active_layers(student));
    //! [grow]

    //! [diagnostics]
    lattice_diag *diag;
    CHECK(lattice_diag_create(student, &diag));
    lattice_data_batch val;
    CHECK(lattice_data_get_val_batch(data, 0, &val));

    /* Residual-stream RMS at each layer boundary: class 0 regular tokens,
     * class 1 boundary tokens, entry 2 all of them. A result struct begins
     * with its size: the first entry's tells the library the array's stride. */
    lattice_diag_boundary_scale_result rms[5 * 3] = {{.size = sizeof(rms[0])}};
    CHECK(lattice_diag_measure_boundary_scale(diag, val.tokens, val.mask, val.batch, val.seq,
                                              NULL, 2, rms, 5 * 3));
    for (int b = 0; b <= 4; b++)
        printf("boundary %d: RMS %.3f (regular tokens), %.3f (document starts)\n", b,
               rms[b * 3 + 0].mean, rms[b * 3 + 1].mean);

    /* What the appended block (layers 2 and 3) contributes. */
    lattice_diag_block_removal_result removal = {.size = sizeof(removal)};
    CHECK(lattice_diag_measure_block_removal(diag, val.tokens, val.targets, val.mask, val.batch,
                                             val.seq, 2, 2, &removal));
    printf("without layers 2-3: cross-entropy %.3f -> %.3f, angle %.3f\n", removal.ce_full,
           removal.ce_removed, removal.angle);
    //! [diagnostics]

    //! [cleanup]
    lattice_diag_destroy(diag);
    lattice_trainer_destroy(trainer); /* then what it bound, the backend last */
    lattice_optim_destroy(optim);
    lattice_schedule_destroy(schedule);
    lattice_distill_destroy(distill);
    lattice_teacher_destroy(teacher);
    lattice_data_destroy(data);
    lattice_model_destroy(student);
    lattice_backend_destroy(backend);
    //! [cleanup]

    if (!(prog.last_loss < prog.first_loss)) {
        fprintf(stderr, "the loss did not fall: %.3f -> %.3f\n", prog.first_loss, prog.last_loss);
        return 1;
    }
    return 0;
}
