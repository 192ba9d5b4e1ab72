"""The C helpers generated regions call: vectorized math, a packed GEMM, conv and pool drivers.

The big helpers (GEMM, conv, pools) form a library compiled once into an object file that
every region links (``LIBRARY``), so a region's own compile stays small; the small ones (exp,
tanh, erf, vector sums) are pasted into each region that asks for them (``render``), where
they inline into its loops. All of it is byoc's own C and takes no string from a model.

The GEMM is the classic BLIS shape: B is packed into NR-wide panels (from a strided matrix, or
from a zero-padded copy of a conv's input, which is im2col without its buffer), A into MR-tall
panels with alpha folded in, and a 6 x 2*GW micro-kernel keeps its accumulators in vector
registers (GCC vector extensions: AVX-512 or AVX when compiled for it, SSE or NEON otherwise).
Only the GEMM takes AVX-512's 16 floats (GW); the other helpers stay at VW (8 on AVX), so
their sums, and the narrow rows of small feature maps, are as on an AVX machine.
"""

from __future__ import annotations

import numpy as np

from . import pool

# Sizes the Python side needs to reserve scratch for packing (largest NR: AVX-512's 32).
MR, NR, KC, MC, NC = 6, 32, 256, 72, 1024
FEW_COLS = 4  # BYOC_FEW_COLS: columns past a whole vector that byoc_gemm takes one by one


def machine_nr() -> int:
    """The NR the GEMM is compiled with here (-march=native): 32 with AVX-512, 16 with AVX, else
    8 (SSE, NEON, or a compiler that refused -march=native). pack_b lays constants out by it."""
    from byoc.codegen.build_cache import native_flags_have

    return 32 if native_flags_have("avx512f") else 16 if native_flags_have("avx") else 8

_PRELUDE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
"""

# The thread pool as regions see it (backends/ccompiler/pool.py): one pointer per module, set
# when the module is loaded (byoc_attach), the same pool for every region of the process.
_RT = pool.API + r"""
extern const byoc_rt_api *byoc_rt;
static inline int byoc_threads(void) { return byoc_rt->threads(); }
static inline void byoc_parallel(long n, byoc_task_fn fn, void *ctx) { byoc_rt->parallel(n, fn, ctx); }
/* a task's own scratch (slot 1; the GEMM's packing buffers are slot 0) */
static inline void *byoc_task_scratch(long bytes) { return byoc_rt->scratch(1, bytes); }
/* Work (multiply-adds, or elements times cost) below which a kernel stays on one thread */
/* (a GEMM: 4x it, ~15 us on AVX-512; a smaller one cut cost more than it saved in ViT). */
#define BYOC_PAR_WORK 262144L
/* fn over 0..n: on the pool when the work is BYOC_PAR_WORK or more, else on this thread */
static inline void byoc_parallel_if(long work, long n, byoc_task_fn fn, void *ctx) {
    if (work >= BYOC_PAR_WORK) byoc_parallel(n, fn, ctx);
    else fn(ctx, 0, n);
}
"""

_RT_DEF = r"""
const byoc_rt_api *byoc_rt;
void byoc_attach(const void *api) { byoc_rt = (const byoc_rt_api *)api; }
"""
ATTACH_CDEF = "void byoc_attach(const void *api);"

_VEC = r"""
/* the one include of intrinsics: AVX's, and AVX-512's used below */
#if defined(__AVX__)
#include <immintrin.h>
#define BYOC_VW 8
#else
#define BYOC_VW 4
#endif
typedef float byoc_vf __attribute__((vector_size(4 * BYOC_VW), aligned(4), may_alias));
typedef int byoc_vi __attribute__((vector_size(4 * BYOC_VW)));
typedef float byoc_v8 __attribute__((vector_size(32)));  /* what AVX's masked moves point to */
/* even and odd lanes of two vectors (a stride-2 row split into its phases; im2col's packer */
/* and the window ops' planes) */
#if defined(__AVX__)
#define BYOC_EVEN ((byoc_vi){0, 2, 4, 6, 8, 10, 12, 14})
#define BYOC_ODD ((byoc_vi){1, 3, 5, 7, 9, 11, 13, 15})
#else
#define BYOC_EVEN ((byoc_vi){0, 2, 4, 6})
#define BYOC_ODD ((byoc_vi){1, 3, 5, 7})
#endif
/* v's first n (0 <= n <= BYOC_VW) lanes to p: with AVX, stores of 4, 2 and 1 lanes from the */
/* register's halves (a memcpy of a length GCC cannot know is a libc call: 14% of a Winograd */
/* conv on 14x14, whose tile rows are 7; AVX's masked store is microcoded on AMD's Zen: */
/* two of them a row were 40% of a 576 x 14 x 14 MaxPool's time) */
static inline void byoc_vstore_first(float *p, byoc_vf v, long n) {
#if defined(__AVX__)
    if (n == 8) { *(byoc_vf *)p = v; return; }
    __m128 part = _mm256_castps256_ps128((__m256)v);
    if (n >= 4) {
        _mm_storeu_ps(p, part);
        part = _mm256_extractf128_ps((__m256)v, 1);
        p += 4, n -= 4;
    }
    if (n >= 2) {
        _mm_storel_pi((__m64 *)p, part);
        part = _mm_movehl_ps(part, part);
        p += 2, n -= 2;
    }
    if (n) _mm_store_ss(p, part);
#else
    memcpy(p, &v, sizeof(float) * n);
#endif
}
"""

# exp: x = n ln2 + r, a degree-5 polynomial in r (minimax-fitted, relative error under 2e-7:
# a degree fewer than Cephes' for a few ulp), 2^n built in the exponent bits. Written without
# branches or libm calls (and compiled with -fno-trapping-math) so that loops calling it
# vectorize; nor clamps: out of range, the arithmetic may give garbage, which the two selects
# at the end replace. NaN and +-inf come out as expf gives them: a NaN is carried by the
# polynomial and passes both selects; past ln(FLT_MAX) the result is inf; below exp(-86.6)
# ~ 2.5e-38 it is 0 (expf would give a denormal there). In a fused chain this is the cost
# (the loop is bound by its instruction count), hence every operation saved.
_MATH = r"""
static inline float byoc_expf(float x) {
    /* n = round(x / ln2) in the low bits of t (adding 1.5 * 2^23 rounds to an integer); */
    /* the extra 126 puts n + 126 there, the exponent field of 2^(n-1): scale is a shift. */
    float t = x * 1.44269504088896341f + 12583038.0f;
    float n = t - 12583038.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    /* 2 e^r, coefficients doubled: scale is 2^(n-1), a normal number for n in [-125, 128]. */
    float p = 1.66148301e-2f;
    p = p * r + 8.38320777e-2f;
    p = p * r + 3.33348602e-1f;
    p = p * r + 9.99977767e-1f;
    p = p * r + 1.99999952f;
    p = p * r + 2.00000024f;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits <<= 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    e = x > 88.72283935546875f ? INFINITY : e;
    return x < -86.6f ? 0.0f : e;
}
/* MaxPool's fold: a NaN in the window is skipped, as onnxruntime does. */
static inline float byoc_fmax(float a, float b) { return a > b ? a : b; }
static inline float byoc_sigmoidf(float x) { return 1.0f / (1.0f + byoc_expf(-x)); }
static inline float byoc_tanhf(float x) {
    /* Near 0, 1 - 2/(e^2x + 1) loses digits; the odd Taylor series is exact there. */
    float ax = fabsf(x);
    float e = byoc_expf(-2.0f * ax);
    float big = (1.0f - e) / (1.0f + e);
    float x2 = x * x;
    float small = ax * (1.0f + x2 * (-0.333333333f + x2 * (0.133333333f + x2 * -0.0539682540f)));
    float t = ax < 0.0625f ? small : big;
    return x < 0.0f ? -t : t;
}
static inline float byoc_erff(float x) {
    /* Abramowitz & Stegun 7.1.26 refined: |error| < 1.5e-7. */
    float ax = fabsf(x);
    float t = 1.0f / (1.0f + 0.3275911f * ax);
    float y = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f
              + t * (-1.453152027f + t * 1.061405429f))));
    float r = 1.0f - y * byoc_expf(-ax * ax);
    return x < 0.0f ? -r : r;
}
"""

_GEMM = r"""
/* The GEMM's vector: AVX-512's 16 floats where the CPU has them (twice AVX's multiply-adds */
/* per instruction; a product's element sums its K terms in the same order at any width). */
#if defined(__AVX512F__)
#define BYOC_GW 16
#else
#define BYOC_GW BYOC_VW
#endif
typedef float byoc_gf __attribute__((vector_size(4 * BYOC_GW), aligned(4), may_alias));
#if defined(__AVX512F__)
/* the first `lanes` of 16 (all past 16, none below 1): a partial vector's mask */
static inline __mmask16 byoc_mask16(long lanes) {
    return lanes >= 16 ? 0xFFFF : lanes > 0 ? (__mmask16)((1u << lanes) - 1) : 0;
}
#endif
#define BYOC_MR 6
#define BYOC_NR (2 * BYOC_GW)
#define BYOC_KC 256
#define BYOC_MC 72
#define BYOC_NC 1024
#define BYOC_EPI_W (4 * BYOC_NR)
/* Up to this many rows of A, B's whole column panels are read in place, not packed (a packed
   panel serving so few rows does not repay its copy: 48 measured even or better, 64 mixed,
   128 slower; docs/decisions.md). */
#define BYOC_INPLACE_M 48

/* Writes rows k0..k0+kc, columns j0..j0+nc of B as NR-wide panels, zero-padded. */
typedef void (*byoc_pack_fn)(const void *src, long k0, long kc, long j0, long nc, float *bp);

static void byoc_pack_b_mat(const void *src, long k0, long kc, long j0, long nc, float *bp) {
    const byoc_mat *b = (const byoc_mat *)src;
    for (long jp = 0; jp < nc; jp += BYOC_NR) {
        long n = nc - jp < BYOC_NR ? nc - jp : BYOC_NR;
        const float *s = b->p + k0 * b->rs + (j0 + jp) * b->cs;
        float *d = bp + jp * kc;
        if (n == BYOC_NR && b->cs == 1) {
            for (long k = 0; k < kc; k++)
                for (int j = 0; j < BYOC_NR; j++) d[k * BYOC_NR + j] = s[k * b->rs + j];
#if defined(__AVX512F__)
        } else if (b->cs == 1) {  /* the last, narrower panel: masked loads, zeros past n */
            const __mmask16 m0 = byoc_mask16(n), m1 = byoc_mask16(n - 16);
            for (long k = 0; k < kc; k++) {
                _mm512_storeu_ps(d + k * BYOC_NR, _mm512_maskz_loadu_ps(m0, s + k * b->rs));
                _mm512_storeu_ps(d + k * BYOC_NR + 16,
                                 _mm512_maskz_loadu_ps(m1, s + k * b->rs + 16));
            }
#endif
        } else {
            for (long k = 0; k < kc; k++) {
                for (long j = 0; j < n; j++) d[k * BYOC_NR + j] = s[k * b->rs + j * b->cs];
                for (long j = n; j < BYOC_NR; j++) d[k * BYOC_NR + j] = 0.0f;
            }
        }
    }
}

/* Rows i0..i0+mc, columns k0..k0+kc of alpha * A as MR-row panels, each column of a panel
   contiguous. A last panel of fewer rows is not zero-padded: byoc_gemm_block gives those rows
   to byoc_ukernel_rows, which reads only them. */
static void byoc_pack_a(const byoc_mat *a, long i0, long mc, long k0, long kc, float alpha,
                        float *ap) {
    for (long ip = 0; ip < mc; ip += BYOC_MR) {
        long m = mc - ip < BYOC_MR ? mc - ip : BYOC_MR;
        const float *s = a->p + (i0 + ip) * a->rs + k0 * a->cs;
        for (long k = 0; k < kc; k++)
            for (long i = 0; i < m; i++) ap[k * BYOC_MR + i] = alpha * s[i * a->rs + k * a->cs];
        ap += kc * BYOC_MR;
    }
}

/* A prefetch of p + n floats, counted in integers: past the last panel of A that address is
   no object's, and forming such a pointer is undefined in C (the prefetch itself never faults). */
static inline void byoc_prefetch_ahead(const float *p, long n) {
    __builtin_prefetch((const void *)((uintptr_t)p + (uintptr_t)n * sizeof(float)));
}

/* c[0..lanes) (+)= x's first lanes (none at or below 0, all GW past it): masked loads and
   stores, no access past them. */
static inline void byoc_store_lanes(float *c, byoc_gf x, long lanes, int accumulate) {
    if (lanes <= 0) return;
#if defined(__AVX512F__)
    const __mmask16 mask = byoc_mask16(lanes);
    if (accumulate) x = (byoc_gf)_mm512_add_ps((__m512)x, _mm512_maskz_loadu_ps(mask, c));
    _mm512_mask_storeu_ps(c, mask, (__m512)x);
#elif defined(__AVX__) && BYOC_GW == 8
    const byoc_vi mv = (byoc_vi){0, 1, 2, 3, 4, 5, 6, 7} < (byoc_vi){0} + (int)lanes;
    if (accumulate) x += __builtin_ia32_maskloadps256((const byoc_v8 *)c, mv);
    __builtin_ia32_maskstoreps256((byoc_v8 *)c, mv, x);
#else
    for (long j = 0; j < lanes && j < BYOC_GW; j++) c[j] = accumulate ? c[j] + x[j] : x[j];
#endif
}

/* C[m x n] (+)= an MR-row panel of A times kc rows of NR floats of B: a packed panel (row k
   at bp + k * NR), or, with off, rows read in place at bp + off[k] (a direct conv's taps, a
   GEMM's B of few rows of A); with bias (not with accumulate), each row's sums start from it.
   MR x NV vectors of accumulators (GCC unrolls the constant loops and keeps them in
   registers; it unswitches the k loop on off: two loops, neither testing it).
   Each k step prefetches the next MR-row panel of A at the same k, which the next call reads:
   a model's weights come from memory once a run, and on small maps (7x7, 14x14) few columns
   use each, so the first column panel waited on them (resnet50 at one thread 45-46 -> 39-41
   ms; past A's end the address is counted in integers, byoc_prefetch_ahead). */
#define BYOC_NV (BYOC_NR / BYOC_GW)
static void byoc_ukernel(long kc, const float *restrict ap, const float *restrict bp,
                         const long *restrict off, float *restrict c, long ldc, long m, long n,
                         int accumulate, const float *restrict bias) {
    byoc_gf acc[BYOC_MR][BYOC_NV];
    /* C's rows of the tile on their way to L1 while the k loop runs: the tile's update had
       waited on them (a K block's partial sums, or C's first write, from L2 or beyond) */
    for (long i = 0; i < m; i++) {
        __builtin_prefetch(c + i * ldc, 1);
        __builtin_prefetch(c + i * ldc + n - 1, 1);
    }
#pragma GCC unroll 32
    for (int i = 0; i < BYOC_MR; i++)
#pragma GCC unroll 4
        for (int v = 0; v < BYOC_NV; v++)
            acc[i][v] = (byoc_gf){0} + (bias && i < m ? bias[i] : 0.0f);
    if (n <= BYOC_GW) {  /* a panel's last columns: one vector a row */
        /* even and odd k in two sets of accumulators, added at the end: MR chains alone
           wait on each FMA's latency (a 16-column panel cost as much as a 32-column one) */
        byoc_gf odd[BYOC_MR];
#pragma GCC unroll 32
        for (int i = 0; i < BYOC_MR; i++) odd[i] = (byoc_gf){0};
        long k = 0;
        for (; k + 1 < kc; k += 2) {
            const float *b = off ? bp + off[k] : bp + k * BYOC_NR;
            const float *b1 = off ? bp + off[k + 1] : bp + (k + 1) * BYOC_NR;
            const byoc_gf b0 = *(const byoc_gf *)b, bo = *(const byoc_gf *)b1;
            const float *a = ap + k * BYOC_MR;
            byoc_prefetch_ahead(a, BYOC_MR * kc);
#pragma GCC unroll 32
            for (int i = 0; i < BYOC_MR; i++) {
                acc[i][0] += a[i] * b0;
                odd[i] += a[BYOC_MR + i] * bo;
            }
        }
        if (k < kc) {
            const float *b = off ? bp + off[k] : bp + k * BYOC_NR;
            const byoc_gf b0 = *(const byoc_gf *)b;
            const float *a = ap + k * BYOC_MR;
#pragma GCC unroll 32
            for (int i = 0; i < BYOC_MR; i++) acc[i][0] += a[i] * b0;
        }
#pragma GCC unroll 32
        for (int i = 0; i < BYOC_MR; i++) acc[i][0] += odd[i];
    } else {
        for (long k = 0; k < kc; k++) {
            const float *b = off ? bp + off[k] : bp + k * BYOC_NR;
            byoc_gf bv[BYOC_NV];
#pragma GCC unroll 4
            for (int v = 0; v < BYOC_NV; v++) bv[v] = *(const byoc_gf *)(b + v * BYOC_GW);
            const float *a = ap + k * BYOC_MR;
            byoc_prefetch_ahead(a, BYOC_MR * kc);
#pragma GCC unroll 32
            for (int i = 0; i < BYOC_MR; i++)
#pragma GCC unroll 4
                for (int v = 0; v < BYOC_NV; v++) acc[i][v] += a[i] * bv[v];
        }
    }
    if (m == BYOC_MR && n == BYOC_NR) {  /* straight from the registers */
#pragma GCC unroll 32
        for (int i = 0; i < BYOC_MR; i++)
#pragma GCC unroll 4
            for (int v = 0; v < BYOC_NV; v++) {
                byoc_gf *r = (byoc_gf *)(c + i * ldc + v * BYOC_GW);
                if (accumulate) *r += acc[i][v];
                else *r = acc[i][v];
            }
        return;
    }
    for (long i = 0; i < m; i++)
        for (int v = 0; v < BYOC_NV; v++)
            byoc_store_lanes(c + i * ldc + v * BYOC_GW, acc[i][v], n - v * BYOC_GW, accumulate);
}

/* Rows R (< MR) of an MR-row panel of A times P NR-column panels of B at once, packed (panel p
   at bp + p * kc * NR) or read in place (row k of panel p at bp + off[k] + p * NR): a GEMM's
   last rows (M = 49 positions: 8 panels and 1 row) had been computed as MR rows against one
   panel, 6x the FMAs for one row; R x P x NV chains keep the FMAs busy. n: columns to store. */
static inline __attribute__((always_inline)) void byoc_ukernel_rows_rp(
        long kc, const float *restrict ap, const float *restrict bp, const long *restrict off,
        float *restrict c, long ldc, const int R, const int P, long n, int accumulate,
        const float *restrict bias) {
    byoc_gf acc[BYOC_MR][4][BYOC_NV];
    const long pstride = off ? BYOC_NR : kc * BYOC_NR;
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int p = 0; p < P; p++)
#pragma GCC unroll 4
            for (int v = 0; v < BYOC_NV; v++) acc[i][p][v] = (byoc_gf){0} + (bias ? bias[i] : 0.0f);
    for (long k = 0; k < kc; k++) {
        const float *b = off ? bp + off[k] : bp + k * BYOC_NR;
        byoc_gf bv[4][BYOC_NV];
#pragma GCC unroll 4
        for (int p = 0; p < P; p++)
#pragma GCC unroll 4
            for (int v = 0; v < BYOC_NV; v++)
                bv[p][v] = *(const byoc_gf *)(b + p * pstride + v * BYOC_GW);
        const float *a = ap + k * BYOC_MR;
#pragma GCC unroll 8
        for (int i = 0; i < R; i++)
#pragma GCC unroll 4
            for (int p = 0; p < P; p++)
#pragma GCC unroll 4
                for (int v = 0; v < BYOC_NV; v++) acc[i][p][v] += a[i] * bv[p][v];
    }
    for (int i = 0; i < R; i++)
        for (int p = 0; p < P; p++)
            for (int v = 0; v < BYOC_NV; v++)
                byoc_store_lanes(c + i * ldc + p * BYOC_NR + v * BYOC_GW, acc[i][p][v],
                                 n - p * BYOC_NR - v * BYOC_GW, accumulate);
}

/* Panels of B at once for R rows: as many as the registers hold (R x P x NV accumulators
   and P x NV of B: 32 vector registers with AVX-512, 16 otherwise). */
#if defined(__AVX512F__)
static const int byoc_rows_panels[BYOC_MR] = {0, 4, 4, 3, 2, 2};
#else
static const int byoc_rows_panels[BYOC_MR] = {0, 2, 2, 1, 1, 1};
#endif

/* C[m x n] (+)= the first m (< MR) rows of an MR-row panel of A times the n columns of B from
   bp (as byoc_ukernel_rows_rp reads it), up to byoc_rows_panels[m] panels a call (no more
   than are left: nothing is read past B's last panel). */
#define BYOC_ROWS_P(R, P) byoc_ukernel_rows_rp(kc, ap, b, off, c + j, ldc, R, P, n - j, \
                                               accumulate, bias)
#define BYOC_ROWS_R(R) switch (np) { \
    case 1: BYOC_ROWS_P(R, 1); break; case 2: BYOC_ROWS_P(R, 2); break; \
    case 3: BYOC_ROWS_P(R, 3); break; default: BYOC_ROWS_P(R, 4); break; }
static void byoc_ukernel_rows(long kc, const float *restrict ap, const float *restrict bp,
                              const long *restrict off, float *restrict c, long ldc, long m,
                              long n, int accumulate, const float *restrict bias) {
    for (long j = 0; j < n;) {
        const float *b = bp + j * (off ? 1 : kc);
        const long left = (n - j + BYOC_NR - 1) / BYOC_NR;
        const long np = left < byoc_rows_panels[m] ? left : byoc_rows_panels[m];
        switch (m) {
        case 1: BYOC_ROWS_R(1); break;
        case 2: BYOC_ROWS_R(2); break;
        case 3: BYOC_ROWS_R(3); break;
        case 4: BYOC_ROWS_R(4); break;
        default: BYOC_ROWS_R(5); break;
        }
        j += np * BYOC_NR;
    }
}
#undef BYOC_ROWS_R
#undef BYOC_ROWS_P

static float byoc_dot(const float *a, const float *b, long n) {
    byoc_vf s0 = {0}, s1 = {0};
    long k = 0;
    for (; k + 2 * BYOC_VW <= n; k += 2 * BYOC_VW) {
        s0 += *(const byoc_vf *)(a + k) * *(const byoc_vf *)(b + k);
        s1 += *(const byoc_vf *)(a + k + BYOC_VW) * *(const byoc_vf *)(b + k + BYOC_VW);
    }
    s0 += s1;
    float s = 0.0f;
    for (int l = 0; l < BYOC_VW; l++) s += s0[l];
    for (; k < n; k++) s += a[k] * b[k];
    return s;
}

/* One GEMM, as its tasks see it. */
typedef struct {
    long M, N, K;
    float alpha;
    const byoc_mat *A;
    const float *apacked;
    byoc_pack_fn pack;
    const void *bsrc;
    float *C;
    long ldc;
    int accumulate, by_rows;
    const float *bias;  /* each row's, added to C (not with accumulate), or 0 */
    const byoc_epi *epi;
    /* B packed once for all tasks (a row cut), or 0: block (pc / KC, jc / NC) at
       bshared + (pc / KC * njc + jc / NC) * bstride */
    float *bshared;
    long njc, bstride;
    /* B's rows read in place (its whole NR-column panels; the last, partial one packed), or
       0: a row-major B of few rows of A to use each packed panel */
    const float *binplace;
    long brs;
} byoc_gemm_job;

static long byoc_gemm_scratch(long n, long k) {  /* floats; as gemm_scratch in runtime_c.py */
    long kc = k < BYOC_KC ? k : BYOC_KC, nc = n < BYOC_NC ? n : BYOC_NC;
    return ((BYOC_MC + BYOC_MR) * kc + 15) / 16 * 16 + kc * (nc + BYOC_NR) + BYOC_NR;
}

/* Columns past a panel's whole vectors taken by byoc_ukernel_few (at most this many). */
#define BYOC_FEW_COLS 4
typedef float byoc_f8 __attribute__((vector_size(32), aligned(4), may_alias));

/* c[m x nd] (+)= an MR-row panel of A times nd (<= BYOC_FEW_COLS) columns of a packed panel
   (row k at bp + k * NR): vectors down A's column k (its MR floats side by side in the panel)
   times each column's float, so that a 7x7 map's 49th column costs an FMA of 8 lanes per k,
   where a vector across columns cost 6 of 16. */
static inline __attribute__((always_inline)) void byoc_ukernel_few_n(
        long kc, const float *restrict ap, const float *restrict bp, float *restrict c,
        long ldc, long m, const long nd, int accumulate, const float *restrict bias) {
    /* sets of accumulators taken in turn by k, added at the end (one chain waits on each
       FMA): four, or two where 16 vector registers (AVX) would not hold four sets of three or
       four columns with a and b (they spilled to the stack; the 832 -> 256 pointwise on 6x6
       that showed it measured even without the spills, 0.96-0.99x) */
#if defined(__AVX512F__)
    const int sets = 4;
#else
    const int sets = nd <= 2 ? 4 : 2;
#endif
    byoc_f8 acc[4][BYOC_FEW_COLS] = {{{0}}};
    if (bias) {
        byoc_f8 b = {0};
        memcpy(&b, bias, sizeof(float) * m);
        for (int j = 0; j < BYOC_FEW_COLS; j++) acc[0][j] = b;
    }
    long k = 0;
    for (; k + 4 < kc; k += 4)  /* 8 floats from column k: lanes MR.. belong to k + 1 */
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) {
            byoc_f8 a = *(const byoc_f8 *)(ap + (k + u) * BYOC_MR);
#if defined(__AVX__)
            __asm__("" : "+x"(a));  /* in a register: GCC had folded its load into each FMA */
#endif
            const float *b = bp + (k + u) * BYOC_NR;
#pragma GCC unroll 4
            for (int j = 0; j < BYOC_FEW_COLS; j++)
                if (j < nd) acc[u % sets][j] += a * b[j];
        }
    for (; k < kc; k++) {  /* the panel's last columns: nothing may be read past it */
        byoc_f8 a = {0};
        memcpy(&a, ap + k * BYOC_MR, sizeof(float) * BYOC_MR);
        const float *b = bp + k * BYOC_NR;
#pragma GCC unroll 4
        for (int j = 0; j < BYOC_FEW_COLS; j++)
            if (j < nd) acc[0][j] += a * b[j];
    }
    for (long j = 0; j < nd; j++) {
        const byoc_f8 s = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
        for (long i = 0; i < m; i++) {
            float *r = c + i * ldc + j;
            *r = accumulate ? *r + s[i] : s[i];
        }
    }
}

/* One body per column count: no test of it per k. */
static void byoc_ukernel_few(long kc, const float *restrict ap, const float *restrict bp,
                             float *restrict c, long ldc, long m, long nd, int accumulate,
                             const float *restrict bias) {
    switch (nd) {
    case 1: byoc_ukernel_few_n(kc, ap, bp, c, ldc, m, 1, accumulate, bias); break;
    case 2: byoc_ukernel_few_n(kc, ap, bp, c, ldc, m, 2, accumulate, bias); break;
    case 3: byoc_ukernel_few_n(kc, ap, bp, c, ldc, m, 3, accumulate, bias); break;
    default: byoc_ukernel_few_n(kc, ap, bp, c, ldc, m, 4, accumulate, bias); break;
    }
}

/* Rows i0..i1, columns j0..j1 of C (i0 a multiple of MR): the blocked loops, each element's
   sum over K taken in the same order wherever the block starts, so that any cut of C into
   blocks gives the same numbers. */
static void byoc_gemm_block(const byoc_gemm_job *g, long i0, long i1, long j0, long j1,
                            float *ws) {
    long K = g->K, kcmax = K < BYOC_KC ? K : BYOC_KC, nc;
    long mpad = (g->M + BYOC_MR - 1) / BYOC_MR * BYOC_MR, ldc = g->ldc;
    float *ap = ws;
    float *bp = ws + ((BYOC_MC + BYOC_MR) * kcmax + 15) / 16 * 16;
    long off[BYOC_KC];  /* B in place: row k of a K block at off[k] from its first */
    if (g->binplace)
        for (long k = 0; k < kcmax; k++) off[k] = k * g->brs;
    for (long jc = j0; jc < j1; jc += nc) {  /* blocks end where B's shared blocks do */
        nc = BYOC_NC - jc % BYOC_NC;
        if (nc > j1 - jc) nc = j1 - jc;
        const long inplace = g->binplace ? nc / BYOC_NR * BYOC_NR : 0;  /* columns */
        for (long pc = 0; pc < K; pc += BYOC_KC) {
            long kc = K - pc < BYOC_KC ? K - pc : BYOC_KC;
            const int acc = g->accumulate || pc > 0;  /* onto C: asked, or K blocks before */
            if (g->bshared)  /* (a column task's part of a block starts jc % NC into it) */
                bp = g->bshared + (pc / BYOC_KC * g->njc + jc / BYOC_NC) * g->bstride
                     + jc % BYOC_NC * kc;
            else if (nc > inplace)
                g->pack(g->bsrc, pc, kc, jc + inplace, nc - inplace, bp);
            for (long ic = i0; ic < i1; ic += BYOC_MC) {
                long mc = i1 - ic < BYOC_MC ? i1 - ic : BYOC_MC;
                const float *a = g->apacked ? g->apacked + pc * mpad + ic * kc : ap;
                if (!g->apacked) byoc_pack_a(g->A, ic, mc, pc, kc, g->alpha, ap);
                /* the epilogue takes mc x BYOC_EPI_W tiles: still in cache, but few calls */
                const long mfull = mc / BYOC_MR * BYOC_MR, mrest = mc - mfull;
                for (long je = 0; je < nc; je += BYOC_EPI_W) {
                    long jend = nc - je < BYOC_EPI_W ? nc : je + BYOC_EPI_W;
                    for (long jr = je; jr < jend; jr += BYOC_NR) {
                        long n = nc - jr < BYOC_NR ? nc - jr : BYOC_NR;
                        /* a few columns past a whole vector (a 7x7 map's 49 = 32 + 16 + 1)
                           down A's columns: a vector across them costs as much as 16 */
                        long nd = n % BYOC_GW <= BYOC_FEW_COLS ? n % BYOC_GW : 0;
                        for (long ir = 0; ir < mfull; ir += BYOC_MR) {
                            const long m = BYOC_MR;
                            float *cr = g->C + (ic + ir) * ldc + jc + jr;
                            const float *bias = g->bias && !acc ? g->bias + ic + ir : 0;
                            if (jr < inplace) {
                                byoc_ukernel(kc, a + ir * kc, g->binplace + pc * g->brs + jc + jr,
                                             off, cr, ldc, m, n, acc, bias);
                                continue;
                            }
                            const float *bpj = bp + (jr - inplace) * kc;
                            if (n > nd)
                                byoc_ukernel(kc, a + ir * kc, bpj, 0, cr, ldc, m,
                                             n - nd, acc, bias);
                            if (nd)
                                byoc_ukernel_few(kc, a + ir * kc, bpj + n - nd,
                                                 cr + n - nd, ldc, m, nd, acc, bias);
                        }
                    }
                    if (mrest) {  /* the last rows against the tile's panels at once */
                        float *cr = g->C + (ic + mfull) * ldc + jc;
                        const float *ar = a + mfull * kc;
                        const float *bias = g->bias && !acc ? g->bias + ic + mfull : 0;
                        const long ip = jend < inplace ? jend : inplace;  /* in place: je..ip */
                        if (je < ip)
                            byoc_ukernel_rows(kc, ar, g->binplace + pc * g->brs + jc + je, off,
                                              cr + je, ldc, mrest, ip - je, acc, bias);
                        const long jp = je > ip ? je : ip;
                        if (jp < jend)
                            byoc_ukernel_rows(kc, ar, bp + (jp - inplace) * kc, 0, cr + jp, ldc,
                                              mrest, jend - jp, acc, bias);
                    }
                    if (g->epi && pc + kc == K)
                        g->epi->fn(g->C + ic * ldc + jc + je, ldc, ic, mc, jend - je,
                                   g->epi->ctx);
                }
            }
        }
    }
}

/* A task of the shared packing: blocks lo..hi of B, each (KC rows, NC columns) whole, so that
   a packer's writes past a block's last panel land in its own slack. */
static void byoc_gemm_pack_task(void *ctx, long lo, long hi) {
    const byoc_gemm_job *g = (const byoc_gemm_job *)ctx;
    for (long t = lo; t < hi; t++) {
        long pc = t / g->njc * BYOC_KC, jc = t % g->njc * BYOC_NC;
        long kc = g->K - pc < BYOC_KC ? g->K - pc : BYOC_KC;
        long nc = g->N - jc < BYOC_NC ? g->N - jc : BYOC_NC;
        g->pack(g->bsrc, pc, kc, jc, nc, g->bshared + t * g->bstride);
    }
}

/* A task: panels lo..hi of MR rows (by_rows) or NR columns, packing into its own scratch. */
static void byoc_gemm_task(void *ctx, long lo, long hi) {
    const byoc_gemm_job *g = (const byoc_gemm_job *)ctx;
    long i0 = 0, i1 = g->M, j0 = 0, j1 = g->N;
    if (g->by_rows) {
        i0 = lo * BYOC_MR;
        i1 = hi * BYOC_MR < g->M ? hi * BYOC_MR : g->M;
    } else {
        j0 = lo * BYOC_NR;
        j1 = hi * BYOC_NR < g->N ? hi * BYOC_NR : g->N;
    }
    float *ws = (float *)byoc_rt->scratch(0, 4 * byoc_gemm_scratch(j1 - j0, g->K));
    byoc_gemm_block(g, i0, i1, j0, j1, ws);
}

/* Whether rows rs floats apart fall in many L1 sets (64 of 64 bytes, as on x86-64 cores):
   at a stride of whole lines sharing a large power of two with 64 lines (768 floats, a 56x56
   map) a panel's rows share a few sets and evict each other. */
static int byoc_rows_spread(long rs) {
    long bytes = rs * (long)sizeof(float), lines = bytes / 64, g = 64;
    if (bytes % 64) return 1;
    while (lines % g) g /= 2;  /* the largest power of two up to 64 dividing it */
    return g <= 2;
}

/* B's blocks as byoc_gemm_block reads a shared B: (KC rows, NC columns) each, bstride floats
   apart (pack_b in runtime_c.py lays out constant weights the same way). */
static void byoc_gemm_shared_layout(byoc_gemm_job *g) {
    long kc = g->K < BYOC_KC ? g->K : BYOC_KC, nc = g->N < BYOC_NC ? g->N : BYOC_NC;
    g->njc = (g->N + BYOC_NC - 1) / BYOC_NC;
    g->bstride = (kc * ((nc + BYOC_NR - 1) / BYOC_NR * BYOC_NR) + BYOC_NR + 15) / 16 * 16;
}

/* Runs a GEMM's job: on the pool when the product is big, over column panels (each task packs
   its own part of B; A, unless packed already, is packed by every task), or over row panels
   when there are few columns (B packed once, shared, unless it came packed). Big is the pool's
   threshold: pointwise convs of 0.26-1M multiply-adds had run on one thread below 4 times it
   (0.72-0.93x on two threads now); below it, a 32 -> 32 on 14x14 went 1.4x slower. */
static void byoc_gemm_run(byoc_gemm_job *g, float *ws) {
    const long M = g->M, N = g->N, K = g->K;
    int threads = byoc_threads();
    if (threads > 1 && (double)M * N * K >= (double)BYOC_PAR_WORK) {
        long col_panels = (N + BYOC_NR - 1) / BYOC_NR, row_panels = (M + BYOC_MR - 1) / BYOC_MR;
        /* each task of a column cut reads all of A, each of a row cut packs all of B: cut the
           longer side (a late conv layer's 2048 channels x 49 positions read its 4 MB of
           weights once per column task, slower on 2 threads than on 1) */
        g->by_rows = col_panels < 2L * threads ? row_panels > col_panels
                                               : row_panels >= 2L * threads && M > N;
        if (g->by_rows && !g->bshared) {  /* B packed once (the caller's slot 2), shared */
            g->binplace = 0;
            byoc_gemm_shared_layout(g);
            long blocks = (K + BYOC_KC - 1) / BYOC_KC * g->njc;
            g->bshared = (float *)byoc_rt->scratch(2, 4 * blocks * g->bstride);
            byoc_parallel(blocks, byoc_gemm_pack_task, g);
        }
        byoc_parallel(g->by_rows ? row_panels : col_panels, byoc_gemm_task, g);
        return;
    }
    byoc_gemm_block(g, 0, M, 0, N, ws);
}

/* C[M, N] (+)= alpha * A[M, K] * B[K, N]; B comes from a packer. ws: byoc_gemm_scratch floats. */
/* apacked: A already packed (pack_a in runtime_c.py: for each KC block, MR-row panels), or 0. */
/* bias (or 0): each row's, the sums' start (not with accumulate). */
/* epi (or 0) runs on each mc x BYOC_EPI_W tile of C once its last K block is stored, in cache. */
static void byoc_gemm(long M, long N, long K, float alpha, const byoc_mat *A,
                      const float *apacked, byoc_pack_fn pack, const void *bsrc, float *C,
                      long ldc, int accumulate, float *ws, const float *bias,
                      const byoc_epi *epi) {
    if (K == 0) {
        if (!accumulate)
            for (long i = 0; i < M; i++)
                for (long j = 0; j < N; j++) C[i * ldc + j] = bias ? bias[i] : 0.0f;
        if (epi) epi->fn(C, ldc, 0, M, N, epi->ctx);
        return;
    }
    byoc_gemm_job g = {M, N, K, alpha, A, apacked, pack, bsrc, C, ldc, accumulate, 0,
                       accumulate ? 0 : bias, epi, 0, 0, 0, 0, 0};
    if (pack == byoc_pack_b_mat && ((const byoc_mat *)bsrc)->cs == 1 && M <= BYOC_INPLACE_M
        && byoc_rows_spread(((const byoc_mat *)bsrc)->rs)) {
        g.binplace = ((const byoc_mat *)bsrc)->p;
        g.brs = ((const byoc_mat *)bsrc)->rs;
    }
    byoc_gemm_run(&g, ws);
}

/* A row or two of A against a strided B: vector dots (B's columns contiguous) or axpys (its
   rows contiguous), over the columns lo..hi. */
typedef struct {
    long M, N, K;
    float alpha;
    const byoc_mat *A, *B;
    float *C;
    long ldc;
    int accumulate;
} byoc_thin_job;

static void byoc_thin_dots(void *ctx, long lo, long hi) {
    const byoc_thin_job *t = (const byoc_thin_job *)ctx;
    for (long i = 0; i < t->M; i++)
        for (long j = lo; j < hi; j++) {
            float v = t->alpha * byoc_dot(t->A->p + i * t->A->rs, t->B->p + j * t->B->cs, t->K);
            float *c = t->C + i * t->ldc + j;
            *c = t->accumulate ? *c + v : v;
        }
}

static void byoc_thin_axpys(void *ctx, long lo, long hi) {
    const byoc_thin_job *t = (const byoc_thin_job *)ctx;
    for (long i = 0; i < t->M; i++) {
        float *restrict c = t->C + i * t->ldc;
        if (!t->accumulate) memset(c + lo, 0, sizeof(float) * (hi - lo));
        for (long k = 0; k < t->K; k++) {
            float a = t->alpha * t->A->p[i * t->A->rs + k * t->A->cs];
            const float *restrict b = t->B->p + k * t->B->rs;
            for (long j = lo; j < hi; j++) c[j] += a * b[j];
        }
    }
}

/* The same over units of 16 columns, for the pool. */
static void byoc_thin_dots_16(void *ctx, long lo, long hi) {
    const byoc_thin_job *t = (const byoc_thin_job *)ctx;
    byoc_thin_dots(ctx, lo * 16, hi * 16 < t->N ? hi * 16 : t->N);
}
static void byoc_thin_axpys_16(void *ctx, long lo, long hi) {
    const byoc_thin_job *t = (const byoc_thin_job *)ctx;
    byoc_thin_axpys(ctx, lo * 16, hi * 16 < t->N ? hi * 16 : t->N);
}

/* The same over a strided B; a row or two of A is done as vector dots or axpys instead. */
void byoc_gemm_mat(long M, long N, long K, float alpha, byoc_mat A, byoc_mat B,
                   float *C, long ldc, int accumulate, float *ws, const byoc_epi *epi) {
    if (M <= 2 && ((B.rs == 1 && A.cs == 1) || B.cs == 1)) {
        byoc_thin_job t = {M, N, K, alpha, &A, &B, C, ldc, accumulate};
        byoc_task_fn fn = B.rs == 1 && A.cs == 1 ? byoc_thin_dots : byoc_thin_axpys;
        if ((double)M * N * K >= (double)BYOC_PAR_WORK * 4 && N >= 64)
            byoc_parallel((N + 15) / 16, fn == byoc_thin_dots ? byoc_thin_dots_16
                                                              : byoc_thin_axpys_16, &t);
        else
            fn(&t, 0, N);
        if (epi) epi->fn(C, ldc, 0, M, N, epi->ctx);
        return;
    }
    byoc_gemm(M, N, K, alpha, &A, 0, byoc_pack_b_mat, &B, C, ldc, accumulate, ws, 0, epi);
}
"""

_CONV = r"""
typedef struct {
    const float *x;
    long H, W, OH, OW, SH, SW;
    float *xs;
} byoc_subsample_job;

/* d[i] = s[i * sw] for i < n, reading no further than s[avail - 1]: a memcpy at stride 1; at
   stride 2 the even lanes of two vectors (a stride GCC cannot know), element by element past
   them. */
static inline void byoc_take_strided(const float *restrict s, float *restrict d, long n,
                                     long sw, long avail) {
    long i = 0;
    if (sw == 1) {
        memcpy(d, s, sizeof(float) * n);
        return;
    }
    if (sw == 2)
        for (; i + BYOC_VW <= n && 2 * (i + BYOC_VW) <= avail; i += BYOC_VW) {
            const byoc_vf *sv = (const byoc_vf *)(s + 2 * i);
            *(byoc_vf *)(d + i) = __builtin_shuffle(sv[0], sv[1], BYOC_EVEN);
        }
    for (; i < n; i++) d[i] = s[i * sw];
}

/* Channels c0..c1: xs[c][oh][ow] = x[c][oh * SH][ow * SW]. */
static void byoc_subsample_channels(void *ctx, long c0, long c1) {
    const byoc_subsample_job *p = (const byoc_subsample_job *)ctx;
    const long W = p->W, OW = p->OW;
    for (long c = c0; c < c1; c++)
        for (long oh = 0; oh < p->OH; oh++)
            byoc_take_strided(p->x + (c * p->H + oh * p->SH) * W,
                              p->xs + (c * p->OH + oh) * OW, OW, p->SW, W);
}

static void byoc_subsample_input(const float *x, long C, long H, long W, long OH, long OW,
                                 long SH, long SW, float *xs) {
    byoc_subsample_job p = {x, H, W, OH, OW, SH, SW, xs};
    byoc_parallel_if(C * OH * OW, C, byoc_subsample_channels, &p);
}

/* A conv's input copied once, zero-padded, into planes whose rows are split into SW phases
   (padded column q lies in phase q % SW at q / SW): per channel HP padded rows of SW phases of
   PL floats. NR consecutive outputs of a row then read NR consecutive floats for every tap, at
   any stride; off[k] says where tap k = (c, kh, kw) of output (0, 0) reads. The direct, flat
   and im2col convs all read their taps so. */
typedef struct {
    const float *x;
    float *planes;
    long H, W, HP, SW, PL, PH, PW;
} byoc_planes_job;

/* Padded rows u0..u1 of the planes (row u: channel u / HP, padded row u % HP). */
static void byoc_fill_rows(void *ctx, long u0, long u1) {
    const byoc_planes_job *p = (const byoc_planes_job *)ctx;
    const long H = p->H, W = p->W, SW = p->SW, PL = p->PL, RS = SW * PL;
    for (long u = u0; u < u1; u++) {
        const long c = u / p->HP, ih = u % p->HP - p->PH;
        float *d = p->planes + u * RS;
        if (ih < 0 || ih >= H) {
            memset(d, 0, sizeof(float) * RS);
            continue;
        }
        const float *s = p->x + (c * H + ih) * W;
        for (long ph = 0; ph < SW; ph++) {  /* q: padded column ph + SW q, input column - PW */
            long lo = (p->PW - ph + SW - 1) / SW, hi = (W + p->PW - ph + SW - 1) / SW;
            lo = lo < 0 ? 0 : lo > PL ? PL : lo;
            hi = hi < lo ? lo : hi > PL ? PL : hi;
            float *dp = d + ph * PL;
            const long at = SW * lo + ph - p->PW;  /* the input column of q = lo */
            for (long q = 0; q < lo; q++) dp[q] = 0.0f;
            byoc_take_strided(s + at, dp + lo, hi - lo, SW, W - at);
            for (long q = hi; q < PL; q++) dp[q] = 0.0f;
        }
    }
}

/* Image x's planes (each channel HP rows of SW phases of PL floats), on the pool from 64K floats
   (a stem's 190K had filled on one thread). */
static void byoc_fill_planes(const float *x, float *planes, long C, long H, long W, long HP,
                             long SW, long PL, long PH, long PW) {
    byoc_planes_job p = {x, planes, H, W, HP, SW, PL, PH, PW};
    byoc_parallel_if(4 * C * HP * SW * PL, C * HP, byoc_fill_rows, &p);
}

/* off[k]: where tap k = (c, kh, kw) of output (0, 0) reads in those planes. */
static void byoc_tap_offsets(long *off, long C, long KH, long KW, long HP, long SW, long PL,
                             long DH, long DW) {
    for (long c = 0, k = 0; c < C; c++)
        for (long kh = 0; kh < KH; kh++)
            for (long kw = 0; kw < KW; kw++, k++)
                off[k] = (c * HP + kh * DH) * SW * PL + kw * DW % SW * PL + kw * DW / SW;
}

/* Where the packer reads: the planes, each tap's offset (byoc_tap_offsets), the floats from
   one output row to the next (SH padded rows), the output's width. */
typedef struct {
    const float *xp;
    const long *off;
    long RS, OW;
} byoc_padded;

/* Packs B of a conv's GEMM, the im2col matrix B[(c, kh, kw)][(oh, ow)], from the input's
   planes (im2col without its buffer). A panel's NR output positions lie on one or a few output
   rows: per (c, kh, kw), each row segment of a panel is a run of consecutive floats of a plane
   (at any stride: the planes hold a row's phases apart), copied in whole vectors, as many as
   its length needs (later segments' copies overwrite the lanes an earlier one overran; the
   last one's overrun lands past the row, in what is packed next or in the scratch's slack). */
static void byoc_pack_b_padded(const void *src, long k0, long kc, long j0, long nc, float *bp) {
    const byoc_padded *v = (const byoc_padded *)src;
    const long *off = v->off + k0;
    long seg_lane[BYOC_NR + 1], seg_at[BYOC_NR];
    for (long jp = 0; jp < nc; jp += BYOC_NR) {
        long n = nc - jp < BYOC_NR ? nc - jp : BYOC_NR, segs = 0;
        for (long l = 0; l < n;) {
            long j = j0 + jp + l, oh = j / v->OW, ow = j % v->OW;
            seg_lane[segs] = l;
            seg_at[segs++] = oh * v->RS + ow;
            l += v->OW - ow < n - l ? v->OW - ow : n - l;
        }
        seg_lane[segs] = n;
        float *d = bp + jp * kc;
        for (long k = 0; k < kc; k++, d += BYOC_NR) {
            const float *xr = v->xp + off[k];
            for (long g = 0; g < segs; g++) {
                const float *s = xr + seg_at[g];
                float *dl = d + seg_lane[g];
                const long len = seg_lane[g + 1] - seg_lane[g];
                for (long q = 0; q < len; q += BYOC_GW)
                    *(byoc_gf *)(dl + q) = *(const byoc_gf *)(s + q);
            }
            for (long l = n; l < BYOC_NR; l++) d[l] = 0.0f;
        }
    }
}

typedef struct {
    const float *x, *w, *wp, *bias;
    float *y;
    const long *off;  /* each tap's offset in a group's planes (byoc_tap_offsets) */
    long C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, G, HP, PL;
    int pointwise;
    const byoc_epi *epi;
} byoc_conv_job;

/* Floats a group's conv needs: its input's planes and 2 NR floats of slack (that whole-vector
   copies may read past the last row) unless pointwise, then the GEMM's scratch. */
static long byoc_conv_pad_floats(const byoc_conv_job *j) {
    return j->pointwise ? 0
                        : (j->C / j->G * j->HP * j->SW * j->PL + 2 * BYOC_NR + 15) / 16 * 16;
}

/* Image n, group g: y's channels of the group = w's rows of it times the group's im2col. */
static void byoc_conv_group(const byoc_conv_job *j, long n, long g, float *ws) {
    const long cg = j->C / j->G, mg = j->M / j->G, kdim = cg * j->KH * j->KW;
    const long ohw = j->OH * j->OW, mgpad = (mg + BYOC_MR - 1) / BYOC_MR * BYOC_MR;
    float *yg = j->y + (n * j->M + g * mg) * ohw;
    /* the bias starts each sum (a pass over the finished tiles had added it) */
    const float *bias = j->bias ? j->bias + g * mg : 0;
    const byoc_epi *e = j->epi;
    byoc_mat a = {j->w + g * mg * kdim, kdim, 1};
    const float *ag = j->wp ? j->wp + g * mgpad * kdim : 0;
    const float *xg = j->x + (n * j->C + g * cg) * j->H * j->W;
    if (j->pointwise) {
        byoc_mat b = {xg, j->H * j->W, 1};
        byoc_gemm(mg, ohw, kdim, 1.0f, &a, ag, byoc_pack_b_mat, &b, yg, ohw, 0, ws, bias, e);
    } else if (j->KH == 1 && j->KW == 1 && j->PH == 0 && j->PW == 0
               && (j->OH - 1) * j->SH < j->H && (j->OW - 1) * j->SW < j->W) {
        /* a strided 1x1 conv (a residual block's downsampling): the positions it reads
           gathered once, a quarter of the input at stride 2, then a plain GEMM over them;
           a padded copy of the whole input and a strided im2col cost more */
        float *xs = ws;
        byoc_subsample_input(xg, cg, j->H, j->W, j->OH, j->OW, j->SH, j->SW, xs);
        byoc_mat b = {xs, ohw, 1};
        byoc_gemm(mg, ohw, kdim, 1.0f, &a, ag, byoc_pack_b_mat, &b, yg, ohw, 0,
                  ws + byoc_conv_pad_floats(j), bias, e);
    } else {
        /* the group's planes, made once, spare the packer bounds checks and strided reads */
        const long floats = cg * j->HP * j->SW * j->PL;
        byoc_fill_planes(xg, ws, cg, j->H, j->W, j->HP, j->SW, j->PL, j->PH, j->PW);
        memset(ws + floats, 0, sizeof(float) * 2 * BYOC_NR);
        byoc_padded b = {ws, j->off, j->SH * j->SW * j->PL, j->OW};
        byoc_gemm(mg, ohw, kdim, 1.0f, &a, ag, byoc_pack_b_padded, &b, yg, ohw, 0,
                  ws + byoc_conv_pad_floats(j), bias, e);
    }
}

/* (image, group) pairs lo..hi, each on one thread with its own scratch. */
static void byoc_conv_groups(void *ctx, long lo, long hi) {
    const byoc_conv_job *j = (const byoc_conv_job *)ctx;
    float *ws = (float *)byoc_rt->scratch(
        1, 4 * (byoc_conv_pad_floats(j)
                + byoc_gemm_scratch(j->OH * j->OW, j->C / j->G * j->KH * j->KW)));
    for (long u = lo; u < hi; u++) byoc_conv_group(j, u / j->G, u % j->G, ws);
}

/* A 1x1-map conv's product Y[N x M] given each channel's bias, then the region's epilogue
   (rows of 1: y[n][m] is row n * M + m). */
static void byoc_maps_1x1_finish(float *y, long N, long M, const float *bias,
                                 const byoc_epi *epi) {
    if (bias)
        for (long n = 0; n < N; n++)
            for (long m = 0; m < M; m++) y[n * M + m] += bias[m];
    if (epi) epi->fn(y, 1, 0, N * M, 1, epi->ctx);
}

/* y = conv(x, w) + bias over NCHW; groups G. wp: each group's weights packed (pack_a in
   runtime_c.py), or 0. ws: conv_scratch floats (the taps' offsets, a group's planes, then
   byoc_gemm's scratch). epi (or 0): the region's epilogue. Several images or groups on several
   threads: a pair each (a grouped 1x1 conv's GEMMs are too small to cut, and one call each
   cost more than it ran), from the pool's threshold of work (from 4 times it, shufflenet's
   grouped 1x1s of 0.3-1M multiply-adds had run on one thread: 0.73-0.86x on two now);
   otherwise one pair after the other, each GEMM cut among the threads. */
void byoc_conv2d(const float *x, const float *w, const float *wp, const float *bias, float *y,
                 long N, long C, long H, long W, long M, long OH, long OW, long KH, long KW,
                 long SH, long SW, long PH, long PW, long DH, long DW, long G, float *ws,
                 const byoc_epi *epi) {
    const long HP = (OH - 1) * SH + (KH - 1) * DH + 1, PL = OW + (KW - 1) * DW / SW;
    long *off = (long *)ws;
    ws += (2 * (C / G) * KH * KW + 15) / 16 * 16;
    byoc_conv_job j = {x, w, wp, bias, y, off, C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW, DH,
                       DW, G, HP, PL, KH == 1 && KW == 1 && SH == 1 && SW == 1 && PH == 0
                       && PW == 0 && OH == H && OW == W, epi};
    if (!j.pointwise) byoc_tap_offsets(off, C / G, KH, KW, HP, SW, PL, DH, DW);
    if (j.pointwise && OH * OW == 1 && G == 1) {
        /* 1x1 maps (an SE block's convs): the batch at once, Y = X W^T, a dot per output
           (as a conv, each image's GEMM had one column: a 16-wide vector per output) */
        byoc_mat xs = {x, C, 1}, wt = {w, 1, C};
        byoc_gemm_mat(N, M, C, 1.0f, xs, wt, y, M, 0, ws, 0);
        byoc_maps_1x1_finish(y, N, M, bias, epi);
        return;
    }
    int threads = byoc_threads();
    if (threads > 1 && N * G >= 2L * threads
        && (double)M * OH * OW * (C / G) * KH * KW >= (double)BYOC_PAR_WORK) {
        byoc_parallel(N * G, byoc_conv_groups, &j);
        return;
    }
    for (long n = 0; n < N; n++)
        for (long g = 0; g < G; g++) byoc_conv_group(&j, n, g, ws);
}

/* A pointwise conv on 1x1 maps (an SE block's), one group, constant weights: the whole batch
   as one product, Y[N x M] = X[N x C] W^T, vectors across output channels and the images as
   rows (fewer than MR: byoc_ukernel_rows). W^T comes packed once as byoc_gemm's shared B (bt:
   pack_b in runtime_c.py); through byoc_gemm_mat (byoc_conv2d's path, for weights that are
   not constant) it is a dot per output for up to two images, and past two a strided pack of
   W^T per call. ws: gemm_scratch(N, M, C) floats. */
void byoc_conv_1x1_maps(const float *x, const float *bt, const float *bias, float *y, long N,
                        long C, long M, float *ws, const byoc_epi *epi) {
    byoc_mat a = {x, C, 1};
    byoc_gemm_job g = {N, M, C, 1.0f, &a, 0, 0, 0, y, M, 0, 0, 0, 0, (float *)bt, 0, 0, 0, 0};
    byoc_gemm_shared_layout(&g);
    byoc_gemm_run(&g, ws);
    byoc_maps_1x1_finish(y, N, M, bias, epi);
}

/* A conv read straight from its input, with no im2col matrix (an indirect GEMM): the micro-
   kernel reads its B rows from the input's planes (byoc_fill_planes, each phase NR floats past
   the last one a row reads) at the taps' offsets (byoc_tap_offsets) instead of from a packed
   panel: for convs of few input channels (a stem's 3), where packing im2col panels costs as
   much as the multiply-adds, and strided ones. Each output's sum over (c, kh, kw) is taken in
   the same order as the GEMM's, in KC blocks; rows of output go to tasks (the same numbers at
   any thread count); a finished output row gets the bias and the epilogue. */
#define BYOC_DC_ROWS 8  /* output rows a block (1 -> 8: a stem 351 -> 310 us) */
typedef struct {
    const float *x, *wp, *bias;
    const long *off;
    float *y;
    long C, H, W, M, K, OH, OW, SH, SW, PL, PH, PW, HB, KH, DH, mpad;
    const byoc_epi *epi;
} byoc_dc_job;

/* Output rows oh0..oh1 (a block) of image i: their input rows copied into this thread's
   planes (HB padded rows a channel), then every channel's outputs from them. */
static void byoc_dc_block(const byoc_dc_job *j, float *planes, long i, long oh0, long oh1) {
    const long M = j->M, K = j->K, OW = j->OW, ohw = j->OH * OW, RS = j->SW * j->PL;
    const long rows = (oh1 - oh0 - 1) * j->SH + (j->KH - 1) * j->DH + 1;
    const byoc_planes_job p = {j->x + i * j->C * j->H * j->W, planes, j->H, j->W, j->HB, j->SW,
                               j->PL, j->PH - oh0 * j->SH, j->PW};
    for (long c = 0; c < j->C; c++) byoc_fill_rows((void *)&p, c * j->HB, c * j->HB + rows);
    float *y = j->y + i * M * ohw;
    for (long pc = 0; pc < K; pc += BYOC_KC) {
        long kc = K - pc < BYOC_KC ? K - pc : BYOC_KC;
        for (long ic = 0; ic < M; ic += BYOC_MC) {
            long mc = M - ic < BYOC_MC ? M - ic : BYOC_MC;
            const float *a = j->wp + pc * j->mpad + ic * kc;
            /* a panel of MR channels down the block's rows, then the next: MR output streams
               at a time, each written in order (a panel along one row, then the next panel,
               had kept every channel's stream open at once: 64 for a stem) */
            for (long ir = 0; ir < mc; ir += BYOC_MR) {
                long m = mc - ir < BYOC_MR ? mc - ir : BYOC_MR;
                for (long oh = oh0; oh < oh1; oh++) {
                    const float *row = planes + (oh - oh0) * j->SH * RS;
                    if (m < BYOC_MR) {  /* the last channels: only their rows' FMAs (a
                                           16-channel stem's 4 had cost as much as 6) */
                        byoc_ukernel_rows(kc, a + ir * kc, row, j->off + pc,
                                          y + (ic + ir) * ohw + oh * OW, ohw, m, OW, pc > 0,
                                          pc == 0 && j->bias ? j->bias + ic + ir : 0);
                        continue;
                    }
                    for (long ow = 0; ow < OW; ow += BYOC_NR) {
                        long n = OW - ow < BYOC_NR ? OW - ow : BYOC_NR;
                        byoc_ukernel(kc, a + ir * kc, row + ow, j->off + pc,
                                     y + (ic + ir) * ohw + oh * OW + ow, ohw, m, n, pc > 0,
                                     pc == 0 && j->bias ? j->bias + ic + ir : 0);
                    }
                }
                /* the panel's finished rows get the epilogue while in L1 (after all of a
                   block's channels, 250 KB for a stem, they had left it) */
                if (pc + kc == K && j->epi)
                    j->epi->fn(y + (ic + ir) * ohw + oh0 * OW, ohw, ic + ir, m,
                               (oh1 - oh0) * OW, j->epi->ctx);
            }
        }
    }
}

/* Rows r0..r1 of the images' output rows, one after another, in blocks of BYOC_DC_ROWS. */
static void byoc_dc_rows(void *ctx, long r0, long r1) {
    const byoc_dc_job *j = (const byoc_dc_job *)ctx;
    float *planes = (float *)byoc_task_scratch(4 * j->C * j->HB * j->SW * j->PL);
    while (r0 < r1) {
        const long i = r0 / j->OH, oh0 = r0 % j->OH;
        long oh1 = oh0 + (r1 - r0) < j->OH ? oh0 + (r1 - r0) : j->OH;
        oh1 = oh1 - oh0 > BYOC_DC_ROWS ? oh0 + BYOC_DC_ROWS : oh1;
        byoc_dc_block(j, planes, i, oh0, oh1);
        r0 += oh1 - oh0;
    }
}

/* y = conv(x, w) + bias over NCHW, one group, from wp (pack_a of w) as above. Each block of
   output rows fills its own planes (its input rows, a few more than SH per output row) on
   the thread that computes it, read back while in L1 or L2: a whole image's planes, filled
   first, had been read back from L3 or memory. ws: direct_conv_scratch floats (runtime_c.py):
   the taps' offsets. */
void byoc_conv_direct(const float *x, const float *wp, const float *bias, float *y,
                      long N, long C, long H, long W, long M, long OH, long OW, long KH,
                      long KW, long SH, long SW, long PH, long PW, long DH, long DW, float *ws,
                      const byoc_epi *epi) {
    const long rows = OH < BYOC_DC_ROWS ? OH : BYOC_DC_ROWS;
    const long HB = (rows - 1) * SH + (KH - 1) * DH + 1;
    const long PL = OW + (KW - 1) * DW / SW + BYOC_NR, K = C * KH * KW;
    long *off = (long *)ws;
    byoc_tap_offsets(off, C, KH, KW, HB, SW, PL, DH, DW);
    byoc_dc_job j = {x, wp, bias, off, y, C, H, W, M, K, OH, OW, SH, SW, PL, PH, PW, HB, KH, DH,
                     (M + BYOC_MR - 1) / BYOC_MR * BYOC_MR, epi};
    /* the rows of all images in one call, so that small images use the threads; (half the
       GEMM's threshold: a 2-image stem of 1M ran 0.6x on two threads) */
    if ((double)M * K * OH * OW * N >= (double)BYOC_PAR_WORK * 2)
        byoc_parallel(N * OH, byoc_dc_rows, &j);
    else byoc_dc_rows(&j, 0, N * OH);
}

/* A stride-1 conv on a small map, read from its input in place as one long row: the input's
   planes keep their padded width PL = OW + (KW - 1) DW, so that output (oh, ow) at flat column
   oh PL + ow reads tap (c, kh, kw) at off[k] + oh PL + ow, and NR consecutive flat columns read
   NR consecutive floats across output rows. The KW - 1 columns a row's end adds are computed
   and dropped (a 7x7 map: 61 columns for 49, in two NR panels where im2col packed 49 for each
   of its K rows, which cost as much as its multiply-adds). Sums go to t (MR x NP floats per
   channel panel), then each panel's rows are copied out, with the bias and epilogue. Channel
   panels go to tasks: the same numbers at any thread count. */
typedef struct {
    const float *planes, *wp, *bias;
    const long *off;
    float *t, *y;
    long M, K, OH, OW, PL, NF, NP, mpad;
    const byoc_epi *epi;
} byoc_flat_job;

static void byoc_flat_panels(void *ctx, long p0, long p1) {
    const byoc_flat_job *j = (const byoc_flat_job *)ctx;
    const long K = j->K, NF = j->NF, NP = j->NP, ohw = j->OH * j->OW;
    for (long pc = 0; pc < K; pc += BYOC_KC) {  /* a KC block of taps stays in L1 */
        long kc = K - pc < BYOC_KC ? K - pc : BYOC_KC;
        for (long p = p0; p < p1; p++) {
            long i0 = p * BYOC_MR, m = j->M - i0 < BYOC_MR ? j->M - i0 : BYOC_MR;
            const float *a = j->wp + pc * j->mpad + i0 * kc;
            for (long jr = 0; jr < NF; jr += BYOC_NR)
                byoc_ukernel(kc, a, j->planes + jr, j->off + pc, j->t + p * BYOC_MR * NP + jr,
                             NP, m, NF - jr < BYOC_NR ? NF - jr : BYOC_NR, pc > 0,
                             pc == 0 && j->bias ? j->bias + i0 : 0);
        }
    }
    for (long p = p0; p < p1; p++) {
        long i0 = p * BYOC_MR, m = j->M - i0 < BYOC_MR ? j->M - i0 : BYOC_MR;
        for (long i = 0; i < m; i++)
            for (long oh = 0; oh < j->OH; oh++)
                memcpy(j->y + (i0 + i) * ohw + oh * j->OW,
                       j->t + (p * BYOC_MR + i) * NP + oh * j->PL, sizeof(float) * j->OW);
        if (j->epi) j->epi->fn(j->y + i0 * ohw, ohw, i0, m, ohw, j->epi->ctx);
    }
}

/* y = conv(x, w) + bias over NCHW as above, one group, stride 1; wp: pack_a of w. ws:
   flat_conv_scratch floats (runtime_c.py): the planes and NR floats of slack, t, the offsets. */
void byoc_conv_flat(const float *x, const float *wp, const float *bias, float *y,
                    long N, long C, long H, long W, long M, long OH, long OW, long KH,
                    long KW, long PH, long PW, long DH, long DW, float *ws,
                    const byoc_epi *epi) {
    const long HP = OH + (KH - 1) * DH, PL = OW + (KW - 1) * DW, K = C * KH * KW;
    const long NF = (OH - 1) * PL + OW, NP = (NF + BYOC_NR - 1) / BYOC_NR * BYOC_NR;
    const long mpad = (M + BYOC_MR - 1) / BYOC_MR * BYOC_MR;
    const long pfloats = (C * HP * PL + BYOC_NR + 15) / 16 * 16;
    float *planes = ws, *t = ws + pfloats;
    long *off = (long *)(t + mpad * NP);
    /* the last panel's columns past NF read up to NR - 1 floats past the last plane */
    memset(planes + C * HP * PL, 0, sizeof(float) * BYOC_NR);
    byoc_tap_offsets(off, C, KH, KW, HP, 1, PL, DH, DW);  /* one phase, PL floats a row */
    for (long n = 0; n < N; n++) {
        byoc_fill_planes(x + n * C * H * W, planes, C, H, W, HP, 1, PL, PH, PW);
        byoc_flat_job j = {planes, wp, bias, off, t, y + n * M * OH * OW, M, K, OH, OW, PL,
                           NF, NP, mpad, epi};
        if ((double)mpad * K * NP >= (double)BYOC_PAR_WORK * 4)
            byoc_parallel(mpad / BYOC_MR, byoc_flat_panels, &j);
        else
            byoc_flat_panels(&j, 0, mpad / BYOC_MR);
    }
}

/* Output channels across the vector's lanes: the GEMM's tile turned over, BYOC_LP output
   positions by NR channels. Each tap's input float is broadcast from the planes
   (byoc_fill_planes) where its position reads it, base (oh, ow) + off[k], so that a strided
   conv reads its taps in place and packs no im2col panel (12-15% of a stride-2 3x3 whose
   GEMM had matched onnxruntime's); the weights come as NR-channel panels down all K taps
   (pack_lanes in runtime_c.py). A tile sums all K in one chain in registers, then its sums go
   to y turned back; the tile's cut (panels of channels, blocks of positions among tasks)
   changes no sum's order. Each block gets the region's epilogue while in cache. */
#define BYOC_LP 6   /* positions a tile: 12 accumulators and 2 weight vectors on AVX's 16 */
#define BYOC_LANES_BLOCK (40 * BYOC_LP)  /* positions a task's block at most */
typedef struct {
    const float *planes, *wl, *bias;
    const long *off;
    float *y;
    long M, K, OH, OW, SH, SW, RS, panels, blocks, bpos, row;  /* bpos: a block's most
                                                                  positions; row: y's first
                                                                  channel in the image */
    const byoc_epi *epi;
} byoc_lanes_job;

/* A tile of P positions' sums over taps k0..k0 + kc (off and wl from k0): from the bias
   (first) or from t, where they go back (P rows of NR floats). */
static inline __attribute__((always_inline)) void byoc_lanes_tile_p(
        long kc, const float *restrict wl, const float *restrict xp, const long *restrict base,
        const long *restrict off, const byoc_gf *restrict bias, int first, float *restrict t,
        const int P) {
    byoc_gf acc[BYOC_LP][BYOC_NV];
    const float *p[BYOC_LP];
#pragma GCC unroll 8
    for (int i = 0; i < P; i++) {
        p[i] = xp + base[i];
#pragma GCC unroll 4
        for (int v = 0; v < BYOC_NV; v++)
            acc[i][v] = first ? bias[v] : *(const byoc_gf *)(t + i * BYOC_NR + v * BYOC_GW);
    }
    for (long k = 0; k < kc; k++) {
        const long o = off[k];
        byoc_gf wv[BYOC_NV];
#pragma GCC unroll 4
        for (int v = 0; v < BYOC_NV; v++)
            wv[v] = *(const byoc_gf *)(wl + k * BYOC_NR + v * BYOC_GW);
#pragma GCC unroll 8
        for (int i = 0; i < P; i++) {
            const float b = p[i][o];
#pragma GCC unroll 4
            for (int v = 0; v < BYOC_NV; v++) acc[i][v] += b * wv[v];
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < P; i++)
#pragma GCC unroll 4
        for (int v = 0; v < BYOC_NV; v++) *(byoc_gf *)(t + i * BYOC_NR + v * BYOC_GW) = acc[i][v];
}

/* One body per tile size (a block's positions go in tiles of as equal sizes as fit: 49 as
   four of 6 and five of 5, where 6s and a last 1 computed 54). */
static void byoc_lanes_tile(long kc, const float *restrict wl, const float *restrict xp,
                            const long *restrict base, const long *restrict off,
                            const byoc_gf *restrict bias, int first, float *restrict t, long P) {
    switch (P) {
    case 1: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, 1); break;
    case 2: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, 2); break;
    case 3: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, 3); break;
    case 4: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, 4); break;
    case 5: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, 5); break;
    default: byoc_lanes_tile_p(kc, wl, xp, base, off, bias, first, t, BYOC_LP); break;
    }
}

#define BYOC_LANES_UNITS 8  /* units whose sums wait in scratch across K blocks (AVX: 120 KB) */

/* Unit u's first channel m0 and its positions q0..q1. */
static inline void byoc_lanes_unit(const byoc_lanes_job *j, long u, long *m0, long *q0,
                                   long *q1) {
    const long ohw = j->OH * j->OW;
    const long b = u / j->panels;  /* blocks of sizes that differ by one at most */
    *m0 = u % j->panels * BYOC_NR;
    *q0 = b * ohw / j->blocks;
    *q1 = (b + 1) * ohw / j->blocks;
}

/* Units u0..u1: unit u = (block of positions, panel of NR channels), the panels of a
   block side by side. A few units at a time go through all K in KC blocks, each block of
   taps (of the positions of a block or two) read by all of them while in cache
   (a 512 -> 512 3x3 onto 7x7 had read each panel's 295 KB of weights and the whole input
   for every tile: 1.4x the GEMM); their sums wait in scratch between blocks (the same
   chain: stored and reloaded exactly). */
static void byoc_lanes_units(void *ctx, long u0, long u1) {
    const byoc_lanes_job *j = (const byoc_lanes_job *)ctx;
    const long K = j->K, OW = j->OW, ohw = j->OH * OW, bt = j->bpos * BYOC_NR;  /* a unit's sums */
    float *sums = (float *)byoc_task_scratch(4 * BYOC_LANES_UNITS * bt);
    for (long c0 = u0; c0 < u1; c0 += BYOC_LANES_UNITS) {
        const long c1 = c0 + BYOC_LANES_UNITS < u1 ? c0 + BYOC_LANES_UNITS : u1;
        for (long pc = 0; pc < K; pc += BYOC_KC) {
            const long kc = K - pc < BYOC_KC ? K - pc : BYOC_KC;
            for (long u = c0; u < c1; u++) {
                long m0, q0, q1;
                byoc_lanes_unit(j, u, &m0, &q0, &q1);
                byoc_gf bias[BYOC_NV];  /* where the sums start: the first block only */
                if (pc == 0)
                    for (int v = 0; v < BYOC_NV; v++)
                        for (int l = 0; l < BYOC_GW; l++) {
                            const long m = m0 + v * BYOC_GW + l;
                            bias[v][l] = j->bias && m < j->M ? j->bias[m] : 0.0f;
                        }
                const float *wl = j->wl + m0 * K + pc * BYOC_NR;
                const long tiles = (q1 - q0 + BYOC_LP - 1) / BYOC_LP;
                long oh = q0 / OW, ow = q0 % OW;  /* of position q */
                for (long i = 0, q = q0; i < tiles; i++) {
                    /* sizes floor or ceil of the mean, the larger first */
                    const long nq = (q1 - q0) / tiles + (i < (q1 - q0) % tiles);
                    long base[BYOC_LP];
                    for (long r = 0; r < nq; r++) {
                        base[r] = oh * j->SH * j->RS + ow * j->SW;
                        if (++ow == OW) ow = 0, oh++;
                    }
                    byoc_lanes_tile(kc, wl, j->planes, base, j->off + pc, bias, pc == 0,
                                    sums + (u - c0) * bt + (q - q0) * BYOC_NR, nq);
                    q += nq;
                }
            }
        }
        for (long u = c0; u < c1; u++) {  /* turned back into y's rows, then the epilogue */
            long m0, q0, q1;
            byoc_lanes_unit(j, u, &m0, &q0, &q1);
            const long mn = j->M - m0 < BYOC_NR ? j->M - m0 : BYOC_NR;
            const float *t = sums + (u - c0) * bt;
            float *y = j->y + m0 * ohw + q0;
            for (long l = 0; l < mn; l++)
                for (long q = 0; q < q1 - q0; q++) y[l * ohw + q] = t[q * BYOC_NR + l];
            if (j->epi) j->epi->fn(y, ohw, j->row + m0, mn, q1 - q0, j->epi->ctx);
        }
    }
}

/* On the pool the units go as BYOC_LANES_TASKS tasks a thread, each a run of units (of one
   block or two, so that its units share their input blocks), equal where the units divide:
   the blocks are made as many as that takes, up to blocks of two tiles. The pool's own cut of
   the units (at most four ranges a thread) had made 10 units 5 ranges of 2, 6 units on one
   thread and 4 on the other, and re-read a block's input for every 2 units. */
#define BYOC_LANES_TASKS 2
static long byoc_lanes_blocks(long panels, long ohw, long tasks) {
    const long first = (ohw + BYOC_LANES_BLOCK - 1) / BYOC_LANES_BLOCK;
    const long most = ohw / (2 * BYOC_LP) > first ? ohw / (2 * BYOC_LP) : first;
    for (long b = first; b <= most; b++)
        if (panels * b % tasks == 0) return b;
    return first;
}

typedef struct {
    const byoc_lanes_job *j;
    long units, tasks;
} byoc_lanes_cut;

static void byoc_lanes_task(void *ctx, long t0, long t1) {
    const byoc_lanes_cut *c = (const byoc_lanes_cut *)ctx;
    for (long t = t0; t < t1; t++)
        byoc_lanes_units((void *)c->j, t * c->units / c->tasks, (t + 1) * c->units / c->tasks);
}

/* y = conv(x, w) + bias over NCHW, groups G, from wl (pack_lanes of w). ws:
   lanes_conv_scratch floats (runtime_c.py): a group's planes, then the taps' offsets. */
void byoc_conv_lanes(const float *x, const float *wl, const float *bias, float *y,
                     long N, long C, long H, long W, long M, long OH, long OW, long KH,
                     long KW, long SH, long SW, long PH, long PW, long DH, long DW, long G,
                     float *ws, const byoc_epi *epi) {
    /* one phase: a broadcast reads any float, so the padded copy is rows of its padded width;
       with no pads, the input itself (its windows end inside it) */
    long HP = (OH - 1) * SH + (KH - 1) * DH + 1, RS = (OW - 1) * SW + (KW - 1) * DW + 1;
    const long cg = C / G, mg = M / G, K = cg * KH * KW, ohw = OH * OW;
    const long panels = (mg + BYOC_NR - 1) / BYOC_NR;
    const int in_place = PH == 0 && PW == 0 && HP <= H && RS <= W;
    float *planes = ws;
    long *off = (long *)(ws + (in_place ? 0 : (cg * HP * RS + 15) / 16 * 16));
    if (in_place) HP = H, RS = W;
    byoc_tap_offsets(off, cg, KH, KW, HP, 1, RS, DH, DW);
    const int par = (double)mg * K * ohw >= (double)BYOC_PAR_WORK * 4 && byoc_threads() > 1;
    const long tasks = BYOC_LANES_TASKS * byoc_threads();
    const long blocks = par ? byoc_lanes_blocks(panels, ohw, tasks)
                            : (ohw + BYOC_LANES_BLOCK - 1) / BYOC_LANES_BLOCK;
    const long units = panels * blocks, bpos = (ohw + blocks - 1) / blocks;
    for (long n = 0; n < N; n++)
        for (long g = 0; g < G; g++) {
            const float *xg = x + (n * C + g * cg) * H * W;
            if (!in_place) byoc_fill_planes(xg, planes, cg, H, W, HP, 1, RS, PH, PW);
            byoc_lanes_job j = {in_place ? xg : planes, wl + g * panels * BYOC_NR * K,
                                bias ? bias + g * mg : 0, off, y + (n * M + g * mg) * ohw, mg,
                                K, OH, OW, SH, SW, RS, panels, blocks, bpos, g * mg, epi};
            const byoc_lanes_cut cut = {&j, units, tasks < units ? tasks : units};
            if (par) byoc_parallel(cut.tasks, byoc_lanes_task, (void *)&cut);
            else byoc_lanes_units(&j, 0, units);
        }
}

/* Winograd F(2x2, 3x3) for stride-1 3x3 convs (one group): each 2x2 output tile comes from
   a 4x4 input tile as Y = A^T [(G g G^T) . (B^T d B)] A, so the channel sums become 16 GEMMs
   of M x tiles x C (2.25x fewer multiply-adds than direct). u: the 16 transformed weight
   matrices G g G^T (M x C each), packed (pack_a, 16 groups). Tiles go in blocks of whole
   tile rows, about BYOC_WG_TILES each (a fixed cut: the same numbers at any thread count); a
   block's output rows get the bias, then the region's epilogue. Both transforms run on
   vectors of BYOC_VW tiles of a tile row: a block's input rows are first copied, zero-padded,
   into a plane whose rows hold even then odd columns, so that each of a tile's 16 inputs is
   one contiguous load for the vector's tiles; the outputs' two columns are interleaved back
   before they are stored. */
#define BYOC_WG_TILES 96
#if BYOC_VW == 8
#define BYOC_ZIP_LO ((byoc_vi){0, 8, 1, 9, 2, 10, 3, 11})
#define BYOC_ZIP_HI ((byoc_vi){4, 12, 5, 13, 6, 14, 7, 15})
#else
#define BYOC_ZIP_LO ((byoc_vi){0, 4, 1, 5})
#define BYOC_ZIP_HI ((byoc_vi){2, 6, 3, 7})
#endif
typedef struct {
    const float *x, *u, *bias;
    float *y;
    long N, C, H, W, M, OH, OW, PH, PW, TW, TH, rows, blocks, WQ;
    const byoc_epi *epi;
} byoc_wg_job;

/* Where the tile-row vector starting at tile tc is computed: the last one ends at the row's
   end (overlapping the one before: the same values twice), a row narrower than a vector
   takes one from tile 0. */
static inline long byoc_wg_at(long tc, long tw) {
    return tw <= BYOC_VW ? 0 : tc + BYOC_VW > tw ? tw - BYOC_VW : tc;
}

/* Input rows 2 r0 - PH .. of channel xc (2 nr + 2 of them), zero-padded, as plane rows of
   2 WQ floats: padded columns 0, 2, 4, ... then 1, 3, 5, ... */
static void byoc_wg_plane(const byoc_wg_job *j, const float *xc, long r0, long nr, float *pl) {
    const long H = j->H, W = j->W, WQ = j->WQ, PW = j->PW;
    for (long k = 0; k < 2 * nr + 2; k++) {
        float *d = pl + k * 2 * WQ;
        long ih = 2 * r0 + k - j->PH;
        if (ih < 0 || ih >= H) {
            memset(d, 0, sizeof(float) * 2 * WQ);
            continue;
        }
        const float *s = xc + ih * W;
        for (int ph = 0; ph < 2; ph++) {  /* u: input column 2 u + ph - PW, if in [0, W) */
            long lo = (PW - ph + 1) / 2, hi = (W + PW - ph + 1) / 2;
            lo = lo < 0 ? 0 : lo > WQ ? WQ : lo;
            hi = hi < lo ? lo : hi > WQ ? WQ : hi;
            float *restrict dp = d + ph * WQ;
            const float *restrict sp = s + ph - PW;
            for (long u = 0; u < lo; u++) dp[u] = 0.0f;
            for (long u = lo; u < hi; u++) dp[u] = sp[2 * u];
            for (long u = hi; u < WQ; u++) dp[u] = 0.0f;
        }
    }
}

/* Floats between two of a block's 16 planes of n floats (v's and mo's): never a multiple of
   4 KB, whose 16 planes would all fall in the same L1 sets (a 56x56 map's blocks of 224 tiles
   x 128 channels are 28 x 4 KB: the input transform ran 2.7x slower per tile than on 28x28). */
static long byoc_wg_stride(long n) {
    long s = (n + 15) / 16 * 16;
    return s % 1024 ? s : s + 16;
}

/* B^T d B of every tile of the block, channel by channel, into v[e][c][tile] (e = a*4+b). */
static void byoc_wg_input(const byoc_wg_job *j, const float *x, long r0, long nr, float *v,
                          float *pl, long c0, long c1) {
    const long C = j->C, TW = j->TW, WQ = j->WQ, nt = nr * TW, stride = byoc_wg_stride(C * nt);
    for (long c = c0; c < c1; c++) {
        byoc_wg_plane(j, x + c * j->H * j->W, r0, nr, pl);
        for (long tr = 0; tr < nr; tr++)
            for (long tc0 = 0; tc0 < TW; tc0 += BYOC_VW) {
                const long tc = byoc_wg_at(tc0, TW);
                const float *rows = pl + 2 * tr * 2 * WQ + tc;
                byoc_vf d[4][4], s[4][4];
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 4; b++)
                        d[a][b] = *(const byoc_vf *)(rows + a * 2 * WQ + (b & 1) * WQ + (b >> 1));
                for (int b = 0; b < 4; b++) {  /* B^T d */
                    s[0][b] = d[0][b] - d[2][b];
                    s[1][b] = d[1][b] + d[2][b];
                    s[2][b] = d[2][b] - d[1][b];
                    s[3][b] = d[1][b] - d[3][b];
                }
                float *o = v + c * nt + tr * TW + tc;
                for (int a = 0; a < 4; a++) {  /* (B^T d) B */
                    byoc_vf e[4] = {s[a][0] - s[a][2], s[a][1] + s[a][2], s[a][2] - s[a][1],
                                    s[a][1] - s[a][3]};
                    for (int b = 0; b < 4; b++) {
                        float *ob = o + (a * 4 + b) * stride;
                        if (TW >= BYOC_VW) *(byoc_vf *)ob = e[b];
                        else byoc_vstore_first(ob, e[b], TW);
                    }
                }
            }
    }
}

/* A^T q A of every tile, plus the bias, into the block's output rows. mo: [e][m][tile], with
   BYOC_VW floats of slack (a narrow tile row's vector reads past it). */
static void byoc_wg_output(const byoc_wg_job *j, float *y, long r0, long nr, const float *mo,
                           long m0, long m1) {
    const long M = j->M, OH = j->OH, OW = j->OW, TW = j->TW, nt = nr * TW;
    const long stride = byoc_wg_stride(M * nt);
    for (long m = m0; m < m1; m++) {
        const byoc_vf b0 = (byoc_vf){0} + (j->bias ? j->bias[m] : 0.0f);
        float *ym = y + m * OH * OW;
        for (long tr = 0; tr < nr; tr++)
            for (long tc0 = 0; tc0 < TW; tc0 += BYOC_VW) {
                const long tc = byoc_wg_at(tc0, TW);
                const float *p = mo + m * nt + tr * TW + tc;
                byoc_vf q[4][4], r[2][4];
                for (int e = 0; e < 16; e++) q[e / 4][e % 4] = *(const byoc_vf *)(p + e * stride);
                for (int b = 0; b < 4; b++) {  /* A^T q */
                    r[0][b] = q[0][b] + q[1][b] + q[2][b];
                    r[1][b] = q[1][b] - q[2][b] - q[3][b];
                }
                long oh = 2 * (r0 + tr), ow = 2 * tc;
                for (int i = 0; i < 2 && oh + i < OH; i++) {
                    byoc_vf c0 = r[i][0] + r[i][1] + r[i][2] + b0;
                    byoc_vf c1 = r[i][1] - r[i][2] - r[i][3] + b0;
                    byoc_vf out[2] = {__builtin_shuffle(c0, c1, BYOC_ZIP_LO),
                                      __builtin_shuffle(c0, c1, BYOC_ZIP_HI)};
                    float *row = ym + (oh + i) * OW + ow;
                    if (ow + 2 * BYOC_VW <= OW) {
                        *(byoc_vf *)row = out[0];
                        *(byoc_vf *)(row + BYOC_VW) = out[1];
                    } else {  /* a row's end: a memcpy of a varying length was a libc call
                                 (3% of squeezenet at one thread) */
#if defined(__AVX512F__) && BYOC_VW == 8
                        _mm512_mask_storeu_ps(row, byoc_mask16(OW - ow),
                                              _mm512_loadu_ps((const float *)out));
#else
                        const long n = OW - ow;
                        byoc_vstore_first(row, out[0], n < BYOC_VW ? n : BYOC_VW);
                        if (n > BYOC_VW) byoc_vstore_first(row + BYOC_VW, out[1], n - BYOC_VW);
#endif
                    }
                }
            }
    }
}

/* Scratch floats of a block's transformed inputs v and GEMM outputs mo. */
static long byoc_wg_vsize(const byoc_wg_job *j) {
    return 16 * byoc_wg_stride(j->C * j->rows * j->TW);
}
static long byoc_wg_msize(const byoc_wg_job *j) {
    return 16 * byoc_wg_stride(j->M * j->rows * j->TW) + BYOC_VW;
}
static long byoc_wg_psize(const byoc_wg_job *j) {
    return ((2 * j->rows + 2) * 2 * j->WQ + 15) / 16 * 16;
}

/* The block k: where its rows start, how many, its image. */
static long byoc_wg_block(const byoc_wg_job *j, long k, long *r0, const float **x, float **y) {
    long n = k / j->blocks;
    *r0 = k % j->blocks * j->rows;
    *x = j->x + n * j->C * j->H * j->W;
    *y = j->y + n * j->M * j->OH * j->OW;
    return (*r0 + j->rows < j->TH ? *r0 + j->rows : j->TH) - *r0;
}

/* The block's 16 GEMMs e = lo..hi: mo[e] = u[e] v[e]. */
static void byoc_wg_gemms(const byoc_wg_job *j, long nt, const float *v, float *mo, long lo,
                          long hi, float *gws) {
    const long C = j->C, M = j->M, mpad = (M + BYOC_MR - 1) / BYOC_MR * BYOC_MR;
    const long vstride = byoc_wg_stride(C * nt), mstride = byoc_wg_stride(M * nt);
    for (long e = lo; e < hi; e++) {
        byoc_mat b = {v + e * vstride, nt, 1};
        byoc_gemm(M, nt, C, 1.0f, 0, j->u + e * mpad * C, byoc_pack_b_mat, &b,
                  mo + e * mstride, nt, 0, gws, 0, 0);
    }
}

/* The bias is in; the region's epilogue on output channels m0..m1 of the block's rows. */
static void byoc_wg_epilogue(const byoc_wg_job *j, float *y, long r0, long nr, long m0, long m1) {
    if (!j->epi) return;
    long p0 = 2 * r0 * j->OW, p1 = (2 * (r0 + nr) < j->OH ? 2 * (r0 + nr) : j->OH) * j->OW;
    j->epi->fn(y + m0 * j->OH * j->OW + p0, j->OH * j->OW, m0, m1 - m0, p1 - p0, j->epi->ctx);
}

/* Whole blocks lo..hi, one task each (many blocks: each thread its own). */
static void byoc_wg_blocks(void *ctx, long lo, long hi) {
    const byoc_wg_job *j = (const byoc_wg_job *)ctx;
    const long vsize = byoc_wg_vsize(j), msize = byoc_wg_msize(j), psize = byoc_wg_psize(j);
    float *v = (float *)byoc_rt->scratch(1, 4 * (vsize + msize + psize
                                                 + byoc_gemm_scratch(j->rows * j->TW, j->C)));
    float *mo = v + vsize, *pl = mo + msize, *gws = pl + psize;
    for (long k = lo; k < hi; k++) {
        long r0;
        const float *x;
        float *y;
        long nr = byoc_wg_block(j, k, &r0, &x, &y), nt = nr * j->TW;
        byoc_wg_input(j, x, r0, nr, v, pl, 0, j->C);
        byoc_wg_gemms(j, nt, v, mo, 0, 16, gws);
        byoc_wg_output(j, y, r0, nr, mo, 0, j->M);
        byoc_wg_epilogue(j, y, r0, nr, 0, j->M);
    }
}

/* Few blocks (a late layer's small map): one block at a time, each of its three steps cut
   among the threads (channels, the 16 GEMMs, output channels). Each value is computed as in
   byoc_wg_blocks, so the same bits. */
typedef struct {
    const byoc_wg_job *j;
    const float *x;
    float *y, *v, *mo;
    long r0, nr;
} byoc_wg_step;

static void byoc_wg_input_task(void *ctx, long c0, long c1) {
    const byoc_wg_step *s = (const byoc_wg_step *)ctx;
    float *pl = (float *)byoc_rt->scratch(1, 4 * byoc_wg_psize(s->j));
    byoc_wg_input(s->j, s->x, s->r0, s->nr, s->v, pl, c0, c1);
}
static void byoc_wg_gemm_task(void *ctx, long lo, long hi) {
    const byoc_wg_step *s = (const byoc_wg_step *)ctx;
    long nt = s->nr * s->j->TW;
    float *gws = (float *)byoc_rt->scratch(1, 4 * byoc_gemm_scratch(nt, s->j->C));
    byoc_wg_gemms(s->j, nt, s->v, s->mo, lo, hi, gws);
}
static void byoc_wg_output_task(void *ctx, long m0, long m1) {
    const byoc_wg_step *s = (const byoc_wg_step *)ctx;
    byoc_wg_output(s->j, s->y, s->r0, s->nr, s->mo, m0, m1);
    byoc_wg_epilogue(s->j, s->y, s->r0, s->nr, m0, m1);
}

static void byoc_wg_stepwise(const byoc_wg_job *j, long nblocks) {
    const long vsize = byoc_wg_vsize(j);
    float *v = (float *)byoc_rt->scratch(2, 4 * (vsize + byoc_wg_msize(j)));
    for (long k = 0; k < nblocks; k++) {
        byoc_wg_step s = {j, 0, 0, v, v + vsize, 0, 0};
        s.nr = byoc_wg_block(j, k, &s.r0, &s.x, &s.y);
        byoc_parallel(j->C, byoc_wg_input_task, &s);
        byoc_parallel(16, byoc_wg_gemm_task, &s);
        byoc_parallel(j->M, byoc_wg_output_task, &s);
    }
}

void byoc_conv3x3_winograd(const float *x, const float *u, const float *bias, float *y,
                           long N, long C, long H, long W, long M, long OH, long OW, long PH,
                           long PW, const byoc_epi *epi) {
    long TW = (OW + 1) / 2, TH = (OH + 1) / 2, rows = 1, best = -1;
    /* tile rows per block: about BYOC_WG_TILES tiles, as few as possible wasted in the GEMMs'
       last column panels (of BYOC_NR tiles), over the whole image */
    for (long r = 1; r <= TH && (r == 1 || r * TW <= 2 * BYOC_WG_TILES); r++) {
        long full = TH / r, last = TH % r * TW, nt = r * TW;
        long padded = full * ((nt + BYOC_NR - 1) / BYOC_NR * BYOC_NR)
                      + (last + BYOC_NR - 1) / BYOC_NR * BYOC_NR;
        long cost = padded * 16 + (TH + r - 1) / r * 64;  /* a block's calls cost ~4 tiles */
        if (best < 0 || cost <= best) { best = cost; rows = r; }
    }
    long WQ = (TW > BYOC_VW ? TW : BYOC_VW) + 1;
    byoc_wg_job j = {x, u, bias, y, N, C, H, W, M, OH, OW, PH, PW, TW, TH, rows,
                     (TH + rows - 1) / rows, WQ, epi};
    long nblocks = N * j.blocks;
    if (byoc_threads() > 1 && nblocks < 4L * byoc_threads()) byoc_wg_stepwise(&j, nblocks);
    else byoc_parallel(nblocks, byoc_wg_blocks, &j);
}

/* col2im of one image and group: output channels lo..hi, each from its own columns. */
typedef struct {
    const float *cols, *bias;
    float *y;
    long H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW;
} byoc_col2im_job;

static void byoc_col2im(void *ctx, long m0, long m1) {
    const byoc_col2im_job *c = (const byoc_col2im_job *)ctx;
    const long H = c->H, W = c->W, OH = c->OH, OW = c->OW, KH = c->KH, KW = c->KW;
    const long SH = c->SH, SW = c->SW, PH = c->PH, PW = c->PW, DH = c->DH, DW = c->DW, hw = H * W;
    for (long m = m0; m < m1; m++) {
        float *yc = c->y + m * OH * OW;
        float b0 = c->bias ? c->bias[m] : 0.0f;
        for (long j = 0; j < OH * OW; j++) yc[j] = b0;
        for (long kh = 0; kh < KH; kh++)
            for (long kw = 0; kw < KW; kw++) {
                const float *col = c->cols + ((m * KH + kh) * KW + kw) * hw;
                for (long ih = 0; ih < H; ih++) {
                    long oh = ih * SH - PH + kh * DH;
                    if (oh < 0 || oh >= OH) continue;
                    /* ow = iw * SW + off must be in [0, OW): the valid iw range. */
                    long off = kw * DW - PW, lo, hi;
                    lo = off < 0 ? (-off + SW - 1) / SW : 0;
                    hi = OW - 1 - off < 0 ? 0 : (OW - 1 - off) / SW + 1;
                    if (hi > W) hi = W;
                    float *restrict yr = yc + oh * OW;
                    const float *restrict cr = col + ih * W;
                    for (long iw = lo; iw < hi; iw++) yr[iw * SW + off] += cr[iw];
                }
            }
    }
}

/* y = conv_transpose(x, w) + bias: a GEMM into columns, then col2im (scatter-add).
   w is [C, M/G, KH, KW]. ws: (M/G)*KH*KW*H*W floats of columns, then GEMM scratch. */
void byoc_conv_transpose2d(const float *x, const float *w, const float *bias, float *y,
                                  long N, long C, long H, long W, long M, long OH, long OW,
                                  long KH, long KW, long SH, long SW, long PH, long PW,
                                  long DH, long DW, long G, float *ws) {
    long cg = C / G, mg = M / G, rows = mg * KH * KW, hw = H * W;
    float *cols = ws, *scratch = ws + (rows * hw + 15) / 16 * 16;
    for (long n = 0; n < N; n++)
        for (long g = 0; g < G; g++) {
            byoc_mat a = {w + g * cg * rows, 1, rows};
            byoc_mat b = {x + (n * C + g * cg) * hw, hw, 1};
            byoc_gemm_mat(rows, hw, cg, 1.0f, a, b, cols, hw, 0, scratch, 0);
            byoc_col2im_job c = {cols, bias ? bias + g * mg : 0, y + (n * M + g * mg) * OH * OW,
                                 H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW};
            byoc_parallel_if(mg * KH * KW * hw, mg, byoc_col2im, &c);
        }
}
"""

_POOL = r"""
typedef struct {
    const float *x;
    float *y;
    long H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, PHE, PWE;
    int count_pad;
} byoc_pool_job;

static void byoc_maxpool_planes(void *ctx, long p0, long p1) {
    const byoc_pool_job *j = (const byoc_pool_job *)ctx;
    const long H = j->H, W = j->W, OH = j->OH, OW = j->OW, KH = j->KH, KW = j->KW;
    const long SH = j->SH, SW = j->SW, PH = j->PH, PW = j->PW, DH = j->DH, DW = j->DW;
    for (long p = p0; p < p1; p++) {
        const float *xc = j->x + p * H * W;
        float *yc = j->y + p * OH * OW;
        for (long oh = 0; oh < OH; oh++)
            for (long ow = 0; ow < OW; ow++) {
                float m = -INFINITY;
                for (long kh = 0; kh < KH; kh++) {
                    long ih = oh * SH - PH + kh * DH;
                    if (ih < 0 || ih >= H) continue;
                    for (long kw = 0; kw < KW; kw++) {
                        long iw = ow * SW - PW + kw * DW;
                        if (iw < 0 || iw >= W) continue;
                        float v = xc[ih * W + iw];
                        m = v > m ? v : m;
                    }
                }
                yc[oh * OW + ow] = m;
            }
    }
}

void byoc_maxpool2d(const float *x, float *y, long NC, long H, long W, long OH, long OW,
                           long KH, long KW, long SH, long SW, long PH, long PW,
                           long DH, long DW) {
    byoc_pool_job j = {x, y, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, 0, 0, 0};
    byoc_parallel_if(NC * OH * OW * KH * KW, NC, byoc_maxpool_planes, &j);
}

/* Average over the window; with count_include_pad the divisor counts padding but not what a
   ceil_mode window hangs past it (PHE, PWE: the padding at the far ends). */
static void byoc_avgpool_planes(void *ctx, long p0, long p1) {
    const byoc_pool_job *j = (const byoc_pool_job *)ctx;
    const long H = j->H, W = j->W, OH = j->OH, OW = j->OW, KH = j->KH, KW = j->KW;
    const long SH = j->SH, SW = j->SW, PH = j->PH, PW = j->PW, PHE = j->PHE, PWE = j->PWE;
    for (long p = p0; p < p1; p++) {
        const float *xc = j->x + p * H * W;
        float *yc = j->y + p * OH * OW;
        for (long oh = 0; oh < OH; oh++) {
            long h0 = oh * SH - PH, h1 = h0 + KH < H + PHE ? h0 + KH : H + PHE;
            long hs = h0 > 0 ? h0 : 0, he = h1 < H ? h1 : H;
            for (long ow = 0; ow < OW; ow++) {
                long w0 = ow * SW - PW, w1 = w0 + KW < W + PWE ? w0 + KW : W + PWE;
                long ws = w0 > 0 ? w0 : 0, we = w1 < W ? w1 : W;
                float s = 0.0f;
                for (long ih = hs; ih < he; ih++)
                    for (long iw = ws; iw < we; iw++) s += xc[ih * W + iw];
                long count = j->count_pad ? (h1 - h0) * (w1 - w0) : (he - hs) * (we - ws);
                yc[oh * OW + ow] = count > 0 ? s / (float)count : 0.0f;
            }
        }
    }
}

void byoc_avgpool2d(const float *x, float *y, long NC, long H, long W, long OH, long OW,
                           long KH, long KW, long SH, long SW, long PH, long PW, long PHE,
                           long PWE, int count_pad) {
    byoc_pool_job j = {x, y, H, W, OH, OW, KH, KW, SH, SW, PH, PW, 1, 1, PHE, PWE, count_pad};
    byoc_parallel_if(NC * OH * OW * KH * KW, NC, byoc_avgpool_planes, &j);
}
"""

# Window loops over padded planes (ops/plane.py) work on whole vectors.
_WINDOW = r"""
/* A window row's vector: AVX-512's 16 floats where the CPU has them (a tap is one load and */
/* one multiply-add or max per vector, so twice the lanes is half the instructions). */
#if defined(__AVX512F__)
#define BYOC_WW 16
#else
#define BYOC_WW BYOC_VW
#endif
typedef float byoc_wf __attribute__((vector_size(4 * BYOC_WW), aligned(4), may_alias));
typedef int byoc_wi __attribute__((vector_size(4 * BYOC_WW)));
/* Lanes s .. s + BYOC_WW - 1 of two vectors side by side (one valignd with AVX-512). */
#if BYOC_WW == 16
#define BYOC_WIDX(s) ((byoc_wi){(s), (s) + 1, (s) + 2, (s) + 3, (s) + 4, (s) + 5, (s) + 6, \
    (s) + 7, (s) + 8, (s) + 9, (s) + 10, (s) + 11, (s) + 12, (s) + 13, (s) + 14, (s) + 15})
#elif BYOC_WW == 8
#define BYOC_WIDX(s) ((byoc_wi){(s), (s) + 1, (s) + 2, (s) + 3, (s) + 4, (s) + 5, (s) + 6, \
    (s) + 7})
#else
#define BYOC_WIDX(s) ((byoc_wi){(s), (s) + 1, (s) + 2, (s) + 3})
#endif
/* Lanes 0, 2, 4, ... of two vectors side by side (a stride-2 row's even columns). */
#if BYOC_WW == 16
#define BYOC_WEVEN ((byoc_wi){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#elif BYOC_WW == 8
#define BYOC_WEVEN ((byoc_wi){0, 2, 4, 6, 8, 10, 12, 14})
#else
#define BYOC_WEVEN ((byoc_wi){0, 2, 4, 6})
#endif
/* Store a vector's first n lanes (a row's last, partial vector): AVX-512's masked store; */
/* with AVX, byoc_vstore_first's stores from the register's halves (not through the stack, */
/* whose narrow reloads wait for the wide store to land: a stride-2 depthwise conv onto */
/* 7x7, all partial rows, was 3x onnxruntime on AVX2). */
#if BYOC_WW == 16
#define byoc_wstore_first(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1), (__m512)(v))
#elif BYOC_WW == 8 && defined(__AVX__)
#define byoc_wstore_first(p, v, n) byoc_vstore_first((p), (v), (n))
#else
#define byoc_wstore_first(p, v, n) memcpy((p), &(v), 4 * (n))
#endif
/* A vector of the n (< BYOC_WW) floats at p and zeros: a masked load where the CPU has them */
/* (nothing read past p + n). */
#if BYOC_WW == 16
#define byoc_wload_first(p, n) ((byoc_wf)_mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1), (p)))
#elif BYOC_WW == 8 && defined(__AVX__)
#define byoc_wload_first(p, n) ((byoc_wf)__builtin_ia32_maskloadps256( \
    (const byoc_v8 *)(p), (byoc_vi){0, 1, 2, 3, 4, 5, 6, 7} < (byoc_vi){0} + (int)(n)))
#else
static inline byoc_wf byoc_wload_first(const float *p, long n) {
    byoc_wf v = {0};
    memcpy(&v, p, 4 * n);
    return v;
}
#endif
/* The vector of a plane row's floats at + off .. (at a multiple of BYOC_WW, the row */
/* aligned, off a constant): an aligned load, or two and a shift across them (one valignd */
/* or vpalignr; SSE2 alone has no such shift, so there it is one unaligned load). */
#if defined(__AVX__)
#define byoc_wtap(row, off, at) ((off) % BYOC_WW == 0 \
    ? *(const byoc_wf *)((row) + (off) + (at)) \
    : __builtin_shuffle(*(const byoc_wf *)((row) + (off) / BYOC_WW * BYOC_WW + (at)), \
                        *(const byoc_wf *)((row) + (off) / BYOC_WW * BYOC_WW + (at) + BYOC_WW), \
                        BYOC_WIDX((off) % BYOC_WW)))
#else
#define byoc_wtap(row, off, at) (*(const byoc_wf *)((row) + (off) + (at)))
#endif
/* A tap at most two floats past an aligned vector (3x3 windows, 5x5 at stride 2): one */
/* unaligned load on AVX2, where the shift across two vectors is two shuffles and they bound */
/* the loop (3x3 depthwise convs 0.78-0.90x, 5x5 stride 2 0.86-0.92x; 5x5 at stride 1, four */
/* shifts a row from the same two loads, stay shifted: unaligned they were 1.2x slower). */
#if BYOC_WW == 16
#define byoc_wtap_near(row, off, at) byoc_wtap(row, off, at)
#else
#define byoc_wtap_near(row, off, at) (*(const byoc_wf *)((row) + (off) + (at)))
#endif
/* MaxPool's fold, lane by lane: m > t ? m : t (a NaN tap is skipped unless it comes last). */
static inline byoc_wf byoc_wmax(byoc_wf m, byoc_wf t) {
    byoc_wf r;
    for (int l = 0; l < BYOC_WW; l++) r[l] = m[l] > t[l] ? m[l] : t[l];
    return r;
}
/* a * b + c rounded once, lane by lane: one vector FMA where the CPU has them. */
/* (Regions are compiled with -ffp-contract=off, so that a * b + c rounds twice as */
/* onnxruntime's Mul and Add do; MLAS takes a conv's sum in its own order with FMAs.) */
static inline byoc_wf byoc_wfma(byoc_wf a, byoc_wf b, byoc_wf c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    byoc_wf r;
    for (int l = 0; l < BYOC_WW; l++) r[l] = __builtin_fmaf(a[l], b[l], c[l]);
    return r;
#else
    return a * b + c;
#endif
}
static inline byoc_wf byoc_wsplat(float x) {
    byoc_wf v;
    for (int l = 0; l < BYOC_WW; l++) v[l] = x;
    return v;
}
"""

# Sums and maxima of contiguous rows with vector accumulators: a plain C loop would be kept in
# order (float addition is not associative) and so never vectorized.
_REDUCE = r"""
static float byoc_sum(const float *x, long n) {
    byoc_vf s0 = {0}, s1 = {0};
    long i = 0;
    for (; i + 2 * BYOC_VW <= n; i += 2 * BYOC_VW) {
        s0 += *(const byoc_vf *)(x + i);
        s1 += *(const byoc_vf *)(x + i + BYOC_VW);
    }
    s0 += s1;
    float s = 0.0f;
    for (int l = 0; l < BYOC_VW; l++) s += s0[l];
    for (; i < n; i++) s += x[i];
    return s;
}
static float byoc_sum_sq_dev(const float *x, long n, float mean) {
    byoc_vf s0 = {0}, s1 = {0};
    long i = 0;
    for (; i + 2 * BYOC_VW <= n; i += 2 * BYOC_VW) {
        byoc_vf d0 = *(const byoc_vf *)(x + i) - mean;
        byoc_vf d1 = *(const byoc_vf *)(x + i + BYOC_VW) - mean;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    s0 += s1;
    float s = 0.0f;
    for (int l = 0; l < BYOC_VW; l++) s += s0[l];
    for (; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return s;
}
/* The largest of x[0..n), NaN if any is (as numpy's max). */
static float byoc_max(const float *x, long n) {
    float m = -INFINITY;
    int nan = 0;
    for (long i = 0; i < n; i++) {
        m = x[i] > m ? x[i] : m;
        nan |= x[i] != x[i];
    }
    return nan ? NAN : m;
}
"""

# What regions call in the library: declarations shared by the library and every region.
_DECLS = r"""
/* Element (i, j) of a matrix view is p[i * rs + j * cs]. */
typedef struct { const float *p; long rs, cs; } byoc_mat;
/* An epilogue fused into a GEMM: fn(c, ldc, row, m, n, ctx) rewrites a finished m x n tile */
/* of C (rows ldc apart, the first row of C being row) in place; the region generates fn. */
typedef void (*byoc_epi_fn)(float *c, long ldc, long row, long m, long n, const void *ctx);
typedef struct { byoc_epi_fn fn; const void *ctx; } byoc_epi;
void byoc_gemm_mat(long M, long N, long K, float alpha, byoc_mat A, byoc_mat B, float *C,
                   long ldc, int accumulate, float *ws, const byoc_epi *epi);
void byoc_conv_1x1_maps(const float *x, const float *bt, const float *bias, float *y, long N,
                        long C, long M, float *ws, const byoc_epi *epi);
void byoc_conv2d(const float *x, const float *w, const float *wp, const float *bias, float *y,
                 long N, long C, long H, long W, long M, long OH, long OW, long KH, long KW,
                 long SH, long SW, long PH, long PW, long DH, long DW, long G, float *ws,
                 const byoc_epi *epi);
void byoc_conv_transpose2d(const float *x, const float *w, const float *bias, float *y,
                           long N, long C, long H, long W, long M, long OH, long OW, long KH,
                           long KW, long SH, long SW, long PH, long PW, long DH, long DW, long G,
                           float *ws);
void byoc_conv3x3_winograd(const float *x, const float *u, const float *bias, float *y,
                           long N, long C, long H, long W, long M, long OH, long OW, long PH,
                           long PW, const byoc_epi *epi);
void byoc_maxpool2d(const float *x, float *y, long NC, long H, long W, long OH, long OW, long KH,
                    long KW, long SH, long SW, long PH, long PW, long DH, long DW);
void byoc_conv_direct(const float *x, const float *wp, const float *bias, float *y,
                      long N, long C, long H, long W, long M, long OH, long OW, long KH,
                      long KW, long SH, long SW, long PH, long PW, long DH, long DW, float *ws,
                      const byoc_epi *epi);
void byoc_conv_flat(const float *x, const float *wp, const float *bias, float *y,
                    long N, long C, long H, long W, long M, long OH, long OW, long KH,
                    long KW, long PH, long PW, long DH, long DW, float *ws,
                    const byoc_epi *epi);
void byoc_conv_lanes(const float *x, const float *wl, const float *bias, float *y,
                     long N, long C, long H, long W, long M, long OH, long OW, long KH,
                     long KW, long SH, long SW, long PH, long PW, long DH, long DW, long G,
                     float *ws, const byoc_epi *epi);
void byoc_avgpool2d(const float *x, float *y, long NC, long H, long W, long OH, long OW, long KH,
                    long KW, long SH, long SW, long PH, long PW, long PHE, long PWE,
                    int count_pad);
"""

# Compiled once into an object file that every region links: the big helpers.
LIBRARY = "\n".join(part.strip("\n") for part in (_PRELUDE, _RT, _VEC, _DECLS, _GEMM, _CONV,
                                                     _POOL))
LINKED = frozenset({"gemm", "conv", "pool"})  # what ctx.need() names that the library holds
_INLINE = {"math": _MATH, "reduce": _REDUCE, "window": _WINDOW}  # pasted into the region (they inline into loops)


def render(needed: set[str]) -> str:
    """The top of a region's source: headers, declarations of the library if it is called,
    and the inline helpers in ``needed``."""
    parts = [_PRELUDE, _RT, _RT_DEF, _VEC]
    if needed & LINKED:
        parts.append(_DECLS)
    parts += [_INLINE[name] for name in sorted(needed - LINKED)]
    return "\n".join(p.strip("\n") for p in parts) + "\n"


def links_library(needed: set[str]) -> bool:
    return bool(needed & LINKED)


def _rows_padded(block: np.ndarray, multiple: int) -> np.ndarray:
    """``block`` with zero rows after its own, to a multiple of ``multiple``."""
    m, k = block.shape
    padded = np.zeros((-(-m // multiple) * multiple, k), np.float32)
    padded[:m] = block
    return padded


def pack_a(a: np.ndarray, groups: int = 1) -> np.ndarray:
    """Rows of ``a`` (per group: ``groups`` equal row blocks) as byoc_gemm reads a packed A:
    per group, per KC block of columns, MR-row panels, each column of a panel contiguous."""
    out = []
    for block in np.split(np.asarray(a, np.float32), groups):
        k = block.shape[1]
        padded = _rows_padded(block, MR)
        for pc in range(0, k, KC):
            part = padded[:, pc:pc + KC]
            out.append(part.reshape(-1, MR, part.shape[1]).transpose(0, 2, 1).ravel())
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def pack_b(b: np.ndarray) -> np.ndarray:
    """``b`` [K x N] as byoc_gemm reads a shared, packed B (byoc_gemm_shared_layout): blocks of
    KC rows and NC columns, each NR-column panels of its rows, bstride floats apart."""
    b = np.asarray(b, np.float32)
    k, n = b.shape
    nr = machine_nr()
    kc_max, nc_max = min(k, KC), min(n, NC)
    stride = (kc_max * (-(-nc_max // nr) * nr) + nr + 15) // 16 * 16
    out = np.zeros((-(-k // KC) * -(-n // NC), stride), np.float32)
    t = 0
    for pc in range(0, k, KC):
        for jc in range(0, n, NC):
            block = b[pc:pc + KC, jc:jc + NC]
            kc, nc = block.shape
            cols = -(-nc // nr) * nr
            padded = np.zeros((kc, cols), np.float32)
            padded[:, :nc] = block
            out[t, :kc * cols] = padded.reshape(kc, -1, nr).transpose(1, 0, 2).ravel()
            t += 1
    return out.ravel()


def gemm_scratch(m: int, n: int, k: int) -> int:
    """Floats of scratch byoc_gemm needs for an M x N x K product (packed A and B, and NR
    floats of slack that byoc_pack_b_padded may write past the last panel)."""
    kc = min(k, KC)
    a = ((MC + MR) * kc + 15) // 16 * 16
    return a + kc * (min(n, NC) + NR) + NR


def conv_scratch(dims: list[int], groups: int) -> int:
    """Floats of scratch byoc_conv2d needs (dims: N, C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW,
    DH, DW), as byoc_conv2d lays it out: a long per tap of a group; unless the conv is
    pointwise, a group's planes (SW phases of PL floats a padded row) with 2 NR floats of
    slack; then the GEMM's."""
    n, c, h, w, m, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = dims
    cg, mg = c // groups, m // groups
    offsets = (2 * cg * kh * kw + 15) // 16 * 16
    gemm = gemm_scratch(mg, oh * ow, cg * kh * kw)
    if kh == kw == sh == sw == 1 and ph == pw == 0 and (oh, ow) == (h, w):
        # 1x1 maps: the whole batch's product, N x M x C (byoc_conv2d)
        return offsets + (max(gemm, gemm_scratch(n, m, c)) if oh * ow == 1 and groups == 1
                          else gemm)
    hp, pl = (oh - 1) * sh + (kh - 1) * dh + 1, ow + (kw - 1) * dw // sw
    return offsets + (cg * hp * sw * pl + 2 * NR + 15) // 16 * 16 + gemm


def direct_conv_scratch(dims: list[int]) -> int:
    """Floats of scratch byoc_conv_direct needs: one long per tap (its blocks' planes are each
    thread's own)."""
    c, kh, kw = dims[1], dims[7], dims[8]
    return 2 * c * kh * kw


def flat_conv_scratch(dims: list[int]) -> int:
    """Floats of scratch byoc_conv_flat needs: the padded planes and NR floats of slack, the
    sums (MR-row panels of the flat row's NR panels), then one long per tap."""
    _, c, _, _, m, oh, ow, kh, kw, _, _, _, _, dh, dw = dims
    hp, pl = oh + (kh - 1) * dh, ow + (kw - 1) * dw
    npad = -(-((oh - 1) * pl + ow) // NR) * NR
    return (c * hp * pl + NR + 15) // 16 * 16 + -(-m // MR) * MR * npad + 2 * c * kh * kw


def lanes_conv_scratch(dims: list[int], groups: int) -> int:
    """Floats of scratch byoc_conv_lanes needs: a group's zero-padded input (one plane of
    padded rows a channel) unless it has no pads, then one long per tap (as it lays them
    out)."""
    _, c, h, w, _, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw = dims
    hp, rs = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    cg = c // groups
    in_place = ph == pw == 0 and hp <= h and rs <= w  # no copy: the input is read as it is
    return (0 if in_place else (cg * hp * rs + 15) // 16 * 16) + 2 * cg * kh * kw


def pack_lanes(w: np.ndarray, groups: int = 1) -> np.ndarray:
    """[M, K] weights as byoc_conv_lanes reads them: per group, panels of NR output channels
    (the last zero-padded), each its K rows of NR floats."""
    nr = machine_nr()
    out = []
    for block in np.split(np.asarray(w, np.float32), groups):
        k = block.shape[1]
        out.append(_rows_padded(block, nr).reshape(-1, nr, k).transpose(0, 2, 1).ravel())
    return np.concatenate(out)


# Winograd F(2x2, 3x3): G, and the weights transformed (G g G^T per output and input channel).
_WG_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """[M, C, 3, 3] weights as byoc_conv3x3_winograd reads them: the 16 matrices
    (G g G^T)[a, b] of M x C, each packed (pack_a)."""
    u = np.einsum("ai,mcij,bj->abmc", _WG_G, np.asarray(w, np.float64), _WG_G)
    m, c = w.shape[:2]
    return pack_a(u.reshape(16 * m, c).astype(np.float32), groups=16)
