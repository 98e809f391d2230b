/* CPU features that decide which GEMM kernels should run, and the OpenBLAS
 * core type they call for. Decided from features, not from the CPU model:
 * the libraries' own model tables are what fall behind new CPUs. */
#include "backend_impl.h"

#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

/* AMX needs the CPUID bit and the OS enabling the tile state in XCR0 (bits 17, 18). */
static int amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)))
        return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & (3u << 17)) == (3u << 17);
}

void lattice__cpu_detect(lattice__cpu *cpu)
{
    /* __builtin_cpu_supports already checks that the OS saves the AVX/AVX-512 state. */
    __builtin_cpu_init();
    cpu->avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    cpu->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    cpu->avx512_bf16 = cpu->avx512 && __builtin_cpu_supports("avx512bf16");
    cpu->amx = cpu->avx512 && amx_usable();
}

#else

void lattice__cpu_detect(lattice__cpu *cpu) { memset(cpu, 0, sizeof(*cpu)); }

#endif

/* SGEMM runs the same AVX-512 kernels on SkylakeX, Cooperlake and
 * SapphireRapids cores (on this Emerald Rapids host SkylakeX and Cooperlake
 * measure the same within noise, 117-148 GFLOP/s on one thread); the newer
 * names are asked for where the CPU has their features so that OpenBLAS's
 * BF16/AMX routines come along. Cooperlake, not SapphireRapids, for BF16
 * without AMX: OpenBLAS 0.3.21 does not know SapphireRapids. */
const char *lattice__openblas_core_for(const lattice__cpu *cpu)
{
    if (cpu->amx)
        return "SapphireRapids";
    if (cpu->avx512_bf16)
        return "Cooperlake";
    if (cpu->avx512)
        return "SkylakeX";
    if (cpu->avx2_fma)
        return "Haswell";
    return NULL;
}

int lattice__openblas_core_optimised(const char *core)
{
    static const char *const fast[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids", "Excavator"};
    if (!core)
        return 0;
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++)
        if (strcasecmp(core, fast[i]) == 0)
            return 1;
    return 0;
}
