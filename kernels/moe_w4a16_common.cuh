// moe_w4a16_common.cuh: what the shipped W4A16 MoE kernel (kernels/moe_w4a16.cu) and its history
// (kernels/dev/moe_w4a16_v1_v10.cu) share: the weight layout, the launch arguments, and the tensor-core
// building blocks of v2 that v11 still runs (nbs/03a_moe_w4a16).
//
// Weights: compressed-tensors pack-quantized, symmetric, group 32. One matrix [N, K] of an expert is
//   packed [N, K/8] int32 (nibble i of word j = element 8j+i, stored value + 8) and scale [N, K/32] bf16.
//   Read 16 bytes at a time, one uint4 is exactly 32 weights = one quantisation group = one scale.
//   Experts are stacked: gate/up [E, I, H/8], [E, I, H/32]; down [E, H, I/8], [E, H, I/32]. H, I % 32 == 0.
// Pairs: p = t*k + j for token t and its j-th routed expert topk_idx[p], weight topk_w[p].
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>
#include "pdl.cuh"   // ldcg: load_chunk_x's coherent path

typedef __nv_bfloat16 bf16;

#define MAXE 1024   // experts per layer the grouping block handles (one thread each)


// =========================================================================================================
// v2: tensor cores (mma.sync m16n8k16 bf16, fp32 accumulate), "swap AB": the weights are the A operand (16
// output rows per mma), the tokens of an expert the B operand (8 tokens per mma), so one mma serves any
// M <= 8 without wasting weight bytes; larger M loops over tiles of 8 tokens. Why v1 sat at ~18% of HBM:
// it re-unpacked every nibble once per token with ~5 fp32 ops per weight per token plus a bf16->fp32
// conversion of x per weight, i.e. it was issue-bound (an H200 SM must retire ~35 weights per cycle to keep
// up with 4.27 TB/s: a budget of ~3.6 lane-ops per weight). v2 spends ~2 lane-ops per weight, once:
//   * 16-byte loads (one uint4 = one quantisation group of one row) with L1::no_allocate (x keeps the L1);
//   * the k order inside an mma is free (sum over k), so thread t of a quad takes the whole group 4c+t of
//     rows g and g+8 and feeds pair (nibble i, nibble i+4) of each word into one A register, with the matching
//     x pair (x[i], x[i+4]) built by one byte_perm: no shuffles, no permuted storage format;
//   * nibble -> bf16 by OR with 0x4300 (128 + n), minus 136 (exact), times the group scale (one rounding);
//   * a block = NW warps splitting K (chunks of 4 groups = 128 k), one chunk prefetched ahead in registers,
//     partial sums reduced through shared memory; gate and up share the x fragments (NT = 2 tiles), down does
//     two 16-row tiles per block. act goes between the two launches as bf16 (the B operand of down).
// Grid: gate/up (ceil(I/16), min(E, P)), down (ceil(H/32), min(E, P)); at T = 1 that is 1024 and 1792 blocks,
// so all 132 SMs stream even with 8 experts hit.
// v3 = v2 with 8 warps per block; v4 = v2 with the L2::256B prefetch-size hint on the weight loads.
// =========================================================================================================

__device__ __forceinline__ uint4 ldw(const uint4 *p) {   // streamed weights: do not allocate in L1
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 ldw_pf(const uint4 *p) {   // same, asking L2 to fetch 256-byte blocks
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bf2u(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t *>(&v); }
__device__ __forceinline__ __nv_bfloat162 u2bf(uint32_t u) { return *reinterpret_cast<__nv_bfloat162 *>(&u); }

// (128 + n_lo, 128 + n_hi) as bf16x2 -> ((n_lo - 8) * s, (n_hi - 8) * s); 128 + n and 136 are exact in bf16
__device__ __forceinline__ uint32_t dq_scale(uint32_t v, __nv_bfloat162 s2) {
    return bf2u(__hmul2(__hsub2(u2bf(v), u2bf(0x43084308u)), s2));
}

// pair i (0..3) of packed word w as bf16x2: ((n_i - 8) * s, (n_{i+4} - 8) * s)
__device__ __forceinline__ uint32_t dq_pair(uint32_t w, int i, __nv_bfloat162 s2) {
    return dq_scale(((w >> (4 * i)) & 0x000F000Fu) | 0x43004300u, s2);
}

// the same pair with the mask and the exponent in one lop3, ((w >> 4i) & 0x000F000F) | 0x43004300 (v12): ptxas
// emits dq_pair's AND and OR as two LOP3s, and the integer pipe is what limits v11 (ncu, T = 1: ALU 66% busy)
__device__ __forceinline__ uint32_t dq_pair_l3(uint32_t w, int i, __nv_bfloat162 s2) {
    uint32_t v;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w >> (4 * i)), "r"(0x000F000Fu), "r"(0x43004300u));
    return dq_scale(v, s2);
}

template <int NT> struct StageV2 { uint4 w[NT][2]; uint32_t s[NT][2]; uint4 x[4]; };
template <int NT> struct PtrsV2 { const uint4 *w[NT][2]; const unsigned short *s[NT][2]; };

// one chunk for this thread: group q of rows g and g+8 of each tile, and x[token g][32q .. 32q+31]
// (split in two for v11, which issues a chunk's weights before the load chain that finds x)
template <int NT, bool PF>
__device__ __forceinline__ void load_chunk_w(StageV2<NT> &st, const PtrsV2<NT> &p, int q, int G) {
    const bool ok = q < G;
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            st.w[i][r] = ok ? (PF ? ldw_pf(p.w[i][r] + q) : ldw(p.w[i][r] + q)) : make_uint4(0, 0, 0, 0);
            st.s[i][r] = ok ? (uint32_t)__ldg(p.s[i][r] + q) : 0u;
        }
}
// NC: through the read-only path (__ldg), whose data must not change while the kernel runs; false: ldcg
template <int NT, bool NC = true>
__device__ __forceinline__ void load_chunk_x(StageV2<NT> &st, const uint4 *xrow, int q, int G) {
    const bool okx = q < G && xrow != nullptr;
#pragma unroll
    for (int j = 0; j < 4; ++j) st.x[j] = okx ? (NC ? __ldg(xrow + 4 * q + j) : ldcg(xrow + 4 * q + j)) : make_uint4(0, 0, 0, 0);
}

template <int NT, bool L3 = false>   // L3: dequantise with dq_pair_l3 (bit-identical, fewer instructions)
__device__ __forceinline__ void v2_compute(const StageV2<NT> &st, float (&acc)[NT][4]) {
    uint32_t b[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {   // (x[8j+i], x[8j+i+4]) pairs, i = 0..3
        const uint4 X = st.x[j];
        b[j][0] = __byte_perm(X.x, X.z, 0x5410); b[j][1] = __byte_perm(X.x, X.z, 0x7632);
        b[j][2] = __byte_perm(X.y, X.w, 0x5410); b[j][3] = __byte_perm(X.y, X.w, 0x7632);
    }
#pragma unroll
    for (int i = 0; i < NT; ++i) {
        const __nv_bfloat162 sg = u2bf(st.s[i][0] * 0x10001u), sh = u2bf(st.s[i][1] * 0x10001u);
        const uint32_t Wg[4] = {st.w[i][0].x, st.w[i][0].y, st.w[i][0].z, st.w[i][0].w};
        const uint32_t Wh[4] = {st.w[i][1].x, st.w[i][1].y, st.w[i][1].z, st.w[i][1].w};
        auto dq = [&](uint32_t w, int p, __nv_bfloat162 s2) { return L3 ? dq_pair_l3(w, p, s2) : dq_pair(w, p, s2); };
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            mma_bf16(acc[i], dq(Wg[j], 0, sg), dq(Wh[j], 0, sh), dq(Wg[j], 1, sg), dq(Wh[j], 1, sh), b[j][0], b[j][1]);
            mma_bf16(acc[i], dq(Wg[j], 2, sg), dq(Wh[j], 2, sh), dq(Wg[j], 3, sg), dq(Wh[j], 3, sh), b[j][2], b[j][3]);
        }
    }
}

#define GU_ARGS const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair, \
    const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit, \
    const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale, \
    const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, bf16 *__restrict__ act
#define GU_PASS x, H, I, k, sorted_pair, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, act
#define DN_ARGS const bf16 *__restrict__ act, int I, int H, const int *__restrict__ sorted_pair, const float *__restrict__ topk_w, \
    const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit, \
    const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, float *__restrict__ ybuf
#define DN_PASS act, I, H, sorted_pair, topk_w, offsets, hit, n_hit, down_packed, down_scale, ybuf

// what the diagnostic MoE kernels in kernels/dev/ record about a block (moe_w4a16_stamps.cu, moe_w4a16_fused.cu)
__device__ __forceinline__ unsigned long long gtime() {   // the global timer, ns
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned smid() {              // the SM this block runs on
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}
