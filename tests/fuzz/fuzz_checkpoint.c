/* libFuzzer: checkpoints (lattice_trainer_load_checkpoint) into a small run. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rig r;
    if (!r.trainer)
        fuzz_run(&r);
    lattice_trainer_load_checkpoint(r.trainer, fuzz_write(data, size, ".ckpt"));
    return 0;
}
