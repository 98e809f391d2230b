/* The preset: its keys, recipes, comparisons, probes and shapes (its arms: preset_arms.c). */
#include "preset.h"

#include "design.h"

#include "files.h"
#include "paper.h"
#include "plan.h"
#include "preset_json.h"
#include "runs.h"

#include <sys/stat.h>

/* lattice_distill_kl_direction's values by name */
static const char *const kl_names[] = {"forward", "reverse"};

/* Every key a preset may hold, by path; anything else is an error. "*" marks
 * the elements of a list. */
static const char *const known_keys[] = {
    "name", "about", "seeds", "threads", "backend", "gemm_precision", "design", "data", "teacher", "student", "train", "arms", "compare",
    "interactions",
    "probes", "probe_every", "require_go", "probes.*.name", "probes.*.layers", "probes.*.steps",
    "probes.*.warmup", "probes.*.lr", "probes.*.lr_shape", "probes.*.min_lr",
    "probes.*.weight_decay", "probes.*.beta2", "probes.*.decay_fraction", "probes.*.seq_len", "probes.*.batch_size",
    "probes.*.init_gain", "probes.*.init_std",
    "data.train", "data.val", "data.seq_len", "data.batch_size", "data.split_long",
    "data.separator",
    "teacher.layers", "teacher.steps", "teacher.lr", "teacher.warmup", "teacher.init_gain",
    "teacher.init_std", "teacher.min_lr", "teacher.lr_shape", "teacher.weight_decay",
    "teacher.beta2", "teacher.seq_len", "teacher.batch_size", "teacher.decay_fraction",
    "student.d_model", "student.n_heads", "student.n_kv_heads", "student.head_dim", "student.d_ff",
    "student.blocks", "student.block_size", "student.qk_norm", "student.rope_theta",
    "student.init_gain", "student.init_std",
    "train.steps_per_phase", "train.lr", "train.lr_per_std", "train.min_lr", "train.warmup",
    "train.clip", "train.alpha", "train.gamma", "train.tau", "train.eval_every",
    "train.eval_batches", "train.final_eval_batches", "train.lr_shape", "train.weight_decay",
    "train.beta2", "train.decay_fraction", "train.kl_direction",
    "arms.*.name", "arms.*.placement", "arms.*.residual_scale", "arms.*.schedule", "arms.*.phases",
    "arms.*.block_init", "arms.*.train_boundary", "arms.*.rewind_data", "arms.*.data",
    "arms.*.init_gain",
    "arms.*.from", "arms.*.block_norm", "arms.*.block_rescale", "arms.*.massive_offset", "arms.*.massive_layer",
    "arms.*.massive_channel",
    "arms.*.train", "arms.*.train.lr", "arms.*.train.min_lr", "arms.*.train.lr_shape",
    "arms.*.train.decay_fraction", "arms.*.train.weight_decay", "arms.*.train.beta2",
    "arms.*.train.warmup", "arms.*.train.clip", "arms.*.train.alpha", "arms.*.train.gamma",
    "arms.*.train.tau", "arms.*.train.kl_direction", "arms.*.train.steps_per_phase",
    "arms.*.phases.*.steps", "arms.*.phases.*.tokens", "arms.*.phases.*.active_layers",
    "arms.*.phases.*.train_from", "arms.*.phases.*.reset_optimizer", "arms.*.phases.*.block_init",
    "arms.*.phases.*.rewind_data", "arms.*.phases.*.train_boundary",
};

/* The LR's shape after warmup in object o (named where): lr_shape cosine
 * (the default; to min_lr, default lr / floor_div), constant (min_lr = lr), or
 * wsd (held, then linear to min_lr over the last decay_fraction, default
 * 0.2, of the steps after warmup). *decay: the fraction, or -1 unless wsd. */
static void lr_shape(json_reader *rd, json_object *o, const char *where, double lr, double floor_div,
                     double *min_lr, double *decay)
{
    static const char *const shapes[] = {"cosine", "constant", "wsd"};
    const int shape = get_enum(rd, o, "lr_shape", where, shapes, 3, 0);
    if (shape == 1 && member(o, "min_lr"))
        die("preset: %s with lr_shape constant: a constant LR has no floor", json_said_at(rd, where, "min_lr"));
    if (shape != 2 && member(o, "decay_fraction"))
        die("preset: %s needs lr_shape wsd (the share of the steps after "
            "warmup spent decaying)", json_said_at(rd, where, "decay_fraction"));
    *min_lr = shape == 1 ? lr : get_d(rd, o, "min_lr", lr / floor_div);
    *decay = shape == 2 ? get_d(rd, o, "decay_fraction", 0.2) : -1.0;
    if (shape == 2 && !(*decay >= 0.0 && *decay <= 1.0))
        die("preset: %s %g must lie in [0, 1]", json_said_at(rd, where, "decay_fraction"), *decay);
}

/* Without lr_shape in o, the inherited shape: its decay fraction (< 0 unless
 * wsd), which o's decay_fraction may replace when the shape is wsd. */
static double inherit_decay(json_reader *rd, json_object *o, const char *where, double decay)
{
    if (!member(o, "decay_fraction"))
        return decay;
    if (decay < 0)
        die("preset: %s needs lr_shape wsd (the share of the steps after "
            "warmup spent decaying)", json_said_at(rd, where, "decay_fraction"));
    decay = get_d(rd, o, "decay_fraction", decay);
    if (!(decay >= 0.0 && decay <= 1.0))
        die("preset: %s %g must lie in [0, 1]", json_said_at(rd, where, "decay_fraction"), decay);
    return decay;
}

/* An arm's optimizer recipe: the preset's train section, with the keys of
 * the arm's own "train" object (t, may be NULL) replacing its keys. Without
 * lr_shape the arm keeps the preset's shape (a cosine's floor in the same
 * proportion to the LR). */
/* The distillation temperature at key (a path from where rd stands): the
 * library's range, refused by its path before any run. */
static void check_tau(json_reader *rd, const char *key, double tau)
{
    if (!(tau >= LATTICE_DISTILL_TAU_MIN && tau <= LATTICE_DISTILL_TAU_MAX))
        die("preset: %s must be in %g..%g (the distillation temperature)", json_path(rd, key),
            (double)LATTICE_DISTILL_TAU_MIN, (double)LATTICE_DISTILL_TAU_MAX);
}

void arm_recipe(json_reader *rd, const preset *p, arm *a, json_object *t, const char *where)
{
    a->train_json[0] = 0;
    a->lr = p->lr;
    a->min_lr = p->min_lr;
    a->decay = p->decay;
    a->weight_decay = p->weight_decay;
    a->beta2 = p->beta2;
    a->warmup = p->warmup;
    a->lr_given = 0;
    a->clip = p->clip;
    a->alpha = p->alpha;
    a->gamma = p->gamma;
    a->tau = p->tau;
    a->kl_direction = p->kl_direction;
    a->steps_per_phase = p->steps_per_phase;
    a->own_settings = 0;
    if (!t)
        return;
    char w[96];
    snprintf(w, sizeof w, "%s.train", where);
    if (!json_object_is_type(t, json_type_object))
        die("preset: %s must be an object", json_said(rd, w));
    const char *js = json_object_to_json_string_ext(t, JSON_C_TO_STRING_PLAIN);
    if (strlen(js) >= sizeof a->train_json)
        die("preset: %s is too long", json_said(rd, w));
    snprintf(a->train_json, sizeof a->train_json, "%s", js);
    json_at(rd, w);
    a->lr_given = member(t, "lr") != NULL;
    a->lr = get_lr(rd, t, "lr", p->lr);
    if (member(t, "lr_shape")) {
        lr_shape(rd, t, w, a->lr, 100, &a->min_lr, &a->decay);
    } else {
        a->decay = inherit_decay(rd, t, w, p->decay);
        a->min_lr = member(t, "min_lr") ? get_d(rd, t, "min_lr", 0) : p->min_lr / p->lr * a->lr;
    }
    a->weight_decay = get_d(rd, t, "weight_decay", p->weight_decay);
    a->beta2 = member(t, "beta2") ? get_d(rd, t, "beta2", 0.95) : p->beta2;
    if (a->beta2 >= 1.0)
        die("preset: %s must be below 1", json_said_at(rd, w, "beta2"));
    a->warmup = get_i(rd, t, "warmup", p->warmup, 0, 1 << 30);
    /* the loss, the clip and the phase length: the preset's unless the arm sets them */
    static const char *const own[] = {"clip", "alpha", "gamma", "tau", "kl_direction",
                                      "steps_per_phase"};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        a->own_settings |= member(t, own[k]) != NULL;
    a->clip = get_d(rd, t, "clip", p->clip);
    a->alpha = get_d(rd, t, "alpha", p->alpha);
    a->gamma = get_d(rd, t, "gamma", p->gamma);
    a->tau = get_d(rd, t, "tau", p->tau);
    if (member(t, "tau"))
        check_tau(rd, "tau", a->tau);
    a->kl_direction = get_enum(rd, t, "kl_direction", w, kl_names, 2, p->kl_direction);
    a->steps_per_phase = get_i(rd, t, "steps_per_phase", p->steps_per_phase, 1, 1 << 30);
    json_at(rd, where);
}

/* Element j of list k of key (compare, interactions): one of the preset's
 * arms, copied to dst. */
static void arm_in_list(const preset *p, json_object *list, const char *key, size_t k, int j,
                        char *dst, size_t n)
{
    json_object *v = json_object_array_get_idx(list, j);
    const char *name = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    int found = 0;
    for (int a = 0; name && a < p->n_arms && !found; a++)
        found = strcmp(p->arms[a].name, name) == 0;
    if (!found)
        die("preset: %s[%zu][%d] must name one of the preset's arms%s%s", key, k, j,
            name ? ", not " : "", name ? name : "");
    snprintf(dst, n, "%s", name);
}

/* interactions: [["pre-joint", "post-joint", "pre-grow", "post-grow"], ...]:
 * I = (post-grow - pre-grow) - (post-joint - pre-joint), paired by seed, for
 * arms the paper's rows do not cover (another recipe, say). */
static void parse_interactions(preset *p, json_object *c)
{
    if (!c)
        return;
    if (!json_object_is_type(c, json_type_array) || json_object_array_length(c) > MAX_INTERACT)
        die("preset: interactions must be a list of at most %d lists of 4 arms", MAX_INTERACT);
    for (size_t k = 0; k < json_object_array_length(c); k++) {
        json_object *four = json_object_array_get_idx(c, k);
        if (!json_object_is_type(four, json_type_array) || json_object_array_length(four) != 4)
            die("preset: interactions[%zu] must list 4 arms: [pre joint, post joint, pre grow, "
                "post grow]", k);
        for (int j = 0; j < 4; j++)
            arm_in_list(p, four, "interactions", k, j, p->interact[k][j], sizeof p->interact[k][j]);
        p->n_interact++;
    }
}

/* compare: [["a", "b"], ...]: paired rows b - a in the report. */
static void parse_compare(preset *p, json_object *c)
{
    if (!c)
        return;
    if (!json_object_is_type(c, json_type_array) || json_object_array_length(c) > MAX_ARMS)
        die("preset: compare must be a list of at most %d pairs [\"arm\", \"arm\"]", MAX_ARMS);
    for (size_t k = 0; k < json_object_array_length(c); k++) {
        json_object *pair = json_object_array_get_idx(c, k);
        if (!json_object_is_type(pair, json_type_array) || json_object_array_length(pair) != 2)
            die("preset: compare[%zu] must be a pair [\"reference arm\", \"arm\"]", k);
        for (int j = 0; j < 2; j++)
            arm_in_list(p, pair, "compare", k, j, p->compare[k][j], sizeof p->compare[k][j]);
        if (strcmp(p->compare[k][0], p->compare[k][1]) == 0)
            die("preset: compare[%zu] compares %s with itself", k, p->compare[k][0]);
        p->n_compare++;
    }
}

/* probes: [{"name": ..., teacher keys to replace}, ...] for --probe. */
static void parse_probes(json_reader *rd, preset *p, json_object *list)
{
    p->probe_every = get_i(rd, p->json, "probe_every", 500, 1, 1 << 30);
    if (!list)
        return;
    if (!json_object_is_type(list, json_type_array) || json_object_array_length(list) > MAX_PROBES)
        die("preset: probes must be a list of at most %d teacher recipes", MAX_PROBES);
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *o = json_object_array_get_idx(list, i);
        char where[32];
        snprintf(where, sizeof where, "probes[%zu]", i);
        if (!json_object_is_type(o, json_type_object))
            die("preset: %s must be an object", where);
        json_at(rd, where);
        probe *q = &p->probes[p->n_probes];
        get_s(rd, o, "name", q->name, sizeof q->name, "");
        if (!q->name[0])
            die("preset: %s needs a name", json_said(rd, where));
        if (!name_ok(json_object_get_string(member(o, "name"))))
            die("preset: %s: the probe name '%s' is not allowed: a name is " NAME_RULE, where,
                json_object_get_string(member(o, "name")));
        for (int k = 0; k < p->n_probes; k++)
            if (strcmp(p->probes[k].name, q->name) == 0)
                die("preset: probe '%s' is listed twice", q->name);
        q->layers = get_i(rd, o, "layers", p->t_layers, 1, 1024);
        q->steps = get_i(rd, o, "steps", p->t_steps, 1, 1 << 30);
        q->warmup = get_i(rd, o, "warmup", p->t_warmup, 0, 1 << 30);
        q->seq_len = get_i(rd, o, "seq_len", p->t_seq_len, 2, 1 << 16);
        q->batch = get_i(rd, o, "batch_size", p->t_batch, 1, 4096);
        q->init_std = member(o, "init_std") ? get_d(rd, o, "init_std", PAPER_INIT_STD)
                      : member(o, "init_gain") ? get_d(rd, o, "init_gain", PAPER_GAIN) / sqrt((double)p->d_model)
                                               : p->t_init_std;
        q->lr = get_lr(rd, o, "lr", p->t_lr);
        /* no lr_shape: the teacher's shape, at this probe's LR */
        if (member(o, "lr_shape")) {
            lr_shape(rd, o, where, q->lr, 10, &q->min_lr, &q->decay);
        } else {
            q->decay = inherit_decay(rd, o, where, p->t_decay);
            q->min_lr = member(o, "min_lr") ? get_d(rd, o, "min_lr", 0)
                        : p->t_min_lr == p->t_lr ? q->lr : p->t_min_lr;
        }
        q->weight_decay = get_d(rd, o, "weight_decay", p->t_weight_decay);
        q->beta2 = member(o, "beta2") ? get_d(rd, o, "beta2", 0.95) : p->t_beta2;
        if (!(q->init_std > 0) || q->beta2 >= 1.0)
            die("preset: %s: the init std must be > 0 and beta2 below 1", where);
        p->n_probes++;
    }
    json_at(rd, "");
}

void preset_for_probe(const preset *p, const probe *q, preset *out)
{
    *out = *p;
    out->t_layers = q->layers;
    out->t_steps = q->steps;
    out->t_warmup = q->warmup;
    out->t_seq_len = q->seq_len;
    out->t_batch = q->batch;
    out->t_init_std = q->init_std;
    out->t_lr = q->lr;
    out->t_min_lr = q->min_lr;
    out->t_weight_decay = q->weight_decay;
    out->t_beta2 = q->beta2;
    out->t_decay = q->decay;
}

/* Every model the preset makes, checked as lattice_model_create would check
 * it: the students at full depth, each arm's with its options and norm, and
 * the teacher. */
static void check_shapes(const preset *p)
{
    char why[LATTICE_ERRMSG_SIZE];
    lattice_model_params mp = model_shape(p, p->blocks * p->block_size, p->init_std, 1);
    if (lattice_model_params_check(&mp, why) != LATTICE_OK)
        die("preset: the student's shape (student.*, data.seq_len, data.batch_size) is not "
            "valid: %s", why);
    for (int i = 0; i < p->n_arms; i++) {
        const arm *a = &p->arms[i];
        lattice_model_params am = mp;
        arm_options(&am, a);
        lattice_norm *n = new_norm(a->placement, a->residual_scale);
        const lattice_status st = lattice_model_estimate(&am, n, NULL, NULL);
        lattice_norm_destroy(n);
        if (st != LATTICE_OK)
            die("preset: arms[%d] ('%s'): %s", i, a->name, lattice_last_error());
    }
    mp = model_shape(p, p->t_layers, p->t_init_std, 1);
    if (lattice_model_params_check(&mp, why) != LATTICE_OK)
        die("preset: the teacher's shape (teacher.layers and the student's width) is not valid: %s",
            why);
}

void check_preset_files(const preset *p)
{
    const char *files[2][2] = {{"data.train", p->train}, {"data.val", p->val}};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(files[k][1], "rb");
        if (f) {
            fclose(f);
            continue;
        }
        const int dflt = !member(p->json, files[k][0]);
        die("preset: %s: cannot read %s: %s%s", files[k][0], files[k][1], strerror(errno),
            dflt ? " (the default corpus: prepare it with python3 examples/data/prepare_austen.py, "
                   "or set LATTICE_REPRODUCE_DATA to a folder with train.txt and val.txt)"
                 : " (a relative path is taken from the preset's folder)");
    }
}

/* A section's (teacher, train) optimizer recipe beyond lr and warmup: the LR's
 * shape (lr_shape above), weight_decay (0) and beta2 (-1: the library's). */
static void recipe(json_reader *rd, json_object *o, const char *sect, double lr, double floor_div, double *min_lr,
                   double *decay, double *weight_decay, double *beta2)
{
    json_object *s = member(o, sect);
    *min_lr = lr / floor_div;
    *decay = -1.0;
    *weight_decay = 0.0;
    *beta2 = -1.0;
    if (!s)
        return;
    json_at(rd, sect); /* messages name sect.key */
    lr_shape(rd, s, sect, lr, floor_div, min_lr, decay);
    *weight_decay = get_d(rd, s, "weight_decay", 0.0);
    *beta2 = member(s, "beta2") ? get_d(rd, s, "beta2", 0.95) : -1.0;
    if (*beta2 >= 1.0)
        die("preset: %s.beta2 must be below 1", sect);
    json_at(rd, "");
}

/* The data's rows and the student's shape: the preset's data and student sections. */
static void parse_shape(json_reader *rd, preset *p, json_object *o)
{
    p->seq_len = get_i(rd, o, "data.seq_len", 128, 2, 1 << 16);
    p->batch = get_i(rd, o, "data.batch_size", 16, 1, 4096);
    p->split_long = get_i(rd, o, "data.split_long", 1, 0, 1);
    {
        json_object *sep = member(o, "data.separator");
        if (sep && json_object_is_type(sep, json_type_string) &&
            (json_object_get_string_len(sep) == 0 ||
             (size_t)json_object_get_string_len(sep) >= sizeof p->separator))
            die("preset: data.separator must be 1 to %zu bytes (it is %d)",
                sizeof p->separator - 1, json_object_get_string_len(sep));
        get_s(rd, o, "data.separator", p->separator, sizeof p->separator, "\f"); /* NUL: refused */
    }
    p->d_model = get_i(rd, o, "student.d_model", 128, 1, 1 << 16);
    p->heads = get_i(rd, o, "student.n_heads", 4, 1, 1024);
    p->kv_heads = get_i(rd, o, "student.n_kv_heads", p->heads, 1, 1024);
    if (!member(o, "student.head_dim")) {
        /* the default, d_model / n_heads, must be a head width RoPE can rotate: say so
         * in the preset's own terms, not as a head_dim the preset never wrote */
        const int hd = p->d_model / p->heads;
        if (p->d_model % p->heads || hd < 2 || hd % 2)
            die("preset: student.head_dim is not given and its default, student.d_model / "
                "student.n_heads = %d / %d, is %s: give student.head_dim (an even number)",
                p->d_model, p->heads,
                p->d_model % p->heads ? "not a whole number" : hd < 2 ? "below 2" : "odd");
    }
    p->head_dim = get_i(rd, o, "student.head_dim", p->d_model / p->heads, 2, 1 << 16);
    p->d_ff = get_i(rd, o, "student.d_ff", 3 * p->d_model, 1, 1 << 20);
    p->blocks = get_i(rd, o, "student.blocks", PAPER_BLOCKS, 1, 64);
    p->block_size = get_i(rd, o, "student.block_size", PAPER_BLOCK_SIZE, 1, 64);
    p->qk_norm = get_i(rd, o, "student.qk_norm", 1, 0, 1);
    p->rope_theta = get_d(rd, o, "student.rope_theta", 10000.0);
}

/* The preset as written goes with the preset as read (json_object_set_userdata). */
static void release_written(json_object *o, void *written)
{
    (void)o;
    json_object_put(written);
}

void load_preset(preset *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    json_reader reader;
    design_naming naming;
    memset(&reader, 0, sizeof reader);
    memset(&naming, 0, sizeof naming);
    json_reader *rd = &reader;
    json_object *o = read_preset_json(path);
    /* a study's results.json holds its preset as written: --preset results.json reruns it */
    json_object *inner = member(o, "preset");
    char data_files[2][1024] = {"", ""}; /* a results.json's corpus, where the study read it */
    if (inner && json_object_is_type(inner, json_type_object) && member(o, "lattice_version")) {
        static const char *const keys[2] = {"data_files.train", "data_files.val"};
        for (int k = 0; k < 2; k++) {
            json_object *v = member(o, keys[k]);
            if (v && json_object_is_type(v, json_type_string) &&
                (size_t)json_object_get_string_len(v) < sizeof data_files[k])
                snprintf(data_files[k], sizeof data_files[k], "%s", json_object_get_string(v));
        }
        json_object_get(inner);
        json_object_put(o);
        o = inner;
    }
    no_nulls(rd, o);
    check_keys(rd, o, known_keys, sizeof known_keys / sizeof known_keys[0]);
    /* the preset as written, before its design adds arms and rows to o */
    if (json_object_deep_copy(o, &p->written, NULL) != 0)
        die("out of memory");
    json_object_set_userdata(o, p->written, release_written); /* freed with o */
    /* a design's arms, comparisons and interactions join the preset's own, and
     * are checked as any arm is, each key named where the design wrote it */
    json_object *own_arms = member(o, "arms");
    naming.from = own_arms && json_object_is_type(own_arms, json_type_array)
                      ? (int)json_object_array_length(own_arms)
                      : 0;
    design_label_levels(o, naming.valued);
    design_expand(o, &p->design);
    naming.d = &p->design;
    naming.base = member(o, "design.base");
    rd->namer = design_namer;
    rd->namer_ctx = &naming;
    if (p->design.n_factors)
        check_keys(rd, o, known_keys, sizeof known_keys / sizeof known_keys[0]);
    p->json = o;
    get_s(rd, o, "name", p->name, sizeof p->name, "custom");
    /* the default output folder is results/NAME */
    if (member(o, "name") && !name_ok(json_object_get_string(member(o, "name"))))
        die("preset: the name '%s' is not allowed: a name is " NAME_RULE,
            json_object_get_string(member(o, "name")));
    preset_data_path(rd, p->train, sizeof p->train, o, "data.train", path, "train.txt");
    preset_data_path(rd, p->val, sizeof p->val, o, "data.val", path, "val.txt");
    /* rerun from a results.json: a data path the preset gives is where the study read it */
    if (data_files[0][0] && member(o, "data.train"))
        snprintf(p->train, sizeof p->train, "%s", data_files[0]);
    if (data_files[1][0] && member(o, "data.val"))
        snprintf(p->val, sizeof p->val, "%s", data_files[1]);
    parse_shape(rd, p, o);
    /* Init: a gain (std = gain / sqrt(d_model)), the paper's by default, or a
     * std given outright. */
    p->init_gain = get_d(rd, o, "student.init_gain", PAPER_GAIN);
    p->init_std = member(o, "student.init_std") ? get_d(rd, o, "student.init_std", PAPER_INIT_STD)
                                                : p->init_gain / sqrt((double)p->d_model);
    if (member(o, "student.init_std"))
        p->init_gain = p->init_std * sqrt((double)p->d_model);
    double t_gain = get_d(rd, o, "teacher.init_gain", PAPER_GAIN);
    p->t_init_std = member(o, "teacher.init_std") ? get_d(rd, o, "teacher.init_std", PAPER_INIT_STD)
                                                  : t_gain / sqrt((double)p->d_model);
    if (!(p->init_std > 0) || !(p->t_init_std > 0))
        die("preset: the init std (or gain) must be > 0");
    p->t_layers = get_i(rd, o, "teacher.layers", 12, 1, 1024);
    p->t_steps = get_i(rd, o, "teacher.steps", 1000, 1, 1 << 30);
    /* LR in the paper's proportion to the init std unless given */
    double lr_per_std = get_lr(rd, o, "train.lr_per_std", PAPER_LR_PER_STD);
    p->t_lr = get_lr(rd, o, "teacher.lr", lr_per_std * p->t_init_std);
    p->t_warmup = get_i(rd, o, "teacher.warmup", 50, 0, 1 << 30);
    p->t_seq_len = get_i(rd, o, "teacher.seq_len", p->seq_len, 2, 1 << 16);
    p->t_batch = get_i(rd, o, "teacher.batch_size", p->batch, 1, 4096);
    recipe(rd, o, "teacher", p->t_lr, 10, &p->t_min_lr, &p->t_decay, &p->t_weight_decay, &p->t_beta2);
    p->steps_per_phase = get_i(rd, o, "train.steps_per_phase", 300, 1, 1 << 30);
    p->lr = get_lr(rd, o, "train.lr", lr_per_std * p->init_std);
    recipe(rd, o, "train", p->lr, 100, &p->min_lr, &p->decay, &p->weight_decay, &p->beta2);
    p->warmup = get_i(rd, o, "train.warmup", 15, 0, 1 << 30);
    p->clip = get_d(rd, o, "train.clip", PAPER_CLIP);
    p->alpha = get_d(rd, o, "train.alpha", PAPER_KD_ALPHA);
    p->gamma = get_d(rd, o, "train.gamma", PAPER_KD_GAMMA);
    p->tau = get_d(rd, o, "train.tau", PAPER_KD_TAU);
    check_tau(rd, "train.tau", p->tau);
    p->kl_direction = get_enum(rd, member(o, "train"), "kl_direction", "train", kl_names, 2,
                               LATTICE_DISTILL_KL_FORWARD);
    p->eval_every = get_i(rd, o, "train.eval_every", 50, 0, 1 << 30);
    p->eval_batches = get_i(rd, o, "train.eval_batches", 8, 0, 1 << 30);
    p->final_eval_batches = get_i(rd, o, "train.final_eval_batches", 0, 0, 1 << 30);
    p->seeds = get_i(rd, o, "seeds", 3, 1, MAX_SEEDS);
    p->threads = get_i(rd, o, "threads", 2, 1, 256);
    char want_backend[32];
    get_s(rd, o, "backend", want_backend, sizeof want_backend, "");
    study_backend_resolve(p, want_backend);
    static const char *const gemm_names[] = {"fp32", "bf16"};
    snprintf(p->gemm_precision, sizeof p->gemm_precision, "%s",
             gemm_names[get_enum(rd, o, "gemm_precision", "", gemm_names, 2, 0)]);
    study_gemm_check(p);
    json_object *arms = member(o, "arms");
    if (arms && !json_object_is_type(arms, json_type_array))
        die("preset: arms must be a list");
    int n = arms ? (int)json_object_array_length(arms) : 0;
    if (n > MAX_ARMS)
        die("preset: at most %d arms", MAX_ARMS);
    for (int i = 0; i < n; i++) {
        parse_arm(rd, p, json_object_array_get_idx(arms, i), i);
        p->arms[i].selected = 1;
    }
    if (!p->n_arms)
        die("preset: no arms to run");
    parse_compare(p, member(o, "compare"));
    parse_interactions(p, member(o, "interactions"));
    parse_probes(rd, p, member(o, "probes"));
    p->require_go = get_i(rd, o, "require_go", 0, 0, 1);
    check_shapes(p);
}
