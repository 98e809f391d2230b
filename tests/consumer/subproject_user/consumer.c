/* A program that uses liblattice as any user would, seeing only the installed
 * headers and library. tests/consumer/run_consumers.py builds it three ways:
 * through pkg-config against an installed copy (shared, then static), and as
 * this directory's meson project with liblattice as a subproject. It trains a
 * tiny post-norm model on one sentence and prints the loss as it falls. */
#include <lattice/lattice.h>
#include <stdio.h>
#include <string.h>

static int failed(const char *what, lattice_status st, const char *detail)
{
    fprintf(stderr, "%s: %s%s%s\n", what, lattice_status_string(st), detail ? ": " : "",
            detail ? detail : "");
    return 1;
}

int main(void)
{
    if (lattice_version_number() != LATTICE_VERSION_NUMBER) {
        fprintf(stderr, "header %s, library %s\n", LATTICE_VERSION_STRING, lattice_version_string());
        return 1;
    }
    static const char text[] = "a lattice of layers, grown one block at a time";
    enum { SEQ = sizeof(text) - 2 }; /* inputs text[0..SEQ), targets one further */
    int32_t ids[sizeof(text) - 1];
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        ids[i] = (unsigned char)text[i];

    lattice_backend *be;
    lattice_norm *norm;
    lattice_status st = lattice_backend_create("default", &be);
    if (st != LATTICE_OK)
        return failed("backend", st, NULL);
    if ((st = lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-6f, &norm)) != LATTICE_OK)
        return failed("norm", st, NULL);

    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.d_model = 64;
    mp.n_layers = mp.n_active_layers = 2;
    mp.n_heads = mp.n_kv_heads = 4;
    mp.head_dim = 16;
    mp.d_ff = 128;
    mp.max_batch = 1;
    mp.max_seq = SEQ;
    lattice_model *model;
    if ((st = lattice_model_create(&mp, norm, be, &model)) != LATTICE_OK)
        return failed("model", st, NULL);
    lattice_norm_destroy(norm);

    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f;
    op.warmup_steps = 0;
    op.total_steps = 20;
    lattice_optim *opt;
    if ((st = lattice_optim_create(model, &op, &opt)) != LATTICE_OK)
        return failed("optimizer", st, NULL);

    for (int step = 0; step < 20; step++) {
        float loss;
        if ((st = lattice_model_forward(model, ids, 1, SEQ)) != LATTICE_OK ||
            (st = lattice_model_cross_entropy(model, ids + 1, NULL, &loss, NULL)) != LATTICE_OK ||
            (st = lattice_model_backward(model)) != LATTICE_OK)
            return failed("step", st, lattice_model_errmsg(model));
        if ((st = lattice_optim_step(opt, NULL)) != LATTICE_OK)
            return failed("update", st, lattice_optim_errmsg(opt));
        if (step % 5 == 0 || step == 19)
            printf("step %2d loss %.4f\n", step, loss);
    }
    printf("liblattice %s, backend %s\n", lattice_version_string(), lattice_backend_get_name(be));
    lattice_optim_destroy(opt);
    lattice_model_destroy(model);
    lattice_backend_destroy(be);
    return 0;
}
