/* Compiled as strict C99 with -pedantic -Werror: the public headers must be
 * clean, and header and library versions must agree. */
#include <lattice/lattice.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (lattice_version_number() != LATTICE_VERSION_NUMBER ||
        strcmp(lattice_version_string(), LATTICE_VERSION_STRING) != 0) {
        printf("header %s, library %s\n", LATTICE_VERSION_STRING, lattice_version_string());
        return 1;
    }
    printf("%s\n", lattice_status_string(LATTICE_OK));
    return 0;
}
