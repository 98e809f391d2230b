/* libFuzzer: checkpoints (lattice_trainer_load_checkpoint) into a small run. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lattice_backend *be;
    static lattice_model *m;
    static lattice_trainer *t;
    static lattice_data *d;
    static lattice_optim *o;
    static lattice_schedule *s;
    if (!t) {
        m = fuzz_model(&be);
        t = fuzz_trainer(m, &d, &o, &s);
    }
    lattice_trainer_load_checkpoint(t, fuzz_write(data, size, ".ckpt"));
    return 0;
}
