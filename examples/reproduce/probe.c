/* Teacher recipes side by side (--probe). */
#include "probe.h"

#include "files.h"

#include <pthread.h>

#include "preset.h"
#include "runs.h"
#include "teacher.h"

#define MAX_CHECKS 512

typedef struct check_point {
    int64_t step;
    double val_ce;
    gonogo g;
} check_point;

typedef struct probe_run {
    preset p; /* the preset with this probe's teacher recipe */
    const probe *q;
    check_point pts[MAX_CHECKS];
    int n;
    double seconds;
} probe_run;

typedef struct probe_pool {
    probe_run *runs;
    int n, next;
    pthread_mutex_t lock;
} probe_pool;

/* The teacher of one probe, trained step by step on its own rows; every
 * probe_every steps (and at the end) its val CE and go/no-go on its rows. */
static void train_probe(probe_run *r)
{
    const preset *p = &r->p;
    const double t0 = ex_now();
    lattice_backend *be = study_backend(p, p->threads);
    /* evaluated here, every probe_every steps, not by the trainer */
    teacher_trainer tt;
    teacher_trainer_open(p, be, 0, NULL, "probe trainer", &tt);
    lattice_model *t = tt.model;
    lattice_data *d = tt.data;
    lattice_trainer *tr = tt.trainer;
    for (int64_t step = 1; step <= p->t_steps; step++) {
        check(lattice_trainer_step(tr, NULL), r->q->name, lattice_trainer_errmsg(tr));
        if ((step % p->probe_every == 0 || step == p->t_steps) && r->n < MAX_CHECKS) {
            check_point *c = &r->pts[r->n++];
            c->step = step;
            check(lattice_model_evaluate(t, d, p->eval_batches, &c->val_ce), "probe evaluation",
                  lattice_model_errmsg(t));
            measure_gonogo(t, d, &c->g);
            say("probe %s: step %lld, val CE %.4f, largest boundary/regular RMS %.2f (after layer "
                "%d), kurtosis up to %.1f, sink heads up to %.0f%%, top/median up to %.1f\n",
                r->q->name, (long long)step, c->val_ce, c->g.max_ratio, c->g.max_layer,
                c->g.max_kurt, 100 * c->g.max_sink_rate, c->g.max_top_ratio);
        }
    }
    lattice_model_destroy(teacher_trainer_close(&tt));
    lattice_backend_destroy(be);
    r->seconds = ex_now() - t0;
}

static void *probe_worker(void *arg)
{
    probe_pool *pl = arg;
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        const int k = pl->next < pl->n ? pl->next++ : -1;
        pthread_mutex_unlock(&pl->lock);
        if (k < 0)
            return NULL;
        train_probe(&pl->runs[k]);
    }
}

static void write_table(FILE *f, const probe_run *runs, int n)
{
    fprintf(f, "| probe | recipe | step | val CE | largest boundary/regular RMS (after layer) | "
               "largest kurtosis | most sink heads | largest top/median | go/no-go |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const preset *p = &runs[i].p;
        char recipe[256], shape[96];
        snprintf(recipe, sizeof recipe, "%d layers, %d x %d bytes, %s LR %.3g, weight decay %g",
                 p->t_layers, p->t_batch, p->t_seq_len,
                 lr_shape_words(p->t_lr, p->t_min_lr, p->t_decay, shape, sizeof shape), p->t_lr,
                 p->t_weight_decay);
        for (int k = 0; k < runs[i].n; k++) {
            const check_point *c = &runs[i].pts[k];
            fprintf(f, "| %s | %s | %lld | %.4f | %.2f (%d) | %.1f | %.0f%% | %.1f | %s |\n",
                    runs[i].q->name, k == 0 ? recipe : "", (long long)c->step, c->val_ce,
                    c->g.max_ratio, c->g.max_layer, c->g.max_kurt, 100 * c->g.max_sink_rate,
                    c->g.max_top_ratio, c->g.max_ratio >= 3 ? "GO" : "NO-GO");
        }
    }
}

void run_probes(const preset *p, const char *dir, int jobs)
{
    if (p->n_probes == 0)
        die("--probe: the preset has no probes (a list of teacher recipes, see "
            "presets/README.md)");
    probe_pool pl = {NULL, p->n_probes, 0, PTHREAD_MUTEX_INITIALIZER};
    pl.runs = calloc((size_t)p->n_probes, sizeof(probe_run));
    if (!pl.runs)
        die("out of memory");
    for (int i = 0; i < p->n_probes; i++) {
        preset_for_probe(p, &p->probes[i], &pl.runs[i].p);
        pl.runs[i].q = &p->probes[i];
    }
    if (jobs > p->n_probes)
        jobs = p->n_probes;
    say("probe: %d teacher recipes, %d at a time x %d thread%s, go/no-go every %d steps on each "
        "teacher's own rows\n",
        p->n_probes, jobs, p->threads, p->threads > 1 ? "s" : "", p->probe_every);
    pthread_t th[MAX_PROBES];
    for (int j = 0; j < jobs; j++)
        if (pthread_create(&th[j], NULL, probe_worker, &pl) != 0)
            die("cannot start probe worker %d: %s", j + 1, strerror(errno));
    for (int j = 0; j < jobs; j++)
        pthread_join(th[j], NULL);
    write_table(stdout, pl.runs, pl.n);
    char path[2048];
    snprintf(path, sizeof path, "%s/probe.md", dir);
    outfile o;
    out_open(&o, path);
    FILE *f = o.f;
    fprintf(f, "# Teacher probes: preset `%s`\n\nEvery %d steps, each teacher's validation CE "
               "(nats/byte, %d validation batches of its own rows; 0 = all) and the go/no-go "
               "figures on its first validation batch: the per-token RMS of the residual stream "
               "after each layer, boundary tokens (position 0 of each row) over regular ones. GO: "
               "a ratio of 3 or more.\n\n",
            p->name, p->probe_every, p->eval_batches);
    write_table(f, pl.runs, pl.n);
    for (int i = 0; i < pl.n; i++)
        fprintf(f, "%s%s %.0f s", i ? "," : "\nWall time per probe:", pl.runs[i].q->name,
                pl.runs[i].seconds);
    fprintf(f, ".\n");
    out_commit(&o);
    snprintf(path, sizeof path, "%s/probe.csv", dir);
    out_open(&o, path);
    f = o.f;
    fprintf(f, "probe,step,val_ce,max_ratio,max_ratio_layer,max_kurtosis,max_sink_rate,"
               "max_top_over_median");
    for (int k = 1; k <= 16; k++)
        fprintf(f, ",ratio_%d", k);
    fprintf(f, "\n");
    for (int i = 0; i < pl.n; i++)
        for (int k = 0; k < pl.runs[i].n; k++) {
            const check_point *c = &pl.runs[i].pts[k];
            fprintf(f, "%s,%lld,%.6f,%.4f,%d,%.3f,%.4f,%.3f", pl.runs[i].q->name,
                    (long long)c->step, c->val_ce, c->g.max_ratio, c->g.max_layer, c->g.max_kurt,
                    c->g.max_sink_rate, c->g.max_top_ratio);
            for (int l = 1; l <= 16; l++)
                if (l < c->g.n)
                    fprintf(f, ",%.4f", c->g.ratio[l]);
                else
                    fprintf(f, ",");
            fprintf(f, "\n");
        }
    out_commit(&o);
    free(pl.runs);
}
