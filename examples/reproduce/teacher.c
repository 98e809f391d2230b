/* The teacher: trained or loaded from the cache in the output folder, and its go/no-go. */
#include "teacher.h"

#include <dirent.h>

#include "canon.h"
#include "files.h"
#include "paper.h"
#include "preset.h"
#include "runs.h"
#include "store.h"

void teacher_trainer_open(const preset *p, lattice_backend *be, int evaluate, progress *pr,
                          const char *what, teacher_trainer *tt)
{
    tt->model = new_model_rows(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, p->t_layers, p->t_init_std,
                               1000, p->t_batch, p->t_seq_len, NULL);
    tt->data = open_data_rows(p, 1000, p->t_batch, p->t_seq_len);
    tt->optim = new_optim(tt->model, p->t_lr, p->t_min_lr, p->t_warmup, p->t_steps, 1.0,
                          p->t_weight_decay, p->t_beta2, p->t_decay);
    check(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, p->t_layers, 1, p->t_steps,
                                         LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, &tt->schedule),
          "the teacher's schedule (teacher.layers, steps)", NULL);
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_batches = p->eval_batches;
    if (!evaluate)
        tp.eval_every = 0;
    if (pr) {
        tp.on_step = on_step;
        tp.on_eval = on_eval;
        tp.user = pr;
    }
    check(lattice_trainer_create(tt->model, NULL, NULL, tt->data, tt->optim, tt->schedule, &tp,
                                 &tt->trainer),
          what, NULL);
}

lattice_model *teacher_trainer_close(teacher_trainer *tt)
{
    lattice_trainer_destroy(tt->trainer);
    lattice_schedule_destroy(tt->schedule);
    lattice_optim_destroy(tt->optim);
    lattice_data_destroy(tt->data);
    lattice_model *m = tt->model;
    memset(tt, 0, sizeof *tt);
    return m;
}

/* The teacher is cached in the output folder with the settings that made it.
 * What a cached teacher must have been made with: the preset's teacher,
 * student and data sections, and the settings derived from them (a default
 * may change between versions). */
json_object *teacher_want(const preset *p)
{
    json_object *want = json_object_new_object();
    json_object_object_add(want, "teacher", json_object_get(member(p->json, "teacher")));
    json_object_object_add(want, "student", json_object_get(member(p->json, "student")));
    json_object_object_add(want, "data", json_object_get(member(p->json, "data")));
    json_object_object_add(want, "init_std", json_object_new_double(p->t_init_std));
    json_object_object_add(want, "lr", json_object_new_double(p->t_lr));
    json_object_object_add(want, "min_lr", json_object_new_double(p->t_min_lr));
    json_object_object_add(want, "weight_decay", json_object_new_double(p->t_weight_decay));
    json_object_object_add(want, "beta2", json_object_new_double(p->t_beta2));
    json_object_object_add(want, "rows", json_object_new_int(p->t_batch));
    json_object_object_add(want, "row_length", json_object_new_int(p->t_seq_len));
    return want;
}

/* What the teacher is made on besides the preset's settings: the corpus, the
 * threads and the backend (the name the library reports), as teacher.json
 * records them since issue 38. */
json_object *teacher_record_want(const preset *p, const char *corpus_hex, const char *backend)
{
    json_object *want = teacher_want(p);
    json_object_object_add(want, "corpus", json_object_new_string(corpus_hex));
    json_object_object_add(want, "threads", json_object_new_int(p->threads));
    json_object_object_add(want, "backend", json_object_new_string(backend));
    return want;
}

/* teacher.json (format 2, since 0.5): {"format": 2, "settings": what
 * teacher_want gives (since issue 38 with teacher_record_want's corpus,
 * threads and backend), as canonical JSON, "safetensors_xxh64": the file's
 * checksum}, written whole after the file. */
static void write_meta(const char *dir, json_object *settings, const char *hex)
{
    char meta[2048];
    snprintf(meta, sizeof meta, "%s/teacher.json", dir);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "format", json_object_new_int(2));
    json_object_object_add(o, "settings", settings);
    json_object_object_add(o, "safetensors_xxh64", json_object_new_string(hex));
    char *text = canon_json(o);
    json_object_put(o);
    write_file_whole(meta, text, strlen(text));
    free(text);
}

void write_teacher_meta(const preset *p, const char *dir, const char *hex)
{
    write_meta(dir, teacher_want(p), hex);
}

void write_teacher_record(const preset *p, const char *dir, const char *hex,
                          const char *corpus_hex, const char *backend)
{
    write_meta(dir, teacher_record_want(p, corpus_hex, backend), hex);
}

/* A teacher.json written before issue 38 does not say the corpus, threads or
 * backend the teacher was made with. What it lacks is filled in:
 * - corpus and threads: as the runs kept in DIR/runs/ with this teacher file
 *   (their settings name it by its checksum) record them: the current value
 *   when one of them was made with it, else the value they were made with;
 *   the current value when no kept run names the teacher;
 * - backend (no run records it): the current backend.
 * So a committed study's teacher and its kept runs are reused as they were,
 * and a changed corpus or thread count trains the teacher again. */
static void fill_old_record(json_object *have, json_object *want, const char *dir,
                            const char *hex)
{
    static const char *const keys[] = {"corpus", "threads", "backend"};
    int lacks = 0;
    for (size_t k = 0; k < 3; k++)
        lacks |= !member(have, keys[k]);
    if (!lacks)
        return;
    json_object *seen[2] = {NULL, NULL}; /* corpus, threads: another value a run was made with */
    int current[2] = {0, 0};
    char runs[2100];
    snprintf(runs, sizeof runs, "%s/runs", dir);
    DIR *d = opendir(runs);
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".run") != 0 || e->d_name[0] == '.')
            continue;
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", runs, e->d_name);
        json_object *rs = kept_settings(path);
        json_object *t = member(rs, "teacher");
        if (t && json_object_is_type(t, json_type_string) &&
            strcmp(json_object_get_string(t), hex) == 0)
            for (int k = 0; k < 2; k++) {
                json_object *v = member(rs, keys[k]), *w = member(want, keys[k]);
                if (!v)
                    continue;
                if (json_object_equal(v, w))
                    current[k] = 1;
                else if (!seen[k])
                    seen[k] = json_object_get(v);
            }
        json_object_put(rs);
    }
    if (d)
        closedir(d);
    for (size_t k = 0; k < 3; k++) {
        json_object *v = k < 2 && !current[k] && seen[k] ? seen[k] : member(want, keys[k]);
        if (!member(have, keys[k]))
            json_object_object_add(have, keys[k], json_object_get(v));
    }
    for (int k = 0; k < 2; k++)
        json_object_put(seen[k]);
}

int cached_teacher(const preset *p, const char *dir, const char *corpus_hex, const char *backend,
                   char *hex, char *why, size_t why_size)
{
    char path[2048], meta[2048];
    snprintf(path, sizeof path, "%s/teacher.safetensors", dir);
    snprintf(meta, sizeof meta, "%s/teacher.json", dir);
    char *text;
    size_t n;
    if (read_regular(meta, 1 << 20, &text, &n) != 0) {
        if (errno == ENOENT) {
            snprintf(why, why_size, "none in %s", dir);
            return 0;
        }
        die("cannot read %s: %s", meta, strerror(errno));
    }
    json_object *have = json_tokener_parse(text);
    free(text);
    json_object *fmt = member(have, "format"), *settings = member(have, "settings"),
                *sum = member(have, "safetensors_xxh64");
    if (!have || !json_object_is_type(have, json_type_object))
        die("%s is not a teacher record (damaged?): restore it, or run with --retrain-teacher "
            "(the runs kept with the teacher will then run again)", meta);
    if (!fmt) {
        json_object_put(have);
        die("%s was written by 0.4 or before, without the teacher file's checksum: `" PROG
            " --rekey` verifies the teacher against the runs kept with it and records one (or "
            "--retrain-teacher trains a new one; the kept runs then run again)", meta);
    }
    if (json_object_get_int(fmt) != 2 || !settings ||
        !json_object_is_type(settings, json_type_object) || !sum ||
        !json_object_is_type(sum, json_type_string) ||
        strlen(json_object_get_string(sum)) != 16) {
        json_object_put(have);
        die("%s is not a teacher record this version knows: restore it, or run with "
            "--retrain-teacher", meta);
    }
    json_object *want = teacher_record_want(p, corpus_hex, backend);
    fill_old_record(settings, want, dir, json_object_get_string(sum));
    char *a = canon_json(settings), *b = canon_json(want);
    json_object_put(want);
    int same = strcmp(a, b) == 0;
    if (!same) {
        char keys[1200];
        canon_diff(a, b, keys, sizeof keys, 4);
        snprintf(why, why_size, "it was trained with other settings: %s", keys);
    }
    free(a);
    free(b);
    if (same) {
        snprintf(hex, 17, "%s", json_object_get_string(sum));
        uint64_t h;
        char got[17];
        if (xxh_file(path, &h) != 0) {
            if (errno != ENOENT)
                die("cannot read the teacher %s: %s", path, strerror(errno));
            snprintf(why, why_size, "%s is missing", path);
            same = 0;
        } else if (hex64(got, h), strcmp(got, hex) != 0) {
            json_object_put(have);
            die("%s does not match the checksum %s records for it (it was changed or damaged "
                "since it was trained): restore it, or run with --retrain-teacher (the runs kept "
                "with it will then run again)", path, meta);
        }
    }
    json_object_put(have);
    return same;
}

lattice_model *get_teacher(const preset *p, lattice_backend *be, const char *dir, int retrain,
                           const char *corpus_hex, char *hex)
{
    char path[2048], why[1300];
    snprintf(path, sizeof path, "%s/teacher.safetensors", dir);
    lattice_model *t = NULL;
    const char *backend = lattice_backend_get_name(be);
    if (!retrain && cached_teacher(p, dir, corpus_hex, backend, hex, why, sizeof why)) {
        char err[LATTICE_ERRMSG_SIZE];
        if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) != LATTICE_OK)
            die("cannot load the teacher %s, although it matches its checksum: %s (run with "
                "--retrain-teacher to train a new one)", path, err);
        say("teacher: reusing %s\n", path);
        return t;
    }
    if (!retrain && strncmp(why, "none", 4) != 0)
        say("teacher: %s; training again\n", why);
    /* its own rows (default the students'); the copy that teaches is made
     * for the students' rows, below */
    run_result *r = calloc(1, sizeof(*r));
    r->losses = calloc((size_t)p->t_steps + 1, sizeof(double));
    progress pr = {0};
    pr.arm = "teacher";
    pr.n_runs = 0;
    pr.n_phases = 1;
    pr.tty = isatty(2);
    pr.steps_total_all = pr.run_steps = p->t_steps;
    pr.start = pr.run_start = pr.last_line = ex_now();
    pr.res = r;
    teacher_trainer tt;
    teacher_trainer_open(p, be, 1, &pr, "teacher trainer", &tt);
    t = tt.model;
    lattice_trainer *tr = tt.trainer;
    lattice_status st = lattice_trainer_run(tr);
    if (pr.tty)
        fputc('\n', stderr);
    check(st, "teacher training", lattice_trainer_errmsg(tr));
    say("teacher: %d layers, %d steps, val CE %.4f (%.0fs)\n", p->t_layers, p->t_steps,
        r->n_pts ? r->pts[r->n_pts - 1].val_ce : NAN, ex_now() - pr.start);
    /* the old record goes first: a teacher file never sits beside a record of another */
    char meta[2100];
    snprintf(meta, sizeof meta, "%s/teacher.json", dir);
    if (unlink(meta) != 0 && errno != ENOENT)
        die("cannot remove %s: %s", meta, strerror(errno));
    check(lattice_model_save(t, path), "saving the teacher", lattice_model_errmsg(t));
    uint64_t h;
    if (xxh_file(path, &h) != 0)
        die("cannot read back the teacher %s: %s", path, strerror(errno));
    hex64(hex, h);
    write_teacher_record(p, dir, hex, corpus_hex, backend);
    teacher_trainer_close(&tt);
    free(r->losses);
    free(r);
    if (p->t_batch != p->batch || p->t_seq_len != p->seq_len) {
        /* the same weights, sized for the students' rows (as a cached teacher is) */
        lattice_model_destroy(t);
        char err[LATTICE_ERRMSG_SIZE];
        if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) != LATTICE_OK)
            die("cannot load the teacher just saved, %s: %s", path, err);
    }
    return t;
}

/* ---- the teacher's go/no-go ------------------------------------------------------- */


void measure_gonogo(lattice_model *m, lattice_data *d, gonogo *g)
{
    memset(g, 0, sizeof(*g));
    lattice_data_batch b;
    check(lattice_data_get_val_batch(d, 0, &b), "validation batch", lattice_data_errmsg(d));
    lattice_diag *dg;
    check(lattice_diag_create(m, &dg), "diagnostics", NULL);
    kept_scale st[(MAX_LAYERS + 1) * 3];
    check(boundary_stats(dg, m, b.tokens, b.mask, b.batch, b.seq, st, (MAX_LAYERS + 1) * 3),
          "teacher boundary scale", lattice_diag_errmsg(dg));
    g->n = lattice_model_get_active_layers(m) + 1;
    for (int k = 0; k < g->n; k++) {
        g->boundary[k] = st[k * 3 + 1].mean;
        g->regular[k] = st[k * 3].mean;
        g->kurt[k] = st[k * 3 + 2].kurtosis;
        g->ratio[k] = g->regular[k] > 0 ? g->boundary[k] / g->regular[k] : NAN;
        if (k > 0 && g->ratio[k] > g->max_ratio) {
            g->max_ratio = g->ratio[k];
            g->max_layer = k;
        }
        if (k > 0 && g->kurt[k] > g->max_kurt)
            g->max_kurt = g->kurt[k];
    }
    lattice_diag_attention_sinks_result sk[MAX_LAYERS];
    check(attention_sinks(dg, b.tokens, b.batch, b.seq, sk, MAX_LAYERS), "attention sinks",
          lattice_diag_errmsg(dg));
    for (int k = 1; k < g->n; k++) {
        const lattice_diag_attention_sinks_result *x = &sk[k - 1];
        g->mass0[k] = x->mass0;
        g->sink_rate[k] = x->sink_rate;
        g->top_ratio[k] = x->top_ratio;
        g->value_norm0[k] = x->value_norm0;
        g->top_token[k] = x->top_token;
        g->top_dim[k] = x->top_dim;
        g->max_top_ratio = fmax(g->max_top_ratio, x->top_ratio);
        g->max_sink_rate = fmax(g->max_sink_rate, x->sink_rate);
    }
    lattice_diag_destroy(dg);
}

void teacher_gonogo(const preset *p, lattice_model *teacher, gonogo *g)
{
    lattice_data *d = open_data(p, 1000);
    measure_gonogo(teacher, d, g);
    lattice_data_destroy(d);
    say("teacher go/no-go: row-start / regular RMS by layer:");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.2f", g->ratio[k]);
    fputc('\n', stderr);
    say("teacher kurtosis of per-token RMS by layer:");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.1f", g->kurt[k]);
    fputc('\n', stderr);
    say("teacher attention mass on position 0 by layer (sink heads > %.1f):", SINK_THRESHOLD);
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.2f (%.0f%%)", g->mass0[k], 100 * g->sink_rate[k]);
    fputc('\n', stderr);
    say("teacher largest |activation| / median by layer (token:dimension):");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.1f (%lld:%d)", g->top_ratio[k], (long long)g->top_token[k],
                g->top_dim[k]);
    fputc('\n', stderr);
    say("teacher position 0's value norm / the others' by layer:");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.2f", g->value_norm0[k]);
    fputc('\n', stderr);
    say("teacher go/no-go: %s (largest ratio %.2f; the paper's pre-norm streams reach %.0fx)\n",
        g->max_ratio >= 3 ? "GO, row-start tokens carry massive activations"
                          : "NO-GO, no massive row-start activations",
        g->max_ratio, PAPER_BOUNDARY_RATIO_PRE);
}

/* The other ranks' teacher: the one rank 0 left in the output folder. */
lattice_model *load_teacher(const preset *p, lattice_backend *be, const char *dir,
                                   uint64_t want_sum)
{
    char path[2048], err[LATTICE_ERRMSG_SIZE];
    snprintf(path, sizeof path, "%s/teacher.safetensors", dir);
    uint64_t sum = FNV_START;
    if (fnv_file(path, &sum) != 0)
        die("cannot read %s, the teacher rank 0 wrote (%s); with ranks on several machines the "
            "output folder must be on a file system they share, at the same path",
            path, strerror(errno));
    if (sum != want_sum)
        die("%s is not the teacher rank 0 wrote (another file at the same path?); with ranks on "
            "several machines the output folder must be on a file system they share",
            path);
    lattice_model *t;
    if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) != LATTICE_OK)
        die("cannot load the teacher %s: %s", path, err);
    return t;
}

