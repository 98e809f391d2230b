/* lattice_dist_create before MPI_Init: a status and a message, not a crash.
 * Run as a plain process (no mpirun): MPI_Initialized may be called before
 * MPI_Init. */
#include <lattice/dist.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    lattice_dist *d = (lattice_dist *)&d; /* must come back NULL */
    const lattice_status st = lattice_dist_create(MPI_COMM_WORLD, &d);
    if (st != LATTICE_ERR_STATE || d != NULL || !strstr(lattice_last_error(), "not initialised") ||
        !strstr(lattice_last_error(), "MPI_Init")) {
        fprintf(stderr, "lattice_dist_create before MPI_Init: status %d, message '%s'\n", (int)st,
                lattice_last_error());
        return 1;
    }
    printf("refused: %s\n", lattice_last_error());
    return 0;
}
