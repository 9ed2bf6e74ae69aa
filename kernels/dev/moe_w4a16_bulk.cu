// moe_w4a16_bulk.cu: the down launch with its weight tiles brought in by bulk copies (cp.async.bulk, sm_90+), a try for
// issue 20's T = 1 goal. stamp_moe.py (session 15) showed every block of v13's down latency-bound: ~1 µs + ~5.2 µs per
// 32-row tile, whatever its SM's load, i.e. one 2 KB chunk a warp in flight. Here thread 0 copies a whole tile (32 rows x
// I/8 words + their scales: 36 KB at Kimi widths, contiguous in the packed layout) into a 2-stage shared-memory ring
// with one instruction each, completing on an mbarrier, two tiles ahead; the 4 warps read the weights from shared
// memory and hold their x chunks of the current expert in registers (I <= 2048). The math, the warps' K split and the
// reduction order are v13's, so the output is v13's bit for bit. 2 blocks per SM (82 KB of shared memory each).
#include "moe_w4a16.cu"

__device__ __forceinline__ void mbar_init(uint32_t a, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(a), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_expect(uint32_t a, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try(uint32_t a, uint32_t parity) {
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(a), "r"(parity) : "memory");
    return ok;
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t mbar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(dst), "l"(src), "r"(bytes), "r"(mbar) : "memory");
}

// dynamic shared memory: 2 stages of (32 G uint4 weights + 32 G bf16 scales), the reduction slots, 2 mbarriers
extern "C" __global__ void __launch_bounds__(128, 2) moe_down_v20(DN_ARGS) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NW = 4, NT = 2, XC = 4;              // warps, 16-row sub-tiles, x chunks a lane holds (G <= 64)
    extern __shared__ __align__(128) unsigned char sm[];
    const int G = I / 32, stage_w = 32 * G * 16, stage = stage_w + 32 * G * 2;
    float *red = reinterpret_cast<float *>(sm + 2 * stage);
    const uint32_t s_base = (uint32_t)__cvta_generic_to_shared(sm), s_mbar = s_base + 2 * stage + 2 * NW * NT * 4 * 32 * 4;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int tiles = H / 32, nloc = ((G + 3) / 4 + NW - 1) / NW;
    int a, n;
    v11_share((long long)n_hit[0] * tiles, a, n);   // the share v11_items walks: items [a, n), then n = their count
    n -= a;
    if (threadIdx.x == 0) {
        mbar_init(s_mbar, 1); mbar_init(s_mbar + 8, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    auto issue = [&](int i) {   // thread 0: item a + i (expert hit[y], row tile r) into stage i & 1
        const int it = a + i, y = it / tiles, r = it - y * tiles;
        const size_t row0 = (size_t)hit[y] * H + (size_t)r * 32;
        const uint32_t dst = s_base + (i & 1) * stage, mb = s_mbar + 8 * (i & 1);
        mbar_expect(mb, stage);
        bulk_g2s(dst, down_packed + row0 * G, stage_w, mb);
        bulk_g2s(dst + stage_w, reinterpret_cast<const unsigned short *>(down_scale) + row0 * G, stage - stage_w, mb);
    };
    if (threadIdx.x == 0) { if (n > 0) issue(0); if (n > 1) issue(1); }
    uint4 xr[XC][4];
    int cur = -1, slot0 = 0, m = 0;
    for (int i = 0; i < n; ++i) {
        const int it = a + i, y = it / tiles, r = it - y * tiles;
        if (y != cur) {   // a new expert: this lane's x chunks of its token row (act), held for all its tiles
            cur = y;
            const int e = hit[y];
            slot0 = offsets[e]; m = min(8, offsets[e + 1] - slot0);
            const uint4 *xrow = g < m ? reinterpret_cast<const uint4 *>(act + (size_t)(slot0 + g) * I) : nullptr;
#pragma unroll
            for (int c = 0; c < XC; ++c) {
                const int q = 4 * (warp + c * NW) + t;
#pragma unroll
                for (int j = 0; j < 4; ++j) xr[c][j] = c < nloc && q < G && xrow ? __ldg(xrow + 4 * q + j) : make_uint4(0, 0, 0, 0);
            }
        }
        while (!mbar_try(s_mbar + 8 * (i & 1), (i >> 1) & 1)) {}
        const unsigned char *st = sm + (i & 1) * stage;
        float acc[NT][4];
#pragma unroll
        for (int k2 = 0; k2 < NT; ++k2) acc[k2][0] = acc[k2][1] = acc[k2][2] = acc[k2][3] = 0.f;
#pragma unroll
        for (int c = 0; c < XC; ++c) {
            if (c < nloc) {
                const int q = 4 * (warp + c * NW) + t;
                const bool ok = q < G;
                StageV2<NT> S;
#pragma unroll
                for (int k2 = 0; k2 < NT; ++k2)
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        const int row = 16 * k2 + 8 * rr + g;
                        S.w[k2][rr] = ok ? *reinterpret_cast<const uint4 *>(st + ((size_t)row * G + q) * 16) : make_uint4(0, 0, 0, 0);
                        S.s[k2][rr] = ok ? (uint32_t)*reinterpret_cast<const unsigned short *>(st + stage_w + ((size_t)row * G + q) * 2) : 0u;
                    }
#pragma unroll
                for (int j = 0; j < 4; ++j) S.x[j] = xr[c][j];
                v2_compute<NT, true>(S, acc);
            }
        }
        float *slot = red + (i & 1) * (NW * NT * 4 * 32);
#pragma unroll
        for (int k2 = 0; k2 < NT; ++k2)
#pragma unroll
            for (int qq = 0; qq < 4; ++qq) slot[((warp * NT + k2) * 4 + qq) * 32 + lane] = acc[k2][qq];
        __syncthreads();   // stage i & 1 read by every warp; slot i & 1 written
        if (threadIdx.x == 0 && i + 2 < n) {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // the generic reads above before the async writes
            issue(i + 2);
        }
        if (warp == (i & (NW - 1))) {
            float v[NT][4];
            slot_sums<NT, NW>(slot, lane, v);
#pragma unroll
            for (int k2 = 0; k2 < NT; ++k2)
#pragma unroll
                for (int qq = 0; qq < 4; ++qq) {
                    const int nn = 32 * r + 16 * k2 + g + (qq >= 2 ? 8 : 0), tok = 2 * t + (qq & 1);
                    if (tok < m) ybuf[(size_t)(slot0 + tok) * H + nn] = topk_w[sorted_pair[slot0 + tok]] * v[k2][qq];
                }
        }
    }
#else
    __trap();   // sm_90+ only (cp.async.bulk): the host launches it on an H100/H200 only
#endif
}
