/* Misuse that used to be silent (issue 38 part 3): two threads inside one
 * model (a wrong loss, no status) and the destroy of a handle that another
 * still borrows (a segfault, a use-after-free, a hang). The first is refused
 * with LATTICE_ERR_STATE; the second is deferred until the last borrower is
 * destroyed (doc/API.md, Handles and threads). Run under ASan/UBSan too. */
#include "rig.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static void misuse_options(rig_options *o)
{
    rig_options_init(o);
    o->data.val_fraction = 0.2f;
}

/* ---- two threads on one model -------------------------------------------- */

typedef struct hammer {
    lattice_model *m;
    lattice_data *data; /* each thread's own: a data handle is not shared either */
    double want;        /* the validation loss alone on the model */
    int calls, refused, wrong, other;
    char why[LATTICE_ERRMSG_SIZE];
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;
    /* until this thread has had its own share of calls through (or a cap):
     * the two threads' calls then overlap, whichever starts first */
    int ok = 0;
    for (int i = 0; ok < h->calls && i < 100000; i++) {
        double ce = -1.0;
        const lattice_status st = lattice_model_evaluate(h->m, h->data, 0, &ce);
        if (st == LATTICE_ERR_STATE) {
            h->refused++;
            if (!strstr(lattice_last_error(), "another thread is inside"))
                snprintf(h->why, sizeof h->why, "%s", lattice_last_error());
        } else if (st != LATTICE_OK) {
            h->other++;
        } else if (ce != h->want) {
            h->wrong++;
        } else {
            ok++;
        }
        usleep(20 + 37 * (i % 5)); /* a caller's own work between calls: the other gets in */
    }
    return NULL;
}

START_TEST(test_two_threads_one_model)
{
    rig_options o;
    misuse_options(&o);
    o.defer_trainer = 1;
    rig r;
    tu_rig_open(&r, &o);
    /* a second corpus of other documents: the two threads' losses differ */
    rig_options o2 = o;
    o2.n_generated = 900;
    rig r2;
    memset(&r2, 0, sizeof r2);
    ck_assert_int_eq(rig_data_create(&r2, &o2), LATTICE_OK);
    hammer h[2] = {{.m = r.model, .data = r.data, .calls = 60},
                   {.m = r.model, .data = r2.data, .calls = 60}};
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(lattice_model_evaluate(r.model, h[k].data, 0, &h[k].want), LATTICE_OK);
    ck_assert(h[0].want != h[1].want);
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, hammer_run, &h[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(h[k].wrong == 0, "thread %d: %d of %d losses wrong", k, h[k].wrong, h[k].calls);
        ck_assert_int_eq(h[k].other, 0);
        ck_assert_msg(h[k].why[0] == 0, "refused with: %s", h[k].why);
    }
    fprintf(stderr, "two threads on one model: %d and %d calls refused\n", h[0].refused,
            h[1].refused);
    /* once both are out, the model is free again */
    double ce;
    ck_assert_int_eq(lattice_model_evaluate(r.model, r.data, 0, &ce), LATTICE_OK);
    ck_assert(ce == h[0].want);
    lattice_data_destroy(r2.data);
    rig_close(&r);
}
END_TEST

/* ---- the busy section, deterministically: a step's callback --------------- */

typedef struct intruder {
    rig *r;
    lattice_status forward, evaluate, step, save, optim, set_active;
    char forward_msg[LATTICE_ERRMSG_SIZE];
} intruder;

static void *intrude(void *arg)
{
    intruder *in = arg;
    static const int32_t tokens[4] = {1, 2, 3, 4};
    in->forward = lattice_model_forward(in->r->model, tokens, 1, 4);
    snprintf(in->forward_msg, sizeof in->forward_msg, "%s", lattice_last_error());
    double ce;
    in->evaluate = lattice_trainer_evaluate(in->r->trainer, &ce);
    in->step = lattice_trainer_step(in->r->trainer, NULL);
    in->save = lattice_model_save(in->r->model, "/tmp/lattice-misuse-never-written.safetensors");
    in->optim = lattice_optim_step(in->r->optim, NULL);
    in->set_active = lattice_model_set_active_layers(in->r->model, 1);
    return NULL;
}

typedef struct callback_seen {
    rig *r;
    int calls;
    intruder in;
    lattice_status own_evaluate, own_save, own_forward;
} callback_seen;

static int on_step_intrude(void *user, const lattice_trainer_metrics *metrics)
{
    (void)metrics;
    callback_seen *s = user;
    if (s->calls++)
        return 0;
    /* another thread while the step holds the model: refused, every call */
    s->in.r = s->r;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, intrude, &s->in), 0);
    pthread_join(th, NULL);
    /* the step's own thread: evaluating and saving from a callback go on */
    double ce;
    s->own_evaluate = lattice_trainer_evaluate(s->r->trainer, &ce);
    char path[] = "/tmp/lattice-misuse-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    s->own_save = lattice_trainer_save_checkpoint(s->r->trainer, path);
    unlink(path);
    static const int32_t tokens[4] = {1, 2, 3, 4};
    s->own_forward = lattice_model_forward(s->r->model, tokens, 1, 4);
    return 0;
}

START_TEST(test_busy_refused_while_step_holds_it)
{
    rig_options o;
    misuse_options(&o);
    rig r;
    callback_seen seen = {.r = &r};
    o.trainer.on_step = on_step_intrude;
    o.trainer.user = &seen;
    tu_rig_open(&r, &o);
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(seen.calls, 1);
    ck_assert_int_eq(seen.in.forward, LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(seen.in.forward_msg, "lattice_model_forward: another thread is "
                                                      "inside lattice_trainer_step on this model"));
    ck_assert_int_eq(seen.in.evaluate, LATTICE_ERR_STATE);
    ck_assert_int_eq(seen.in.step, LATTICE_ERR_STATE);
    ck_assert_int_eq(seen.in.save, LATTICE_ERR_STATE);
    ck_assert_int_eq(seen.in.optim, LATTICE_ERR_STATE);
    ck_assert_int_eq(seen.in.set_active, LATTICE_ERR_STATE);
    ck_assert_int_eq(seen.own_evaluate, LATTICE_OK);
    ck_assert_int_eq(seen.own_save, LATTICE_OK);
    ck_assert_int_eq(seen.own_forward, LATTICE_OK);
    /* the step left: another thread may call again */
    intruder after = {.r = &r};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, intrude, &after), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(after.forward, LATTICE_OK);
    ck_assert_int_eq(after.evaluate, LATTICE_OK);
    ck_assert_int_eq(after.step, LATTICE_OK);
    rig_close(&r);
}
END_TEST

/* ---- what a trainer borrows, shared by two trainers (issue 48 part 2) ------- */

/* A second trainer that shares the first's distill loss, a third that shares
 * its data and schedule, and direct calls on the three, from another thread
 * while the first trainer's step holds them: each is refused, naming the
 * handle. Until issue 48 only the model was held: a shared distill loss let
 * two runs' steps mix (up to 96 of 120 losses differed from running them one
 * after the other). */
typedef struct sharer {
    rig *r;                    /* the first run */
    lattice_trainer *by_loss;  /* shares r's distill loss */
    lattice_trainer *by_data;  /* shares r's data and schedule */
    int calls;
    lattice_status loss_step, data_step, dense, next, record, set_position;
    char loss_msg[LATTICE_ERRMSG_SIZE], data_msg[LATTICE_ERRMSG_SIZE];
} sharer;

static void *share(void *arg)
{
    sharer *s = arg;
    s->loss_step = lattice_trainer_step(s->by_loss, NULL);
    snprintf(s->loss_msg, sizeof s->loss_msg, "%s", lattice_last_error());
    s->data_step = lattice_trainer_step(s->by_data, NULL);
    snprintf(s->data_msg, sizeof s->data_msg, "%s", lattice_last_error());
    float z[2 * 11] = {0}, g[2 * 11];
    const int32_t tgt[2] = {1, 2};
    lattice_distill_result res;
    s->dense = lattice_distill_dense(s->r->distill, z, z, tgt, NULL, 2, 11, g, &res);
    lattice_data_batch b;
    s->next = lattice_data_next(s->r->data, &b);
    int ended;
    s->record = lattice_schedule_record(s->r->schedule, 4, 4, 1.0, &ended);
    s->set_position = lattice_schedule_set_position(s->r->schedule, 0, 0, NULL);
    return NULL;
}

static int on_step_share(void *user, const lattice_trainer_metrics *metrics)
{
    (void)metrics;
    sharer *s = user;
    if (s->calls++)
        return 0;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, share, s), 0);
    pthread_join(th, NULL);
    return 0;
}

START_TEST(test_trainers_sharing_a_handle)
{
    rig_options o;
    misuse_options(&o);
    o.teacher = RIG_TEACHER_MODEL;
    rig r, r2;
    sharer s = {.r = &r};
    o.trainer.on_step = on_step_share;
    o.trainer.user = &s;
    tu_rig_open(&r, &o);
    rig_options o2;
    misuse_options(&o2);
    o2.teacher = RIG_TEACHER_MODEL;
    o2.defer_trainer = 1;
    tu_rig_open(&r2, &o2);
    ck_assert_int_eq(lattice_trainer_create(r2.model, r2.teacher, r.distill, r2.data, r2.optim,
                                            r2.schedule, NULL, &s.by_loss),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_create(r2.model, NULL, NULL, r.data, r2.optim, r.schedule,
                                            NULL, &s.by_data),
                     LATTICE_OK);
    lattice_schedule_counters before;
    lattice_schedule_get_counters(r.schedule, &before);
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.loss_step, LATTICE_ERR_STATE);
    ck_assert_msg(strstr(s.loss_msg, "another thread is inside lattice_trainer_step on this "
                                     "distill loss"), "%s", s.loss_msg);
    ck_assert_int_eq(s.data_step, LATTICE_ERR_STATE);
    ck_assert_msg(strstr(s.data_msg, "on this data"), "%s", s.data_msg);
    ck_assert_int_eq(s.dense, LATTICE_ERR_STATE);
    ck_assert_int_eq(s.next, LATTICE_ERR_STATE);
    ck_assert_int_eq(s.record, LATTICE_ERR_STATE);
    ck_assert_int_eq(s.set_position, LATTICE_ERR_STATE);
    /* the first run's step was its own: one step counted, nothing from the others */
    lattice_schedule_counters after;
    lattice_schedule_get_counters(r.schedule, &after);
    ck_assert_int_eq(after.steps, before.steps + 1);
    ck_assert_int_eq(lattice_optim_get_steps(r2.optim), 0);
    /* one after the other, as the API allows */
    ck_assert_int_eq(lattice_trainer_step(s.by_loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_step(s.by_data, NULL), LATTICE_OK);
    lattice_trainer_destroy(s.by_loss);
    lattice_trainer_destroy(s.by_data);
    rig_close(&r2);
    rig_close(&r);
}
END_TEST

/* A trainer's optimizer is its model's: one created for another model would
 * update that model's weights from this one's gradients. */
START_TEST(test_optimizer_of_another_model_refused)
{
    rig_options o;
    misuse_options(&o);
    o.defer_trainer = 1;
    rig r, r2;
    tu_rig_open(&r, &o);
    tu_rig_open(&r2, &o);
    lattice_trainer *t = NULL;
    ck_assert_int_eq(lattice_trainer_create(r.model, NULL, NULL, r.data, r2.optim, r.schedule,
                                            NULL, &t),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "the optimizer was created for another "
                                                       "model"));
    rig_close(&r2);
    rig_close(&r);
}
END_TEST

/* ---- borrowed handles ------------------------------------------------------ */

START_TEST(test_destroy_of_borrowed_is_deferred)
{
    /* the case: teacher, its model and the distill loss destroyed
     * while a trainer binds them, then training (a segfault, a use-after-free
     * or a hang before); here every bound handle goes */
    rig_options o;
    misuse_options(&o);
    o.teacher = RIG_TEACHER_MODEL;
    rig r;
    tu_rig_open(&r, &o);
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    lattice_set_last_error("");
    lattice_model_destroy(r.teacher_model);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "lattice_model_destroy: the model is still "
                                                       "borrowed by 1 other handle"));
    lattice_teacher_destroy(r.teacher);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "lattice_teacher_destroy: the teacher is "
                                                       "still borrowed"));
    lattice_distill_destroy(r.distill);
    lattice_data_destroy(r.data);
    lattice_optim_destroy(r.optim);
    lattice_schedule_destroy(r.schedule);
    lattice_model_destroy(r.model);
    /* the model: its optimizer and the trainer */
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "borrowed by 2 other handles"));
    lattice_trainer_metrics m = {.size = sizeof m};
    ck_assert_int_eq(lattice_trainer_step(r.trainer, &m), LATTICE_OK);
    ck_assert(isfinite(m.loss) && m.kl >= 0.0);
    double ce;
    ck_assert_int_eq(lattice_trainer_evaluate(r.trainer, &ce), LATTICE_OK);
    /* a handle whose destroy was asked is not bound again */
    lattice_trainer *again = NULL;
    ck_assert_int_eq(lattice_trainer_create(r.model, NULL, NULL, r.data, r.optim, r.schedule, NULL,
                                            &again),
                     LATTICE_ERR_STATE);
    ck_assert_ptr_null(again);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "the model was destroyed"));
    lattice_optim *o2 = NULL;
    ck_assert_int_eq(lattice_optim_create(r.model, &o.optim, &o2), LATTICE_ERR_STATE);
    /* the trainer's destroy completes every deferred one (ASan: no leak, no
     * use after free) */
    lattice_trainer_destroy(r.trainer);
    lattice_norm_destroy(r.norm);
    lattice_backend_destroy(r.be);
}
END_TEST

START_TEST(test_borrowers_of_a_model)
{
    /* an optimizer, a diag and a teacher borrow the model; the last of them frees it */
    rig_options o;
    misuse_options(&o);
    o.defer_trainer = 1;
    rig r;
    tu_rig_open(&r, &o);
    lattice_diag *d;
    lattice_teacher *t;
    ck_assert_int_eq(lattice_diag_create(r.model, &d), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_create_model(r.model, &t), LATTICE_OK);
    lattice_model_destroy(r.model);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "borrowed by 3 other handles"));
    static const int32_t tokens[4] = {1, 2, 3, 4};
    const float *z;
    ck_assert_int_eq(lattice_teacher_logits(t, tokens, 1, 4, &z), LATTICE_OK);
    lattice_teacher_destroy(t);
    ck_assert_int_eq(lattice_model_forward(r.model, tokens, 1, 4), LATTICE_OK);
    float loss;
    ck_assert_int_eq(lattice_model_cross_entropy(r.model, tokens, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(r.model), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_step(r.optim, NULL), LATTICE_OK);
    lattice_optim_destroy(r.optim);
    lattice_diag_destroy(d); /* the last: the model goes with it */
    r.model = NULL;
    r.optim = NULL;
    /* a second destroy of a handle nobody borrows is the caller's error, but
     * an unborrowed destroy frees at once: nothing else to check */
    rig_close(&r);
}
END_TEST

START_TEST(test_unborrowed_destroy_is_immediate)
{
    /* the trainer gone, its handles are free to destroy in any order */
    rig_options o;
    misuse_options(&o);
    o.teacher = RIG_TEACHER_MODEL;
    rig r;
    tu_rig_open(&r, &o);
    lattice_trainer_destroy(r.trainer);
    r.trainer = NULL;
    lattice_set_last_error("");
    lattice_model_destroy(r.model); /* its optimizer still borrows it */
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "borrowed by 1 other handle"));
    lattice_set_last_error("");
    lattice_optim_destroy(r.optim);
    lattice_teacher_destroy(r.teacher);
    lattice_model_destroy(r.teacher_model);
    lattice_data_destroy(r.data);
    lattice_schedule_destroy(r.schedule);
    lattice_distill_destroy(r.distill);
    ck_assert_str_eq(lattice_last_error(), "");
    r.model = r.teacher_model = NULL;
    r.optim = NULL;
    r.teacher = NULL;
    r.data = NULL;
    r.schedule = NULL;
    r.distill = NULL;
    rig_close(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("misuse");
    TCase *c = tcase_create("misuse");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, test_two_threads_one_model);
    tcase_add_test(c, test_busy_refused_while_step_holds_it);
    tcase_add_test(c, test_trainers_sharing_a_handle);
    tcase_add_test(c, test_optimizer_of_another_model_refused);
    tcase_add_test(c, test_destroy_of_borrowed_is_deferred);
    tcase_add_test(c, test_borrowers_of_a_model);
    tcase_add_test(c, test_unborrowed_destroy_is_immediate);
    suite_add_tcase(s, c);
    return tu_run(s);
}
