#include "model_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lattice_teacher {
    lattice_model *model; /* borrowed; NULL for a callback teacher */
    lattice_teacher_fn fn;
    void *user;
    int vocab, max_batch, max_seq;
    float *buf; /* callback teachers' logits */
    char err[LATTICE_ERRMSG_MAX];
};

#define FAIL(t, st, ...) lattice__set_error((t)->err, (st), __VA_ARGS__)

lattice_status lattice_teacher_create_model(lattice_model *model, lattice_teacher **out)
{
    if (!out)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!model)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_teacher *t = calloc(1, sizeof(*t));
    if (!t)
        return LATTICE_ERR_OUT_OF_MEMORY;
    t->model = model;
    t->vocab = model->p.vocab_size;
    t->max_batch = model->p.max_batch;
    t->max_seq = model->p.max_seq;
    *out = t;
    return LATTICE_OK;
}

lattice_status lattice_teacher_create_callback(lattice_teacher_fn fn, void *user, int vocab_size,
                                               int max_batch, int max_seq, lattice_teacher **out)
{
    if (!out)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!fn || vocab_size < 1 || max_batch < 1 || max_seq < 1 ||
        (double)vocab_size * max_batch * max_seq > (double)(SIZE_MAX / 8))
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_teacher *t = calloc(1, sizeof(*t));
    if (!t)
        return LATTICE_ERR_OUT_OF_MEMORY;
    t->fn = fn;
    t->user = user;
    t->vocab = vocab_size;
    t->max_batch = max_batch;
    t->max_seq = max_seq;
    t->buf = malloc(sizeof(float) * (size_t)vocab_size * max_batch * max_seq);
    if (!t->buf) {
        free(t);
        return LATTICE_ERR_OUT_OF_MEMORY;
    }
    *out = t;
    return LATTICE_OK;
}

void lattice_teacher_destroy(lattice_teacher *t)
{
    if (!t)
        return;
    free(t->buf);
    free(t);
}

const char *lattice_teacher_errmsg(const lattice_teacher *t)
{
    return t ? t->err : "no teacher (NULL handle)";
}

int lattice_teacher_vocab_size(const lattice_teacher *t) { return t ? t->vocab : 0; }

lattice_status lattice_teacher_logits(lattice_teacher *t, const int32_t *tokens, int batch,
                                      int seq, const float **logits)
{
    if (!t)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (!tokens || !logits)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "tokens and logits must not be NULL");
    *logits = NULL;
    if (batch < 1 || seq < 1 || batch > t->max_batch || seq > t->max_seq)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "batch %d x %d beyond the teacher's %d x %d",
                    batch, seq, t->max_batch, t->max_seq);
    const float *z;
    if (t->model) {
        lattice_status st = lattice_model_forward(t->model, tokens, batch, seq);
        if (st != LATTICE_OK)
            return FAIL(t, st, "teacher model: %s", lattice_model_errmsg(t->model));
        z = lattice_model_logits(t->model);
    } else {
        if (t->fn(t->user, tokens, batch, seq, t->vocab, t->buf) != 0)
            return FAIL(t, LATTICE_ERR_BACKEND, "the teacher callback reported failure");
        z = t->buf;
    }
    const long n = (long)batch * seq * t->vocab;
    for (long i = 0; i < n; i++)
        if (!isfinite(z[i]))
            return FAIL(t, LATTICE_ERR_NON_FINITE, "teacher logit %ld is not finite", i);
    *logits = z;
    return LATTICE_OK;
}

double lattice_teacher_flops(const lattice_teacher *t, int batch, int seq)
{
    return t && t->model ? lattice_model_flops(t->model, batch, seq, 0) : 0.0;
}

static void copy_floats(float *dst, const float *src, size_t n)
{
    memcpy(dst, src, sizeof(float) * n);
}

lattice_status lattice_teacher_init_student(lattice_teacher *t, lattice_model *s)
{
    if (!t || !s)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_model *m = t->model;
    if (!m)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG, "only a model teacher can initialise a student");
    if (m->p.vocab_size != s->p.vocab_size || m->p.d_model != s->p.d_model)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                    "teacher (vocab %d, d_model %d) and student (vocab %d, d_model %d) differ",
                    m->p.vocab_size, m->p.d_model, s->p.vocab_size, s->p.d_model);
    if (m->norm.placement == LATTICE_NORM_POST)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG, "a post-norm teacher has no final norm to copy");
    if (m->norm.kind != s->norm.kind)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG, "teacher and student norm kinds differ");
    const size_t vd = (size_t)s->p.vocab_size * s->p.d_model, d = (size_t)s->p.d_model;
    copy_floats(s->wte, m->wte, vd);
    if (s->whead != s->wte)
        copy_floats(s->whead, m->whead, vd);
    copy_floats(s->bnorm.w, m->bnorm.w, d);
    if (s->bnorm.b)
        copy_floats(s->bnorm.b, m->bnorm.b, d);
    s->trainable_embedding = 0;
    return LATTICE_OK;
}
