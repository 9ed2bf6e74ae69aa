// dev/moe_w4a16_v1_v10.cu: the W4A16 MoE kernel's gate/up and down versions 1..10, kept as the history of the shipped
// v11 (kernels/moe_w4a16.cu; llm.c's dev/cuda shape). Each is validated against the torch reference and timed by
// benchmarks/bench_moe.py (numbers in benchmarks/moe_w4a16.md); `moe_w4a16(..., version=v)` runs it with the shipped
// moe_group and moe_combine. Not shipped in the wheel.
// v1: fp32 CUDA cores, GEMV-like streaming, one warp per packed row; weights unpacked and scaled in registers
//     (nibble -> float via the 2^23 magic number, each group's dot product scaled once) -- once per token.
// v2-v10 (further down): tensor cores, mma.sync m16n8k16 bf16 with the weights as the A operand
//     (the building blocks they share with v11 are in moe_w4a16_common.cuh).
#include "moe_w4a16_common.cuh"

#define MT 8        // tokens per tile: each packed row is streamed once per tile
#define WARPS 8     // warps per block in the GEMV kernels, one output row each


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

template <int NT, bool PF>
__device__ __forceinline__ void v2_load(StageV2<NT> &st, const PtrsV2<NT> &p, const uint4 *xrow, int q, int G) {
    load_chunk_w<NT, PF>(st, p, q, G);
    load_chunk_x<NT>(st, xrow, q, G);
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
