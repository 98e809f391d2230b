/* Kept runs of the reproduction (examples/reproduce/store.c): the input is a
 * list of edits (4 bytes of position, 1 of value) to a valid run file, and
 * any file that differs from the original must be refused, never reused; the
 * input itself is also read as a run file, which must not crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../reproduce/kept_sample.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *good;
    static size_t n;
    if (!good)
        good = sample_kept(&n);
    (void)sample_reused((const char *)data, size);
    char *bad = malloc(n);
    memcpy(bad, good, n);
    size_t m = n;
    for (size_t at = 0; at + 5 <= size; at += 5) {
        uint32_t pos;
        memcpy(&pos, data + at, 4);
        if (pos == UINT32_MAX) /* a cut */
            m = data[at + 4] * (n / 256);
        else
            bad[pos % n] = (char)data[at + 4];
    }
    if ((m != n || memcmp(bad, good, n) != 0) && sample_reused(bad, m))
        __builtin_trap(); /* a corrupted record was taken for the run */
    free(bad);
    return 0;
}
