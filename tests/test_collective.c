/* The trainer's collective hook (lattice_trainer_set_collective) with an
 * in-process fake: each rank is a thread with its own objects, sums meet at
 * a barrier and add the ranks' vectors in rank order. Runs with or without
 * MPI; the MPI suite (tests/mpi) covers liblattice-mpi's implementation. */
#include "distworld.h"
#include "testutil.h"

#include <pthread.h>
#include <unistd.h>

#define MAX_RANKS 4
/* 2 ranks of b rows against 1 of 2b: the same sums in another order (float
 * gradients summed per rank, then across ranks), so agreement to rounding:
 * the loss after 10 steps within this relative tolerance (docs: DISTRIBUTED.md). */
#define REL_TOL 1e-5

typedef struct fake_world {
    int n;
    pthread_barrier_t bar;
    void *ptr[MAX_RANKS];
    int fail; /* every slot fails at once (no barrier) */
    int solo; /* one thread plays its rank alone: the others add nothing, send nothing */
} fake_world;

typedef struct fake_rank {
    fake_world *w;
    int rank;
} fake_rank;

static int f_rank(void *u) { return ((fake_rank *)u)->rank; }
static int f_n(void *u) { return ((fake_rank *)u)->w->n; }
static const char *f_errmsg(void *u) { return ((fake_rank *)u)->w->fail ? "fake link down" : ""; }

/* data on every rank becomes the rank-ordered sum (in double, like liblattice-mpi) */
#define FAKE_SUM(name, type)                                                                     \
    static int name(void *u, type *data, size_t count)                                           \
    {                                                                                            \
        fake_rank *r = u;                                                                        \
        fake_world *w = r->w;                                                                    \
        if (w->fail)                                                                             \
            return 7;                                                                            \
        if (w->solo)                                                                             \
            return 0;                                                                            \
        type *tmp = malloc(count * sizeof(type) + 1);                                            \
        w->ptr[r->rank] = data;                                                                  \
        pthread_barrier_wait(&w->bar);                                                           \
        for (size_t i = 0; i < count; i++) {                                                     \
            double acc = (double)((type *)w->ptr[0])[i];                                         \
            for (int s = 1; s < w->n; s++)                                                       \
                acc += (double)((type *)w->ptr[s])[i];                                           \
            tmp[i] = (type)acc;                                                                  \
        }                                                                                        \
        pthread_barrier_wait(&w->bar);                                                           \
        memcpy(data, tmp, count * sizeof(type));                                                 \
        free(tmp);                                                                               \
        return 0;                                                                                \
    }
FAKE_SUM(f_sum_floats, float)
FAKE_SUM(f_sum_doubles, double)
FAKE_SUM(f_sum_int64, int64_t)

static int f_barrier(void *u)
{
    fake_rank *r = u;
    if (r->w->fail)
        return 7;
    if (!r->w->solo)
        pthread_barrier_wait(&r->w->bar);
    return 0;
}

static int f_broadcast(void *u, void *data, size_t bytes, int root)
{
    fake_rank *r = u;
    if (r->w->fail)
        return 7;
    if (r->w->solo)
        return 0;
    r->w->ptr[r->rank] = data;
    pthread_barrier_wait(&r->w->bar);
    if (r->rank != root)
        memcpy(data, r->w->ptr[root], bytes);
    pthread_barrier_wait(&r->w->bar);
    return 0;
}

static const lattice_trainer_collective fake_ops = {
    .size = sizeof(lattice_trainer_collective),
    .rank = f_rank,
    .n_ranks = f_n,
    .sum_floats = f_sum_floats,
    .sum_doubles = f_sum_doubles,
    .sum_int64 = f_sum_int64,
    .barrier = f_barrier,
    .broadcast = f_broadcast,
    .errmsg = f_errmsg,
};

/* What one rank's run gave: its losses, counters and final weights. */
typedef struct rank_run {
    fake_rank fr;
    dw_config cfg;
    int steps;
    double loss[16], val[16];
    lattice_schedule_counters counters[16];
    float *weights;
    size_t n_weights;
    lattice_status st;
    const char *save_path, *load_path; /* after the steps: save, then load and step on */
    unsigned load_flags;                /* of lattice_trainer_load_checkpoint_flags */
    int after;                          /* steps after the load */
    double after_loss[16];
    lattice_status save_st, load_st;
    char msg[LATTICE_ERRMSG_SIZE];
    /* where the run ended: the data's position, the schedule's counters, optimizer steps */
    lattice_data_position end_pos;
    lattice_schedule_counters end_counters;
    int64_t end_optim_steps;
} rank_run;

static void *run_rank(void *arg)
{
    rank_run *r = arg;
    rig w;
    if (r->fr.w) {
        r->cfg.coll = &fake_ops;
        r->cfg.coll_user = &r->fr;
    }
    r->st = dw_open(&w, &r->cfg);
    if (r->st != LATTICE_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", lattice_last_error());
        return NULL;
    }
    for (int i = 0; i < r->steps && r->st == LATTICE_OK; i++) {
        lattice_trainer_metrics m = {.size = sizeof(m)};
        r->st = lattice_trainer_step(w.trainer, &m);
        r->loss[i] = m.loss;
        r->val[i] = m.val_ce;
        r->counters[i] = m.counters;
    }
    if (r->save_path)
        r->save_st = lattice_trainer_save_checkpoint(w.trainer, r->save_path);
    if (r->load_path) {
        r->load_st = lattice_trainer_load_checkpoint_flags(w.trainer, r->load_path, r->load_flags);
        for (int i = 0; i < r->after && r->load_st == LATTICE_OK; i++) {
            lattice_trainer_metrics m = {.size = sizeof(m)};
            r->load_st = lattice_trainer_step(w.trainer, &m);
            r->after_loss[i] = m.loss;
        }
    }
    snprintf(r->msg, sizeof r->msg, "%s", lattice_trainer_errmsg(w.trainer));
    lattice_data_get_position(w.data, &r->end_pos);
    lattice_schedule_get_counters(w.schedule, &r->end_counters);
    r->end_optim_steps = lattice_optim_get_steps(w.optim);
    r->weights = rig_weights(w.model, &r->n_weights);
    rig_close(&w);
    return NULL;
}

/* Run n fake ranks (threads) of the same config; runs[i] set up by the caller. */
static void run_fake(fake_world *fw, rank_run *runs, int n)
{
    pthread_t th[MAX_RANKS];
    fw->n = n;
    fw->fail = 0;
    fw->solo = 0;
    ck_assert_int_eq(pthread_barrier_init(&fw->bar, NULL, (unsigned)n), 0);
    for (int i = 0; i < n; i++) {
        runs[i].fr.w = fw;
        runs[i].fr.rank = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_rank, &runs[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&fw->bar);
}

static void free_runs(rank_run *runs, int n)
{
    for (int i = 0; i < n; i++)
        free(runs[i].weights);
}

START_TEST(test_table_checked)
{
    rig w;
    dw_config c = {.batch = 4, .max_batch = 4};
    ck_assert_int_eq(dw_open(&w, &c), LATTICE_OK);
    /* one thread: attaching compares setups with the other ranks (since 0.4),
     * which here send nothing and so agree */
    fake_world fw = {.n = 2, .solo = 1};
    fake_rank fr = {&fw, 0};
    lattice_trainer_collective ops = fake_ops;
    /* a table that ends before ours (0.3's, up to broadcast, among them) */
    const size_t shorter[] = {offsetof(lattice_trainer_collective, broadcast),
                              TU_COLLECTIVE_0_3_SIZE};
    ck_assert_uint_eq(TU_COLLECTIVE_0_3_SIZE, offsetof(lattice_trainer_collective, errmsg));
    for (int k = 0; k < 2; k++) {
        ops.size = shorter[k];
        ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &ops, &fr),
                         LATTICE_ERR_INVALID_ARGUMENT);
        tu_expect_pre_1_0("set_collective", shorter[k], sizeof ops);
        ck_assert_str_eq(lattice_trainer_errmsg(w.trainer), lattice_last_error());
        ck_assert_int_eq(lattice_trainer_collective_reduce_gradients(&ops, &fr, w.model, 1.0),
                         LATTICE_ERR_INVALID_ARGUMENT);
        tu_expect_pre_1_0("reduce_gradients", shorter[k], sizeof ops);
    }
    ops = fake_ops;
    ops.sum_doubles = NULL;
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &ops, &fr),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "ops->sum_doubles is NULL"));
    fr.rank = 2;
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "rank 2 of 2"));
    fr.rank = 0;
    fw.n = 3; /* 4 rows over 3 ranks */
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "does not divide by 3 ranks"));
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "does not divide by 3 ranks"));
    fw.n = 2;
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr), LATTICE_OK);
    /* detach */
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, NULL, NULL), LATTICE_OK);
    /* alone again: a step needs no other rank */
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    rig_close(&w);
    /* a share larger than the model holds */
    c.batch = 8;
    c.max_batch = 8;
    ck_assert_int_eq(dw_open(&w, &c), LATTICE_OK);
    rig_options so; /* a student of the world's, holding 2 rows */
    lattice_schedule_phase phases[2];
    dw_options(&so, phases, &c);
    so.model.max_batch = 2;
    so.model.seed = 1;
    lattice_model *small;
    ck_assert_int_eq(lattice_model_create(&so.model, w.norm, w.be, &small), LATTICE_OK);
    lattice_optim *o;
    ck_assert_int_eq(lattice_optim_create(small, &so.optim, &o), LATTICE_OK);
    lattice_trainer *t;
    ck_assert_int_eq(lattice_trainer_create(small, NULL, NULL, w.data, o, w.schedule, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG); /* alone: the global batch is checked */
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.collective = &fake_ops;
    tp.collective_user = &fr;
    fw.n = 2; /* shares of 4 rows: more than the 2 the model holds */
    ck_assert_int_eq(lattice_trainer_create(small, NULL, NULL, w.data, o, w.schedule, &tp, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "share of 4 rows exceeds"));
    fw.n = 4; /* shares of 2 rows: fits */
    ck_assert_int_eq(lattice_trainer_create(small, NULL, NULL, w.data, o, w.schedule, &tp, &t),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_set_collective(t, NULL, NULL), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "cannot detach"));
    lattice_trainer_destroy(t);
    ck_assert_int_eq(lattice_trainer_set_collective(NULL, &fake_ops, &fr),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "trainer is NULL"));
    lattice_optim_destroy(o);
    lattice_model_destroy(small);
    rig_close(&w);
}
END_TEST

/* One rank through the hook computes exactly what no hook computes. */
/* What companion libraries (liblattice-mpi) record their failures with. */
START_TEST(test_set_last_error)
{
    lattice_set_last_error("a companion library's reason");
    ck_assert_str_eq(lattice_last_error(), "a companion library's reason");
    lattice_set_last_error(lattice_last_error()); /* its own message: kept */
    ck_assert_str_eq(lattice_last_error(), "a companion library's reason");
    char longer[2 * LATTICE_ERRMSG_SIZE];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    lattice_set_last_error(longer);
    ck_assert_uint_eq(strlen(lattice_last_error()), LATTICE_ERRMSG_SIZE - 1);
    lattice_set_last_error(NULL);
    ck_assert_str_eq(lattice_last_error(), "");
}
END_TEST

START_TEST(test_one_rank_is_bit_identical)
{
    rank_run alone = {.cfg = {.batch = 4, .max_batch = 4, .teacher = 1}, .steps = 10};
    rank_run one = alone;
    fake_world fw;
    run_rank(&alone);
    run_fake(&fw, &one, 1);
    ck_assert_int_eq(alone.st, LATTICE_OK);
    ck_assert_int_eq(one.st, LATTICE_OK);
    ck_assert_uint_eq(alone.n_weights, one.n_weights);
    ck_assert_int_eq(memcmp(alone.weights, one.weights, alone.n_weights * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(alone.loss, one.loss, sizeof(alone.loss)), 0);
    free(alone.weights);
    free(one.weights);
}
END_TEST

/* 2 ranks of 2 rows = 1 rank of 4, with a teacher and a grow schedule whose
 * first phase is a token budget. */
START_TEST(test_two_ranks_match_one)
{
    rank_run alone = {.cfg = {.batch = 4, .max_batch = 4, .teacher = 1}, .steps = 10};
    rank_run two[2] = {{.cfg = {.batch = 4, .max_batch = 2, .teacher = 1}, .steps = 10},
                       {.cfg = {.batch = 4, .max_batch = 2, .teacher = 1}, .steps = 10}};
    fake_world fw;
    run_rank(&alone);
    run_fake(&fw, two, 2);
    ck_assert_int_eq(alone.st, LATTICE_OK);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(two[r].st == LATTICE_OK, "rank %d: %s", r, two[r].msg);
        for (int i = 0; i < 10; i++) {
            const lattice_schedule_counters *a = &alone.counters[i], *b = &two[r].counters[i];
            ck_assert_int_eq(a->steps, b->steps);
            ck_assert_int_eq(a->tokens, b->tokens);
            ck_assert_int_eq(a->nonpad_tokens, b->nonpad_tokens);
            ck_assert_int_eq(a->active_layer_tokens, b->active_layer_tokens); /* phases end together */
            ck_assert_double_eq_tol(a->flops, b->flops, 1e-9 * a->flops);
            ck_assert_msg(fabs(alone.loss[i] - two[r].loss[i]) <= REL_TOL * fabs(alone.loss[i]),
                          "step %d: loss %.9g alone, %.9g on rank %d", i, alone.loss[i],
                          two[r].loss[i], r);
            ck_assert_int_eq(isnan(alone.val[i]), isnan(two[r].val[i]));
            if (!isnan(alone.val[i]))
                ck_assert_double_eq_tol(alone.val[i], two[r].val[i], REL_TOL * alone.val[i]);
        }
    }
    /* the ranks hold the same weights, bit for bit */
    ck_assert_int_eq(memcmp(two[0].weights, two[1].weights, two[0].n_weights * sizeof(float)), 0);
    free(alone.weights);
    free_runs(two, 2);
}
END_TEST

/* A recorded teacher (dense and top-k) stores whole global batches: each rank
 * looks its batch up whole and takes its rows, and 2 ranks match 1. */
START_TEST(test_recorded_teacher_over_ranks)
{
    for (int k = 0; k <= 3; k += 3) {
        char path[64];
        snprintf(path, sizeof path, "coll-teacher-%d-%ld.safetensors", k, (long)getpid());
        rig rec;
        const dw_config rc = {.batch = 4, .max_batch = 4, .teacher = 1};
        ck_assert_int_eq(dw_open(&rec, &rc), LATTICE_OK);
        ck_assert_msg(lattice_teacher_record(rec.teacher, rec.data, 30, k, path) == LATTICE_OK,
                      "%s", lattice_teacher_errmsg(rec.teacher));
        rig_close(&rec);
        rank_run alone = {.cfg = {.batch = 4, .max_batch = 4, .teacher_file = path}, .steps = 8};
        rank_run two[2] = {
            {.cfg = {.batch = 4, .max_batch = 2, .teacher_file = path}, .steps = 8},
            {.cfg = {.batch = 4, .max_batch = 2, .teacher_file = path}, .steps = 8}};
        fake_world fw;
        run_rank(&alone);
        run_fake(&fw, two, 2);
        ck_assert_msg(alone.st == LATTICE_OK, "k %d alone: %s", k, alone.msg);
        for (int r = 0; r < 2; r++) {
            ck_assert_msg(two[r].st == LATTICE_OK, "k %d rank %d: %s", k, r, two[r].msg);
            for (int i = 0; i < 8; i++)
                ck_assert_msg(fabs(alone.loss[i] - two[r].loss[i]) <= REL_TOL * fabs(alone.loss[i]),
                              "k %d step %d: loss %.9g alone, %.9g on rank %d", k, i,
                              alone.loss[i], two[r].loss[i], r);
        }
        ck_assert_int_eq(memcmp(two[0].weights, two[1].weights, two[0].n_weights * sizeof(float)),
                         0);
        free(alone.weights);
        free_runs(two, 2);
        unlink(path);
    }
}
END_TEST

/* A teacher that fails on rank 1's third call: every rank fails that step. */
static int flaky_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                         float *z)
{
    fake_rank *r = user;
    static _Thread_local int calls;
    (void)tokens;
    if (r->rank == 1 && ++calls == 3)
        return 1;
    for (long i = 0; i < (long)batch * seq * vocab; i++)
        z[i] = (float)(i % vocab) * 0.1f;
    return 0;
}

typedef struct flaky_run {
    fake_rank fr;
    lattice_status st[5];
    int64_t steps_after[5];
    lattice_data_position pos[5];
    char msg[LATTICE_ERRMSG_SIZE];
} flaky_run;

static void *run_flaky(void *arg)
{
    flaky_run *r = arg;
    rig w;
    dw_config c = {.batch = 4, .max_batch = 2, .teacher_fn = flaky_teacher, .user = &r->fr,
                   .coll = &fake_ops, .coll_user = &r->fr};
    if (dw_open(&w, &c) != LATTICE_OK) {
        r->st[0] = LATTICE_ERR_STATE;
        return NULL;
    }
    for (int i = 0; i < 5; i++) {
        r->st[i] = lattice_trainer_step(w.trainer, NULL);
        if (r->st[i] != LATTICE_OK && !r->msg[0])
            snprintf(r->msg, sizeof r->msg, "%s", lattice_trainer_errmsg(w.trainer));
        lattice_schedule_counters cn;
        lattice_schedule_get_counters(w.schedule, &cn);
        r->steps_after[i] = cn.steps;
        lattice_data_get_position(w.data, &r->pos[i]);
    }
    rig_close(&w);
    return NULL;
}

START_TEST(test_failure_on_one_rank_fails_all)
{
    fake_world fw = {.n = 2};
    flaky_run runs[2] = {{.fr = {&fw, 0}}, {.fr = {&fw, 1}}};
    pthread_t th[2];
    ck_assert_int_eq(pthread_barrier_init(&fw.bar, NULL, 2), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_flaky, &runs[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&fw.bar);
    for (int r = 0; r < 2; r++) {
        const flaky_run *x = &runs[r];
        ck_assert_int_eq(x->st[0], LATTICE_OK);
        ck_assert_int_eq(x->st[1], LATTICE_OK);
        ck_assert_int_ne(x->st[2], LATTICE_OK); /* the teacher's failure, on both ranks */
        ck_assert_int_eq(x->st[2], runs[0].st[2]);
        ck_assert_int_eq(x->steps_after[2], 2); /* put back: no step recorded... */
        ck_assert_int_eq(x->pos[2].index, x->pos[1].index); /* ...nor data consumed */
        ck_assert_int_eq(x->st[3], LATTICE_OK); /* and the run goes on */
        ck_assert_int_eq(x->steps_after[4], 4);
    }
    ck_assert_ptr_nonnull(strstr(runs[1].msg, "teacher"));
    ck_assert_ptr_nonnull(strstr(runs[0].msg, "rank 1 failed"));
}
END_TEST

START_TEST(test_slot_failure_is_reported)
{
    rig w;
    dw_config c = {.batch = 4, .max_batch = 4};
    ck_assert_int_eq(dw_open(&w, &c), LATTICE_OK);
    fake_world fw = {.n = 2, .fail = 1, .solo = 1};
    fake_rank fr = {&fw, 0};
    /* attaching compares the ranks' setups: a link down refuses it */
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr),
                     LATTICE_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "comparing the ranks' setups"));
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "fake link down"));
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK); /* still alone */
    fw.fail = 0;
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr), LATTICE_OK);
    fw.fail = 1;
    lattice_data_position before, after;
    lattice_data_get_position(w.data, &before);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "fake link down"));
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "sum_int64"));
    lattice_data_get_position(w.data, &after);
    ck_assert_int_eq(before.index, after.index);
    double v;
    ck_assert_int_eq(lattice_trainer_evaluate(w.trainer, &v), LATTICE_ERR_BACKEND);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(w.trainer, "/nonexistent/x"), LATTICE_ERR_IO);
    fr.rank = 1; /* rank 1 waits for rank 0's word, and the broadcast fails */
    fw.fail = 0;
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr), LATTICE_OK);
    fw.fail = 1;
    ck_assert_int_eq(lattice_trainer_save_checkpoint(w.trainer, "/nonexistent/x"),
                     LATTICE_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "broadcast"));
    ck_assert_int_eq(lattice_trainer_collective_reduce_gradients(&fake_ops, &fr, w.model, 1.0),
                     LATTICE_ERR_BACKEND);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "fake link down"));
    ck_assert_int_eq(lattice_trainer_collective_reduce_gradients(&fake_ops, &fr, w.model, NAN),
                     LATTICE_ERR_INVALID_ARGUMENT);
    rig_close(&w);
}
END_TEST

/* Another thread's gradient sum or detach while a step is inside the trainer
 * (here: in its teacher's callback) is refused, nothing done: the sum halved
 * the step's gradients under it, and a detach freed the ranks' statuses. */
typedef struct step_inside {
    pthread_barrier_t bar;
    rig *w;
    fake_rank *fr;
    int calls;
    lattice_status reduce, detach;
    float grad_before, grad_after;
} step_inside;

static int waiting_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                           float *logits)
{
    (void)tokens;
    step_inside *x = user;
    memset(logits, 0, sizeof(float) * (size_t)batch * seq * vocab);
    if (x->calls++ == 0) {
        pthread_barrier_wait(&x->bar); /* inside the step */
        pthread_barrier_wait(&x->bar); /* the other thread has tried */
    }
    return 0;
}

static void *try_during_step(void *arg)
{
    step_inside *x = arg;
    pthread_barrier_wait(&x->bar);
    lattice_model_tensor_info ti;
    lattice_model_find_tensor(x->w->model, "model.norm.weight", &ti);
    x->grad_before = ti.grad[0];
    x->reduce = lattice_trainer_collective_reduce_gradients(&fake_ops, x->fr, x->w->model, 0.5);
    x->detach = lattice_trainer_set_collective(x->w->trainer, NULL, NULL);
    x->grad_after = ti.grad[0];
    pthread_barrier_wait(&x->bar);
    return NULL;
}

START_TEST(test_other_thread_refused_during_step)
{
    step_inside x = {.calls = 0};
    pthread_barrier_init(&x.bar, NULL, 2);
    rig w;
    dw_config c = {.batch = 4, .max_batch = 4, .teacher_fn = waiting_teacher, .user = &x};
    ck_assert_int_eq(dw_open(&w, &c), LATTICE_OK);
    fake_world fw = {.n = 1, .solo = 1};
    fake_rank fr = {&fw, 0};
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, &fake_ops, &fr), LATTICE_OK);
    x.w = &w;
    x.fr = &fr;
    pthread_t other;
    ck_assert_int_eq(pthread_create(&other, NULL, try_during_step, &x), 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    pthread_join(other, NULL);
    ck_assert_int_eq(x.reduce, LATTICE_ERR_STATE);
    ck_assert_int_eq(x.detach, LATTICE_ERR_STATE);
    ck_assert(x.grad_after == x.grad_before || isnan(x.grad_before));
    /* between calls both are taken */
    ck_assert_int_eq(lattice_trainer_collective_reduce_gradients(&fake_ops, &fr, w.model, 1.0),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_set_collective(w.trainer, NULL, NULL), LATTICE_OK);
    rig_close(&w);
    pthread_barrier_destroy(&x.bar);
}
END_TEST

/* Rank 0 writes the checkpoint alone (rank 1's path names a directory that
 * does not exist, and is never used); two ranks resume it bit-exactly; one
 * rank refuses it. */
START_TEST(test_checkpoint_over_ranks)
{
    char dir[] = "/tmp/lattice-collective-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/ck.safetensors", dir);
    snprintf(other, sizeof other, "%s/missing/ck.safetensors", dir);
    const dw_config c = {.batch = 4, .max_batch = 2, .teacher = 1};
    rank_run full[2] = {{.cfg = c, .steps = 8}, {.cfg = c, .steps = 8}};
    rank_run first[2] = {{.cfg = c, .steps = 4, .save_path = path},
                         {.cfg = c, .steps = 4, .save_path = other}};
    rank_run resumed[2] = {{.cfg = c, .load_path = path, .after = 4},
                           {.cfg = c, .load_path = path, .after = 4}};
    fake_world fw;
    run_fake(&fw, full, 2);
    run_fake(&fw, first, 2);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(first[r].save_st == LATTICE_OK, "rank %d: %s", r, first[r].msg);
    ck_assert_int_eq(access(path, F_OK), 0);
    run_fake(&fw, resumed, 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(resumed[r].load_st == LATTICE_OK, "rank %d: %s (rank 1: %s)", r,
                      resumed[r].msg, resumed[1].msg);
        ck_assert_int_eq(memcmp(full[r].weights, resumed[r].weights,
                                full[r].n_weights * sizeof(float)), 0);
    }
    /* a stale copy on one rank: another checkpoint of the same run (2 steps
     * earlier) at rank 1's path; every rank refuses, rank 1 says why */
    char stale[256];
    snprintf(stale, sizeof stale, "%s/stale.safetensors", dir);
    rank_run early[2] = {{.cfg = c, .steps = 2, .save_path = stale},
                         {.cfg = c, .steps = 2, .save_path = other}};
    run_fake(&fw, early, 2);
    ck_assert_int_eq(early[0].save_st, LATTICE_OK);
    rank_run mixed[2] = {{.cfg = c, .load_path = path}, {.cfg = c, .load_path = stale}};
    run_fake(&fw, mixed, 2);
    for (int r = 0; r < 2; r++)
        ck_assert_msg(mixed[r].load_st == LATTICE_ERR_INVALID_CONFIG, "rank %d: %s", r,
                      mixed[r].msg);
    ck_assert_msg(strstr(mixed[1].msg, "another checkpoint"), "%s", mixed[1].msg);
    free_runs(early, 2);
    free_runs(mixed, 2);
    unlink(stale);
    /* another rank count: refused before anything changes */
    rank_run alone = {.cfg = {.batch = 4, .max_batch = 4, .teacher = 1}, .load_path = path};
    run_rank(&alone);
    ck_assert_int_eq(alone.load_st, LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(alone.msg, "over 2 ranks and this run has 1"));
    free(alone.weights);
    free_runs(full, 2);
    free_runs(first, 2);
    free_runs(resumed, 2);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* The state two runs ended in is the same: weights bit for bit, the data's
 * position, the schedule's counters and the optimizer's step count. */
static void expect_same_state(const rank_run *a, const rank_run *b, const char *what)
{
    ck_assert_uint_eq(a->n_weights, b->n_weights);
    ck_assert_msg(memcmp(a->weights, b->weights, a->n_weights * sizeof(float)) == 0,
                  "%s: the weights differ", what);
    ck_assert_msg(a->end_pos.epoch == b->end_pos.epoch && a->end_pos.index == b->end_pos.index,
                  "%s: data at (%lld, %lld) and (%lld, %lld)", what, (long long)a->end_pos.epoch,
                  (long long)a->end_pos.index, (long long)b->end_pos.epoch,
                  (long long)b->end_pos.index);
    ck_assert_int_eq(a->end_counters.steps, b->end_counters.steps);
    ck_assert_int_eq(a->end_counters.tokens, b->end_counters.tokens);
    ck_assert_int_eq(a->end_counters.nonpad_tokens, b->end_counters.nonpad_tokens);
    ck_assert_int_eq(a->end_counters.active_layer_tokens, b->end_counters.active_layer_tokens);
    ck_assert_int_eq(a->end_optim_steps, b->end_optim_steps);
}

/* LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS (since 0.4): a checkpoint of 2 ranks
 * resumes on 1 and one of 1 on 2. The state loads whole (weights bit for
 * bit, data position, counters); the run then goes on as the original count
 * would have, to the rounding of 2 ranks against 1. Without the flag: the
 * refusal of test_checkpoint_over_ranks, which now names the flag. */
START_TEST(test_checkpoint_other_ranks)
{
    char dir[] = "/tmp/lattice-collective-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char two_ck[256], one_ck[256], unused[256];
    snprintf(two_ck, sizeof two_ck, "%s/two.safetensors", dir);
    snprintf(one_ck, sizeof one_ck, "%s/one.safetensors", dir);
    snprintf(unused, sizeof unused, "%s/missing/ck.safetensors", dir);
    const dw_config c2 = {.batch = 4, .max_batch = 2, .teacher = 1};
    const dw_config c1 = {.batch = 4, .max_batch = 4, .teacher = 1};
    const unsigned other = LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS;
    fake_world fw;
    /* 2 ranks: 8 steps, and 4 steps saved */
    rank_run full2[2] = {{.cfg = c2, .steps = 8}, {.cfg = c2, .steps = 8}};
    rank_run saved2[2] = {{.cfg = c2, .steps = 4, .save_path = two_ck},
                          {.cfg = c2, .steps = 4, .save_path = unused}};
    run_fake(&fw, full2, 2);
    run_fake(&fw, saved2, 2);
    ck_assert_msg(saved2[0].save_st == LATTICE_OK, "%s", saved2[0].msg);
    /* 1 rank, without the flag: refused, nothing changed */
    rank_run fresh = {.cfg = c1};
    rank_run refused = {.cfg = c1, .load_path = two_ck, .load_flags = LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA};
    run_rank(&fresh);
    run_rank(&refused);
    ck_assert_int_eq(refused.load_st, LATTICE_ERR_INVALID_CONFIG);
    ck_assert_msg(strstr(refused.msg, "over 2 ranks and this run has 1"), "%s", refused.msg);
    ck_assert_msg(strstr(refused.msg, "LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS"), "%s", refused.msg);
    expect_same_state(&fresh, &refused, "a refused load");
    /* with it: the checkpoint's state, whole */
    rank_run loaded = {.cfg = c1, .load_path = two_ck, .load_flags = other};
    run_rank(&loaded);
    ck_assert_msg(loaded.load_st == LATTICE_OK, "%s", loaded.msg);
    expect_same_state(&saved2[0], &loaded, "2 ranks' checkpoint on 1");
    /* and on: the 2-rank run's steps 4..7 to rounding, the same counters */
    rank_run resumed = {.cfg = c1, .load_path = two_ck, .load_flags = other, .after = 4};
    run_rank(&resumed);
    ck_assert_msg(resumed.load_st == LATTICE_OK, "%s", resumed.msg);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(fabs(resumed.after_loss[i] - full2[0].loss[4 + i]) <=
                          REL_TOL * fabs(full2[0].loss[4 + i]),
                      "step %d: loss %.9g on 2 ranks, %.9g resumed on 1", 4 + i,
                      full2[0].loss[4 + i], resumed.after_loss[i]);
    ck_assert_int_eq(resumed.end_counters.tokens, full2[0].end_counters.tokens);
    ck_assert_int_eq(resumed.end_counters.active_layer_tokens,
                     full2[0].end_counters.active_layer_tokens);
    ck_assert_int_eq(resumed.end_pos.index, full2[0].end_pos.index);
    /* the other way: 1 rank's checkpoint on 2 ranks */
    rank_run saved1 = {.cfg = c1, .steps = 4, .save_path = one_ck};
    run_rank(&saved1);
    ck_assert_msg(saved1.save_st == LATTICE_OK, "%s", saved1.msg);
    rank_run no2[2] = {{.cfg = c2, .load_path = one_ck}, {.cfg = c2, .load_path = one_ck}};
    run_fake(&fw, no2, 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(no2[r].load_st, LATTICE_ERR_INVALID_CONFIG);
        ck_assert_msg(strstr(no2[r].msg, "over 1 rank and this run has 2"), "%s", no2[r].msg);
    }
    rank_run on2[2] = {{.cfg = c2, .load_path = one_ck, .load_flags = other},
                       {.cfg = c2, .load_path = one_ck, .load_flags = other}};
    run_fake(&fw, on2, 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(on2[r].load_st == LATTICE_OK, "rank %d: %s", r, on2[r].msg);
        expect_same_state(&saved1, &on2[r], "1 rank's checkpoint on 2");
    }
    free_runs(full2, 2);
    free_runs(saved2, 2);
    free_runs(no2, 2);
    free_runs(on2, 2);
    free(fresh.weights);
    free(refused.weights);
    free(loaded.weights);
    free(resumed.weights);
    free(saved1.weights);
    unlink(two_ck);
    unlink(one_ck);
    rmdir(dir);
}
END_TEST

/* Ranks bound to objects set up differently: before 0.4 they trained, each
 * on its share of another batch, without a word. Now the trainer's creation
 * (and an attach after it) is refused on every rank, naming the field. */
START_TEST(test_mismatched_ranks_refused)
{
    static const struct {
        dw_config odd; /* rank 1's */
        const char *says[2];
    } cases[] = {
        {{.batch = 8, .max_batch = 4, .teacher = 1},
         {"rank 1's data batch_size 8 differs from rank 0's 4", NULL}},
        {{.batch = 4, .max_batch = 2, .teacher = 1, .data_seed = 4},
         {"rank 1's data seed 4 differs from rank 0's 3", NULL}},
        {{.batch = 4, .max_batch = 2, .teacher = 1, .model_seed = 43},
         {"rank 1's model weights_hash 0x", "(seed 43) differs from rank 0's 0x"}},
        {{.batch = 4, .max_batch = 2, .teacher = 1, .phase2_steps = 13},
         {"rank 1's schedule phase 1 steps 13 differs from rank 0's 12", NULL}},
        {{.batch = 4, .max_batch = 2, .teacher = 0},
         {"rank 1's trainer teacher_kind none differs from rank 0's model", NULL}},
    };
    const dw_config same = {.batch = 4, .max_batch = 2, .teacher = 1};
    const dw_config *c = &cases[_i].odd;
    rank_run runs[2] = {{.cfg = same, .steps = 2}, {.cfg = *c, .steps = 2}};
    fake_world fw;
    run_fake(&fw, runs, 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(runs[r].st == LATTICE_ERR_INVALID_CONFIG, "case %d rank %d: %s (%s)", _i, r,
                      lattice_status_string(runs[r].st), runs[r].msg);
        for (int k = 0; k < 2 && cases[_i].says[k]; k++)
            ck_assert_msg(strstr(runs[r].msg, cases[_i].says[k]), "case %d rank %d: '%s'", _i, r,
                          runs[r].msg);
        ck_assert_msg(strstr(runs[r].msg, "refused on every rank"), "%s", runs[r].msg);
    }
    free_runs(runs, 2);
}
END_TEST

/* The same refusal when the collective is attached after creation, in
 * lattice_trainer_set_collective; and matching ranks attach. */
typedef struct attach_run {
    fake_rank fr;
    dw_config cfg;
    lattice_status st;
    char msg[LATTICE_ERRMSG_SIZE], last[LATTICE_ERRMSG_SIZE];
} attach_run;

static void *attach_rank(void *arg)
{
    attach_run *r = arg;
    rig w;
    r->st = dw_open(&w, &r->cfg);
    if (r->st == LATTICE_OK) {
        r->st = lattice_trainer_set_collective(w.trainer, &fake_ops, &r->fr);
        snprintf(r->msg, sizeof r->msg, "%s", lattice_trainer_errmsg(w.trainer));
        snprintf(r->last, sizeof r->last, "%s", lattice_last_error());
        if (r->st != LATTICE_OK) /* refused: still alone, and it trains */
            ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
        rig_close(&w);
    }
    return NULL;
}

START_TEST(test_mismatched_ranks_refused_at_attach)
{
    fake_world fw = {.n = 2};
    attach_run runs[2] = {{.fr = {&fw, 0}, .cfg = {.batch = 4, .max_batch = 4}},
                          {.fr = {&fw, 1}, .cfg = {.batch = 4, .max_batch = 4, .data_seed = 9}}};
    for (int round = 0; round < 2; round++) {
        pthread_t th[2];
        ck_assert_int_eq(pthread_barrier_init(&fw.bar, NULL, 2), 0);
        for (int i = 0; i < 2; i++)
            ck_assert_int_eq(pthread_create(&th[i], NULL, attach_rank, &runs[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&fw.bar);
        for (int r = 0; r < 2; r++) {
            if (round == 0) {
                ck_assert_msg(runs[r].st == LATTICE_ERR_INVALID_CONFIG, "rank %d: %s", r,
                              runs[r].msg);
                ck_assert_msg(strstr(runs[r].msg, "rank 1's data seed 9 differs from rank 0's 3"),
                              "rank %d: %s", r, runs[r].msg);
                ck_assert_msg(strstr(runs[r].last, "rank 1's data seed 9"), "%s", runs[r].last);
            } else {
                ck_assert_msg(runs[r].st == LATTICE_OK, "rank %d: %s", r, runs[r].msg);
            }
        }
        runs[1].cfg.data_seed = 0; /* now the same */
    }
}
END_TEST

static Suite *collective_suite(void)
{
    Suite *s = suite_create("collective");
    TCase *tc = tcase_create("collective");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_table_checked);
    tcase_add_test(tc, test_set_last_error);
    tcase_add_test(tc, test_one_rank_is_bit_identical);
    tcase_add_test(tc, test_two_ranks_match_one);
    tcase_add_test(tc, test_recorded_teacher_over_ranks);
    tcase_add_test(tc, test_failure_on_one_rank_fails_all);
    tcase_add_test(tc, test_slot_failure_is_reported);
    tcase_add_test(tc, test_other_thread_refused_during_step);
    tcase_add_test(tc, test_checkpoint_over_ranks);
    tcase_add_test(tc, test_checkpoint_other_ranks);
    tcase_add_loop_test(tc, test_mismatched_ranks_refused, 0, 5);
    tcase_add_test(tc, test_mismatched_ranks_refused_at_attach);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(collective_suite()); }
