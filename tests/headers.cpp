// Compiled as C++ with -pedantic -Werror: the public headers are C++-clean
// (extern "C"), and a C++ program can drive a model through them.
#include <lattice/lattice.h>
#include <cstdio>
#include <cstring>

int main()
{
    if (lattice_version_number() != LATTICE_VERSION_NUMBER)
        return 1;
    lattice_backend *be = nullptr;
    lattice_norm *norm = nullptr;
    lattice_model *model = nullptr;
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 8;
    p.d_model = 8;
    p.n_layers = 1;
    p.n_active_layers = 1;
    p.n_heads = 2;
    p.n_kv_heads = 1;
    p.head_dim = 4;
    p.d_ff = 8;
    p.max_batch = 1;
    p.max_seq = 4;
    if (lattice_backend_create("ref", &be) != LATTICE_OK ||
        lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-6f, &norm) != LATTICE_OK ||
        lattice_model_create(&p, norm, be, &model) != LATTICE_OK)
        return 1;
    const int32_t tokens[4] = {1, 2, 3, 4}, targets[4] = {2, 3, 4, 5};
    float loss = 0.0f;
    int rc = lattice_model_forward(model, tokens, 1, 4) != LATTICE_OK ||
             lattice_model_cross_entropy(model, targets, nullptr, &loss, nullptr) != LATTICE_OK;
    std::printf("loss %.4f\n", loss);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    return rc;
}
