/* report.md's opening: the study's settings in words (report_words.h). */
#include "report_words.h"

#include <sys/stat.h>

#include "preset.h"
#include "runs.h"

/* Batches in one pass over the training text at the students' rows: the
 * batch that ends the pass counts whole. */
int64_t batches_per_pass(const preset *p)
{
    lattice_data *d = open_data(p, 1);
    lattice_data_batch b;
    lattice_data_position pos = {0, 0};
    int64_t n = 0;
    while (pos.epoch == 0) {
        check(lattice_data_next(d, &b), "data", lattice_data_errmsg(d));
        check(lattice_data_get_position(d, &pos), "data", lattice_data_errmsg(d));
        n++;
    }
    lattice_data_destroy(d);
    /* a pass of whole batches turns the epoch only at the next call: that
     * batch, all of the next pass, is not this pass's */
    return pos.index == p->batch && n > 1 ? n - 1 : n;
}

/* The most batches an arm reads from one place in the text without a rewind. */
int64_t longest_read(const preset *p, const arm *a)
{
    lattice_schedule_phase ph[MAX_PHASES];
    const int n = arm_phases(p, a, ph);
    int64_t run = 0, most = 0;
    for (int k = 0; k < n; k++) {
        run = (ph[k].rewind_data ? 0 : run) + ph[k].steps;
        most = run > most ? run : most;
    }
    return most;
}

/* Arms that read past the end of the training text: what they read after it
 * is the same text again, reshuffled, not new text. */
static void data_passes(FILE *f, const preset *p)
{
    const int64_t pass = batches_per_pass(p);
    int told = 0;
    for (int i = 0; i < p->n_arms; i++) {
        const arm *a = &p->arms[i];
        const int64_t most = longest_read(p, a);
        if (most <= pass)
            continue;
        if (!told++)
            fprintf(f, "Data: one pass over the training text is %lld batches of %d x %d bytes. "
                       "These arms read on past its end, where the text repeats in a new order: "
                       "beyond the first pass their \"fresh\" data is text they have seen.\n\n",
                    (long long)pass, p->batch, p->seq_len);
        fprintf(f, "- `%s`: %lld steps without a rewind, %.2f passes\n", a->name, (long long)most,
                (double)most / (double)pass);
    }
    if (told)
        fprintf(f, "\n");
}

/* A JSON member that is a string, or NULL. */
static const char *member_string(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* The held-out text in words: its path, and the titles of its novels when a
 * manifest.json beside it (examples/data/prepare_austen.py writes one) lists
 * this very file (its name and size) as a split. */
static const char *val_text(const preset *p, char *buf, size_t n)
{
    char cwd[1024], man[1100];
    const size_t c = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    const int inside = c > 0 && strncmp(p->val, cwd, c) == 0 && p->val[c] == '/';
    snprintf(buf, n, "%s", inside ? p->val + c + 1 : p->val); /* relative to here when inside */
    const char *slash = strrchr(p->val, '/'), *base = slash ? slash + 1 : p->val;
    snprintf(man, sizeof man, "%.*smanifest.json", (int)(base - p->val), p->val);
    json_object *m = access(man, R_OK) == 0 ? json_object_from_file(man) : NULL;
    json_object *files, *file, *bytes, *novels;
    struct stat st;
    char split[256];
    const char *dot = strrchr(base, '.');
    snprintf(split, sizeof split, "%.*s", dot ? (int)(dot - base) : (int)strlen(base), base);
    if (m && json_object_object_get_ex(m, "files", &files) &&
        json_object_object_get_ex(files, base, &file) &&
        json_object_object_get_ex(file, "bytes", &bytes) &&
        json_object_is_type(bytes, json_type_int) && stat(p->val, &st) == 0 &&
        json_object_get_int64(bytes) == (int64_t)st.st_size &&
        json_object_object_get_ex(m, "novels", &novels) &&
        json_object_is_type(novels, json_type_object)) {
        int k = 0;
        json_object_object_foreach(novels, key, v)
        {
            (void)key;
            const char *sp = member_string(v, "split"), *title = member_string(v, "title");
            if (sp && title && strcmp(sp, split) == 0)
                snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", k++ ? ", " : " (", title);
        }
        if (k)
            snprintf(buf + strlen(buf), n - strlen(buf), ")");
    }
    json_object_put(m);
    return buf;
}

/* What the row-start token is here, and how it stands to the paper's
 * document-boundary tokens. */
static void row_start_words(FILE *f, const preset *p)
{
    fprintf(f, "**The row-start token.** The boundary statistics here are about position 0 of "
               "each row, the row-start token. %s Position 0 attends only to itself and RoPE is "
               "the identity there, so its residual stream is one fixed vector per model, the "
               "same in every row. The paper's boundary tokens open whole documents: its rows are "
               "documents of about 1k tokens on average, right-padded.\n\n",
            p->split_long
                ? "With split_long, documents are cut into pieces of one row each, and every "
                  "piece opens with the separator token (256): most rows start in the middle of "
                  "a document, and the row-start token is that separator."
                : "Each row is one document, truncated at the row's length or right-padded to "
                  "it, so the row-start token is the boundary token (256) that opens every "
                  "document.");
    if (strcmp(p->separator, "\f") != 0)
        fprintf(f, "Documents are the text between separators of %zu bytes (data.separator), "
                   "not the corpus's chapters.\n\n", strlen(p->separator));
}


static const char *kl_words(int direction)
{
    return direction == LATTICE_DISTILL_KL_REVERSE ? "reverse KL(student || teacher)"
                                                   : "forward KL(teacher || student)";
}

/* Every training setting of the preset, and each arm's where they differ
 * from it (peak LRs as run). */
static void settings_words(FILE *f, const preset *p)
{
    char shape[96], b2[32];
    if (p->beta2 < 0)
        snprintf(b2, sizeof b2, "the library's");
    else
        snprintf(b2, sizeof b2, "%g", p->beta2);
    fprintf(f, "Every run's training settings (an arm's own, where it has any, are listed below): "
               "%d steps per phase; %s LR, peak %.3g, floor %.3g, after %d warmup steps; weight "
               "decay %g, beta2 %s, gradient clip %g; the loss alpha x tau^2 x KL + gamma x CE "
               "with alpha %g, gamma %g, tau %g, %s; evaluation every %d steps over %d "
               "batches, the final one over %s; rows of %d x %d bytes, split_long %d; backend "
               "%s%s, %d thread%s per run.\n\n",
            p->steps_per_phase, lr_shape_words(p->lr, p->min_lr, p->decay, shape, sizeof shape),
            p->lr, p->min_lr, p->warmup, p->weight_decay, b2, p->clip, p->alpha, p->gamma,
            p->tau, kl_words(p->kl_direction), p->eval_every,
            p->eval_batches, p->final_eval_batches ? "its first batches" : "the whole held-out text",
            p->batch, p->seq_len, p->split_long, p->backend, study_gemm_words(p), p->threads,
            p->threads == 1 ? "" : "s");
    /* the rewind rule: said per arm only where the arms differ in it */
    int rewinds = 0;
    for (int i = 0; i < p->n_arms; i++)
        rewinds += p->arms[i].rewind_data != 0;
    const int rewind_differs = rewinds > 0 && rewinds < p->n_arms;
    int own = 0;
    for (int i = 0; i < p->n_arms; i++) {
        const arm *a = &p->arms[i];
        char more[600] = "";
#define MORE(...) snprintf(more + strlen(more), sizeof more - strlen(more), __VA_ARGS__)
        if (a->steps_per_phase != p->steps_per_phase)
            MORE("; %d steps per phase", a->steps_per_phase);
        if (a->clip != p->clip)
            MORE("; gradient clip %g", a->clip);
        if (a->alpha != p->alpha || a->gamma != p->gamma)
            MORE("; loss alpha %g, gamma %g%s", a->alpha, a->gamma,
                 a->alpha == 0 ? " (cross-entropy only)" : "");
        if (a->tau != p->tau)
            MORE("; tau %g", a->tau);
        if (a->kl_direction != p->kl_direction)
            MORE("; %s", kl_words(a->kl_direction));
        if (a->beta2 != p->beta2)
            MORE("; beta2 %g", a->beta2);
#undef MORE
        if (!a->train_json[0] && !more[0])
            continue;
        if (!own++)
            fprintf(f, "Arms whose settings differ from these (peak LRs as run):\n\n");
        if (a->train_json[0]) {
            const double scale = a->lr_given ? 1.0 : arm_std(p, a) / p->init_std;
            fprintf(f, "- `%s`: %s LR %.3g after %d warmup steps, weight decay %g%s\n", a->name,
                    lr_shape_words(a->lr * scale, a->min_lr * scale, a->decay, shape,
                                   sizeof shape),
                    a->lr * scale, a->warmup, a->weight_decay, more);
        } else {
            fprintf(f, "- `%s`: %s\n", a->name, more + 2);
        }
    }
    if (own)
        fprintf(f, "\n");
    if (rewind_differs) { /* which arms restart the data at each phase, which read on */
        for (int pass = 1; pass >= 0; pass--) {
            fprintf(f, "%s", pass ? "Data rewound to the shard's start at every phase: "
                                  : "; read on at phase starts (no rewind): ");
            for (int i = 0, k = 0; i < p->n_arms; i++)
                if ((p->arms[i].rewind_data != 0) == pass)
                    fprintf(f, "%s`%s`", k++ ? ", " : "", p->arms[i].name);
        }
        fprintf(f, ".\n\n");
    }
}

void report_opening(FILE *f, const preset *p)
{
    char shape[96], t_shape[96], val[1400];
    fprintf(f, "# Reproduction: preset `%s`\n\n", p->name);
    fprintf(f, "Students: %d layers (%d blocks x %d), d_model %d, %d heads (%d kv) of %d, d_ff %d, "
               "init std %.4g (gain %.3g / sqrt(d_model)), peak LR %.3g; %d steps per phase, batch "
               "%d x %d bytes; %d paired seed%s; students' recipe: %s LR, weight decay %g. "
               "Teacher: %d layers, init std %.4g, %d steps of %d x %d bytes, %s LR %.3g, weight "
               "decay %g. Validation CE in nats per byte at the scheduled end, over %s%s.\n\n",
            p->blocks * p->block_size, p->blocks, p->block_size, p->d_model, p->heads, p->kv_heads,
            p->head_dim, p->d_ff, p->init_std, p->init_gain, p->lr, p->steps_per_phase, p->batch,
            p->seq_len, p->seeds, p->seeds == 1 ? "" : "s",
            lr_shape_words(p->lr, p->min_lr, p->decay, shape, sizeof shape), p->weight_decay,
            p->t_layers, p->t_init_std, p->t_steps, p->t_batch, p->t_seq_len,
            lr_shape_words(p->t_lr, p->t_min_lr, p->t_decay, t_shape, sizeof t_shape), p->t_lr,
            p->t_weight_decay,
            p->final_eval_batches ? "the first batches of the held-out text (final_eval_batches): "
                                  : "the whole held-out text: ",
            val_text(p, val, sizeof val));
    settings_words(f, p);
    data_passes(f, p);
    row_start_words(f, p);
}
