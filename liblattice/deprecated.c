/* The functions 0.3 renamed (doc/API.md, doc/renames-0.3.txt), under their
 * 0.1 and 0.2 names: binaries built against those releases keep linking, and
 * sources keep compiling with a deprecation warning, until 1.0. Each forwards
 * to its new name. */
#include "internal.h"

#include <stddef.h>
#include <string.h>

const char *lattice_backend_name(const lattice_backend *backend)
{
    return lattice_backend_get_name(backend);
}

int lattice_backend_threads(const lattice_backend *backend)
{
    return lattice_backend_get_threads(backend);
}

int64_t lattice_data_n_documents(const lattice_data *data, lattice_data_split split)
{
    return lattice_data_get_n_documents(data, split);
}

int64_t lattice_data_n_tokens(const lattice_data *data, lattice_data_split split)
{
    return lattice_data_get_n_tokens(data, split);
}

int64_t lattice_data_n_val_batches(const lattice_data *data)
{
    return lattice_data_get_n_val_batches(data);
}

lattice_status lattice_data_val_batch(lattice_data *data, int64_t index, lattice_data_batch *batch)
{
    return lattice_data_get_val_batch(data, index, batch);
}

lattice_norm_placement lattice_model_placement(const lattice_model *model)
{
    return lattice_model_get_placement(model);
}

int lattice_model_active_layers(const lattice_model *model)
{
    return lattice_model_get_active_layers(model);
}

const float *lattice_model_logits(const lattice_model *model)
{
    return lattice_model_get_logits(model);
}

float *lattice_model_dlogits(lattice_model *model)
{
    return lattice_model_get_dlogits(model);
}

lattice_status lattice_model_hidden(const lattice_model *model, int boundary, const float **out)
{
    return lattice_model_get_hidden(model, boundary, out);
}

int lattice_model_n_tensors(const lattice_model *model)
{
    return lattice_model_get_n_tensors(model);
}

lattice_status lattice_model_tensor(const lattice_model *model, int index, lattice_model_tensor_info *out)
{
    return lattice_model_get_tensor(model, index, out);
}

int64_t lattice_model_n_params(const lattice_model *model)
{
    return lattice_model_get_n_params(model);
}

double lattice_model_flops(const lattice_model *model, int batch, int seq, int with_backward)
{
    return lattice_model_get_flops(model, batch, seq, with_backward);
}

size_t lattice_model_arena_bytes(const lattice_model *model)
{
    return lattice_model_get_arena_bytes(model);
}

float lattice_optim_lr(const lattice_optim *optim)
{
    return lattice_optim_get_lr(optim);
}

int64_t lattice_optim_steps(const lattice_optim *optim)
{
    return lattice_optim_get_steps(optim);
}

void lattice_phase_init(lattice_schedule_phase *phase)
{
    lattice_schedule_phase_init(phase);
}

#ifdef LATTICE_SYMVER
/* Every program built against 0.1-0.4 binds lattice_phase_init at the symbol
 * version LATTICE_0.1, and one built against 0.1 has a 40-byte lattice_phase
 * (0.2 appended rewind_data and train_boundary without a new version): this
 * version fills those 40 bytes only, and says so in size, so that no old
 * program's stack is written past its struct. A program built against 0.2-0.4
 * that sets rewind_data or train_boundary after it gets their defaults
 * (continue the data, train the boundary); lattice_schedule_phase_init fills
 * its whole struct. Programs built now bind the default, LATTICE_0.5. */
void compat_phase_init_0_1(void *phase) __attribute__((visibility("default")));
__asm__(".symver compat_phase_init_0_1, lattice_phase_init@LATTICE_0.1");
void compat_phase_init_0_1(void *phase)
{
    if (!phase)
        return;
    lattice_schedule_phase now;
    lattice_schedule_phase_init(&now);
    now.size = offsetof(lattice_schedule_phase, rewind_data);
    memcpy(phase, &now, now.size);
}
#endif

int lattice_schedule_n_phases(const lattice_schedule *schedule)
{
    return lattice_schedule_get_n_phases(schedule);
}

/* 0.2 ABI only: the name is a type in 0.3, so no declaration in the headers. */
LATTICE_API lattice_status lattice__compat_schedule_phase(const lattice_schedule *schedule, int index, lattice_schedule_phase *phase) __asm__("lattice_schedule_phase");
lattice_status lattice__compat_schedule_phase(const lattice_schedule *schedule, int index, lattice_schedule_phase *phase)
{
    return lattice_schedule_get_phase(schedule, index, phase);
}

int lattice_schedule_max_layers(const lattice_schedule *schedule)
{
    return lattice_schedule_get_max_layers(schedule);
}

int64_t lattice_schedule_total_steps(const lattice_schedule *schedule)
{
    return lattice_schedule_get_total_steps(schedule);
}

lattice_status lattice_schedule_position(const lattice_schedule *schedule, int *phase, int64_t *step_in_phase)
{
    return lattice_schedule_get_position(schedule, phase, step_in_phase);
}

int lattice_schedule_finished(const lattice_schedule *schedule)
{
    return lattice_schedule_is_finished(schedule);
}

/* 0.2 ABI only: the name is a type in 0.3, so no declaration in the headers. */
LATTICE_API lattice_status lattice__compat_schedule_counters(const lattice_schedule *schedule, lattice_schedule_counters *out) __asm__("lattice_schedule_counters");
lattice_status lattice__compat_schedule_counters(const lattice_schedule *schedule, lattice_schedule_counters *out)
{
    return lattice_schedule_get_counters(schedule, out);
}

int lattice_teacher_vocab_size(const lattice_teacher *teacher)
{
    return lattice_teacher_get_vocab_size(teacher);
}

double lattice_teacher_flops(const lattice_teacher *teacher, int batch, int seq)
{
    return lattice_teacher_get_flops(teacher, batch, seq);
}

int lattice_teacher_topk_k(const lattice_teacher *teacher)
{
    return lattice_teacher_get_k(teacher);
}
