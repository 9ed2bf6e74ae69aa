// few_row_gemm.cu (dev, session 36; measured in session 37, not used by the engine): Y[M, N] = norm(X)[M, K] · W[N, K]^T for
// M <= 16 rows, bf16 in and out, fp32 accumulation, optionally with the RMS norm of each row of X (weight g[K], eps) in the
// prologue, as a one-token forward's fused reduction does. The question it answered (benchmarks/bench_few_row_gemm.py,
// bench_compile.md "Session 37", an H100): is a plain mma.sync kernel at the demo pair's projection shapes faster than
// cuBLAS's ~2.7 µs a GEMM at 9-16 rows? Correct (the same error against float32 as cuBLAS), but not by the ~1 µs a GEMM that
// would pay for an op. At M = 9: 0.19-0.35 µs faster at K = 128-256, 0.1-0.8 µs slower at K = 512-1024; with the norm inside,
// 0.1-0.8 µs faster than a norm kernel + cuBLAS at K <= 256, 0.7-1.8 µs slower at K >= 512 (every block normalizes all rows).
//
// Block: 4 warps over one 16-column slice of N, each warp a quarter of K (split-K inside the block, summed in shared
// memory). Per 32-wide k step a lane loads 16 B of one W row (row n0 + lane / 4, k = kb + 8 (lane % 4) ...) and 16 B of X rows
// lane / 4 and lane / 4 + 8 from shared memory, and issues two m16n8k16 mma a column tile. The k order inside the step is
// permuted identically for X and W (each lane's 8 consecutive k feed the fragment slots 2t, 2t + 1, 8 + 2t, 8 + 2t + 1 of
// two mma), so every load is 16 B wide; the dot product is the same sum in another order.
// Limits: M <= 16, K % 128 == 0 (4 warps x 32), N % 16 == 0, and 16 (K + FR_PAD) bf16 + 4 KB of dynamic shared memory
// (K <= 1,376 within the default 48 KB; up to 7,104 with the 227 KB opt-in).
#include <cuda_bf16.h>
#include <stdint.h>

#define FR_WARPS 4
#define FR_PAD 32                      // bf16 of padding a shared row (64 B): consecutive rows 16 banks apart, so a quarter-warp's 16-B loads (2 rows x 4 k chunks) hit 8 distinct bank quads

__device__ __forceinline__ void mma_bf16(float4 &c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c.x), "+f"(c.y), "+f"(c.z), "+f"(c.w) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// g == nullptr: no norm. Else row r of X becomes bf16(x * rsqrt(mean(x^2) + eps)) * g (fp32 math, as RMSNorm in fp32).
extern "C" __global__ void few_row_gemm(   // no __launch_bounds__: with it ptxas held 48 registers and spilled 8 B
    const __nv_bfloat16 *__restrict__ X, int M, int K, const __nv_bfloat16 *__restrict__ W, int N,
    const __nv_bfloat16 *__restrict__ g, float eps, __nv_bfloat16 *__restrict__ Y)
{
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem);            // [16][K + FR_PAD]
    float *red = reinterpret_cast<float *>(smem + 16 * (K + FR_PAD) * 2);    // [FR_WARPS][32][8] partial sums
    __shared__ float rs[16];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, ld = K + FR_PAD;
    const int n0 = blockIdx.x * 16;
    // the rows' norms first (one warp a row, rows >= M are zero)
    if (g) {
        for (int r = warp; r < 16; r += FR_WARPS) {
            float s = 0.f;
            if (r < M) for (int k = lane * 8; k < K; k += 256) {
                const uint4 v = *reinterpret_cast<const uint4 *>(X + (long long)r * K + k);
                const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
                #pragma unroll
                for (int j = 0; j < 4; ++j) { const float2 f = __bfloat1622float2(h[j]); s += f.x * f.x + f.y * f.y; }
            }
            #pragma unroll
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0) rs[r] = rsqrtf(s / K + eps);
        }
        __syncthreads();
    }
    // X (normed) into shared memory, 16 B a thread a step
    for (int e = tid * 8; e < 16 * K; e += FR_WARPS * 32 * 8) {
        const int r = e / K, k = e % K;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < M) {
            v = *reinterpret_cast<const uint4 *>(X + (long long)r * K + k);
            if (g) {
                const uint4 gv = *reinterpret_cast<const uint4 *>(g + k);
                __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v);
                const __nv_bfloat162 *gg = reinterpret_cast<const __nv_bfloat162 *>(&gv);
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const float2 f = __bfloat1622float2(h[j]), w = __bfloat1622float2(gg[j]);
                    const __nv_bfloat162 nrm = __floats2bfloat162_rn(f.x * rs[r], f.y * rs[r]);
                    const float2 fn = __bfloat1622float2(nrm);
                    h[j] = __floats2bfloat162_rn(fn.x * w.x, fn.y * w.y);
                }
            }
        }
        *reinterpret_cast<uint4 *>(xs + r * ld + k) = v;
    }
    __syncthreads();
    const int gr = lane >> 2, t = lane & 3, kq = K / FR_WARPS, k_lo = warp * kq;
    float4 c0 = make_float4(0.f, 0.f, 0.f, 0.f), c1 = c0;   // column tiles n0 .. n0 + 7 and n0 + 8 .. n0 + 15
    const __nv_bfloat16 *w0 = W + (long long)(n0 + gr) * K, *w1 = W + (long long)(n0 + 8 + gr) * K;
    #pragma unroll 2
    for (int kb = k_lo; kb < k_lo + kq; kb += 32) {
        const int k = kb + 8 * t;
        const uint4 b0 = __ldg(reinterpret_cast<const uint4 *>(w0 + k)), b1 = __ldg(reinterpret_cast<const uint4 *>(w1 + k));
        const uint4 lo = *reinterpret_cast<const uint4 *>(xs + gr * ld + k), hi = *reinterpret_cast<const uint4 *>(xs + (gr + 8) * ld + k);
        // the lane's k 0-3 (slots 2t, 2t + 1, 8 + 2t, 9 + 2t of the first mma), then its k 4-7 (the second's)
        mma_bf16(c0, lo.x, hi.x, lo.y, hi.y, b0.x, b0.y); mma_bf16(c0, lo.z, hi.z, lo.w, hi.w, b0.z, b0.w);
        mma_bf16(c1, lo.x, hi.x, lo.y, hi.y, b1.x, b1.y); mma_bf16(c1, lo.z, hi.z, lo.w, hi.w, b1.z, b1.w);
    }
    // split-K: warps 1-3 leave their sums, warp 0 adds and stores
    float4 *mine = reinterpret_cast<float4 *>(red) + (warp * 32 + lane) * 2;
    if (warp) { mine[0] = c0; mine[1] = c1; }
    __syncthreads();
    if (warp == 0) {
        #pragma unroll
        for (int w = 1; w < FR_WARPS; ++w) {
            const float4 *o = reinterpret_cast<const float4 *>(red) + (w * 32 + lane) * 2, p = o[0], q = o[1];
            c0.x += p.x; c0.y += p.y; c0.z += p.z; c0.w += p.w; c1.x += q.x; c1.y += q.y; c1.z += q.z; c1.w += q.w;
        }
        const int col = n0 + 2 * t;
        __nv_bfloat16 *y0 = Y + (long long)gr * N + col, *y8 = Y + (long long)(gr + 8) * N + col;
        if (gr < M) { *reinterpret_cast<__nv_bfloat162 *>(y0) = __floats2bfloat162_rn(c0.x, c0.y); *reinterpret_cast<__nv_bfloat162 *>(y0 + 8) = __floats2bfloat162_rn(c1.x, c1.y); }
        if (gr + 8 < M) { *reinterpret_cast<__nv_bfloat162 *>(y8) = __floats2bfloat162_rn(c0.z, c0.w); *reinterpret_cast<__nv_bfloat162 *>(y8 + 8) = __floats2bfloat162_rn(c1.z, c1.w); }
    }
}
