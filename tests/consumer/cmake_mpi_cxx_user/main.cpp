// Over the ranks of MPI_COMM_WORLD, liblattice-mpi's sum of each rank's
// rank + 1, from C++: prints "rank R of N: sum S" (S = N (N + 1) / 2).
#include <lattice/dist.h>

#include <cstdio>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    lattice_dist *dist = nullptr;
    int rc = 1;
    if (lattice_dist_create(MPI_COMM_WORLD, &dist) == LATTICE_OK) {
        double v = lattice_dist_get_rank(dist) + 1.0;
        if (lattice_dist_sum_doubles(dist, &v, 1) == LATTICE_OK) {
            std::printf("rank %d of %d: sum %.1f\n", lattice_dist_get_rank(dist),
                        lattice_dist_get_size(dist), v);
            rc = 0;
        } else {
            std::fprintf(stderr, "sum: %s\n", lattice_dist_errmsg(dist));
        }
        lattice_dist_destroy(dist);
    }
    MPI_Finalize();
    return rc;
}
