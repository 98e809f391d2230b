/* libFuzzer: token-id files and byte-level text (the first input byte picks the loader). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int mode = data[0] % 3;
    const char *path = fuzz_write(data + 1, size - 1, ".data");
    lattice_data_params p;
    lattice_data_params_init(&p);
    p.batch_size = 3;
    p.seq_len = 5;
    p.split_long = data[0] & 4;
    p.pack = data[0] & 8;
    p.val_fraction = data[0] & 16 ? 0.3f : 0.0f;
    if (mode != 2) {
        p.vocab_size = 300;
        p.boundary_id = 299;
    }
    lattice_data *d = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    lattice_status st = mode == 2 ? lattice_data_create_text(path, &p, &d, err)
                                  : lattice_data_create_tokens(path, mode ? 4 : 2, &p, &d, err);
    if (st == LATTICE_OK) {
        lattice_data_batch b;
        for (int i = 0; i < 4; i++)
            lattice_data_next(d, &b);
        for (int64_t i = 0; i < lattice_data_get_n_val_batches(d) && i < 4; i++)
            lattice_data_get_val_batch(d, i, &b);
        lattice_data_destroy(d);
    }
    return 0;
}
