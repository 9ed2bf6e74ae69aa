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
//   2. moe_gate_up  grid (ceil(I/8), min(E, P)): block y takes the y-th hit expert (exits if y >= n_hit),
//                   each warp one row n of gate AND up, streaming the packed rows once per tile of MT tokens;
//                   act[slot, n] = silu(x.Wg[n]) * (x.Wu[n]) in fp32 (workspace [P, I]).
//   3. moe_down     grid (ceil(H/8), min(E, P)): same over Wd with act rows as inputs;
//                   ybuf[slot, n] = topk_w[p] * act[slot].Wd[n] (workspace [P, H] fp32).
//   4. moe_combine  out[t, n] = bf16(routed_scaling_factor * sum_j ybuf[pos[t*k+j], n]), j in order
//                   (deterministic: no atomics on the output).
// v1 (this file): fp32 CUDA cores, GEMV-like streaming -- the memory-bound regime of decode (M per expert
// small). Weights are unpacked and scaled in registers: nibble -> float via the 2^23 magic number, the
// group's dot product sum x*(q-8) accumulated and multiplied by its scale once.
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
extern "C" __global__ void __launch_bounds__(256)
moe_combine(const float *__restrict__ ybuf, const int *__restrict__ pos, int k, int H, float rsf, bf16 *__restrict__ out) {
    const int t = blockIdx.y, n = blockIdx.x * 256 + threadIdx.x;
    if (n >= H) return;
    float s = 0.f;
    for (int j = 0; j < k; ++j) {
        const int slot = pos[t * k + j];
        if (slot >= 0) s += ybuf[(size_t)slot * H + n];
    }
    out[(size_t)t * H + n] = __float2bfloat16(rsf * s);
}
