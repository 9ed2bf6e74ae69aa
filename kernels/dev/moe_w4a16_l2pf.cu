// Issue 20, T = 1 (session 17): v13's PDL down launch with an L2 prefetch of each block's first PF row tiles (packed words and
// scales, one cp.async.bulk.prefetch.L2 each) before it waits for gate/up. Under PDL a down block becomes resident when a
// gate/up block exits, so these prefetches keep HBM busy through gate/up's tail (~3 us at T = 1, benchmarks/moe_w4a16.md,
// "Session 15") and the block's first tiles then come from L2. The math, tiles and reduction order are v13's: the same bits.
// Launched by benchmarks/try_moe_l2pf.py with moe_w4a16.cu's moe_gate_up_v13_pdl and moe_combine_pdl (this file includes it).
#include "moe_w4a16.cu"

__device__ __forceinline__ void l2_prefetch(const void *p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// v13's PDL down (down_v11<true, true, false, true>), with thread 0 requesting up to PF tiles of the block's first run into L2
// just before the wait: where the run's expert and first tile are already at hand (computing them apart, or walking the share
// as v11_items does, made ptxas spill 36 bytes)
template <int PF> __device__ __forceinline__ void down_v13_pdl_pf(DN_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int G = I / 32;
    bool waited = false;
    const bf16 *actp = act;
    v11_items(n_hit[0], (H + 31) >> 5, [&](int y, int r0, int R) {
        down_item<true, true, false>(DN_PASS, G, y, r0, R, red, [&]() {
            if (!waited) {
                if (threadIdx.x == 0) {
                    const int rows = min(32 * min(PF, R), H - 32 * r0);
                    const size_t row0 = (size_t)hit[y] * H + 32 * r0;
                    l2_prefetch(down_packed + row0 * G, (unsigned)rows * G * 16);
                    l2_prefetch(reinterpret_cast<const unsigned short *>(down_scale) + row0 * G, (unsigned)rows * G * 2);
                }
                pdl_wait(); waited = true; actp = after_here(act);
            }
            return actp;
        });
    });
    if (!waited) pdl_wait();
    pdl_launch_dependents();
}

#define DOWN_L2PF(PF) extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_pdl_pf##PF(DN_ARGS) { down_v13_pdl_pf<PF>(DN_PASS); }
DOWN_L2PF(1)
DOWN_L2PF(2)
DOWN_L2PF(4)
DOWN_L2PF(64)
