/* The flash attention kernels' body, included by attention_flash.c once per
 * instruction set (no include guard). Before including, define
 *   FL_SFX  the suffix of this instance's names (avx512, avx2, portable),
 *   FL_TGT  its function attribute (a target(...) or nothing),
 *   FL_VW   its vector width in floats (16 or 8),
 * and FL_BARRIER(v) (see attention_flash.c). It defines FL(fwd_group) and
 * FL(bwd_group) for one kv head and its group of query heads.
 *
 * Forward: per query head, rows in blocks of FL_VW, one row per vector lane;
 * keys in tiles of FL_KT, 8 at a time. A tile's scores (FL_VW rows x FL_KT
 * keys) stay in registers and L1, the running max and sum per row are
 * vectors, and the output rows accumulate transposed (one vector per head
 * element) with the online softmax's rescale once per tile. Only the output
 * and each row's log-sum-exp reach memory.
 *
 * Backward: keys in blocks of FL_VW, one key per lane; for each block, every
 * query row from the block's first on (of every head of the group) recomputes
 * its scores and P from the log-sum-exp, dP from dO, dS, and adds into the
 * block's dK and dV (held transposed, one vector per head element, summed
 * over the group's heads in order) and into its own dQ row. Nothing of size
 * T x T exists.
 *
 * Every lane is one row (forward) or one key (backward), so each value's
 * chain of operations does not depend on FL_VW (its rounding still may,
 * where the compiler contracts differently). */

#define FL_CAT2(a, b) a##_##b
#define FL_CAT(a, b) FL_CAT2(a, b)
#define FL(name) FL_CAT(name, FL_SFX)
#define FLI FL_TGT __attribute__((always_inline)) static inline

#define VF FL(vf)
#define VI FL(vi)
#define VU FL(vu)
#define V8 FL(v8f)
typedef float VF __attribute__((vector_size(FL_VW * 4)));
typedef int VI __attribute__((vector_size(FL_VW * 4)));
typedef unsigned VU __attribute__((vector_size(FL_VW * 4)));
typedef float V8 __attribute__((vector_size(32)));

FLI VF FL(ld)(const float *x)
{
    VF v;
    memcpy(&v, x, sizeof v);
    return v;
}

FLI void FL(st)(float *x, VF v) { memcpy(x, &v, sizeof v); }

FLI V8 FL(ld8)(const float *x)
{
    V8 v;
    memcpy(&v, x, sizeof v);
    return v;
}

FLI void FL(st8)(float *x, V8 v) { memcpy(x, &v, sizeof v); }

FLI VF FL(bc)(float x) { return (VF){0} + x; }

FLI VF FL(vmax)(VF a, VF b)
{
    const VI m = a > b;
    return (VF)(((VI)a & m) | ((VI)b & ~m));
}

/* where m, x; elsewhere y */
FLI VF FL(sel)(VI m, VF x, VF y) { return (VF)(((VI)x & m) | ((VI)y & ~m)); }

FLI VI FL(iota)(void)
{
#if FL_VW == 16
    return (VI){0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
    return (VI){0, 1, 2, 3, 4, 5, 6, 7};
#endif
}

/* lattice__expf lane by lane, the same operations in the same order: 0 below
 * -87 and for -inf */
FLI VF FL(vexp)(VF x)
{
    const VF shifter = FL(bc)(12582912.0f); /* 1.5 * 2^23 */
    const VF t = x * 1.44269504088896341f + shifter;
    const VF n = t - shifter;
    VF r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    VF p = FL(bc)(1.0f / 5040.0f);
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const VU sc = ((VU)t - 0x4B400000u + 127u) << 23;
    const VF y = p * (VF)sc;
    return (VF)((VI)y & ~(x < -87.0f));
}

/* log(x) lane by lane for normal x > 0 (the softmax's sums, >= 1): x =
 * 2^n m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(f / (2 + f)), f = m -
 * 1, to s^9 (|s| < 0.172: truncation below 1e-9 relative), n ln2 in two parts. */
FLI VF FL(vlog)(VF x)
{
    const VI xi = (VI)x;
    VI n = ((xi >> 23) & 0xff) - 127;
    VF m = (VF)((xi & 0x007fffff) | 0x3f800000); /* [1, 2) */
    const VI big = m > 1.41421356f;
    m = FL(sel)(big, m * 0.5f, m);
    n = n + (big & 1);
    const VF f = m - 1.0f, t = f / (f + 2.0f), t2 = t * t;
    VF p = FL(bc)(1.0f / 9.0f);
    p = p * t2 + 1.0f / 7.0f;
    p = p * t2 + 1.0f / 5.0f;
    p = p * t2 + 1.0f / 3.0f;
    p = p * t2 + 1.0f;
    const VF nf = __builtin_convertvector(n, VF);
    return nf * 0.693145751953125f + (2.0f * t * p + nf * 1.428606765330187045e-06f);
}

/* ---- forward ---------------------------------------------------------------- */

/* Rows i0 .. i0 + nr - 1 (nr = min(FL_VW, T - i0)) of one head: o rows (stride
 * ldo) = softmax(scale q k^T, causal) v, lse[i] = the row's log-sum-exp of its
 * scaled scores. q, k, v: [T, hd]. */
FLI void FL(fwd_block)(float *o, int ldo, float *lse, const float *q, const float *k,
                       const float *v, int i0, int T, int hd, float scale)
{
    float qt[FL_MAXHD][FL_VW]; /* the block's queries, transposed */
    VF ot[FL_MAXHD];           /* its output rows, transposed, unnormalised */
    VF s[FL_KT];               /* a tile's scores, then its probabilities */
    const int nr = T - i0 < FL_VW ? T - i0 : FL_VW, kend = i0 + nr;
    memset(qt, 0, sizeof(float) * FL_VW * hd);
    for (int r = 0; r < nr; r++)
        for (int e = 0; e < hd; e++)
            qt[e][r] = q[(size_t)(i0 + r) * hd + e];
    for (int e = 0; e < hd; e++)
        ot[e] = (VF){0};
    const VI row = FL(iota)() + i0;
    const VF ninf = FL(bc)(-__builtin_inff());
    VF m = ninf, l = {0};
    for (int j0 = 0; j0 < kend; j0 += FL_KT) {
        const int nk = kend - j0 < FL_KT ? kend - j0 : FL_KT;
        const int nc = (nk + 7) & ~7; /* score columns: whole groups of 8 */
        for (int c0 = 0; c0 < nc; c0 += 8) {
            const float *kr[8];
            for (int c = 0; c < 8; c++) { /* past kend: a real row, masked below */
                const int j = j0 + c0 + c < kend ? j0 + c0 + c : kend - 1;
                kr[c] = k + (size_t)j * hd;
            }
            VF a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
            for (int e = 0; e < hd; e++) {
                const VF qe = FL(ld)(qt[e]);
                a0 += qe * kr[0][e];
                a1 += qe * kr[1][e];
                a2 += qe * kr[2][e];
                a3 += qe * kr[3][e];
                a4 += qe * kr[4][e];
                a5 += qe * kr[5][e];
                a6 += qe * kr[6][e];
                a7 += qe * kr[7][e];
            }
            VF *sc = s + c0;
            sc[0] = a0 * scale, sc[1] = a1 * scale, sc[2] = a2 * scale, sc[3] = a3 * scale;
            sc[4] = a4 * scale, sc[5] = a5 * scale, sc[6] = a6 * scale, sc[7] = a7 * scale;
            if (j0 + c0 + 7 > i0) /* keys past some row's own: -inf there */
                for (int c = 0; c < 8; c++)
                    sc[c] = FL(sel)(row < j0 + c0 + c, ninf, sc[c]);
        }
        /* the tile's max in 8 independent chains, then a tree: one chain of
         * nc compare-and-selects was the forward's longest wait (max is exact:
         * the same result in any order, up to the sign of a zero, which no
         * use of it sees) */
        VF mx[8];
        for (int c = 0; c < 8; c++)
            mx[c] = s[c];
        for (int c = 8; c < nc; c++)
            mx[c & 7] = FL(vmax)(mx[c & 7], s[c]);
        const VF mt = FL(vmax)(FL(vmax)(FL(vmax)(mx[0], mx[1]), FL(vmax)(mx[2], mx[3])),
                               FL(vmax)(FL(vmax)(mx[4], mx[5]), FL(vmax)(mx[6], mx[7])));
        const VF mn = FL(vmax)(m, mt);
        const VF alpha = FL(vexp)(m - mn); /* 0 on the first tile (m = -inf) */
        VF ls = {0};
        for (int c = 0; c < nc; c++) {
            s[c] = FL(vexp)(s[c] - mn);
            ls += s[c];
        }
        l = l * alpha + ls;
        m = mn;
        for (int e0 = 0; e0 < hd; e0 += 8) {
            VF o0 = ot[e0] * alpha, o1 = ot[e0 + 1] * alpha, o2 = ot[e0 + 2] * alpha;
            VF o3 = ot[e0 + 3] * alpha, o4 = ot[e0 + 4] * alpha, o5 = ot[e0 + 5] * alpha;
            VF o6 = ot[e0 + 6] * alpha, o7 = ot[e0 + 7] * alpha;
            for (int c = 0; c < nk; c++) {
                const VF p = s[c];
                const float *vr = v + (size_t)(j0 + c) * hd + e0;
                o0 += p * vr[0];
                o1 += p * vr[1];
                o2 += p * vr[2];
                o3 += p * vr[3];
                o4 += p * vr[4];
                o5 += p * vr[5];
                o6 += p * vr[6];
                o7 += p * vr[7];
            }
            ot[e0] = o0, ot[e0 + 1] = o1, ot[e0 + 2] = o2, ot[e0 + 3] = o3;
            ot[e0 + 4] = o4, ot[e0 + 5] = o5, ot[e0 + 6] = o6, ot[e0 + 7] = o7;
        }
    }
    const VF inv = 1.0f / l, lsev = m + FL(vlog)(l);
    for (int e = 0; e < hd; e++)
        ot[e] *= inv;
    for (int r = 0; r < nr; r++) {
        float *orow = o + (size_t)(i0 + r) * ldo;
        for (int e = 0; e < hd; e++)
            orow[e] = ot[e][r];
        lse[i0 + r] = lsev[r];
    }
}

FLI void FL(fwd_heads)(float *att, int ldo, float *lse, size_t lse_stride, const float *q,
                       const float *k, const float *v, int G, int T, int hd, float scale)
{
    for (int g = 0; g < G; g++)
        for (int i0 = 0; i0 < T; i0 += FL_VW)
            FL(fwd_block)(att + (size_t)g * hd, ldo, lse + g * lse_stride, q + (size_t)g * T * hd,
                          k, v, i0, T, hd, scale);
}

/* One kv head (k, v: [T, hd]) and its G query heads (q: G x [T, hd]; att: the
 * heads' output rows side by side, stride ldo; head g's lse at lse + g
 * lse_stride). */
FL_TGT static void FL(fwd_group)(float *att, int ldo, float *lse, size_t lse_stride,
                                 const float *q, const float *k, const float *v, int G, int T,
                                 int hd, float scale)
{
    switch (hd) { /* constant head widths: the loops over e unroll */
    case 16: FL(fwd_heads)(att, ldo, lse, lse_stride, q, k, v, G, T, 16, scale); break;
    case 32: FL(fwd_heads)(att, ldo, lse, lse_stride, q, k, v, G, T, 32, scale); break;
    case 64: FL(fwd_heads)(att, ldo, lse, lse_stride, q, k, v, G, T, 64, scale); break;
    case 128: FL(fwd_heads)(att, ldo, lse, lse_stride, q, k, v, G, T, 128, scale); break;
    default: FL(fwd_heads)(att, ldo, lse, lse_stride, q, k, v, G, T, hd, scale); break;
    }
}

/* ---- backward --------------------------------------------------------------- */

/* dq[ev] += sum over the block's keys c of ds[c] k_c[ev], for the row's
 * head elements in vectors of VT (W floats) from e0 on; returns where it stopped. */
#define FL_DQ_CHUNKS(VT, W, LD, ST)                                                                \
    for (; e0 + (W) <= hd; e0 += (W)) {                                                            \
        VT acc[NR];                                                                                \
        for (int r = 0; r < NR; r++)                                                               \
            acc[r] = LD(dq + (size_t)r * hd + e0);                                                 \
        for (int c = 0; c < nk; c++) {                                                             \
            const VT kc = LD(k + (size_t)(j0 + c) * hd + e0);                                      \
            for (int r = 0; r < NR; r++)                                                           \
                acc[r] += kc * dsf[r][c];                                                          \
        }                                                                                          \
        for (int r = 0; r < NR; r++)                                                               \
            ST(dq + (size_t)r * hd + e0, acc[r]);                                                  \
    }

/* Query rows per backward step: the key block's kt, vt, dkt, dvt are read
 * once for all of them (their sums still run row by row, in order). */
#define FL_NR (FL_VW == 16 ? 8 : 4)

/* NR consecutive query rows i .. i + NR - 1 of one head against the key block
 * j0 .. j0 + nk - 1 (kt, vt: the block's keys and values transposed, zero past
 * nk). q, dq: the rows' queries and dQ (stride hd); dO rows at dout (stride
 * ldo); lse, dd: the rows' log-sum-exp and rowsum(dO * O). Adds into dkt, dvt
 * (transposed, scale folded into dS) and dq. */
FLI void FL(bwd_rows)(VF *dkt, VF *dvt, float *dq, const float *q, const float *dout, int ldo,
                      const float *lse, const float *dd, float (*kt)[FL_VW],
                      float (*vt)[FL_VW], const float *k, int i, int j0, int nk, int hd,
                      float scale, const int NR)
{
    VF s[FL_NR], dp[FL_NR], p[FL_NR], ds[FL_NR];
    for (int r = 0; r < NR; r++)
        s[r] = dp[r] = (VF){0};
    for (int e = 0; e < hd; e++) {
        const VF ke = FL(ld)(kt[e]), ve = FL(ld)(vt[e]);
        for (int r = 0; r < NR; r++) {
            s[r] += ke * q[(size_t)r * hd + e];
            dp[r] += ve * dout[(size_t)r * ldo + e];
        }
    }
    const VI key = FL(iota)() + j0;
    float dsf[FL_NR][FL_VW];
    /* unrolled (NR is at most 8), each row's P and dS stay in registers for
     * the sums below instead of a loop's stack slots: the backward about 4%
     * faster at the study's shape (AVX-512), the same operations */
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++) {
        VF sr = s[r] * scale;
        FL_BARRIER(sr); /* rounded as the forward rounds it, not fused into the next op */
        p[r] = FL(vexp)(sr - lse[r]);
        if (i + r < j0 + FL_VW - 1) /* keys past the row (and past T): 0 */
            p[r] = FL(sel)(key > i + r, (VF){0}, p[r]);
        ds[r] = p[r] * (dp[r] - dd[r]) * scale;
        FL(st)(dsf[r], ds[r]);
    }
    for (int e = 0; e < hd; e++) {
        VF a = dvt[e], b = dkt[e];
        for (int r = 0; r < NR; r++) {
            a += p[r] * dout[(size_t)r * ldo + e];
            b += ds[r] * q[(size_t)r * hd + e];
        }
        dvt[e] = a;
        dkt[e] = b;
    }
    int e0 = 0;
    FL_DQ_CHUNKS(VF, FL_VW, FL(ld), FL(st))
#if FL_VW > 8
    FL_DQ_CHUNKS(V8, 8, FL(ld8), FL(st8))
#endif
}

FLI void FL(bwd_heads)(float *dq, float *dk, float *dv, float *dd, const float *datt,
                       const float *att, int ldo, const float *lse, size_t lse_stride,
                       const float *q, const float *k, const float *v, int G, int T, int hd,
                       float scale)
{
    float kt[FL_MAXHD][FL_VW], vt[FL_MAXHD][FL_VW];
    VF dkt[FL_MAXHD], dvt[FL_MAXHD];
    const size_t Thd = (size_t)T * hd;
    memset(dq, 0, sizeof(float) * G * Thd);
    for (int g = 0; g < G; g++) /* rowsum(dO * O): 8 lanes, summed in a fixed order */
        for (int i = 0; i < T; i++) {
            const float *dorow = datt + (size_t)i * ldo + (size_t)g * hd;
            const float *orow = att + (size_t)i * ldo + (size_t)g * hd;
            V8 acc = FL(ld8)(dorow) * FL(ld8)(orow);
            for (int e = 8; e < hd; e += 8)
                acc += FL(ld8)(dorow + e) * FL(ld8)(orow + e);
            dd[g * lse_stride + i] =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    for (int j0 = 0; j0 < T; j0 += FL_VW) {
        const int nk = T - j0 < FL_VW ? T - j0 : FL_VW;
        memset(kt, 0, sizeof(float) * FL_VW * hd);
        memset(vt, 0, sizeof(float) * FL_VW * hd);
        for (int c = 0; c < nk; c++)
            for (int e = 0; e < hd; e++) {
                kt[e][c] = k[(size_t)(j0 + c) * hd + e];
                vt[e][c] = v[(size_t)(j0 + c) * hd + e];
            }
        for (int e = 0; e < hd; e++)
            dkt[e] = dvt[e] = (VF){0};
        for (int g = 0; g < G; g++) {
            const float *qg = q + g * Thd, *dog = datt + (size_t)g * hd;
            const float *lg = lse + g * lse_stride, *dg = dd + g * lse_stride;
            float *dqg = dq + g * Thd;
            int i = j0;
            for (; i + FL_NR <= T; i += FL_NR)
                FL(bwd_rows)(dkt, dvt, dqg + (size_t)i * hd, qg + (size_t)i * hd,
                             dog + (size_t)i * ldo, ldo, lg + i, dg + i, kt, vt, k, i, j0, nk, hd,
                             scale, FL_NR);
            for (; i < T; i++)
                FL(bwd_rows)(dkt, dvt, dqg + (size_t)i * hd, qg + (size_t)i * hd,
                             dog + (size_t)i * ldo, ldo, lg + i, dg + i, kt, vt, k, i, j0, nk, hd,
                             scale, 1);
        }
        for (int c = 0; c < nk; c++)
            for (int e = 0; e < hd; e++) {
                dk[(size_t)(j0 + c) * hd + e] = dkt[e][c];
                dv[(size_t)(j0 + c) * hd + e] = dvt[e][c];
            }
    }
}

/* One kv head and its G query heads: dq (G x [T, hd], =), dk, dv ([T, hd], =,
 * summed over the group) from datt and att (the heads' dO and O rows side by
 * side, stride ldo) and the forward's lse (head g's at lse + g lse_stride);
 * dd: scratch laid out as lse, for each row's rowsum(dO * O). */
FL_TGT static void FL(bwd_group)(float *dq, float *dk, float *dv, float *dd, const float *datt,
                                 const float *att, int ldo, const float *lse, size_t lse_stride,
                                 const float *q, const float *k, const float *v, int G, int T,
                                 int hd, float scale)
{
    switch (hd) {
    case 16:
        FL(bwd_heads)(dq, dk, dv, dd, datt, att, ldo, lse, lse_stride, q, k, v, G, T, 16, scale);
        break;
    case 32:
        FL(bwd_heads)(dq, dk, dv, dd, datt, att, ldo, lse, lse_stride, q, k, v, G, T, 32, scale);
        break;
    case 64:
        FL(bwd_heads)(dq, dk, dv, dd, datt, att, ldo, lse, lse_stride, q, k, v, G, T, 64, scale);
        break;
    case 128:
        FL(bwd_heads)(dq, dk, dv, dd, datt, att, ldo, lse, lse_stride, q, k, v, G, T, 128, scale);
        break;
    default:
        FL(bwd_heads)(dq, dk, dv, dd, datt, att, ldo, lse, lse_stride, q, k, v, G, T, hd, scale);
        break;
    }
}

#undef FL_DQ_CHUNKS
#undef FL_NR
#undef VF
#undef VI
#undef VU
#undef V8
#undef FLI
#undef FL
#undef FL_CAT
#undef FL_CAT2
