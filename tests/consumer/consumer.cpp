// liblattice from C++: the C API behind RAII handles, built by
// run_consumers.py against an installed copy with nothing but
// `pkg-config --cflags --libs lattice`. Trains a tiny model; prints the loss.
#include <lattice/lattice.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void check(lattice_status st, const std::string &what)
{
    if (st != LATTICE_OK)
        throw std::runtime_error(what + ": " + lattice_status_string(st));
}

struct Deleter {
    void operator()(lattice_backend *p) const { lattice_backend_destroy(p); }
    void operator()(lattice_norm *p) const { lattice_norm_destroy(p); }
    void operator()(lattice_model *p) const { lattice_model_destroy(p); }
    void operator()(lattice_optim *p) const { lattice_optim_destroy(p); }
};
template <class T> using Handle = std::unique_ptr<T, Deleter>;

template <class T, class Create> Handle<T> make(Create create, const std::string &what)
{
    T *raw = nullptr;
    check(create(&raw), what);
    return Handle<T>(raw);
}

} // namespace

int main()
{
    try {
        const std::string text = "lattices in C++, handles that free themselves";
        std::vector<int32_t> ids(text.begin(), text.end());
        const int seq = static_cast<int>(ids.size()) - 1;

        auto backend = make<lattice_backend>(
            [](lattice_backend **out) { return lattice_backend_create("default", out); }, "backend");
        auto norm = make<lattice_norm>(
            [](lattice_norm **out) {
                return lattice_norm_create(LATTICE_NORM_PRE, LATTICE_NORM_RMS, 1e-6f, out);
            },
            "norm");

        lattice_model_params mp;
        lattice_model_params_init(&mp);
        mp.d_model = 64;
        mp.n_layers = mp.n_active_layers = 2;
        mp.n_heads = mp.n_kv_heads = 4;
        mp.head_dim = 16;
        mp.d_ff = 128;
        mp.max_batch = 1;
        mp.max_seq = seq;
        auto model = make<lattice_model>(
            [&](lattice_model **out) { return lattice_model_create(&mp, norm.get(), backend.get(), out); },
            "model");

        lattice_optim_params op;
        lattice_optim_params_init(&op);
        op.lr = 3e-3f;
        op.warmup_steps = 0;
        op.total_steps = 20;
        auto optim = make<lattice_optim>(
            [&](lattice_optim **out) { return lattice_optim_create(model.get(), &op, out); }, "optim");

        for (int step = 0; step < 20; step++) {
            float loss = 0.0f;
            check(lattice_model_forward(model.get(), ids.data(), 1, seq), "forward");
            check(lattice_model_cross_entropy(model.get(), ids.data() + 1, nullptr, &loss, nullptr),
                  "cross-entropy");
            check(lattice_model_backward(model.get()), "backward");
            check(lattice_optim_step(optim.get(), nullptr), "optimizer step");
            if (step % 5 == 0 || step == 19)
                std::printf("step %2d loss %.4f\n", step, loss);
        }
        std::printf("liblattice %s from C++\n", lattice_version_string());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
