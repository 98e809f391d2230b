/* lattice/dist.h compiles as strict C99 (with mpi.h) and links against
 * liblattice-mpi; the getters of a NULL handle cannot fail. */
#include <lattice/dist.h>

int main(void)
{
    return lattice_dist_get_size(NULL) + lattice_dist_get_rank(NULL);
}
