/* The rows split of a pass: the batch's sequences dealt out to threads, each
 * running the whole pass on its rows through a view of the model. */
#include "model_internal.h"

#include "backend_impl.h"
#include "kernels.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- ops split or rows split ---------------------------------------------
 *
 * A pass uses the backend's threads one of two ways. Ops split: each op runs
 * over the whole batch and splits its own work (a GEMM's rows or columns, a
 * kernel's rows) across the team, joining after every op. Rows split: the
 * batch's sequences are dealt out in contiguous blocks, one per thread, and
 * each thread runs the whole pass (every layer) on its block with serial
 * kernels, through a view: a copy of the model whose activation pointers
 * start at its block. Every op is row-local or sequence-local except the
 * weight gradients, which each thread sums into its own arena; the arenas are
 * then added into the model's in thread order. The block boundaries and the
 * order of that sum depend only on the thread count, so reruns at one count
 * give the same bits. Small shapes take the rows split: their GEMMs are too
 * small to share, and the ops split would join dozens of times per layer. */

/* Per-row multiply-adds of a layer's projections (q/k/v, o, gate/up, down)
 * below which a pass takes the rows split (the study's d64 student: 49k;
 * the d256 benchmark student: 852k). Measured: doc/PERFORMANCE.md. */
#define ROWS_SPLIT_MAX_ROW_MACS 200000L

static int rows_threads(const lattice_model *m)
{
    const lattice_model_params *p = &m->p;
    int nt = m->be->n_threads;
    if (nt < 2 || m->batch < 2 || m->be->parallel == LATTICE_BACKEND_PARALLEL_OPS || !lattice__backend_builtin(m->be))
        return 1;
#ifdef _OPENMP
    if (omp_in_parallel()) /* a caller's thread: no team to split over */
        return 1;
#endif
    const long W = (long)(p->n_heads + 2 * p->n_kv_heads) * p->head_dim;
    const long row_macs =
        (long)p->d_model * (W + (long)p->n_heads * p->head_dim + 3L * p->d_ff);
    if (m->be->parallel == LATTICE_BACKEND_PARALLEL_AUTO && row_macs >= ROWS_SPLIT_MAX_ROW_MACS)
        return 1;
    return nt < m->batch ? nt : m->batch;
}

void lattice__model_split_free(model_split *ws)
{
    free(ws->grads);
    free(ws->red);
    free(ws->views);
    free(ws->hs);
    free(ws->acts);
    free(ws->be);
    free(ws->status);
    free(ws->busy);
    memset(ws, 0, sizeof(*ws));
}

static size_t grads_stride(const lattice_model *m) /* floats, a 64-byte multiple */
{
    return (m->n_params + 15) / 16 * 16;
}

/* The workspace for nt threads: made at the first rows-split pass (and again
 * when the thread count changes), kept to the model's end. */
static lattice_status split_alloc(lattice_model *m, int nt)
{
    model_split *ws = &m->split;
    lattice__model_split_free(ws);
    const lattice_model_params *p = &m->p;
    const long rows = (long)p->max_batch * p->max_seq;
    long red_d = lattice__reduce_scratch(rows, 2 * (long)p->d_model);
    long red_h = lattice__reduce_scratch(rows, 2 * (long)p->head_dim);
    ws->red_floats = (size_t)(red_d > red_h ? red_d : red_h);
    const size_t gbytes = (size_t)(nt - 1) * grads_stride(m) * sizeof(float);
    ws->grads = aligned_alloc(64, gbytes);
    ws->red = malloc((size_t)(nt - 1) * ws->red_floats * sizeof(float));
    ws->views = calloc((size_t)nt, sizeof(lattice_model));
    ws->hs = calloc((size_t)nt * (p->n_layers + 1), sizeof(float *));
    ws->acts = calloc((size_t)nt * p->n_layers, sizeof(layer_acts));
    ws->be = calloc((size_t)nt, sizeof(struct lattice_backend));
    ws->status = calloc((size_t)nt, sizeof(lattice_status));
    ws->busy = calloc((size_t)nt, sizeof(double));
    if (!ws->grads || !ws->red || !ws->views || !ws->hs || !ws->acts || !ws->be || !ws->status ||
        !ws->busy) {
        lattice__model_split_free(ws);
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY,
                    "out of memory for the %d threads' gradient arenas of the rows split", nt);
    }
    memset(ws->grads, 0, gbytes);
    ws->n = nt;
    ws->bytes = gbytes + (size_t)(nt - 1) * ws->red_floats * sizeof(float);
    return LATTICE_OK;
}

/* Thread t's view: the model with every row-indexed buffer starting at its
 * first sequence, its own backend copy (one thread), gradient arena and
 * reduction scratch. */
static void split_view(lattice_model *m, int t)
{
    model_split *ws = &m->split;
    const lattice_model_params *p = &m->p;
    const int nt = ws->n, L = p->n_layers, T = m->seq;
    const long D = p->d_model, H = p->n_heads;
    const int b0 = (int)((long)m->batch * t / nt), b1 = (int)((long)m->batch * (t + 1) / nt);
    const long r0 = (long)b0 * T;
    lattice_model *v = &ws->views[t];
    *v = *m;
    v->batch = b1 - b0;
    struct lattice_backend *be = &ws->be[t];
    /* every field but the hold (last, atomic, counted by other threads): a
     * view's copy is never held */
    memcpy(be, m->be, offsetof(struct lattice_backend, hold));
    atomic_init(&be->hold.state, 0);
    be->n_threads = 1;
    if (be->ops.user == m->be)
        be->ops.user = be;
    v->be = be;
    if (t > 0) {
        v->grads = ws->grads + (size_t)(t - 1) * grads_stride(m);
        v->red = ws->red + (size_t)(t - 1) * ws->red_floats;
        v->prof.on = 0; /* the op times are thread 0's */
    }
#define AT(ptr, width) ((ptr) ? (ptr) + r0 * (width) : NULL)
    v->tokens = m->tokens + r0;
    v->hs = ws->hs + (size_t)t * (L + 1);
    for (int i = 0; i <= L; i++)
        v->hs[i] = AT(m->hs[i], D);
    v->acts = ws->acts + (size_t)t * L;
    for (int i = 0; i < L; i++) {
        /* every buffer of the layer, from the one list of them (model_layout.c) */
        const char *A = (const char *)&m->acts[i];
        char *B = (char *)&v->acts[i];
        for (int k = 0; k < lattice__n_act_buffers; k++) {
            const act_buffer *b = &lattice__act_buffers[k];
            float *const *from = (float *const *)(A + b->offset);
            *(float **)(B + b->offset) =
                AT(*from, (long)lattice__act_width(m, b->width, (size_t)T));
        }
    }
    for (int k = 0; k < lattice__n_model_act_buffers; k++) { /* and the model's own */
        const act_buffer *b = &lattice__model_act_buffers[k];
        float *const *from = (float *const *)((const char *)m + b->offset);
        *(float **)((char *)v + b->offset) =
            AT(*from, (long)lattice__act_width(m, b->width, (size_t)T));
    }
    v->rowloss = m->rowloss + r0;
    v->ptr_a = m->ptr_a + (long)b0 * H;
    v->ptr_b = m->ptr_b + (long)b0 * H;
    v->ptr_c = m->ptr_c + (long)b0 * H;
#undef AT
}

/* This thread's number in its team and the team's size (0 of 1 without OpenMP). */
static void team_place(int *t, int *T)
{
#ifdef _OPENMP
    *t = omp_get_thread_num();
    *T = omp_get_num_threads();
#else
    *t = 0;
    *T = 1;
#endif
}

/* The threads' gradient arenas added into the model's, in thread order. */
static void sum_grads(lattice_model *m)
{
    const model_split *ws = &m->split;
    const int nt = ws->n;
    const size_t stride = grads_stride(m);
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        int t, T;
        team_place(&t, &T);
        for (int e = 0; e < m->n_tensors; e++) {
            const tensor_entry *te = &m->tensors[e];
            if (!lattice__tensor_updatable(m, te))
                continue;
            const size_t off = (size_t)(te->data - m->params);
            const size_t n = (size_t)(te->rows * te->cols);
            const size_t lo = n * t / T, hi = n * (t + 1) / T;
            float *g = m->grads + off;
            for (size_t j = lo; j < hi; j++) {
                float sum = g[j];
                for (int k = 1; k < nt; k++)
                    sum += ws->grads[(size_t)(k - 1) * stride + off + j];
                g[j] = sum;
            }
        }
    }
}

/* A pass's failure: out of memory inside it (a bf16 GEMM's primitive or
 * scratch) said in the model's own message as well, which the GEMM's refusal
 * did not write (it went to lattice_last_error() of the thread that ran it:
 * this one's, its detail kept, where the pass ran here alone). */
static lattice_status pass_failed(lattice_model *m, lattice_status st, int backward, int here)
{
    if (st == LATTICE_ERR_OUT_OF_MEMORY)
        return FAIL(m, st, "out of memory during %s (in bf16: a GEMM shape's oneDNN primitive "
                    "or its operands' scratch)%s%s", backward ? "backward" : "forward",
                    here ? ": " : "", here ? lattice_last_error() : "");
    return st;
}

/* One pass over the batch the model holds, split as rows_threads says. */
lattice_status lattice__model_run_pass(lattice_model *m, lattice_status (*pass)(lattice_model *),
                                       int backward)
{
    const int nt = rows_threads(m);
    m->prof.rows_threads = nt;
    if (nt < 2)
        return pass_failed(m, pass(m), backward, 1);
    if (m->split.n != nt)
        TRY(split_alloc(m, nt));
    model_split *ws = &m->split;
    for (int t = 0; t < nt; t++)
        split_view(m, t);
    /* wall time only: the process's CPU time sums the team */
    const int clock = m->prof.on == LATTICE_PROF_WALL ? LATTICE_PROF_WALL : 0;
    double *busy = ws->busy;
    memset(busy, 0, sizeof(double) * (size_t)nt);
    const double t0 = clock ? lattice__prof_clock(clock) : 0.0;
#pragma omp parallel num_threads(nt)
    {
        int t, T;
        team_place(&t, &T);
        const double b0 = clock ? lattice__prof_clock(clock) : 0.0;
        for (int k = t; k < nt; k += T) /* every view, however many threads came */
            ws->status[k] = pass(&ws->views[k]);
        if (clock)
            busy[t] = lattice__prof_clock(clock) - b0;
    }
    const double region = clock ? lattice__prof_clock(clock) - t0 : 0.0;
    const double wait = m->prof.rows_wait_secs, fork = m->prof.rows_fork_secs;
    m->prof = ws->views[0].prof;
    m->prof.rows_threads = nt;
    if (clock) {
        double slowest = 0.0;
        for (int t = 0; t < nt; t++)
            slowest = busy[t] > slowest ? busy[t] : slowest;
        m->prof.rows_wait_secs = wait + (slowest - busy[0]);
        m->prof.rows_fork_secs = fork + (region > slowest ? region - slowest : 0.0);
    }
    for (int t = 0; t < nt; t++)
        if (ws->status[t] != LATTICE_OK)
            return pass_failed(m, ws->status[t], backward, 0);
    if (backward)
        PROF(LATTICE_OP_GRAD_SUM, sum_grads(m));
    return LATTICE_OK;
}
