/* libFuzzer: precomputed teacher-logits files (lattice_teacher_create_file and its lookups). */
#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lattice_teacher *t = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    if (lattice_teacher_create_file(fuzz_write(data, size, ".logits"), &t, err) != LATTICE_OK)
        return 0;
    /* ask for the tokens of the seed's first batch and for all-zero tokens */
    static const int32_t seen[2 * 6] = {12, 1, 2, 3, 0, 0, 12, 4, 5, 6, 7, 0};
    int32_t zeros[2 * 6];
    memset(zeros, 0, sizeof zeros);
    const float *z;
    const int32_t *ix;
    const float *v;
    for (int seq = 1; seq <= 6; seq++) {
        lattice_teacher_logits(t, seen, 2, seq, &z);
        lattice_teacher_topk(t, seen, 2, seq, &ix, &v);
        lattice_teacher_logits(t, zeros, 1, seq, &z);
    }
    lattice_teacher_destroy(t);
    return 0;
}
