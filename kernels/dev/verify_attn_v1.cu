// dev/verify_attn_v1.cu: the first verify kernel (nbs/03_verify), kept as history in llm.c's dev/cuda shape: the
// simple, obviously-correct version the tensor-core kernels (kernels/verify_attn.cu, verify_attn_sm90.cu) are held to.
// Runs from a checkout (`mla_tree_attention(..., version=1)`, the cuda cells of nbs/03, benchmarks/bench_verify.py --v1);
// not in the wheel. Same inputs, outputs and edge-case rules as the shipped kernels (kernels/verify_attn.cu's header).
#include "verify_attn_common.cuh"  // bf16, dims, prefix clamp, tree mask, the edge-case rules
// ---------------------------------------------------------------------------------------------------------
// v1: block = one query row, 4 warps; each warp takes every 4th key, lane i holds dims i + 32k.
// ---------------------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128)
verify_attn_v1(const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe, const bf16 *__restrict__ kv,
               const uint32_t *__restrict__ vis, int W, int T, int H, int P, const int *__restrict__ p_dev, int S,
               float scale, bf16 *__restrict__ out, float *__restrict__ lse) {
    const int r = blockIdx.x, t = r / H, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (p_dev) P = clamp_prefix(*p_dev, T, S);
    float q[18];
#pragma unroll
    for (int i = 0; i < 16; ++i) q[i] = __bfloat162float(q_lat[(size_t)r * DC + lane + 32 * i]);
#pragma unroll
    for (int i = 0; i < 2; ++i) q[16 + i] = __bfloat162float(q_pe[(size_t)r * DR + lane + 32 * i]);
    const float sl2 = scale * LOG2E;
    float m = -INFINITY, l = 0.f, acc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) acc[i] = 0.f;
    for (int s = warp; s < P + T; s += 4) {
        if (s >= P && !tree_visible(vis, W, t, s - P)) continue;
        const bf16 *k = kv + (size_t)s * DQK;
        float v[16], d = 0.f;
#pragma unroll
        for (int i = 0; i < 16; ++i) { v[i] = __bfloat162float(k[lane + 32 * i]); d += q[i] * v[i]; }
#pragma unroll
        for (int i = 0; i < 2; ++i) d += q[16 + i] * __bfloat162float(k[DC + lane + 32 * i]);
#pragma unroll
        for (int o = 16; o; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        d *= sl2;
        const float mn = fmaxf(m, d), mu = mn == -INFINITY ? 0.f : mn;  // a key scoring -inf (k_pe = inf) adds nothing, not NaN
        const float a = exp2f(m - mu), p = exp2f(d - mu);
        l = l * a + p;
#pragma unroll
        for (int i = 0; i < 16; ++i) acc[i] = acc[i] * a + p * v[i];
        m = mn;
    }
    __shared__ float sm[4], sl[4], sacc[4][DC];
    if (lane == 0) { sm[warp] = m; sl[warp] = l; }
#pragma unroll
    for (int i = 0; i < 16; ++i) sacc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    const float mx = fmaxf(fmaxf(sm[0], sm[1]), fmaxf(sm[2], sm[3]));
    float f[4], L = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) { f[w] = sm[w] == -INFINITY ? 0.f : exp2f(sm[w] - mx); L += sl[w] * f[w]; }
    const float inv = L == 0.f ? 0.f : 1.f / L;  // nothing visible: 0; NaN (a visible NaN row) stays NaN
    for (int c = threadIdx.x; c < DC; c += 128) {
        float o = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w) o += sacc[w][c] * f[w];
        out[(size_t)r * DC + c] = __float2bfloat16(o * inv);
    }
    if (threadIdx.x == 0) lse[r] = row_lse(mx, L);
}
