/* Per-op timing of a model's passes (profile.h): the ops' names and the
 * switch. Private: bench_step and the tests reach it through the static
 * library. */
#include "model_impl.h"

#include <string.h>

static const char *const op_names[LATTICE_OP_COUNT] = {
    "embed", "gemm_qkv", "gemm_o", "gemm_mlp", "gemm_head", "attn_score", "attn_value",
    "softmax", "attn_fused", "norm", "rope", "elementwise", "loss", "optim", "grad_sum",
};

const char *lattice__op_name(lattice_op op)
{
    return (unsigned)op < LATTICE_OP_COUNT ? op_names[op] : "?";
}

void lattice__model_profile(lattice_model *m, int on)
{
    memset(&m->prof, 0, sizeof(m->prof));
    m->prof.on = on;
}

const lattice_prof *lattice__model_profile_get(const lattice_model *m) { return &m->prof; }
