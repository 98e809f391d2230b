/* libFuzzer: model files (lattice_model_load, lattice_model_create_from_file). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rig r;
    if (!r.model)
        fuzz_run(&r);
    const char *path = fuzz_write(data, size, ".safetensors");
    lattice_model_load(r.model, path);
    lattice_model *made = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    if (lattice_model_create_from_file(path, NULL, r.be, 1, 4, &made, err) == LATTICE_OK) {
        const int32_t tok[4] = {0, 0, 0, 0};
        lattice_model_forward(made, tok, 1, 4); /* ids may exceed a tiny vocab: a status, fine */
        lattice_model_destroy(made);
    }
    return 0;
}
