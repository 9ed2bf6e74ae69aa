// moe_w4a16.cu: routed MoE experts with INT4 weights kept packed (W4A16), for one MoE layer (nbs/03a_moe_w4a16).
//
// Weights: compressed-tensors pack-quantized, symmetric, group 32. One matrix [N, K] of an expert is
//   packed [N, K/8] int32 (nibble i of word j = element 8j+i, stored value + 8) and scale [N, K/32] bf16.
//   Read 16 bytes at a time, one uint4 is exactly 32 weights = one quantisation group = one scale.
//   Experts are stacked: gate/up [E, I, H/8], [E, I, H/32]; down [E, H, I/8], [E, H, I/32]. H, I % 32 == 0.
// Pairs: p = t*k + j for token t and its j-th routed expert topk_idx[p], weight topk_w[p].
//
// Four launches, no host synchronisation, nothing allocated (all buffers come from the caller's workspace):
//   1. moe_group    (1 block)  counting sort of the pairs by expert: counts, exclusive scan -> offsets, the
//                              compact list of hit experts, scatter -> sorted_pair[slot] = p, pos[p] = slot.
//   2. moe_gate_up  (v1's shape; v2+ further down) grid (ceil(I/8), min(E, P)): block y takes the y-th hit expert (exits if y >= n_hit),
//                   each warp one row n of gate AND up, streaming the packed rows once per tile of MT tokens;
//                   act[slot, n] = silu(x.Wg[n]) * (x.Wu[n]) in fp32 (workspace [P, I]).
//   3. moe_down     grid (ceil(H/8), min(E, P)): same over Wd with act rows as inputs;
//                   ybuf[slot, n] = topk_w[p] * act[slot].Wd[n] (workspace [P, H] fp32).
//   4. moe_combine  out[t, n] = bf16(routed_scaling_factor * sum_j ybuf[pos[t*k+j], n]), j in order
//                   (deterministic: no atomics on the output).
// The gate/up and down launches come in numbered versions (llm.c style, all kept, each validated and timed by
// benchmarks/bench_moe.py; nbs/03a_moe_w4a16 picks the default, CUDA_VERSION):
// v1: fp32 CUDA cores, GEMV-like streaming, one warp per packed row; weights unpacked and scaled in registers
//     (nibble -> float via the 2^23 magic number, each group's dot product scaled once) -- once per token.
// v2-v10 (further down): tensor cores, mma.sync m16n8k16 bf16 with the weights as the A operand.
#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

#define MAXE 1024   // experts per layer the grouping block handles (one thread each)
#define MT 8        // tokens per tile: each packed row is streamed once per tile
#define WARPS 8     // warps per block in the GEMV kernels, one output row each

// ---------------------------------------------------------------------------------------------------------
// 1. grouping: one block of MAXE threads
// ---------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(MAXE)
moe_group(const int *__restrict__ topk_idx, int P, int E, int *__restrict__ counts, int *__restrict__ offsets,
          int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos) {
    __shared__ int s_cnt[MAXE], s_sum[MAXE], s_hit[MAXE];
    const int tid = threadIdx.x;
    s_cnt[tid] = 0;
    __syncthreads();
    for (int p = tid; p < P; p += MAXE) {
        int e = topk_idx[p];
        if (e >= 0 && e < E) atomicAdd(&s_cnt[e], 1);
    }
    __syncthreads();
    const int c = tid < E ? s_cnt[tid] : 0;
    s_sum[tid] = c; s_hit[tid] = c > 0;
    __syncthreads();
    for (int off = 1; off < MAXE; off <<= 1) {   // Hillis-Steele inclusive scan of counts and of (count > 0)
        int a = tid >= off ? s_sum[tid - off] : 0, b = tid >= off ? s_hit[tid - off] : 0;
        __syncthreads();
        s_sum[tid] += a; s_hit[tid] += b;
        __syncthreads();
    }
    const int incl = s_sum[tid], ex = incl - c;
    if (tid < E) {
        counts[tid] = c; offsets[tid] = ex;
        if (c > 0) hit[s_hit[tid] - 1] = tid;
        if (tid == E - 1) { offsets[E] = incl; n_hit[0] = s_hit[tid]; }
    }
    __syncthreads();
    s_cnt[tid] = ex;                              // reuse as the per-expert cursor
    __syncthreads();
    for (int p = tid; p < P; p += MAXE) {
        int e = topk_idx[p];
        if (e >= 0 && e < E) { int slot = atomicAdd(&s_cnt[e], 1); sorted_pair[slot] = p; pos[p] = slot; }
        else pos[p] = -1;                         // an invalid expert id contributes nothing
    }
}

// ---------------------------------------------------------------------------------------------------------
// helpers: int4 group dot products
// ---------------------------------------------------------------------------------------------------------
__device__ __forceinline__ float q4(uint32_t w, int i) {   // stored nibble i of w, minus 8, as float (exact)
    return __int_as_float(0x4B000000u | ((w >> (4 * i)) & 0xFu)) - 8388616.0f;
}

// sum_{i<8} x[i] * (q_i - 8) for one packed word and 8 activations
__device__ __forceinline__ float dot8(uint32_t w, const float (&x)[8]) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) s = fmaf(x[i], q4(w, i), s);
    return s;
}

__device__ __forceinline__ void load8(const bf16 *__restrict__ p, float (&x)[8]) {   // 16-byte load
    uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { x[2 * i] = __uint_as_float(u[i] << 16); x[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u); }
}

__device__ __forceinline__ void load8(const float *__restrict__ p, float (&x)[8]) {  // 2 x 16-byte loads
    float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float bf(const bf16 *p) { return __bfloat162float(*p); }

// ---------------------------------------------------------------------------------------------------------
// 2. gate + up, SiLU-gated product into the fp32 act workspace
// ---------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(WARPS * 32)
moe_gate_up(const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair,
            const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
            const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale,
            const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, float *__restrict__ act) {
    if ((int)blockIdx.y >= n_hit[0]) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = blockIdx.x * WARPS + warp;
    if (n >= I) return;
    const int e = hit[blockIdx.y], start = offsets[e], m = offsets[e + 1] - start, G = H / 32;
    const size_t row = (size_t)e * I + n;
    const uint4 *wg = gate_packed + row * G, *wu = up_packed + row * G;
    const bf16 *sg = gate_scale + row * G, *su = up_scale + row * G;
    for (int t0 = 0; t0 < m; t0 += MT) {
        const int mt = min(MT, m - t0);
        const bf16 *xr[MT];
#pragma unroll
        for (int i = 0; i < MT; ++i) xr[i] = x + (size_t)(sorted_pair[start + t0 + min(i, mt - 1)] / k) * H;
        float ag[MT], au[MT];
#pragma unroll
        for (int i = 0; i < MT; ++i) ag[i] = au[i] = 0.f;
#pragma unroll 2
        for (int g = lane; g < G; g += 32) {
            const uint4 a = __ldg(wg + g), b = __ldg(wu + g);
            const float ga = bf(sg + g), ub = bf(su + g);
            const uint32_t A[4] = {a.x, a.y, a.z, a.w}, B[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                if (i < mt) {
                    float pg = 0.f, pu = 0.f, xv[8];
#pragma unroll
                    for (int w = 0; w < 4; ++w) { load8(xr[i] + g * 32 + w * 8, xv); pg += dot8(A[w], xv); pu += dot8(B[w], xv); }
                    ag[i] = fmaf(ga, pg, ag[i]); au[i] = fmaf(ub, pu, au[i]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            if (i < mt) {
                const float gv = warp_sum(ag[i]), uv = warp_sum(au[i]);
                if (lane == 0) act[(size_t)(start + t0 + i) * I + n] = gv / (1.f + __expf(-gv)) * uv;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// 3. down projection, weighted by the routing score, into the fp32 ybuf workspace (rows = sorted slots)
// ---------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(WARPS * 32)
moe_down(const float *__restrict__ act, int I, int H, const int *__restrict__ sorted_pair, const float *__restrict__ topk_w,
         const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
         const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, float *__restrict__ ybuf) {
    if ((int)blockIdx.y >= n_hit[0]) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n = blockIdx.x * WARPS + warp;
    if (n >= H) return;
    const int e = hit[blockIdx.y], start = offsets[e], m = offsets[e + 1] - start, G = I / 32;
    const size_t row = (size_t)e * H + n;
    const uint4 *wd = down_packed + row * G;
    const bf16 *sd = down_scale + row * G;
    for (int t0 = 0; t0 < m; t0 += MT) {
        const int mt = min(MT, m - t0);
        const float *ar[MT];
#pragma unroll
        for (int i = 0; i < MT; ++i) ar[i] = act + (size_t)(start + t0 + min(i, mt - 1)) * I;
        float ad[MT];
#pragma unroll
        for (int i = 0; i < MT; ++i) ad[i] = 0.f;
#pragma unroll 2
        for (int g = lane; g < G; g += 32) {
            const uint4 a = __ldg(wd + g);
            const float s = bf(sd + g);
            const uint32_t A[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                if (i < mt) {
                    float pd = 0.f, xv[8];
#pragma unroll
                    for (int w = 0; w < 4; ++w) { load8(ar[i] + g * 32 + w * 8, xv); pd += dot8(A[w], xv); }
                    ad[i] = fmaf(s, pd, ad[i]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            if (i < mt) {
                const float v = warp_sum(ad[i]);
                if (lane == 0) {
                    const int slot = start + t0 + i;
                    ybuf[(size_t)slot * H + n] = topk_w[sorted_pair[slot]] * v;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// 4. combine: each token sums its k pair rows in order (deterministic), scaled, to bf16
// ---------------------------------------------------------------------------------------------------------
// grid (ceil(H/256), min(T, 65535)): block y takes tokens y, y + gridDim.y, ... (grid.y caps at 65,535: a long prefill)
extern "C" __global__ void __launch_bounds__(256)
moe_combine(const float *__restrict__ ybuf, const int *__restrict__ pos, int T, int k, int H, float rsf, bf16 *__restrict__ out) {
    const int n = blockIdx.x * 256 + threadIdx.x;
    if (n >= H) return;
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        float s = 0.f;
        for (int j = 0; j < k; ++j) {
            const int slot = pos[(size_t)t * k + j];
            if (slot >= 0) s += ybuf[(size_t)slot * H + n];
        }
        out[(size_t)t * H + n] = __float2bfloat16(rsf * s);
    }
}

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

// pair i (0..3) of packed word w as bf16x2: ((n_i - 8) * s, (n_{i+4} - 8) * s); 128 + n and 136 are exact in bf16
__device__ __forceinline__ uint32_t dq_pair(uint32_t w, int i, __nv_bfloat162 s2) {
    const uint32_t v = ((w >> (4 * i)) & 0x000F000Fu) | 0x43004300u;
    return bf2u(__hmul2(__hsub2(u2bf(v), u2bf(0x43084308u)), s2));
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
template <int NT>
__device__ __forceinline__ void load_chunk_x(StageV2<NT> &st, const uint4 *xrow, int q, int G) {
    const bool okx = q < G && xrow != nullptr;
#pragma unroll
    for (int j = 0; j < 4; ++j) st.x[j] = okx ? __ldg(xrow + 4 * q + j) : make_uint4(0, 0, 0, 0);
}
template <int NT, bool PF>
__device__ __forceinline__ void v2_load(StageV2<NT> &st, const PtrsV2<NT> &p, const uint4 *xrow, int q, int G) {
    load_chunk_w<NT, PF>(st, p, q, G);
    load_chunk_x<NT>(st, xrow, q, G);
}

template <int NT>
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
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            mma_bf16(acc[i], dq_pair(Wg[j], 0, sg), dq_pair(Wh[j], 0, sh), dq_pair(Wg[j], 1, sg), dq_pair(Wh[j], 1, sh), b[j][0], b[j][1]);
            mma_bf16(acc[i], dq_pair(Wg[j], 2, sg), dq_pair(Wh[j], 2, sh), dq_pair(Wg[j], 3, sg), dq_pair(Wh[j], 3, sh), b[j][2], b[j][3]);
        }
    }
}

// this warp's share of K (chunks warp, warp + NW, ...), one chunk prefetched ahead; acc zeroed here
template <int NT, int NW, bool PF>
__device__ __forceinline__ void v2_gemv(const PtrsV2<NT> &p, const uint4 *xrow, int G, float (&acc)[NT][4]) {
    const int warp = threadIdx.x >> 5, t = threadIdx.x & 3, nch = (G + 3) >> 2;
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    int c = warp;
    if (c >= nch) return;
    StageV2<NT> A, B;
    v2_load<NT, PF>(A, p, xrow, 4 * c + t, G);
    while (true) {
        const int c1 = c + NW;
        if (c1 < nch) v2_load<NT, PF>(B, p, xrow, 4 * c1 + t, G);
        v2_compute<NT>(A, acc);
        if (c1 >= nch) break;
        const int c2 = c1 + NW;
        if (c2 < nch) v2_load<NT, PF>(A, p, xrow, 4 * c2 + t, G);
        v2_compute<NT>(B, acc);
        if (c2 >= nch) break;
        c = c2;
    }
}

// sum the warps' partial accumulators into warp 0 (returns true there)
template <int NT, int NW>
__device__ __forceinline__ bool v2_reduce(float (&acc)[NT][4], float *red) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp > 0) {
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r) red[(((warp - 1) * NT + i) * 4 + r) * 32 + lane] = acc[i][r];
    }
    __syncthreads();
    if (warp > 0) return false;
    for (int w = 0; w < NW - 1; ++w)
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][r] += red[((w * NT + i) * 4 + r) * 32 + lane];
    return true;
}

// The gate/up projection's loop over 8-token tiles of one expert's pairs, shared by v2 and v5 like `down_tiles`:
// `gemv` fills acc[0] (gate) and acc[1] (up), and warp 0 writes silu(gate) * up into act.
template <int NW, class Gemv>
__device__ __forceinline__ void gate_up_tiles(const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair,
        const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale,
        const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, bf16 *__restrict__ act, float *red, Gemv gemv) {
    if ((int)blockIdx.y >= n_hit[0]) return;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, n0 = blockIdx.x * 16;
    const int e = hit[blockIdx.y], start = offsets[e], m = offsets[e + 1] - start, G = H / 32;
    const size_t ra = (size_t)e * I + min(n0 + g, I - 1), rb = (size_t)e * I + min(n0 + g + 8, I - 1);
    PtrsV2<2> p;
    p.w[0][0] = gate_packed + ra * G; p.w[0][1] = gate_packed + rb * G;
    p.w[1][0] = up_packed + ra * G;   p.w[1][1] = up_packed + rb * G;
    p.s[0][0] = reinterpret_cast<const unsigned short *>(gate_scale) + ra * G;
    p.s[0][1] = reinterpret_cast<const unsigned short *>(gate_scale) + rb * G;
    p.s[1][0] = reinterpret_cast<const unsigned short *>(up_scale) + ra * G;
    p.s[1][1] = reinterpret_cast<const unsigned short *>(up_scale) + rb * G;
    for (int t0 = 0; t0 < m; t0 += 8) {
        const int mt = min(8, m - t0);
        const uint4 *xrow = g < mt ? reinterpret_cast<const uint4 *>(x + (size_t)(sorted_pair[start + t0 + g] / k) * H) : nullptr;
        float acc[2][4];
        gemv(p, xrow, G, acc);
        if (v2_reduce<2, NW>(acc, red)) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {   // c0,c1: row g, tokens 2t, 2t+1; c2,c3: row g+8
                const int n = n0 + g + (r >= 2 ? 8 : 0), tok = 2 * t + (r & 1);
                if (n < I && tok < mt) {
                    const float gv = acc[0][r], uv = acc[1][r];
                    act[(size_t)(start + t0 + tok) * I + n] = __float2bfloat16(gv / (1.f + __expf(-gv)) * uv);
                }
            }
        }
        __syncthreads();
    }
}

template <int NW, bool PF>
__device__ __forceinline__ void gate_up_v2(const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair,
        const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale,
        const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, bf16 *__restrict__ act) {
    __shared__ float red[(NW - 1) * 2 * 4 * 32 + 1];
    gate_up_tiles<NW>(x, H, I, k, sorted_pair, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, act, red,
                      [](const PtrsV2<2> &p, const uint4 *xrow, int G, float (&acc)[2][4]) { v2_gemv<2, NW, PF>(p, xrow, G, acc); });
}

// The down projection's loop over 8-token tiles of one expert's pairs, shared by v2 and v5 (they differ only in how a
// tile's GEMV streams the weights): `gemv(p, xrow, G, acc)` fills acc, the warps reduce through `red`, and warp 0
// writes the routing-weighted rows into ybuf.
template <int NW, class Gemv>
__device__ __forceinline__ void down_tiles(const bf16 *__restrict__ act, int I, int H, const int *__restrict__ sorted_pair,
        const float *__restrict__ topk_w, const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, float *__restrict__ ybuf, float *red, Gemv gemv) {
    if ((int)blockIdx.y >= n_hit[0]) return;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, n0 = blockIdx.x * 32;
    const int e = hit[blockIdx.y], start = offsets[e], m = offsets[e + 1] - start, G = I / 32;
    PtrsV2<2> p;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const size_t row = (size_t)e * H + min(n0 + 16 * i + 8 * r + g, H - 1);
            p.w[i][r] = down_packed + row * G;
            p.s[i][r] = reinterpret_cast<const unsigned short *>(down_scale) + row * G;
        }
    for (int t0 = 0; t0 < m; t0 += 8) {
        const int mt = min(8, m - t0);
        const uint4 *xrow = g < mt ? reinterpret_cast<const uint4 *>(act + (size_t)(start + t0 + g) * I) : nullptr;
        float acc[2][4];
        gemv(p, xrow, G, acc);
        if (v2_reduce<2, NW>(acc, red)) {
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int n = n0 + 16 * i + g + (r >= 2 ? 8 : 0), tok = 2 * t + (r & 1);
                    if (n < H && tok < mt) {
                        const int slot = start + t0 + tok;
                        ybuf[(size_t)slot * H + n] = topk_w[sorted_pair[slot]] * acc[i][r];
                    }
                }
        }
        __syncthreads();
    }
}

template <int NW, bool PF>
__device__ __forceinline__ void down_v2(const bf16 *__restrict__ act, int I, int H, const int *__restrict__ sorted_pair,
        const float *__restrict__ topk_w, const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, float *__restrict__ ybuf) {
    __shared__ float red[(NW - 1) * 2 * 4 * 32 + 1];
    down_tiles<NW>(act, I, H, sorted_pair, topk_w, offsets, hit, n_hit, down_packed, down_scale, ybuf, red,
                   [](const PtrsV2<2> &p, const uint4 *xrow, int G, float (&acc)[2][4]) { v2_gemv<2, NW, PF>(p, xrow, G, acc); });
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

extern "C" __global__ void __launch_bounds__(128) moe_gate_up_v2(GU_ARGS) { gate_up_v2<4, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_v2(DN_ARGS) { down_v2<4, false>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(256) moe_gate_up_v3(GU_ARGS) { gate_up_v2<8, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(256) moe_down_v3(DN_ARGS) { down_v2<8, false>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(128) moe_gate_up_v4(GU_ARGS) { gate_up_v2<4, true>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_v4(DN_ARGS) { down_v2<4, true>(DN_PASS); }

// =========================================================================================================
// v5/v6: v2's math with a deeper memory pipeline. v2 holds the next chunk in registers, so a warp has one
// chunk (~2.3 KB) in flight and 126 registers cap an SM at 16 warps: ~37 KB in flight per SM, about what
// Little's law asks at 4.27 TB/s / 132 SMs x ~1 us, with no slack. Here each warp streams its weights and
// scales into a private ring of S stages in shared memory with cp.async (16-byte copies that bypass L1;
// a scale travels in the aligned 4-byte word that holds it; past-the-end groups are zero-filled by a source
// size of 0), so S - 1 chunks are in flight per warp without holding registers. Every lane reads back only
// what it copied itself, so no barrier is needed, only cp.async.wait_group. x stays a register load (L1 hit).
// v5: 4 warps x 4 stages (43 KB static shared per block, registers allow 4 blocks per SM); v6: the same capped
// at 102 registers (__launch_bounds__(128, 5)) so that 5 blocks (20 warps) fit per SM; v7: v6 with the
// L2::256B prefetch-size hint on the weight copies.
// =========================================================================================================

template <bool PF> __device__ __forceinline__ void cp16(uint32_t dst, const void *src, bool ok) {
    if (PF) asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
    else asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp4(uint32_t dst, const void *src, bool ok) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(ok ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// the ring of one warp: S stages x (NT tiles x 2 rows) x 32 lanes of uint4 weights, and of u32 scale words
template <int NT, int S> struct RingV5 { uint4 w[S][NT * 2][32]; uint32_t s[S][NT * 2][32]; };

template <int NT, int S, bool PF>
__device__ __forceinline__ void v5_issue(RingV5<NT, S> &ring, int stage, const PtrsV2<NT> &p, int q, int G, int lane) {
    const bool ok = q < G;
    const int qq = ok ? q : 0;
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            cp16<PF>((uint32_t)__cvta_generic_to_shared(&ring.w[stage][2 * i + r][lane]), p.w[i][r] + qq, ok);
            const unsigned short *sp = p.s[i][r] + qq;
            cp4((uint32_t)__cvta_generic_to_shared(&ring.s[stage][2 * i + r][lane]),
                reinterpret_cast<const void *>(reinterpret_cast<uintptr_t>(sp) & ~(uintptr_t)3), ok);
        }
}

template <int NT, int NW, int S, bool PF>
__device__ __forceinline__ void v5_gemv(RingV5<NT, S> &ring, const PtrsV2<NT> &p, const uint4 *xrow, int G, float (&acc)[NT][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3, nch = (G + 3) >> 2;
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    const int nloc = warp < nch ? (nch - warp + NW - 1) / NW : 0;   // chunks warp, warp + NW, ...
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < nloc) v5_issue<NT, S, PF>(ring, s, p, 4 * (warp + s * NW) + t, G, lane);
        cp_commit();
    }
    for (int i = 0; i < nloc; ++i) {
        const int nx = i + S - 1;
        if (nx < nloc) v5_issue<NT, S, PF>(ring, nx % S, p, 4 * (warp + nx * NW) + t, G, lane);
        cp_commit();
        const int q = 4 * (warp + i * NW) + t;
        StageV2<NT> st;
        const bool okx = q < G && xrow != nullptr;
#pragma unroll
        for (int j = 0; j < 4; ++j) st.x[j] = okx ? __ldg(xrow + 4 * q + j) : make_uint4(0, 0, 0, 0);
        cp_wait<S - 1>();
        const int stg = i % S;
#pragma unroll
        for (int k2 = 0; k2 < NT * 2; ++k2) {
            st.w[k2 >> 1][k2 & 1] = ring.w[stg][k2][lane];
            const int hi = (int)((reinterpret_cast<uintptr_t>(p.s[k2 >> 1][k2 & 1] + q) >> 1) & 1);   // which half of the word
            st.s[k2 >> 1][k2 & 1] = (ring.s[stg][k2][lane] >> (hi * 16)) & 0xFFFFu;
        }
        v2_compute<NT>(st, acc);
    }
    cp_wait<0>();
}

template <int NW, int S, bool PF>
__device__ __forceinline__ void gate_up_v5(const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair,
        const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale,
        const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, bf16 *__restrict__ act) {
    __shared__ RingV5<2, S> rings[NW];
    __shared__ float red[(NW - 1) * 2 * 4 * 32 + 1];
    gate_up_tiles<NW>(x, H, I, k, sorted_pair, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, act, red, [](const PtrsV2<2> &p, const uint4 *xrow, int G, float (&acc)[2][4]) {
        v5_gemv<2, NW, S, PF>(rings[threadIdx.x >> 5], p, xrow, G, acc);
    });
}

template <int NW, int S, bool PF>
__device__ __forceinline__ void down_v5(const bf16 *__restrict__ act, int I, int H, const int *__restrict__ sorted_pair,
        const float *__restrict__ topk_w, const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit,
        const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, float *__restrict__ ybuf) {
    __shared__ RingV5<2, S> rings[NW];
    __shared__ float red[(NW - 1) * 2 * 4 * 32 + 1];
    down_tiles<NW>(act, I, H, sorted_pair, topk_w, offsets, hit, n_hit, down_packed, down_scale, ybuf, red, [](const PtrsV2<2> &p, const uint4 *xrow, int G, float (&acc)[2][4]) {
        v5_gemv<2, NW, S, PF>(rings[threadIdx.x >> 5], p, xrow, G, acc);
    });
}

extern "C" __global__ void __launch_bounds__(128) moe_gate_up_v5(GU_ARGS) { gate_up_v5<4, 4, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128) moe_down_v5(DN_ARGS) { down_v5<4, 4, false>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(128, 5) moe_gate_up_v6(GU_ARGS) { gate_up_v5<4, 4, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 5) moe_down_v6(DN_ARGS) { down_v5<4, 4, false>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(128, 5) moe_gate_up_v7(GU_ARGS) { gate_up_v5<4, 4, true>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 5) moe_down_v7(DN_ARGS) { down_v5<4, 4, true>(DN_PASS); }

// =========================================================================================================
// v8-v10 (after measuring v2-v7 on the H200: v4 best, the cp.async ring of v5-v7 no better, and down the weaker
// launch everywhere, 45% of HBM at T = 1). A down block streams only 32 rows x 1 KB, so with K split over 4 warps
// each warp sees 4 chunks between its fixed costs (the hit -> offsets -> sorted_pair load chain, the shared-memory
// reduction and barrier, the epilogue). These give each warp more of K:
//   v8: gate/up of v4, down with 2 warps per block (8 chunks per warp at Kimi widths);
//   v9: gate/up of v4, down with 1 warp per block (all 16 chunks, no reduction, no barrier work);
//   v10: gate/up with 2 warps per block (28 chunks per warp), down of v9.
// =========================================================================================================
extern "C" __global__ void __launch_bounds__(64) moe_down_v8(DN_ARGS) { down_v2<2, true>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(32) moe_down_v9(DN_ARGS) { down_v2<1, true>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(64) moe_gate_up_v10(GU_ARGS) { gate_up_v2<2, true>(GU_PASS); }

// =========================================================================================================
// v11 (aimed at T <= 16, where v4 pays per-block fixed costs and a wave tail: at T = 1 gate/up runs 1024 blocks
// and down 1792 over 528 resident, each block waits on the chain n_hit -> hit -> offsets -> sorted_pair -> x
// before its first chunk, and reduces through a barrier after only 14 (gate/up) or 4 (down) chunks per warp).
// v4's math (mma.sync swap-AB, one chunk prefetched in registers, L2::256B hint), scheduled differently:
//   * persistent: the grid is the resident block count (4 blocks of 4 warps per SM, launch bounds (128, 4)),
//     and block b takes the b-th equal share of the n_hit x row-tile work items (expert-major), i.e. one or two
//     runs of consecutive row tiles of one expert: no wave tail, and the load chain is paid once per run;
//   * each warp streams its share of K of all the run's tiles back to back with the next chunk in flight across
//     tile boundaries; a finished tile's partial sums go to one of two shared-memory slots, one barrier, and
//     warp (r mod 4) reduces tile r and writes it while the others stream on (slot r & 1 is written again only
//     after the next barrier, which that warp reaches after its reads);
//   * a run's first chunk of weights is issued before offsets -> sorted_pair -> x resolves;
//   * every warp runs the same number of chunks per tile (past-the-end chunks load nothing and add zeros), so
//     all warps meet the same barriers.
// gate/up: a tile = 16 rows of gate and of up; down: a tile = 32 rows (two 16-row mma tiles sharing x).
// Launch: grid (resident blocks, 1), 128 threads; tokens of an expert beyond 8 loop over 8-token tiles.
// =========================================================================================================

// One run of R consecutive row tiles (starting at row n0) of one expert with m tokens: tile r's sub-tile i is rows
// n0 + r*RS + i*IS + {g, g + 8} of matrix W[i] (clamped to N - 1, outputs past N masked by `epi`). `xrow_of(t0, mt)`
// gives this lane's x row for the 8-token tile at t0 (nullptr past mt); `epi(r, t0, mt, acc)` writes tile r.
template <int NT, int NW, int RS, int IS, class XRow, class Epi>
__device__ __forceinline__ void v11_run(const uint4 *const (&W)[NT], const unsigned short *const (&S)[NT], int n0, int N, int G,
                                        int R, const int *mp, float *red, XRow xrow_of, Epi epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nloc = (((G + 3) >> 2) + NW - 1) / NW;    // chunks per warp per tile, the same for every warp
    uint32_t off[NT][2];                                 // row * G of the tile being loaded (32 bits: fewer registers)
    auto point = [&](int r) {
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) off[i][rr] = (uint32_t)min(n0 + r * RS + i * IS + 8 * rr + g, N - 1) * (uint32_t)G;
    };
    auto load_w = [&](StageV2<NT> &st, int q) {
        PtrsV2<NT> p;
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) { p.w[i][rr] = W[i] + off[i][rr]; p.s[i][rr] = S[i] + off[i][rr]; }
        load_chunk_w<NT, true>(st, p, q, G);
    };
    StageV2<NT> A, B;
    point(0);
    load_w(A, 4 * warp + t);                             // in flight while the token chain below resolves
    const int start = mp[0], m = mp[1] - start;
    for (int t0 = 0; t0 < m; t0 += 8) {
        const int mt = min(8, m - t0);
        const uint4 *xrow = xrow_of(start + t0, mt);
        if (t0 > 0) { point(0); load_w(A, 4 * warp + t); }
        load_chunk_x<NT>(A, xrow, 4 * warp + t, G);
        float acc[NT][4];
#pragma unroll
        for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
        int nr = 0, nj = 0, cr = 0, cj = 0;              // tile and local chunk of the last stage loaded / next computed
        auto next = [&](StageV2<NT> &st) {
            if (++nj == nloc) { nj = 0; if (++nr < R) point(nr); }
            if (nr < R) {
                const int q = 4 * (warp + nj * NW) + t;
                load_w(st, q); load_chunk_x<NT>(st, xrow, q, G);
            }
        };
        auto finish = [&](const StageV2<NT> &st) {
            v2_compute<NT>(st, acc);
            if (++cj < nloc) return;
            cj = 0;
            float *slot = red + (cr & 1) * (NW * NT * 4 * 32);
#pragma unroll
            for (int i = 0; i < NT; ++i)
#pragma unroll
                for (int q = 0; q < 4; ++q) { slot[((warp * NT + i) * 4 + q) * 32 + lane] = acc[i][q]; acc[i][q] = 0.f; }
            __syncthreads();
            if (warp == (cr & (NW - 1))) {
                float s[NT][4];
#pragma unroll
                for (int i = 0; i < NT; ++i)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        float v = 0.f;
#pragma unroll
                        for (int w = 0; w < NW; ++w) v += slot[((w * NT + i) * 4 + q) * 32 + lane];
                        s[i][q] = v;
                    }
                epi(cr, t0, mt, s);
            }
            ++cr;
        };
        while (true) {
            next(B); finish(A);
            if (cr >= R) break;
            next(A); finish(B);
            if (cr >= R) break;
        }
        __syncthreads();   // the slots start over with the next token tile or run
    }
}

// block b's share [a, b) of the n_hit x tiles work items, walked as runs within one expert: run(y, r0, R)
template <class Run>
__device__ __forceinline__ void v11_items(int nh, int tiles, Run run) {
    const long long items = (long long)nh * tiles;
    int a = (int)(items * blockIdx.x / gridDim.x);
    const int b = (int)(items * (blockIdx.x + 1) / gridDim.x);
    while (a < b) {
        const int y = a / tiles, r0 = a - y * tiles, R = min(b - a, tiles - r0);
        run(y, r0, R);
        a += R;
    }
}

extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v11(GU_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int G = H / 32;
    v11_items(n_hit[0], (I + 15) >> 4, [&](int y, int r0, int R) {
        const int e = hit[y];
        const size_t base = (size_t)e * I * G;
        const uint4 *const W[2] = {gate_packed + base, up_packed + base};
        const unsigned short *const S[2] = {reinterpret_cast<const unsigned short *>(gate_scale) + base,
                                            reinterpret_cast<const unsigned short *>(up_scale) + base};
        const int n0 = r0 * 16, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
        v11_run<2, 4, 16, 0>(W, S, n0, I, G, R, offsets + e, red,
            [&](int s0, int mt) { return g < mt ? reinterpret_cast<const uint4 *>(x + (size_t)(sorted_pair[s0 + g] / k) * H) : nullptr; },
            [&](int r, int t0, int mt, const float (&s)[2][4]) {
                const int slot0 = offsets[e] + t0;
#pragma unroll
                for (int q = 0; q < 4; ++q) {   // c0,c1: row g, tokens 2t, 2t+1; c2,c3: row g+8
                    const int n = n0 + 16 * r + g + (q >= 2 ? 8 : 0), tok = 2 * t + (q & 1);
                    if (n < I && tok < mt) act[(size_t)(slot0 + tok) * I + n] = __float2bfloat16(s[0][q] / (1.f + __expf(-s[0][q])) * s[1][q]);
                }
            });
    });
}

extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v11(DN_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int G = I / 32;
    v11_items(n_hit[0], (H + 31) >> 5, [&](int y, int r0, int R) {
        const int e = hit[y];
        const size_t base = (size_t)e * H * G;
        const uint4 *const W[2] = {down_packed + base, down_packed + base};
        const unsigned short *const S[2] = {reinterpret_cast<const unsigned short *>(down_scale) + base,
                                            reinterpret_cast<const unsigned short *>(down_scale) + base};
        const int n0 = r0 * 32, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
        v11_run<2, 4, 32, 16>(W, S, n0, H, G, R, offsets + e, red,
            [&](int s0, int mt) { return g < mt ? reinterpret_cast<const uint4 *>(act + (size_t)(s0 + g) * I) : nullptr; },
            [&](int r, int t0, int mt, const float (&s)[2][4]) {
                const int slot0 = offsets[e] + t0;
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const int n = n0 + 32 * r + 16 * i + g + (q >= 2 ? 8 : 0), tok = 2 * t + (q & 1);
                        if (n < H && tok < mt) ybuf[(size_t)(slot0 + tok) * H + n] = topk_w[sorted_pair[slot0 + tok]] * s[i][q];
                    }
            });
    });
}
