/* The preset: parse and validate the JSON, named arms, schedules, paths, --arms, --check. */
#include "preset.h"
#include "runs.h"
#include "plan.h"

/* The paper's arms by name. Grow, freeze and single-block replay one shard
 * per phase (the paper's rule); the budget controls read on into fresh data
 * (the paper: "fresh data"). */
static const struct {
    const char *name;
    lattice_norm_placement placement;
    lattice_schedule_preset schedule;
    int replay;
} named_arms[] = {
    {"pre-joint", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"post-joint", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"peri-joint", LATTICE_NORM_PLACEMENT_PERI, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"pre-grow", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"post-grow", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"peri-grow", LATTICE_NORM_PLACEMENT_PERI, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"pre-single", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1},
    {"post-single", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1},
    {"pre-freeze", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_FREEZE, 1},
    {"post-freeze", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_FREEZE, 1},
    {"pre-joint-active", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 0},
    {"post-joint-active", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 0},
    {"pre-joint-total", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 0},
    {"post-joint-total", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 0},
};
#define N_NAMED ((int)(sizeof named_arms / sizeof named_arms[0]))

static const char *const schedule_names[] = {"joint", "grow", "freeze", "single", "joint-active",
                                             "joint-total"};
static const char *const placement_names[] = {"pre", "post", "peri"};
static const char *const block_init_names[] = {"random", "identity", "copy"};

/* The paper's default gain: std 0.02 at width 4096 (0.02 * sqrt(4096)). */
#define PAPER_GAIN 1.28
/* The paper's LR per unit of init std: 1e-4 at std 0.02. */
#define PAPER_LR_PER_STD (1e-4 / 0.02)

/* Every key a preset may hold, by path; anything else is an error. "*" marks
 * the elements of a list. */
static const char *const known_keys[] = {
    "name", "about", "seeds", "threads", "data", "teacher", "student", "train", "arms",
    "data.train", "data.val", "data.seq_len", "data.batch_size", "data.split_long",
    "teacher.layers", "teacher.steps", "teacher.lr", "teacher.warmup", "teacher.init_gain",
    "teacher.init_std",
    "student.d_model", "student.n_heads", "student.n_kv_heads", "student.head_dim", "student.d_ff",
    "student.blocks", "student.block_size", "student.qk_norm", "student.rope_theta",
    "student.init_gain", "student.init_std",
    "train.steps_per_phase", "train.lr", "train.lr_per_std", "train.min_lr", "train.warmup",
    "train.clip", "train.alpha", "train.gamma", "train.tau", "train.eval_every",
    "train.eval_batches", "train.final_eval_batches",
    "arms.*.name", "arms.*.placement", "arms.*.residual_scale", "arms.*.schedule", "arms.*.phases",
    "arms.*.block_init", "arms.*.train_boundary", "arms.*.data", "arms.*.init_gain",
    "arms.*.phases.*.steps", "arms.*.phases.*.tokens", "arms.*.phases.*.active_layers",
    "arms.*.phases.*.train_from", "arms.*.phases.*.reset_optimizer", "arms.*.phases.*.block_init",
    "arms.*.phases.*.rewind_data", "arms.*.phases.*.train_boundary",
};

static void check_keys(json_object *o, const char *path, const char *pattern)
{
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            char p2[256], pat2[256];
            snprintf(p2, sizeof p2, "%s[%zu]", path, i);
            snprintf(pat2, sizeof pat2, "%s.*", pattern);
            check_keys(json_object_array_get_idx(o, i), p2, pat2);
        }
        return;
    }
    if (!json_object_is_type(o, json_type_object))
        return;
    json_object_object_foreach(o, key, val)
    {
        char pat[256], full[256];
        snprintf(pat, sizeof pat, "%s%s%s", pattern, pattern[0] ? "." : "", key);
        snprintf(full, sizeof full, "%s%s%s", path, path[0] ? "." : "", key);
        int ok = 0;
        for (size_t k = 0; k < sizeof known_keys / sizeof known_keys[0] && !ok; k++)
            ok = strcmp(known_keys[k], pat) == 0;
        if (!ok)
            die("preset: unknown key '%s' (a typo? see examples/reproduce/presets/README.md)", full);
        check_keys(val, full, pat);
    }
}

json_object *member(json_object *o, const char *path)
{
    /* "a.b" walks nested objects */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_object *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) {
        if (!cur || !json_object_is_type(cur, json_type_object) ||
            !json_object_object_get_ex(cur, tok, &cur))
            return NULL;
    }
    return cur;
}

static int get_i(json_object *o, const char *path, int fallback, int lo, int hi)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean))
        die("preset: %s must be an integer", path);
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        die("preset: %s = %lld outside %d..%d", path, (long long)x, lo, hi);
    return (int)x;
}

static double get_d(json_object *o, const char *path, double fallback)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        die("preset: %s must be a number", path);
    double x = json_object_get_double(v);
    if (!isfinite(x) || x < 0)
        die("preset: %s must be finite and >= 0", path);
    return x;
}

static void get_s(json_object *o, const char *path, char *dst, size_t n, const char *fallback)
{
    json_object *v = member(o, path);
    if (v && !json_object_is_type(v, json_type_string))
        die("preset: %s must be a string", path);
    snprintf(dst, n, "%s", v ? json_object_get_string(v) : fallback);
}

/* A string member that must be one of names[]; returns its index, or fallback when absent. */
static int get_enum(json_object *o, const char *key, const char *where, const char *const *names,
                    int n, int fallback)
{
    char s[64];
    if (!member(o, key))
        return fallback;
    get_s(o, key, s, sizeof s, "");
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    char known[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
    die("preset: %s.%s = '%s' is not one of: %s", where, key, s, known);
    return -1;
}

/* A path in a preset is relative to the preset's own folder. */
static void resolve_path(char *dst, size_t n, const char *preset_path, const char *rel)
{
    if (rel[0] == '/') {
        snprintf(dst, n, "%s", rel);
        return;
    }
    const char *slash = strrchr(preset_path, '/');
    int dirlen = slash ? (int)(slash - preset_path) : 1;
    snprintf(dst, n, "%.*s/%s", dirlen, slash ? preset_path : ".", rel);
}

static void parse_arm(preset *p, json_object *v, int index)
{
    arm *a = &p->arms[p->n_arms];
    memset(a, 0, sizeof(*a));
    a->residual_scale = 1.0;
    a->train_boundary = -1;
    a->block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM;
    char where[64];
    snprintf(where, sizeof where, "arms[%d]", index);
    const char *name = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    json_object *spec = json_object_is_type(v, json_type_object) ? v : NULL;
    if (!name && !spec)
        die("preset: %s must be an arm's name or an object", where);
    if (spec) {
        get_s(spec, "name", a->name, sizeof a->name, "");
        if (!a->name[0])
            die("preset: %s needs a name", where);
    } else {
        snprintf(a->name, sizeof a->name, "%s", name);
    }
    int named = -1;
    for (int i = 0; i < N_NAMED && named < 0; i++)
        if (strcmp(named_arms[i].name, a->name) == 0)
            named = i;
    if (!spec && named < 0)
        die("preset: unknown arm '%s' (known: pre-/post- joint, grow, single, freeze, joint-active, "
            "joint-total, peri-joint, peri-grow; or give an object with placement and schedule)",
            a->name);
    a->placement = named >= 0 ? named_arms[named].placement : LATTICE_NORM_PLACEMENT_PRE;
    a->schedule = named >= 0 ? (int)named_arms[named].schedule : -1;
    a->replay = named >= 0 ? named_arms[named].replay : 1;
    for (int i = 0; i < p->n_arms; i++)
        if (strcmp(p->arms[i].name, a->name) == 0)
            die("preset: arm '%s' is listed twice", a->name);
    if (spec) {
        a->placement = (lattice_norm_placement)get_enum(spec, "placement", where, placement_names, 3,
                                                        named >= 0 ? (int)a->placement : -1);
        if ((int)a->placement < 0)
            die("preset: %s needs a placement (pre, post or peri)", where);
        a->residual_scale = get_d(spec, "residual_scale", 1.0);
        if (a->residual_scale <= 0)
            die("preset: %s.residual_scale must be > 0", where);
        a->schedule = get_enum(spec, "schedule", where, schedule_names, 6, a->schedule);
        a->block_init = (lattice_schedule_block_init)get_enum(spec, "block_init", where, block_init_names, 3, 0);
        a->train_boundary = member(spec, "train_boundary") ? get_i(spec, "train_boundary", 1, 0, 1) : -1;
        static const char *const data_modes[] = {"continue", "replay"};
        a->replay = get_enum(spec, "data", where, data_modes, 2, a->replay);
        a->init_gain = get_d(spec, "init_gain", 0);
        json_object *ph = member(spec, "phases");
        if (ph) {
            if (!json_object_is_type(ph, json_type_array) || json_object_array_length(ph) == 0 ||
                json_object_array_length(ph) > MAX_PHASES)
                die("preset: %s.phases must be a list of 1..%d phases", where, MAX_PHASES);
            a->schedule = -1;
            const int L = p->blocks * p->block_size;
            for (size_t k = 0; k < json_object_array_length(ph); k++) {
                json_object *e = json_object_array_get_idx(ph, k);
                lattice_schedule_phase *f = &a->phases[a->n_phases++];
                lattice_schedule_phase_init(f);
                f->steps = get_i(e, "steps", member(e, "tokens") ? 0 : p->steps_per_phase, 0, 1 << 30);
                f->tokens = member(e, "tokens") ? (int64_t)get_d(e, "tokens", 0) : 0;
                f->active_layers = get_i(e, "active_layers", L, 1, L);
                f->train_from = get_i(e, "train_from", 0, 0, L - 1);
                f->reset_optimizer = get_i(e, "reset_optimizer", 1, 0, 1);
                f->block_init = (lattice_schedule_block_init)get_enum(e, "block_init", where, block_init_names,
                                                             3, (int)a->block_init);
                f->rewind_data = get_i(e, "rewind_data", k > 0 && a->replay, 0, 1);
                f->train_boundary = get_i(e, "train_boundary", 1, 0, 1);
            }
        } else if (a->schedule < 0) {
            die("preset: %s needs a schedule (%s, ...) or phases", where, schedule_names[0]);
        }
    }
    p->n_arms++;
}

void load_preset(preset *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    json_object *o = json_object_from_file(path);
    if (!o || !json_object_is_type(o, json_type_object))
        die("cannot read the preset %s (missing, or not a JSON object)", path);
    check_keys(o, "", "");
    p->json = o;
    char rel[1024];
    get_s(o, "name", p->name, sizeof p->name, "custom");
    get_s(o, "data.train", rel, sizeof rel, "../../data/austen/train.txt");
    resolve_path(p->train, sizeof p->train, path, rel);
    get_s(o, "data.val", rel, sizeof rel, "../../data/austen/val.txt");
    resolve_path(p->val, sizeof p->val, path, rel);
    p->seq_len = get_i(o, "data.seq_len", 128, 2, 1 << 16);
    p->batch = get_i(o, "data.batch_size", 16, 1, 4096);
    p->split_long = get_i(o, "data.split_long", 1, 0, 1);
    p->d_model = get_i(o, "student.d_model", 128, 1, 1 << 16);
    p->heads = get_i(o, "student.n_heads", 4, 1, 1024);
    p->kv_heads = get_i(o, "student.n_kv_heads", p->heads, 1, 1024);
    p->head_dim = get_i(o, "student.head_dim", p->d_model / p->heads, 2, 1 << 16);
    p->d_ff = get_i(o, "student.d_ff", 3 * p->d_model, 1, 1 << 20);
    p->blocks = get_i(o, "student.blocks", 3, 1, 64);
    p->block_size = get_i(o, "student.block_size", 3, 1, 64);
    p->qk_norm = get_i(o, "student.qk_norm", 1, 0, 1);
    p->rope_theta = get_d(o, "student.rope_theta", 10000.0);
    /* Init: a gain (std = gain / sqrt(d_model)), the paper's by default, or a
     * std given outright. */
    p->init_gain = get_d(o, "student.init_gain", PAPER_GAIN);
    p->init_std = member(o, "student.init_std") ? get_d(o, "student.init_std", 0.02)
                                                : p->init_gain / sqrt((double)p->d_model);
    if (member(o, "student.init_std"))
        p->init_gain = p->init_std * sqrt((double)p->d_model);
    double t_gain = get_d(o, "teacher.init_gain", PAPER_GAIN);
    p->t_init_std = member(o, "teacher.init_std") ? get_d(o, "teacher.init_std", 0.02)
                                                  : t_gain / sqrt((double)p->d_model);
    if (!(p->init_std > 0) || !(p->t_init_std > 0))
        die("preset: the init std (or gain) must be > 0");
    p->t_layers = get_i(o, "teacher.layers", 12, 1, 1024);
    p->t_steps = get_i(o, "teacher.steps", 1000, 1, 1 << 30);
    /* LR in the paper's proportion to the init std unless given */
    double lr_per_std = get_d(o, "train.lr_per_std", PAPER_LR_PER_STD);
    p->t_lr = get_d(o, "teacher.lr", lr_per_std * p->t_init_std);
    p->t_warmup = get_i(o, "teacher.warmup", 50, 0, 1 << 30);
    p->steps_per_phase = get_i(o, "train.steps_per_phase", 300, 1, 1 << 30);
    p->lr = get_d(o, "train.lr", lr_per_std * p->init_std);
    p->min_lr = get_d(o, "train.min_lr", p->lr / 100);
    p->warmup = get_i(o, "train.warmup", 15, 0, 1 << 30);
    p->clip = get_d(o, "train.clip", 0.5);
    p->alpha = get_d(o, "train.alpha", 0.7);
    p->gamma = get_d(o, "train.gamma", 0.3);
    p->tau = get_d(o, "train.tau", 1.0);
    p->eval_every = get_i(o, "train.eval_every", 50, 0, 1 << 30);
    p->eval_batches = get_i(o, "train.eval_batches", 8, 0, 1 << 30);
    p->final_eval_batches = get_i(o, "train.final_eval_batches", 0, 0, 1 << 30);
    p->seeds = get_i(o, "seeds", 3, 1, MAX_SEEDS);
    p->threads = get_i(o, "threads", 2, 1, 256);
    json_object *arms = member(o, "arms");
    if (arms && !json_object_is_type(arms, json_type_array))
        die("preset: arms must be a list");
    int n = arms ? (int)json_object_array_length(arms) : 0;
    if (n > MAX_ARMS)
        die("preset: at most %d arms", MAX_ARMS);
    for (int i = 0; i < n; i++) {
        parse_arm(p, json_object_array_get_idx(arms, i), i);
        p->arms[i].selected = 1;
    }
    if (!p->n_arms)
        die("preset: no arms to run");
}

/* The schedule of an arm: the preset's phases (or the explicit ones), with
 * the arm's block init, data rule and boundary freeze applied. */
lattice_schedule *arm_schedule(const preset *p, const arm *a)
{
    lattice_schedule_phase ph[MAX_PHASES];
    int n = a->n_phases;
    if (a->schedule >= 0) {
        lattice_schedule *s;
        if (lattice_schedule_create_preset((lattice_schedule_preset)a->schedule, p->blocks,
                                           p->block_size, p->steps_per_phase, a->block_init,
                                           &s) != LATTICE_OK)
            die("arm %s: the schedule preset does not fit the student", a->name);
        n = lattice_schedule_get_n_phases(s);
        if (n > MAX_PHASES)
            die("arm %s: too many phases", a->name);
        for (int i = 0; i < n; i++) {
            lattice_schedule_phase_init(&ph[i]);
            lattice_schedule_get_phase(s, i, &ph[i]);
            ph[i].rewind_data = i > 0 && a->replay;
            if (i > 0 && a->train_boundary >= 0)
                ph[i].train_boundary = a->train_boundary;
        }
        lattice_schedule_destroy(s);
    } else {
        memcpy(ph, a->phases, sizeof(ph[0]) * (size_t)n);
    }
    lattice_schedule *s;
    if (lattice_schedule_create(&s) != LATTICE_OK)
        die("out of memory");
    for (int i = 0; i < n; i++)
        if (lattice_schedule_add_phase(s, &ph[i]) != LATTICE_OK)
            die("arm %s: phase %d: %s", a->name, i, lattice_schedule_errmsg(s));
    return s;
}

/* Keep only the named arms (a comma-separated list), in the preset's order. */
void select_arms(preset *p, const char *list)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (int a = 0; a < p->n_arms; a++)
        p->arms[a].selected = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int a = 0; a < p->n_arms; a++)
            if (strcmp(p->arms[a].name, tok) == 0)
                p->arms[a].selected = found = 1;
        if (!found)
            die("--arms: the preset has no arm '%s'", tok);
    }
}

/* The preset as understood: data, init, and every arm's phases. */
void print_preset(const preset *p)
{
    printf("preset %s\ntrain %s\nval %s\n", p->name, p->train, p->val);
    printf("student init_std %.6g (gain %.4g), lr %.6g, min_lr %.6g; teacher %d layers, init_std "
           "%.6g, lr %.6g\n",
           p->init_std, p->init_gain, p->lr, p->min_lr, p->t_layers, p->t_init_std, p->t_lr);
    for (int a = 0; a < p->n_arms; a++) {
        const arm *am = &p->arms[a];
        if (!am->selected)
            continue;
        lattice_schedule *s = arm_schedule(p, am);
        printf("arm %s: %s-norm", am->name, placement_names[am->placement]);
        if (am->residual_scale != 1.0)
            printf(" (residual scale %g)", am->residual_scale);
        printf(", init std %.6g, cost %.4g full-depth steps\n", arm_std(p, am), arm_cost(p, am));
        for (int i = 0; i < lattice_schedule_get_n_phases(s); i++) {
            lattice_schedule_phase ph;
            lattice_schedule_phase_init(&ph);
            lattice_schedule_get_phase(s, i, &ph);
            printf("  phase %d: %lld steps, %d active, train_from %d, reset %d, block_init %s, "
                   "rewind_data %d, train_boundary %d\n",
                   i, (long long)ph.steps, ph.active_layers, ph.train_from, ph.reset_optimizer,
                   block_init_names[ph.block_init], ph.rewind_data, ph.train_boundary);
        }
        lattice_schedule_destroy(s);
    }
}

