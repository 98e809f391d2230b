/* Teachers: a model teacher initialising its student, a callback teacher,
 * and logits recorded to files (dense and top-k) read back, trained on, and
 * files that are not logits refused. */
#include "study_run.h"

#include <unistd.h>

START_TEST(test_init_student)
{
    rig w;
    study_open(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.model), LATTICE_OK);
    long n;
    float *te = tu_copy_tensor(w.teacher_model, "model.embed_tokens.weight", &n);
    float *th = tu_copy_tensor(w.teacher_model, "lm_head.weight", &n);
    float *tn = tu_copy_tensor(w.teacher_model, "model.norm.weight", &n);
    ck_assert(tu_same_tensor(w.model, "model.embed_tokens.weight", te));
    ck_assert(tu_same_tensor(w.model, "lm_head.weight", th));
    ck_assert(tu_same_tensor(w.model, "model.entry_norm.weight", tn)); /* post: entry norm */
    int tr;
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_EMBEDDING, -1, &tr);
    ck_assert_int_eq(tr, 0);
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_HEAD, -1, &tr);
    ck_assert_int_eq(tr, 1);
    /* a post-norm teacher has no final norm; a callback teacher has no weights */
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_teacher *self;
    lattice_teacher_create_model(w.model, &self);
    ck_assert_int_eq(lattice_teacher_init_student(self, w.teacher_model), LATTICE_ERR_INVALID_CONFIG);
    const char *why = lattice_teacher_errmsg(self); /* the model's reason, in the teacher's words */
    ck_assert_msg(strstr(why, "no final norm to copy") || strstr(why, ") differ") ||
                      strstr(why, "norm kinds differ"),
                  "%s", why);
    lattice_teacher_destroy(self);
    free(te);
    free(th);
    free(tn);
    rig_close(&w);
}
END_TEST

START_TEST(test_callback_teacher)
{
    cb_state s = {0};
    lattice_teacher *t;
    ck_assert_int_eq(lattice_teacher_create_callback(cb_teacher, &s, 10, 2, 3, &t), LATTICE_OK);
    const int32_t tok[6] = {1, 2, 3, 4, 5, 9};
    const float *z;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_OK);
    ck_assert_float_eq(z[5 * 10 + 0], 4.0f); /* after 9 comes 0 */
    ck_assert_float_eq(z[0 * 10 + 2], 4.0f);
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 3, 3, &z), LATTICE_ERR_INVALID_ARGUMENT);
    s.nan_at = 2;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_ERR_NON_FINITE);
    s.fail = 1;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_ERR_BACKEND);
    ck_assert_ptr_null(z);
    lattice_teacher_destroy(t);
    ck_assert_int_eq(lattice_teacher_create_callback(NULL, &s, 10, 2, 3, &t), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_file_teacher)
{
    rig w;
    study_open(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT);
    char dense[64], sparse[64], full[64];
    snprintf(dense, sizeof dense, "/tmp/lattice-logits-%d-d.safetensors", (int)getpid());
    snprintf(sparse, sizeof sparse, "/tmp/lattice-logits-%d-s.safetensors", (int)getpid());
    snprintf(full, sizeof full, "/tmp/lattice-logits-%d-f.safetensors", (int)getpid());
    const lattice_data_position start = {0, 0};
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 3, 0, dense), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 3, 5, sparse), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 6, VOCAB, full), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    lattice_teacher *fd, *fs, *ff;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_teacher_create_file(dense, &fd, err) == LATTICE_OK, "%s", err);
    ck_assert_msg(lattice_teacher_create_file(sparse, &fs, err) == LATTICE_OK, "%s", err);
    ck_assert_msg(lattice_teacher_create_file(full, &ff, err) == LATTICE_OK, "%s", err);
    ck_assert_int_eq(lattice_teacher_get_k(fd), 0);
    ck_assert_int_eq(lattice_teacher_get_k(fs), 5);
    ck_assert_int_eq(lattice_teacher_get_vocab_size(fs), VOCAB);
    /* the stored logits are the model teacher's, batch by batch, even out of order */
    lattice_data_batch b[3];
    int32_t toks[3][4 * 48];
    int seqs[3];
    for (int i = 0; i < 3; i++) {
        lattice_data_next(w.data, &b[i]);
        memcpy(toks[i], b[i].tokens, sizeof(int32_t) * b[i].batch * b[i].seq);
        seqs[i] = b[i].seq;
    }
    for (int i = 2; i >= 0; i--) {
        const float *zm, *zf;
        const int32_t *ix;
        const float *vx;
        ck_assert_int_eq(lattice_teacher_logits(fd, toks[i], 4, seqs[i], &zf), LATTICE_OK);
        ck_assert_int_eq(lattice_teacher_logits(w.teacher, toks[i], 4, seqs[i], &zm), LATTICE_OK);
        ck_assert_int_eq(memcmp(zf, zm, sizeof(float) * 4 * seqs[i] * VOCAB), 0);
        ck_assert_int_eq(lattice_teacher_topk(fs, toks[i], 4, seqs[i], &ix, &vx), LATTICE_OK);
        for (int c = 0; c < 4 * seqs[i]; c++) {
            const float *row = zm + (long)c * VOCAB;
            for (int e = 0; e < 5; e++) {
                ck_assert_float_eq(vx[c * 5 + e], row[ix[c * 5 + e]]);
                int above = 0; /* the e-th largest has exactly e values above it */
                for (int v = 0; v < VOCAB; v++)
                    above += row[v] > vx[c * 5 + e];
                ck_assert_int_le(above, e);
            }
        }
    }
    const float *z;
    int32_t other[4 * 48];
    for (int i = 0; i < 4 * 48; i++)
        other[i] = 7;
    ck_assert_int_eq(lattice_teacher_logits(fd, other, 4, 5, &z), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_teacher_logits(fs, toks[0], 4, seqs[0], &z), LATTICE_ERR_UNSUPPORTED);
    /* training on a top-k file with k = vocab is training on the dense teacher */
    double dense_loss[3], topk_loss[3];
    for (int pass = 0; pass < 2; pass++) {
        rig_options o;
        study_options(&o, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT);
        if (pass) {
            o.teacher = RIG_TEACHER_FILE;
            o.teacher_file = full;
        }
        rig v;
        tu_rig_open(&v, &o);
        log_t l;
        study_bind(&v, &l, 0);
        for (int i = 0; i < 3; i++) {
            lattice_trainer_metrics m = {.size = sizeof(m)};
            ck_assert_msg(lattice_trainer_step(v.trainer, &m) == LATTICE_OK, "%s",
                          lattice_trainer_errmsg(v.trainer));
            (pass ? topk_loss : dense_loss)[i] = m.loss;
        }
        rig_close(&v);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq_tol(dense_loss[i], topk_loss[i], 1e-5);
    /* reverse KL reads the teacher's dense distribution: a top-k file with it
     * is refused when the trainer is made, not at every step */
    {
        rig_options o;
        study_options(&o, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT);
        o.teacher = RIG_TEACHER_FILE;
        o.teacher_file = sparse;
        o.distill.direction = LATTICE_DISTILL_KL_REVERSE;
        rig v;
        tu_rig_open(&v, &o); /* the trainer deferred */
        ck_assert_int_eq(rig_bind(&v, NULL), LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_null(v.trainer);
        ck_assert_ptr_nonnull(strstr(lattice_last_error(), "reverse KL needs the teacher's dense"));
        rig_close(&v);
    }
    lattice_teacher_destroy(fd);
    lattice_teacher_destroy(fs);
    lattice_teacher_destroy(ff);
    /* files that are not logits files */
    ck_assert_int_eq(lattice_model_save(w.model, dense), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_create_file(dense, &fd, err), LATTICE_ERR_FORMAT);
    ck_assert_ptr_null(fd);
    ck_assert_ptr_nonnull(strstr(err, "tokens"));
    ck_assert_int_eq(lattice_teacher_create_file("/nonexistent", &fd, err), LATTICE_ERR_IO);
    remove(dense);
    remove(sparse);
    remove(full);
    rig_close(&w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("teacher");
    TCase *tt = tcase_create("teacher");
    tcase_add_test(tt, test_init_student);
    tcase_add_test(tt, test_callback_teacher);
    tcase_add_test(tt, test_file_teacher);
    suite_add_tcase(s, tt);
    return tu_run(s);
}
