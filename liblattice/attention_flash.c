/* Causal attention without the score matrix (attention.h, "flash path"): the
 * kernels' body (attention_flash_body.h) built for AVX-512, AVX2/FMA and
 * plain C, one chosen at run time from the CPU's features. */
/* float selects must if-convert; no FP-exception semantics are needed */
#pragma GCC optimize("no-trapping-math", "no-math-errno")
/* vectors travel only between always_inline helpers of one instance: no call
 * crosses an ABI boundary with them */
#pragma GCC diagnostic ignored "-Wpsabi"

#include "attention.h"

#include "backend_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FL_MAXHD LATTICE_FLASH_MAX_HD
#define FL_KT 32 /* keys per tile of the forward's online softmax */

/* S = scale * (q . k) is rounded the same way in forward and backward: the
 * barrier keeps the backward's product from fusing into the subtraction that
 * follows it (one FMA instead of a rounded product). */
#define FL_SFX portable
#define FL_TGT
#define FL_VW 8
#define FL_BARRIER(v) __asm__("" : "+m"(v))
#include "attention_flash_body.h"
#undef FL_SFX
#undef FL_TGT
#undef FL_VW
#undef FL_BARRIER

#if defined(__x86_64__) && defined(__GNUC__)
#define LATTICE_FLASH_X86 1

#define FL_SFX avx2
#define FL_TGT __attribute__((target("avx2,fma")))
#define FL_VW 8
#define FL_BARRIER(v) __asm__("" : "+v"(v))
#include "attention_flash_body.h"
#undef FL_SFX
#undef FL_TGT
#undef FL_VW
#undef FL_BARRIER

#define FL_SFX avx512
#define FL_TGT __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define FL_VW 16
#define FL_BARRIER(v) __asm__("" : "+v"(v))
#include "attention_flash_body.h"
#undef FL_SFX
#undef FL_TGT
#undef FL_VW
#undef FL_BARRIER
#endif

/* ---- which instance runs --------------------------------------------------- */

static const char *const isa_names[] = {"auto", "portable", "avx2", "avx512"};

const char *lattice__attn_isa_name(int isa)
{
    return isa >= 0 && isa <= LATTICE_ATTN_ISA_AVX512 ? isa_names[isa] : "unknown";
}

int lattice__attn_isa_supported(int isa)
{
    if (isa == LATTICE_ATTN_ISA_PORTABLE)
        return 1;
#ifdef LATTICE_FLASH_X86
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    if (isa == LATTICE_ATTN_ISA_AVX2)
        return cpu.avx2_fma;
    if (isa == LATTICE_ATTN_ISA_AVX512)
        return cpu.avx512 && cpu.avx2_fma;
#endif
    return 0;
}

/* The instance the CPU's features call for. */
static int isa_best(void)
{
    for (int isa = LATTICE_ATTN_ISA_AVX512; isa > LATTICE_ATTN_ISA_PORTABLE; isa--)
        if (lattice__attn_isa_supported(isa))
            return isa;
    return LATTICE_ATTN_ISA_PORTABLE;
}

/* The CPU's answer, found once: a fact of the machine, the same for every
 * thread that races to find it. */
static int isa_detected = -1;

int lattice__attn_isa_resolve(int requested)
{
    if (requested > LATTICE_ATTN_ISA_AUTO && lattice__attn_isa_supported(requested))
        return requested;
    int isa = __atomic_load_n(&isa_detected, __ATOMIC_RELAXED);
    if (isa < 0) {
        isa = isa_best();
        __atomic_store_n(&isa_detected, isa, __ATOMIC_RELAXED);
    }
    return isa;
}

/* A backend's choice of instance (backend.h): its names and what the CPU
 * runs are this file's, so the setting is too; the backend only holds it. */
lattice_status lattice_backend_set_attention_kernel(lattice_backend *backend, const char *name)
{
    if (lattice__need(NULL, "lattice_backend_set_attention_kernel", 2, (const void *)backend,
                      "backend", (const void *)name, "name") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    int isa = -1;
    for (int i = LATTICE_ATTN_ISA_AUTO; i <= LATTICE_ATTN_ISA_AVX512 && isa < 0; i++)
        if (strcmp(name, isa_names[i]) == 0)
            isa = i;
    if (isa < 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_attention_kernel: '%.40s' names no attention kernel (auto, "
            "portable, avx2 or avx512)", name);
    if (isa != LATTICE_ATTN_ISA_AUTO && !lattice__attn_isa_supported(isa))
        return lattice__fail(LATTICE_ERR_UNSUPPORTED,
            "lattice_backend_set_attention_kernel: this CPU cannot run the %s kernels (%s runs "
            "here)", name, isa_names[lattice__attn_isa_resolve(LATTICE_ATTN_ISA_AUTO)]);
    const lattice_status st =
        lattice__hold_change(&backend->hold, "lattice_backend_set_attention_kernel", "backend");
    if (st != LATTICE_OK)
        return st;
    backend->attn_isa = isa;
    lattice__hold_changed(&backend->hold);
    return LATTICE_OK;
}

const char *lattice_backend_get_attention_kernel(const lattice_backend *backend)
{
    const int isa = backend ? backend->attn_isa : LATTICE_ATTN_ISA_AUTO;
    return isa_names[lattice__attn_isa_resolve(isa)];
}

int lattice__flash_ok(int head_dim)
{
    return head_dim >= 8 && head_dim % 8 == 0 && head_dim <= LATTICE_FLASH_MAX_HD;
}

/* ---- the passes: kv heads of every sequence side by side -------------------- */

void lattice__flash_forward(float *att, float *lse, size_t lse_stride, const float *q,
                            const float *k, const float *v, const lattice_attn_dims *d, int nt)
{
    const int T = d->seq, hd = d->head_dim, H = d->n_heads, KV = d->n_kv_heads, G = H / KV;
    const int ldo = H * hd, nkv = d->batch * KV, isa = lattice__attn_isa_resolve(d->isa);
    const float scale = 1.0f / sqrtf((float)hd);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nkv > 1)
    for (int bk = 0; bk < nkv; bk++) {
        const int b = bk / KV, h0 = bk % KV * G;
        const size_t bh0 = (size_t)b * H + h0, kv = (size_t)bk * T * hd;
        float *o = att + (size_t)b * T * ldo + (size_t)h0 * hd, *l = lse + bh0 * lse_stride;
        const float *qg = q + bh0 * T * hd;
        switch (isa) {
#ifdef LATTICE_FLASH_X86
        case LATTICE_ATTN_ISA_AVX512:
            fwd_group_avx512(o, ldo, l, lse_stride, qg, k + kv, v + kv, G, T, hd, scale);
            break;
        case LATTICE_ATTN_ISA_AVX2:
            fwd_group_avx2(o, ldo, l, lse_stride, qg, k + kv, v + kv, G, T, hd, scale);
            break;
#endif
        default:
            fwd_group_portable(o, ldo, l, lse_stride, qg, k + kv, v + kv, G, T, hd, scale);
        }
    }
}

void lattice__flash_backward(float *dq, float *dk, float *dv, float *dd, const float *datt,
                             const float *att, const float *lse, size_t lse_stride,
                             const float *q, const float *k, const float *v,
                             const lattice_attn_dims *d, int nt)
{
    const int T = d->seq, hd = d->head_dim, H = d->n_heads, KV = d->n_kv_heads, G = H / KV;
    const int ldo = H * hd, nkv = d->batch * KV, isa = lattice__attn_isa_resolve(d->isa);
    const float scale = 1.0f / sqrtf((float)hd);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nkv > 1)
    for (int bk = 0; bk < nkv; bk++) {
        const int b = bk / KV, h0 = bk % KV * G;
        const size_t bh0 = (size_t)b * H + h0, kv = (size_t)bk * T * hd;
        const size_t orow = (size_t)b * T * ldo + (size_t)h0 * hd;
        float *dqg = dq + bh0 * T * hd, *ddg = dd + bh0 * lse_stride;
        const float *dog = datt + orow, *og = att + orow, *l = lse + bh0 * lse_stride;
        const float *qg = q + bh0 * T * hd;
        switch (isa) {
#ifdef LATTICE_FLASH_X86
        case LATTICE_ATTN_ISA_AVX512:
            bwd_group_avx512(dqg, dk + kv, dv + kv, ddg, dog, og, ldo, l, lse_stride, qg, k + kv,
                             v + kv, G, T, hd, scale);
            break;
        case LATTICE_ATTN_ISA_AVX2:
            bwd_group_avx2(dqg, dk + kv, dv + kv, ddg, dog, og, ldo, l, lse_stride, qg, k + kv,
                           v + kv, G, T, hd, scale);
            break;
#endif
        default:
            bwd_group_portable(dqg, dk + kv, dv + kv, ddg, dog, og, ldo, l, lse_stride, qg, k + kv,
                               v + kv, G, T, hd, scale);
        }
    }
}
