/* Depth schedules: phases, the paper's presets, and where a run stands in them. */
#include "schedule_access.h"

#include "fields.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct lattice_schedule {
    lattice_schedule_phase *phases;
    int n_phases, cap;
    int phase;                /* current phase (n_phases once finished) */
    int64_t step_in_phase;
    int64_t nonpad_in_phase;
    lattice_schedule_counters counters;
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
    lattice_busy busy;     /* the thread inside a call that changes it (handle.h) */
};

/* The phase's fields, once: the setup digest the ranks compare, a
 * checkpoint's schedule.phases and its reading back derive from this table
 * (fields.h). A record's phases carry every field: they were first written
 * by 0.4. */
#define PHASE_FIELD(f, type, since) {#f, type, offsetof(lattice_schedule_phase, f), since, 1, 0}
static const lattice__field phase_fields[] = {
    PHASE_FIELD(steps, LATTICE__F_I64, 1),
    PHASE_FIELD(tokens, LATTICE__F_I64, 1),
    PHASE_FIELD(active_layers, LATTICE__F_INT, 1),
    PHASE_FIELD(train_from, LATTICE__F_INT, 1),
    PHASE_FIELD(reset_optimizer, LATTICE__F_FLAG, 1),
    PHASE_FIELD(block_init, LATTICE__F_ENUM, 1),
    PHASE_FIELD(rewind_data, LATTICE__F_FLAG, 2),
    PHASE_FIELD(train_boundary, LATTICE__F_FLAG, 2),
};
#undef PHASE_FIELD
const lattice__fields lattice__phase_fields = {phase_fields,
                                               (int)(sizeof phase_fields / sizeof phase_fields[0])};

/* Where the schedule stands, once: a checkpoint's schedule and the setup
 * with state derive from this table; how its values agree with each other is
 * checkpoint_state.c's to check. The setup has the count with the phases. */
#define AT(f, type, lo, hi) {#f, type, offsetof(lattice__schedule_at, f), 1, lo, hi}
#define COUNTER(f) {#f, LATTICE__F_I64, offsetof(lattice__schedule_at, counters.f), 1, 0, \
                    LATTICE__COUNT_MAX}
static const lattice__field at_fields[] = {
    AT(n_phases, LATTICE__F_INT, 1, INT32_MAX), AT(phase, LATTICE__F_INT, 0, INT32_MAX),
    AT(step_in_phase, LATTICE__F_I64, 0, LATTICE__COUNT_MAX),
    AT(nonpad_in_phase, LATTICE__F_I64, 0, LATTICE__COUNT_MAX),
    COUNTER(steps), COUNTER(tokens), COUNTER(nonpad_tokens), COUNTER(active_layer_tokens),
    {"flops", LATTICE__F_F64, offsetof(lattice__schedule_at, counters.flops), 1, 0, INT64_MAX}};
#undef AT
#undef COUNTER
const lattice__fields lattice__schedule_at_fields = {at_fields, 9};

void lattice_schedule_phase_init(lattice_schedule_phase *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->steps = 1000;
    p->active_layers = 1;
    p->reset_optimizer = 1;
    p->block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM;
    p->rewind_data = 0;
    p->train_boundary = 1;
}

lattice_status lattice_schedule_create(lattice_schedule **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_schedule_create: invalid argument: out is NULL");
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY, "lattice_schedule_create: out of memory");
    return LATTICE_OK;
}

static void schedule_free(lattice_schedule *s)
{
    free(s->phases);
    free(s);
}

LATTICE__BORROWABLE(lattice_schedule, schedule, "schedule", schedule_free)

lattice_busy *lattice__schedule_busy(lattice_schedule *h) { return &h->busy; }

const char *lattice_schedule_errmsg(const lattice_schedule *s)
{
    return s ? s->err : "no schedule (NULL handle)";
}

static int known_block_init(lattice_schedule_block_init b)
{
    return b == LATTICE_SCHEDULE_BLOCK_INIT_RANDOM || b == LATTICE_SCHEDULE_BLOCK_INIT_IDENTITY ||
           b == LATTICE_SCHEDULE_BLOCK_INIT_COPY;
}

static lattice_status schedule_add_phase_body(lattice_schedule *s,
                                              const lattice_schedule_phase *phase)
{
    if (!s)
        return lattice__set_error(LATTICE__ERRBUF(s), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_schedule_add_phase: invalid argument: schedule is NULL");
    lattice_schedule_phase p;
    lattice_schedule_phase_init(&p);
    TRY(lattice__copy_in(
        s->err, "lattice_schedule_add_phase",
        LATTICE__SIZED(lattice_schedule_phase, "phase", LATTICE__SCHEDULE_PHASE_1_0, 0), &p,
        phase));
    p.rewind_data = p.rewind_data != 0;
    p.train_boundary = p.train_boundary != 0;
    if (p.steps < 0 || p.tokens < 0 || (p.steps == 0 && p.tokens == 0))
        return FAIL(s, LATTICE_ERR_INVALID_CONFIG, "a phase needs a positive step or token budget");
    if (p.active_layers < 1 || p.train_from < 0 || p.train_from >= p.active_layers)
        return FAIL(s, LATTICE_ERR_INVALID_CONFIG,
                    "phase with %d active layers cannot train from layer %d", p.active_layers,
                    p.train_from);
    if (!known_block_init(p.block_init))
        return FAIL(s, LATTICE_ERR_INVALID_CONFIG, "unknown block initialisation %d",
                    (int)p.block_init);
    int64_t total = 0; /* the step budgets so far: each add kept their sum in range */
    for (int i = 0; i < s->n_phases; i++)
        total += s->phases[i].steps;
    /* the counts a checkpoint keeps (LATTICE__COUNT_MAX, 2^50) bound the budgets */
    if (p.steps > LATTICE__COUNT_MAX - total || p.tokens > LATTICE__COUNT_MAX)
        return FAIL(s, LATTICE_ERR_INVALID_CONFIG,
                    "a phase of %lld steps (%lld tokens) after %lld steps: the schedule's steps "
                    "would add up past %lld, or its token budget is past it",
                    (long long)p.steps, (long long)p.tokens, (long long)total,
                    (long long)LATTICE__COUNT_MAX);
    if (s->n_phases == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        lattice_schedule_phase *np = realloc(s->phases, sizeof(*np) * (size_t)cap);
        if (!np)
            return FAIL(s, LATTICE_ERR_OUT_OF_MEMORY, "no memory for phases");
        s->phases = np;
        s->cap = cap;
    }
    s->phases[s->n_phases++] = p;
    return LATTICE_OK;
}

lattice_status lattice_schedule_add_phase(lattice_schedule *s, const lattice_schedule_phase *phase)
{
    LATTICE__INSIDE(s, "lattice_schedule_add_phase", "schedule", schedule_add_phase_body(s, phase));
}

/* Phase k of a preset (0 <= k < preset_count), as create_preset adds it. */
static lattice_schedule_phase preset_phase(lattice_schedule_preset preset, int n_blocks,
                                           int block_size, int64_t steps_per_phase,
                                           lattice_schedule_block_init block_init, int64_t k)
{
    const int full = n_blocks * block_size;
    lattice_schedule_phase p;
    lattice_schedule_phase_init(&p);
    p.steps = steps_per_phase;
    p.active_layers = full;
    p.train_from = 0;
    p.train_boundary = 1;
    p.reset_optimizer = 1;
    p.block_init = block_init;
    switch (preset) {
    case LATTICE_SCHEDULE_PRESET_GROW:
        p.active_layers = (int)(k + 1) * block_size;
        break;
    case LATTICE_SCHEDULE_PRESET_FREEZE:
        /* the paper's freeze arm: after phase 0 only the newest block moves, so
         * its input (earlier blocks and the boundary norm) and the head are fixed */
        p.active_layers = (int)(k + 1) * block_size;
        p.train_from = (int)k * block_size;
        p.train_boundary = k == 0;
        break;
    case LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK:
        p.active_layers = block_size;
        break;
    case LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE: {
        /* grow spends steps * block_size * (1 + 2 + ... + n) active-layer
         * steps: (n + 1) / 2 phases' worth at full depth, the last one short */
        const int64_t total = steps_per_phase * (n_blocks + 1) / 2, done = k * steps_per_phase;
        p.steps = total - done < steps_per_phase ? total - done : steps_per_phase;
        break;
    }
    default: /* joint, and joint matched on total tokens: full depth */
        break;
    }
    return p;
}

/* The number of phases of a preset; -1 for an unknown preset. */
static int64_t preset_count(lattice_schedule_preset preset, int n_blocks, int64_t steps_per_phase)
{
    switch (preset) {
    case LATTICE_SCHEDULE_PRESET_JOINT:
    case LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK:
        return 1;
    case LATTICE_SCHEDULE_PRESET_GROW:
    case LATTICE_SCHEDULE_PRESET_FREEZE:
    case LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL:
        return n_blocks;
    case LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE: {
        const int64_t total = steps_per_phase * (n_blocks + 1) / 2;
        return (total + steps_per_phase - 1) / steps_per_phase;
    }
    default:
        return -1;
    }
}

/* The shared checks of the preset calls: the shape, then the preset. */
static lattice_status check_preset(const char *fn, lattice_schedule_preset preset, int n_blocks,
                                   int block_size, int64_t steps_per_phase,
                                   lattice_schedule_block_init block_init)
{
    /* (n_blocks + 1) phases' worth of steps must be countable (a checkpoint
     * keeps counts up to 2^50): the matched joint arm's budget is
     * steps_per_phase * (n_blocks + 1) / 2 */
    if (n_blocks < 1 || block_size < 1 || steps_per_phase < 1 || n_blocks > 4096 ||
        block_size > 4096 || steps_per_phase > LATTICE__COUNT_MAX / (n_blocks + 1))
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "%s: n_blocks %d, block_size %d, steps_per_phase %lld: needs "
                             "n_blocks and block_size in 1..4096 and steps_per_phase in "
                             "1..2^50 / (n_blocks + 1)",
                             fn, n_blocks, block_size, (long long)steps_per_phase);
    if (preset_count(preset, n_blocks, steps_per_phase) < 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "%s: unknown preset %d", fn,
                             (int)preset);
    if (!known_block_init(block_init))
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG, "%s: unknown block initialisation %d",
                             fn, (int)block_init);
    return LATTICE_OK;
}

lattice_status lattice_schedule_get_preset_phases(lattice_schedule_preset preset, int n_blocks,
                                                  int block_size, int64_t steps_per_phase,
                                                  lattice_schedule_block_init block_init,
                                                  lattice_schedule_phase *phases, int capacity,
                                                  int *n_phases)
{
    static const char fn[] = "lattice_schedule_get_preset_phases";
    if (!n_phases)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: n_phases is NULL", fn);
    *n_phases = 0;
    if (capacity < 0 || (!phases && capacity > 0))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: capacity %d with phases %s (give phases "
                             "room for capacity >= 0 phases, or NULL and 0 to ask for the count)",
                             fn, capacity, phases ? "given" : "NULL");
    lattice_status st = check_preset(fn, preset, n_blocks, block_size, steps_per_phase, block_init);
    if (st != LATTICE_OK)
        return st;
    const int64_t n = preset_count(preset, n_blocks, steps_per_phase);
    *n_phases = (int)n; /* at most 4096 */
    if (!phases)
        return LATTICE_OK;
    if (capacity < n)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: the preset has %lld phases, capacity is %d "
                             "(nothing written; *n_phases says how many)",
                             fn, (long long)n, capacity);
    for (int64_t k = 0; k < n; k++)
        phases[k] = preset_phase(preset, n_blocks, block_size, steps_per_phase, block_init, k);
    return LATTICE_OK;
}

lattice_status lattice_schedule_create_preset(lattice_schedule_preset preset, int n_blocks,
                                              int block_size, int64_t steps_per_phase,
                                              lattice_schedule_block_init block_init,
                                              lattice_schedule **out)
{
    static const char fn[] = "lattice_schedule_create_preset";
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "%s: invalid argument: out is NULL",
                             fn);
    *out = NULL;
    lattice_status st = check_preset(fn, preset, n_blocks, block_size, steps_per_phase, block_init);
    if (st != LATTICE_OK)
        return st;
    lattice_schedule *s;
    if ((st = lattice_schedule_create(&s)) != LATTICE_OK)
        return st;
    const int64_t n = preset_count(preset, n_blocks, steps_per_phase);
    for (int64_t k = 0; k < n && st == LATTICE_OK; k++) {
        const lattice_schedule_phase p =
            preset_phase(preset, n_blocks, block_size, steps_per_phase, block_init, k);
        st = lattice_schedule_add_phase(s, &p);
    }
    if (st != LATTICE_OK) {
        lattice_schedule_destroy(s);
        return st;
    }
    *out = s;
    return LATTICE_OK;
}

int lattice_schedule_get_n_phases(const lattice_schedule *s) { return s ? s->n_phases : 0; }

lattice_status lattice_schedule_get_phase(const lattice_schedule *s, int index, lattice_schedule_phase *phase)
{
    if (lattice__need(LATTICE__ERRBUF(s), "lattice_schedule_get_phase", 2,
                      (const void *)s, "schedule", (const void *)phase, "phase") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (index < 0 || index >= s->n_phases)
        return lattice__set_error(LATTICE__ERRBUF(s), LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_schedule_get_phase: invalid argument: index %d is not a phase of "
                    "this schedule (0..%d)", index, s->n_phases - 1);
    return lattice__copy_out(LATTICE__ERRBUF(s), "lattice_schedule_get_phase", phase,
                             &s->phases[index], sizeof(lattice_schedule_phase),
                             LATTICE__SCHEDULE_PHASE_1_0);
}

static lattice_status schedule_set_rewind_data_body(lattice_schedule *s, int on)
{
    if (!s)
        return lattice__set_error(LATTICE__ERRBUF(s), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_schedule_set_rewind_data: invalid argument: schedule is NULL");
    for (int i = 1; i < s->n_phases; i++)
        s->phases[i].rewind_data = on != 0;
    return LATTICE_OK;
}

lattice_status lattice_schedule_set_rewind_data(lattice_schedule *s, int on)
{
    LATTICE__INSIDE(s, "lattice_schedule_set_rewind_data", "schedule",
                    schedule_set_rewind_data_body(s, on));
}

int lattice_schedule_get_max_layers(const lattice_schedule *s)
{
    int mx = 0;
    for (int i = 0; s && i < s->n_phases; i++)
        mx = s->phases[i].active_layers > mx ? s->phases[i].active_layers : mx;
    return mx;
}

int64_t lattice_schedule_get_total_steps(const lattice_schedule *s)
{
    int64_t total = 0;
    for (int i = 0; s && i < s->n_phases; i++) {
        if (s->phases[i].steps == 0)
            return -1;
        total += s->phases[i].steps;
    }
    return total;
}

lattice_status lattice_schedule_get_position(const lattice_schedule *s, int *phase,
                                             int64_t *step_in_phase)
{
    if (lattice__need(LATTICE__ERRBUF(s), "lattice_schedule_get_position", 2,
                      (const void *)s, "schedule", (const void *)phase, "phase") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *phase = s->phase;
    if (step_in_phase)
        *step_in_phase = s->step_in_phase;
    return LATTICE_OK;
}

int lattice_schedule_is_finished(const lattice_schedule *s) { return !s || s->phase >= s->n_phases; }

/* Why a step of these counts cannot be recorded, into why; 1 when it can. The
 * counters stay within what a checkpoint keeps: 2^50 each (the FLOPs, an
 * estimate, stop at INT64_MAX instead: lattice_schedule_record). */
int lattice__schedule_fits(const lattice_schedule *s, int64_t tokens, int64_t nonpad_tokens,
                           double flops, char *why, size_t n)
{
    const lattice_schedule_counters *c = &s->counters;
    const int64_t most = LATTICE__COUNT_MAX;
    const int layers = s->phase < s->n_phases ? s->phases[s->phase].active_layers : 1;
    if (tokens < 0 || nonpad_tokens < 0 || nonpad_tokens > tokens)
        snprintf(why, n, "tokens %lld and nonpad_tokens %lld must be >= 0, and the non-padding "
                 "ones no more than all", (long long)tokens, (long long)nonpad_tokens);
    else if (!(flops >= 0.0) || !isfinite(flops))
        snprintf(why, n, "flops %g must be finite and >= 0", flops);
    else if (c->steps >= most || tokens > most - c->tokens || nonpad_tokens > most / layers ||
             nonpad_tokens * layers > most - c->active_layer_tokens)
        snprintf(why, n, "a step of %lld tokens (%lld non-padding) would carry the counters "
                 "(steps %lld, tokens %lld, active-layer tokens %lld) past what a checkpoint "
                 "keeps (%lld each)",
                 (long long)tokens, (long long)nonpad_tokens, (long long)c->steps,
                 (long long)c->tokens, (long long)c->active_layer_tokens, (long long)most);
    else
        return 1;
    return 0;
}

static lattice_status schedule_record_body(lattice_schedule *s, int64_t tokens,
                                           int64_t nonpad_tokens, double flops, int *phase_ended)
{
    if (phase_ended)
        *phase_ended = 0;
    if (!s)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "lattice_schedule_record: invalid argument: schedule is NULL");
    char why[320];
    if (!lattice__schedule_fits(s, tokens, nonpad_tokens, flops, why, sizeof why))
        return FAIL(s, LATTICE_ERR_INVALID_ARGUMENT, "lattice_schedule_record: invalid argument: %s",
                    why);
    if (s->phase >= s->n_phases)
        return FAIL(s, LATTICE_ERR_STATE, "the schedule has finished");
    const lattice_schedule_phase *p = &s->phases[s->phase];
    s->counters.steps++;
    s->counters.tokens += tokens;
    s->counters.nonpad_tokens += nonpad_tokens;
    s->counters.active_layer_tokens += nonpad_tokens * p->active_layers;
    /* an estimate: it stops at what a checkpoint keeps rather than refuse a step */
    s->counters.flops = s->counters.flops + flops < (double)INT64_MAX ? s->counters.flops + flops
                                                                      : (double)INT64_MAX;
    s->step_in_phase++;
    s->nonpad_in_phase += nonpad_tokens;
    int done = p->steps ? s->step_in_phase >= p->steps : s->nonpad_in_phase >= p->tokens;
    if (done) {
        s->phase++;
        s->step_in_phase = 0;
        s->nonpad_in_phase = 0;
    }
    if (phase_ended)
        *phase_ended = done;
    return LATTICE_OK;
}

lattice_status lattice_schedule_record(lattice_schedule *s, int64_t tokens, int64_t nonpad_tokens,
                                       double flops, int *phase_ended)
{
    LATTICE__INSIDE(s, "lattice_schedule_record", "schedule",
                    schedule_record_body(s, tokens, nonpad_tokens, flops, phase_ended));
}

lattice_status lattice_schedule_get_counters(const lattice_schedule *s, lattice_schedule_counters *out)
{
    if (lattice__need(LATTICE__ERRBUF(s), "lattice_schedule_get_counters", 2,
                      (const void *)s, "schedule", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *out = s->counters;
    return LATTICE_OK;
}

int lattice__schedule_check_position(const lattice_schedule *s, const lattice__schedule_at *at,
                                     char *why, size_t n)
{
    const int64_t phase = at->phase, step_in_phase = at->step_in_phase,
                  nonpad_in_phase = at->nonpad_in_phase;
    if (phase < 0 || phase > s->n_phases)
        snprintf(why, n, "phase %lld is not one of the schedule's 0..%d (%d: finished)",
                 (long long)phase, s->n_phases, s->n_phases);
    else if (step_in_phase < 0 || nonpad_in_phase < 0)
        snprintf(why, n, "%lld steps and %lld tokens into phase %lld: a count below 0",
                 (long long)step_in_phase, (long long)nonpad_in_phase, (long long)phase);
    else if (step_in_phase > LATTICE__COUNT_MAX || nonpad_in_phase > LATTICE__COUNT_MAX)
        snprintf(why, n, "%lld steps and %lld tokens into phase %lld: a count past 2^50, what a "
                 "checkpoint keeps", (long long)step_in_phase, (long long)nonpad_in_phase,
                 (long long)phase);
    else if (step_in_phase == 0 && nonpad_in_phase != 0)
        snprintf(why, n, "%lld tokens into phase %lld before its first step: a step counts them",
                 (long long)nonpad_in_phase, (long long)phase);
    else if (phase == s->n_phases && (step_in_phase != 0 || nonpad_in_phase != 0))
        snprintf(why, n, "the schedule has finished, but %lld steps and %lld tokens into a phase "
                 "after the last", (long long)step_in_phase, (long long)nonpad_in_phase);
    else if (phase < s->n_phases && s->phases[phase].steps &&
             step_in_phase >= s->phases[phase].steps)
        snprintf(why, n, "step %lld of phase %lld, which has %lld steps",
                 (long long)step_in_phase, (long long)phase, (long long)s->phases[phase].steps);
    else if (phase < s->n_phases && !s->phases[phase].steps &&
             nonpad_in_phase >= s->phases[phase].tokens)
        snprintf(why, n, "%lld tokens into phase %lld, whose budget is %lld tokens",
                 (long long)nonpad_in_phase, (long long)phase, (long long)s->phases[phase].tokens);
    else
        return 1;
    return 0;
}

void lattice__schedule_where(const lattice_schedule *s, lattice__schedule_at *out)
{
    out->phases = s->phases;
    out->n_phases = s->n_phases;
    out->phase = s->phase;
    out->step_in_phase = s->step_in_phase;
    out->nonpad_in_phase = s->nonpad_in_phase;
    out->counters = s->counters;
}

void lattice__schedule_restore(lattice_schedule *s, const lattice__schedule_at *at)
{
    s->phase = at->phase;
    s->step_in_phase = at->step_in_phase;
    s->nonpad_in_phase = at->nonpad_in_phase;
    s->counters = at->counters;
}

static lattice_status schedule_set_position_body(lattice_schedule *s, int phase,
                                                 int64_t step_in_phase,
                                                 const lattice_schedule_counters *counters)
{
    if (!s)
        return lattice__set_error(LATTICE__ERRBUF(s), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_schedule_set_position: invalid argument: schedule is NULL");
    char why[160];
    const lattice_schedule_counters none = {0};
    const int64_t most = LATTICE__COUNT_MAX;
    if (counters && (counters->steps < 0 || counters->tokens < 0 || counters->nonpad_tokens < 0 ||
                     counters->nonpad_tokens > counters->tokens ||
                     counters->active_layer_tokens < 0 || !(counters->flops >= 0.0) ||
                     counters->steps > most || counters->tokens > most ||
                     counters->active_layer_tokens > most ||
                     !(counters->flops <= (double)INT64_MAX)))
        return FAIL(s, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_schedule_set_position: invalid argument: counters steps %lld, tokens "
                    "%lld, nonpad_tokens %lld, active_layer_tokens %lld, flops %g: each in 0..2^50 "
                    "(flops 0..INT64_MAX), the non-padding tokens among all",
                    (long long)counters->steps, (long long)counters->tokens,
                    (long long)counters->nonpad_tokens, (long long)counters->active_layer_tokens,
                    counters->flops);
    const lattice__schedule_at at = {.phase = phase, .step_in_phase = step_in_phase,
                                     .counters = counters ? *counters : none};
    if (!lattice__schedule_check_position(s, &at, why, sizeof why))
        return FAIL(s, LATTICE_ERR_INVALID_ARGUMENT, "position (%d, %lld) outside the schedule: %s",
                    phase, (long long)step_in_phase, why);
    lattice__schedule_restore(s, &at);
    return LATTICE_OK;
}

lattice_status lattice_schedule_set_position(lattice_schedule *s, int phase, int64_t step_in_phase,
                                             const lattice_schedule_counters *counters)
{
    LATTICE__INSIDE(s, "lattice_schedule_set_position", "schedule",
                    schedule_set_position_body(s, phase, step_in_phase, counters));
}

void lattice__setup_phases(const lattice_schedule_phase *ph, int n, lattice__setup *s)
{
    SETUP_INT(s, n, "n_phases");
    for (int i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "phase %d ", i);
        lattice__fields_setup(&lattice__phase_fields, &ph[i], prefix, s);
    }
}

void lattice__schedule_setup(const lattice_schedule *sc, int with_state, lattice__setup *s)
{
    lattice__setup_phases(sc->phases, sc->n_phases, s);
    if (!with_state)
        return;
    lattice__schedule_at at;
    lattice__schedule_where(sc, &at);
    /* the table but its first row, n_phases, with which the phases' list begins */
    lattice__fields_setup(&(lattice__fields){at_fields + 1, 8}, &at, "", s);
}
