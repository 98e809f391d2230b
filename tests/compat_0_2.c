/* A program written against liblattice 0.2's names, linked against the shared
 * library: the names 0.3 renamed (doc/renames-0.3.txt) still compile (with
 * deprecation warnings, silenced here; the 'deprecated-names' test checks
 * they are raised) and give what the new names give. The two functions whose
 * names became types in 0.3 (lattice_schedule_phase, lattice_schedule_counters)
 * exist for old binaries only: they are looked up as symbols. */
#include <lattice/lattice.h>
#include <lattice/checkpoint.h>

#include "layout_0_2.h"
#include "tiny_model.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* The _init functions of the structs 0.3 changed, as a program built against
 * 0.2 binds them: at the symbol version LATTICE_0.1 (0.3's default version
 * fills 0.3's structs). */
void optim_params_init_0_2(struct optim_params_0_2 *p);
void trainer_params_init_0_2(struct trainer_params_0_2 *p);
void optim_params_init_0_3(struct optim_params_0_3 *p);
__asm__(".symver optim_params_init_0_2, lattice_optim_params_init@LATTICE_0.1");
__asm__(".symver optim_params_init_0_3, lattice_optim_params_init@LATTICE_0.3");
__asm__(".symver trainer_params_init_0_2, lattice_trainer_params_init@LATTICE_0.1");

#define SAME(a, b)                                                                                \
    do {                                                                                          \
        if ((a) != (b)) {                                                                         \
            printf("%s:%d: %s != %s\n", __FILE__, __LINE__, #a, #b);                              \
            failures++;                                                                           \
        }                                                                                         \
    } while (0)

#define OK(call)                                                                                  \
    do {                                                                                          \
        lattice_status st_ = (call);                                                              \
        if (st_ != LATTICE_OK) {                                                                  \
            printf("%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, lattice_status_string(st_), \
                   lattice_last_error());                                                         \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

int main(void)
{
    /* constants of 0.2 are the same values */
    SAME(LATTICE_NORM_PRE, LATTICE_NORM_PLACEMENT_PRE);
    SAME(LATTICE_NORM_POST, LATTICE_NORM_PLACEMENT_POST);
    SAME(LATTICE_NORM_PERI, LATTICE_NORM_PLACEMENT_PERI);
    SAME(LATTICE_NORM_RMS, LATTICE_NORM_KIND_RMS);
    SAME(LATTICE_SPLIT_VAL, LATTICE_DATA_SPLIT_VAL);
    SAME(LATTICE_GROUP_HEAD, LATTICE_MODEL_GROUP_HEAD);
    SAME(LATTICE_KL_REVERSE, LATTICE_DISTILL_KL_REVERSE);
    SAME(LATTICE_PRESET_GROW, LATTICE_SCHEDULE_PRESET_GROW);
    SAME(LATTICE_BLOCK_INIT_COPY, LATTICE_SCHEDULE_BLOCK_INIT_COPY);

    lattice_backend *be;
    OK(lattice_backend_create("ref", &be));
    OK(lattice_backend_set_threads(be, 1));
    SAME(strcmp(lattice_backend_name(be), lattice_backend_get_name(be)), 0);
    SAME(lattice_backend_threads(be), 1);

    lattice_model_params mp;
    tu_tiny_params(&mp);
    lattice_norm *norm;
    OK(lattice_norm_create(LATTICE_NORM_POST, LATTICE_NORM_RMS, 1e-6f, &norm));
    lattice_model *m;
    OK(lattice_model_create(&mp, norm, be, &m));
    SAME(lattice_model_placement(m), LATTICE_NORM_POST);
    SAME(lattice_model_active_layers(m), 2);
    SAME(lattice_model_n_params(m), lattice_model_get_n_params(m));
    SAME(lattice_model_n_tensors(m), lattice_model_get_n_tensors(m));
    SAME(lattice_model_arena_bytes(m), lattice_model_get_arena_bytes(m));
    SAME(lattice_model_flops(m, 2, 5, 1), lattice_model_get_flops(m, 2, 5, 1));
    lattice_tensor_info ti;
    OK(lattice_model_tensor(m, 0, &ti));
    lattice_model_tensor_info ti_new;
    OK(lattice_model_get_tensor(m, 0, &ti_new));
    SAME(strcmp(ti.name, ti_new.name), 0);

    const int32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    OK(lattice_model_forward(m, tokens, 2, 5));
    SAME(lattice_model_logits(m), lattice_model_get_logits(m));
    SAME(lattice_model_dlogits(m), lattice_model_get_dlogits(m));
    const float *h_old, *h_new;
    OK(lattice_model_hidden(m, 1, &h_old));
    OK(lattice_model_get_hidden(m, 1, &h_new));
    SAME(h_old, h_new);

    lattice_optim_params op;
    lattice_optim_params_init(&op);
    lattice_optim *o;
    OK(lattice_optim_create(m, &op, &o));
    SAME(lattice_optim_lr(o), lattice_optim_get_lr(o));
    SAME(lattice_optim_steps(o), 0);

    lattice_schedule *s;
    OK(lattice_schedule_create_preset(LATTICE_PRESET_GROW, 2, 1, 3, LATTICE_BLOCK_INIT_RANDOM, &s));
    SAME(lattice_schedule_n_phases(s), 2);
    SAME(lattice_schedule_max_layers(s), 2);
    SAME(lattice_schedule_total_steps(s), 6);
    SAME(lattice_schedule_finished(s), 0);
    int phase = -1;
    int64_t step = -1;
    OK(lattice_schedule_position(s, &phase, &step));
    SAME(phase, 0);
    SAME(step, 0);
    lattice_phase ph;
    lattice_phase_init(&ph);
    SAME(ph.size, sizeof(lattice_schedule_phase));

    /* the two 0.2 functions whose names are 0.3 types, as old binaries call them */
    typedef lattice_status (*phase_fn)(const lattice_schedule *, int, lattice_phase *);
    typedef lattice_status (*counters_fn)(const lattice_schedule *, lattice_counters *);
    phase_fn old_phase;
    counters_fn old_counters;
    *(void **)&old_phase = dlsym(RTLD_DEFAULT, "lattice_schedule_phase");
    *(void **)&old_counters = dlsym(RTLD_DEFAULT, "lattice_schedule_counters");
    if (!old_phase || !old_counters) {
        printf("the 0.2 symbols lattice_schedule_phase/_counters are not exported\n");
        return 1;
    }
    lattice_phase p_old, p_new;
    lattice_phase_init(&p_old);
    lattice_schedule_phase_init(&p_new);
    OK(old_phase(s, 1, &p_old));
    OK(lattice_schedule_get_phase(s, 1, &p_new));
    SAME(p_old.active_layers, p_new.active_layers);
    SAME(p_old.steps, p_new.steps);
    lattice_counters c_old, c_new;
    memset(&c_old, 0xff, sizeof(c_old));
    memset(&c_new, 0, sizeof(c_new));
    OK(old_counters(s, &c_old));
    OK(lattice_schedule_get_counters(s, &c_new));
    SAME(memcmp(&c_old, &c_new, sizeof(c_old)), 0);

    /* a 0.2 program's params structs, heap-exact: nothing is written past them */
    struct optim_params_0_2 *op02 = malloc(sizeof(*op02));
    memset(op02, 0xA5, sizeof(*op02));
    optim_params_init_0_2(op02);
    SAME(op02->size, sizeof(*op02));
    SAME(op02->warmup_steps, (int)op.warmup_steps);
    SAME(op02->total_steps, (int)op.total_steps);
    SAME(op02->clip_norm, op.clip_norm);
    op02->warmup_steps = 3;
    lattice_optim *o02;
    OK(lattice_optim_create(m, (const lattice_optim_params *)(void *)op02, &o02));
    lattice_optim_params back = {.size = sizeof(back)};
    OK(lattice_optim_get_params(o02, &back));
    SAME(back.warmup_steps, 3);
    SAME(back.total_steps, op.total_steps);
    lattice_optim_destroy(o02);
    free(op02);
    /* a 0.3 program's optim params (0.4 grew the struct): filled to its size */
    struct optim_params_0_3 *op03 = malloc(sizeof(*op03));
    memset(op03, 0xA5, sizeof(*op03));
    optim_params_init_0_3(op03);
    SAME(op03->size, sizeof(*op03));
    SAME(op03->total_steps, op.total_steps);
    SAME(op03->clip_norm, op.clip_norm);
    op03->warmup_steps = 3;
    lattice_optim *o03;
    OK(lattice_optim_create(m, (const lattice_optim_params *)(void *)op03, &o03));
    back.size = sizeof(back);
    OK(lattice_optim_get_params(o03, &back));
    SAME(back.warmup_steps, 3);
    SAME(back.lr_shape, LATTICE_OPTIM_LR_SHAPE_COSINE);
    lattice_optim_destroy(o03);
    free(op03);
    struct trainer_params_0_2 *tp02 = malloc(sizeof(*tp02));
    memset(tp02, 0xA5, sizeof(*tp02));
    trainer_params_init_0_2(tp02);
    SAME(tp02->size, sizeof(*tp02));
    SAME(tp02->eval_every, 0);
    SAME(tp02->user, NULL);
    free(tp02);

    lattice_schedule_destroy(s);
    lattice_optim_destroy(o);
    lattice_model_destroy(m);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    if (failures)
        return 1;
    printf("the 0.2 names work\n");
    return 0;
}
