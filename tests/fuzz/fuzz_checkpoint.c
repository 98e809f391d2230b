/* libFuzzer: checkpoints (lattice_trainer_load_checkpoint) into a small run. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lattice_backend *be;
    static lattice_model *m;
    static lattice_trainer *t;
    if (!t) {
        lattice_data *d;
        m = fuzz_model(&be);
        t = fuzz_trainer(m, &d);
    }
    lattice_trainer_load_checkpoint(t, fuzz_write(data, size, ".ckpt"));
    return 0;
}
