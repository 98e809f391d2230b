/* The preset's arms: named arms, an arm's keys and phases, --arms and their
 * listing (--check). */
#include "preset.h"

#include "files.h"
#include "plan.h"
#include "preset_json.h"
#include "runs.h"

/* The paper's arms by name. Grow, freeze and single-block rewind the data to
 * the shard's start at every phase (the paper's rule: one shard, replayed);
 * the budget controls read on into fresh data (the paper: "fresh data"). */
static const struct {
    const char *name;
    lattice_norm_placement placement;
    lattice_schedule_preset schedule;
    int rewind_data;
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

/* An arm's model option `key` (the library's name), within the bounds the
 * library gives for it; without it, the library's default. The rules that
 * join it to other settings are the library's too: check_shapes (preset.c) asks
 * them. */
static double arm_option(json_reader *rd, json_object *spec, const char *key,
                         lattice_model_option option)
{
    double lo, hi, dflt;
    lattice_model_params init;
    lattice_model_params_init(&init);
    check(lattice_model_option_bounds(option, &lo, &hi), json_path(rd, key), NULL);
    check(lattice_model_params_get_option(&init, option, &dflt), json_path(rd, key), NULL);
    if (option != LATTICE_MODEL_OPTION_MASSIVE_OFFSET) /* the arm holds the others as ints */
        return get_i(rd, spec, key, (int)dflt, (int)lo, (int)hi);
    const double v = get_d(rd, spec, key, dflt);
    if (!(v >= lo && v <= hi))
        die("preset: %s = %g outside %g..%g", json_path(rd, key), v, lo, hi);
    return v;
}

/* An arm's block_norm or block_rescale: as the library's, every this many
 * layers (0: none). 0.4's presets wrote 1 for "every block_size layers";
 * that 1 is refused unless the blocks are 1 layer, so that no 0.4 preset
 * silently means every layer. */
static int block_every(json_reader *rd, const preset *p, json_object *spec, const char *key,
                       lattice_model_option option, const char *where)
{
    const int v = (int)arm_option(rd, spec, key, option);
    if (v == 1 && p->block_size != 1)
        die("preset: %s is a layer count since 1.0, as in lattice_model_params: 0.4's 1 "
            "(every block) is the student's block_size, %d", json_said_at(rd, where, key), p->block_size);
    return v;
}

/* An arm's explicit phase k (e, in the arm named where), of a student of L layers. */
static void parse_phase(json_reader *rd, arm *a, json_object *e, size_t k, const char *where,
                        int L)
{
    char pw[96];
    snprintf(pw, sizeof pw, "%s.phases[%zu]", where, k);
    json_at(rd, pw);
    if (!json_object_is_type(e, json_type_object))
        die("preset: %s must be an object", json_said(rd, pw));
    lattice_schedule_phase *f = &a->phases[a->n_phases++];
    lattice_schedule_phase_init(f);
    f->steps = get_i(rd, e, "steps", member(e, "tokens") ? 0 : a->steps_per_phase, 0, 1 << 30);
    const double tok = get_d(rd, e, "tokens", 0);
    /* in range before the conversion: a double beyond int64_t's is undefined */
    if (tok > 4e18 || tok != floor(tok))
        die("preset: %s = %g must be a whole number of tokens up to 4e18", json_said_at(rd, pw, "tokens"),
            tok);
    f->tokens = (int64_t)tok;
    f->active_layers = get_i(rd, e, "active_layers", L, 1, L);
    f->train_from = get_i(rd, e, "train_from", 0, 0, L - 1);
    f->reset_optimizer = get_i(rd, e, "reset_optimizer", 1, 0, 1);
    f->block_init = (lattice_schedule_block_init)get_enum(rd, e, "block_init", pw, block_init_names,
                                                 3, (int)a->block_init);
    f->rewind_data = get_i(rd, e, "rewind_data", k > 0 && a->rewind_data, 0, 1);
    /* the arm's train_boundary (phases after the first) is each phase's default */
    f->train_boundary =
        get_i(rd, e, "train_boundary", k > 0 && a->train_boundary >= 0 ? a->train_boundary : 1,
              0, 1);
}

void parse_arm(json_reader *rd, preset *p, json_object *v, int index)
{
    arm *a = &p->arms[p->n_arms];
    memset(a, 0, sizeof(*a));
    arm_recipe(rd, p, a, NULL, "");
    a->residual_scale = 1.0;
    a->train_boundary = -1;
    a->block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM;
    char where[64];
    snprintf(where, sizeof where, "arms[%d]", index);
    json_at(rd, where);
    const char *name = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    json_object *spec = json_object_is_type(v, json_type_object) ? v : NULL;
    if (!name && !spec)
        die("preset: %s must be an arm's name or an object", json_said(rd, where));
    if (spec) {
        get_s(rd, spec, "name", a->name, sizeof a->name, "");
        if (!a->name[0])
            die("preset: %s needs a name", json_said(rd, where));
    } else {
        if (strlen(name) >= sizeof a->name)
            die("preset: %s: the arm name is %zu bytes long, at most %zu", json_said(rd, where), strlen(name),
                sizeof a->name - 1);
        snprintf(a->name, sizeof a->name, "%s", name);
    }
    /* a name becomes a file name (runs/NAME.seedN.run) and a plot title */
    if (!name_ok(spec ? json_object_get_string(member(spec, "name")) : name))
        die("preset: %s: the arm name '%s' is not allowed: a name is " NAME_RULE, json_said(rd, where),
            spec ? json_object_get_string(member(spec, "name")) : name);
    /* an arm object starts from the named arm of its name, or of its "from" */
    char from[48];
    snprintf(from, sizeof from, "%s", a->name);
    if (spec && member(spec, "from"))
        get_s(rd, spec, "from", from, sizeof from, "");
    int named = -1;
    for (int i = 0; i < N_NAMED && named < 0; i++)
        if (strcmp(named_arms[i].name, from) == 0)
            named = i;
    if (spec && member(spec, "from") && named < 0)
        die("preset: %s = '%s' is not a named arm (pre-/post- joint, grow, single, freeze, "
            "joint-active, joint-total, peri-joint, peri-grow)", json_said_at(rd, where, "from"), from);
    if (!spec && named < 0)
        die("preset: unknown arm '%s' (known: pre-/post- joint, grow, single, freeze, joint-active, "
            "joint-total, peri-joint, peri-grow; or give an object with placement and schedule)",
            a->name);
    a->placement = named >= 0 ? named_arms[named].placement : LATTICE_NORM_PLACEMENT_PRE;
    a->schedule = named >= 0 ? (int)named_arms[named].schedule : -1;
    a->rewind_data = named >= 0 ? named_arms[named].rewind_data : 1;
    for (int i = 0; i < p->n_arms; i++)
        if (strcmp(p->arms[i].name, a->name) == 0)
            die("preset: arm '%s' is listed twice", a->name);
    if (spec) {
        a->placement = (lattice_norm_placement)get_enum(rd, spec, "placement", where, placement_names, 3,
                                                        named >= 0 ? (int)a->placement : -1);
        if ((int)a->placement < 0)
            die("preset: %s needs a placement (pre, post or peri), or \"from\": a named arm to "
                "start from (\"from\": \"post-grow\")", json_said(rd, where));
        a->residual_scale = get_d(rd, spec, "residual_scale", 1.0);
        if (a->residual_scale <= 0)
            die("preset: %s must be > 0", json_said_at(rd, where, "residual_scale"));
        a->schedule = get_enum(rd, spec, "schedule", where, schedule_names, 6, a->schedule);
        a->block_init = (lattice_schedule_block_init)get_enum(rd, spec, "block_init", where, block_init_names, 3, 0);
        a->train_boundary = member(spec, "train_boundary") ? get_i(rd, spec, "train_boundary", 1, 0, 1) : -1;
        if (member(spec, "data")) /* 0.x's name for rewind_data */
            die("preset: %s is rewind_data since 1.0, the library's name: \"rewind_data\": "
                "1 for \"replay\", 0 for \"continue\"", json_said_at(rd, where, "data"));
        a->rewind_data = get_i(rd, spec, "rewind_data", a->rewind_data, 0, 1);
        a->init_gain = get_d(rd, spec, "init_gain", 0);
        a->block_norm = block_every(rd, p, spec, "block_norm", LATTICE_MODEL_OPTION_BLOCK_NORM, where);
        a->block_rescale =
            block_every(rd, p, spec, "block_rescale", LATTICE_MODEL_OPTION_BLOCK_RESCALE, where);
        a->massive_offset =
            arm_option(rd, spec, "massive_offset", LATTICE_MODEL_OPTION_MASSIVE_OFFSET);
        a->massive_layer =
            (int)arm_option(rd, spec, "massive_layer", LATTICE_MODEL_OPTION_MASSIVE_LAYER);
        a->massive_channel =
            (int)arm_option(rd, spec, "massive_channel", LATTICE_MODEL_OPTION_MASSIVE_CHANNEL);
        if (!a->massive_offset && (member(spec, "massive_layer") || member(spec, "massive_channel")))
            die("preset: %s sets massive_layer or massive_channel without massive_offset", json_said(rd, where));
        arm_recipe(rd, p, a, member(spec, "train"), where);
        json_object *ph = member(spec, "phases");
        if (ph && member(spec, "schedule"))
            die("preset: %s has both a schedule and phases: give one (the phases would replace "
                "the schedule)", json_said(rd, where));
        if (ph) {
            if (!json_object_is_type(ph, json_type_array) || json_object_array_length(ph) == 0 ||
                json_object_array_length(ph) > MAX_PHASES)
                die("preset: %s must be a list of 1..%d phases", json_said_at(rd, where, "phases"), MAX_PHASES);
            a->schedule = -1;
            const int L = p->blocks * p->block_size;
            for (size_t k = 0; k < json_object_array_length(ph); k++) {
                parse_phase(rd, a, json_object_array_get_idx(ph, k), k, where, L);
            }
            json_at(rd, where);
        } else if (a->schedule < 0) {
            die("preset: %s needs a schedule (%s, ...) or phases", json_said(rd, where), schedule_names[0]);
        }
    }
    json_at(rd, "");
    p->n_arms++;
}

int arm_phases(const preset *p, const arm *a, lattice_schedule_phase ph[MAX_PHASES])
{
    if (a->schedule < 0) { /* explicit: parse_arm applied the arm's rules */
        memcpy(ph, a->phases, sizeof(ph[0]) * (size_t)a->n_phases);
        return a->n_phases;
    }
    int n = 0;
    if (lattice_schedule_get_preset_phases((lattice_schedule_preset)a->schedule, p->blocks,
                                           p->block_size, a->steps_per_phase, a->block_init, ph,
                                           MAX_PHASES, &n) != LATTICE_OK)
        die("arm %s: the schedule preset does not fit the student: %s", a->name,
            lattice_last_error());
    for (int i = 1; i < n; i++) {
        ph[i].rewind_data = a->rewind_data;
        if (a->train_boundary >= 0)
            ph[i].train_boundary = a->train_boundary;
    }
    return n;
}

int64_t phases_steps(const lattice_schedule_phase *ph, int n)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ph[i].steps == 0)
            return -1;
        total += ph[i].steps;
    }
    return total;
}

lattice_schedule *phases_schedule(const arm *a, const lattice_schedule_phase *ph, int n)
{
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
        lattice_schedule_phase phs[MAX_PHASES];
        const int n_phases = arm_phases(p, am, phs);
        printf("arm %s: %s-norm", am->name, placement_names[am->placement]);
        if (am->residual_scale != 1.0)
            printf(" (residual scale %g)", am->residual_scale);
        if (am->block_norm)
            printf(" with a block-entry norm every %d layers", am->block_norm);
        if (am->block_rescale)
            printf(" with the row-start token rescaled every %d layers", am->block_rescale);
        if (am->massive_offset > 0)
            printf(" with an induced row-start offset of %g x the regular RMS after layer %d "
                   "(channel %d)", am->massive_offset, am->massive_layer, am->massive_channel);
        printf(", init std %.6g, cost %.4g full-depth steps\n", arm_std(p, am), arm_cost(p, am));
        for (int i = 0; i < n_phases; i++) {
            const lattice_schedule_phase ph = phs[i];
            printf("  phase %d: %lld steps, %d active, train_from %d, reset %d, block_init %s, "
                   "rewind_data %d, train_boundary %d\n",
                   i, (long long)ph.steps, ph.active_layers, ph.train_from, ph.reset_optimizer,
                   block_init_names[ph.block_init], ph.rewind_data, ph.train_boundary);
        }
    }
}

