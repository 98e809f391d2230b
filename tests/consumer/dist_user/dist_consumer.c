/* A program that uses liblattice-mpi as a user would, through nothing but
 * `pkg-config --cflags --libs lattice-mpi` against an installed copy
 * (tests/consumer/run_consumers.py builds it and runs it on 2 ranks). A
 * hand-written data-parallel loop: each rank trains on its half of two
 * copies of one sentence, gradients summed over ranks; rank 0 prints the
 * global loss as it falls. */
#include <lattice/dist.h>
#include <stdio.h>
#include <string.h>

static int failed(const char *what, lattice_status st)
{
    fprintf(stderr, "%s: %s: %s\n", what, lattice_status_string(st), lattice_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    lattice_dist *dist;
    lattice_status st = lattice_dist_create(MPI_COMM_WORLD, &dist);
    if (st != LATTICE_OK)
        return failed("lattice_dist_create", st);
    static const char text[] = "a lattice of layers, grown one block at a time";
    enum { SEQ = sizeof(text) - 2 };
    int32_t ids[sizeof(text) - 1];
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        ids[i] = (unsigned char)text[i];

    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *model;
    lattice_optim *opt;
    if ((st = lattice_backend_create("ref", &be)) != LATTICE_OK)
        return failed("backend", st);
    if ((st = lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &norm)) != LATTICE_OK)
        return failed("norm", st);
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.d_model = 32;
    mp.n_layers = mp.n_active_layers = 1;
    mp.n_heads = mp.n_kv_heads = 2;
    mp.head_dim = 16;
    mp.d_ff = 64;
    mp.max_batch = 1;
    mp.max_seq = SEQ;
    if ((st = lattice_model_create(&mp, norm, be, &model)) != LATTICE_OK)
        return failed("model", st);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f;
    op.warmup_steps = 0;
    op.total_steps = 20;
    if ((st = lattice_optim_create(model, &op, &opt)) != LATTICE_OK)
        return failed("optimizer", st);
    const double share = 1.0 / lattice_dist_get_size(dist); /* equal token counts */
    for (int step = 0; step < 20; step++) {
        float loss;
        if ((st = lattice_model_forward(model, ids, 1, SEQ)) != LATTICE_OK ||
            (st = lattice_model_cross_entropy(model, ids + 1, NULL, &loss, NULL)) != LATTICE_OK ||
            (st = lattice_model_backward(model)) != LATTICE_OK)
            return failed("step", st);
        double sum[1] = {loss * share};
        if ((st = lattice_dist_allreduce_gradients(dist, model, share)) != LATTICE_OK ||
            (st = lattice_dist_sum_doubles(dist, sum, 1)) != LATTICE_OK)
            return failed("sum over ranks", st);
        if ((st = lattice_optim_step(opt, NULL)) != LATTICE_OK)
            return failed("update", st);
        if (lattice_dist_get_rank(dist) == 0 && (step % 5 == 0 || step == 19))
            printf("step %2d loss %.4f\n", step, sum[0]);
    }
    if (lattice_dist_get_rank(dist) == 0)
        printf("liblattice %s over %d ranks\n", lattice_version_string(),
               lattice_dist_get_size(dist));
    lattice_optim_destroy(opt);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    lattice_dist_destroy(dist);
    MPI_Finalize();
    return 0;
}
