/* libFuzzer: checkpoints (lattice_trainer_load_checkpoint) into a small run. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lattice_backend *be;
    static lattice_model *m;
    static lattice_trainer *t;
    if (!t) {
        m = fuzz_model(&be);
        static const int32_t ids[] = {12, 1, 2, 3, 12, 4, 5, 6, 7, 12, 8, 9};
        lattice_data_params dp;
        lattice_data_params_init(&dp);
        dp.vocab_size = 13;
        dp.boundary_id = 12;
        dp.batch_size = 2;
        dp.seq_len = 6;
        lattice_data *d;
        lattice_optim_params op;
        lattice_optim_params_init(&op);
        lattice_optim *o;
        lattice_schedule *s;
        if (lattice_data_create_memory(ids, 12, &dp, &d, NULL) != LATTICE_OK ||
            lattice_optim_create(m, &op, &o) != LATTICE_OK ||
            lattice_schedule_create_preset(LATTICE_PRESET_GROW, 2, 1, 3, 0, &s) != LATTICE_OK ||
            lattice_trainer_create(m, NULL, NULL, d, o, s, NULL, &t) != LATTICE_OK)
            abort();
    }
    lattice_trainer_load_checkpoint(t, fuzz_write(data, size, ".ckpt"));
    return 0;
}
