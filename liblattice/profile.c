/* Per-op timing of a model's passes (profile.h): the ops' names. The switch
 * is the model's (model.c). Private: bench_step and the tests reach it
 * through the static library. */
#include "profile.h"

static const char *const op_names[LATTICE_OP_COUNT] = {
    "embed", "gemm_qkv", "gemm_o", "gemm_mlp", "gemm_head", "attn_score", "attn_value",
    "softmax", "attn_fused", "norm", "rope", "elementwise", "loss", "optim", "grad_sum",
};

const char *lattice__op_name(lattice_op op)
{
    return (unsigned)op < LATTICE_OP_COUNT ? op_names[op] : "?";
}
