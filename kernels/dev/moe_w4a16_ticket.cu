// Issue 20, T <= 8 (session 17): the combine launch out of v13's PDL chain. In a graph of MoE layers the chain costs 2.2 us
// a layer more with its combine launch than without it at T = 1 (benchmarks/moe_in_graph.py --parts), 3% of the layer.
//   moe_down_v13_pdl_early: v13's PDL down with griddepcontrol.launch_dependents right after its wait, not at its end, so
//     the combine's blocks are launched during down's tail and wait there (the combine launch stays);
//   moe_down_v13_pdl_tc: down does the combine itself. A block, once its tiles' ybuf stores are fenced, adds each tile's
//     token count to that row tile's ticket (one thread per tile); the block whose addition completes a row tile (all valid
//     pairs counted, offsets[E]) sums its 32 rows for every token exactly as moe_combine does (the same additions in the
//     same order: the same bits) and sets the ticket back to 0 for the next launch. No combine launch.
// Launched by benchmarks/try_moe_ticket.py with moe_w4a16.cu's grouping and moe_gate_up_v13_pdl (this file includes it).
#include "moe_w4a16.cu"

#define TC_ARGS DN_ARGS, const int *__restrict__ pos, int T, int k, int E, float rsf, bf16 *__restrict__ out, int *__restrict__ ticket

template <bool EARLY, bool TC> __device__ __forceinline__ void down_pdl_x(TC_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    __shared__ int s_done[64], s_nd;                 // TC: the row tiles this block completes (its share: <= 28 tiles at T <= 8)
    const int G = I / 32, tiles = (H + 31) >> 5;
    bool waited = false;
    const bf16 *actp = act;
    v11_items(n_hit[0], tiles, [&](int y, int r0, int R) {
        down_item<true, true, false>(DN_PASS, G, y, r0, R, red, [&]() {
            if (!waited) {
                pdl_wait(); waited = true; actp = after_here(act);
                if constexpr (EARLY) pdl_launch_dependents();
            }
            return actp;
        });
    });
    if (!waited) pdl_wait();
    pdl_launch_dependents();
    if constexpr (TC) {
        const int tid = threadIdx.x, nh = n_hit[0];
        int a, b;
        v11_share((long long)nh * tiles, a, b);
        if (tid == 0) s_nd = 0;
        __threadfence();                                 // this thread's ybuf stores (if any) before the tickets below
        __syncthreads();
        for (int i = a + tid; i < b; i += blockDim.x) {  // one thread per tile of this block's share
            const int y = i / tiles, r = i - y * tiles, e = hit[y], m = offsets[e + 1] - offsets[e];
            if (atomicAdd(&ticket[r], m) + m == offsets[E]) { ticket[r] = 0; s_done[atomicAdd(&s_nd, 1)] = r; }
        }
        __threadfence();                                 // the other blocks' ybuf rows, seen complete, before they are read
        __syncthreads();
        const int nd = s_nd;
        for (int j = tid; j < nd * 32 * T; j += blockDim.x) {   // moe_combine's sum for row 32 r + c, token t
            const int d = j / (32 * T), t = (j / 32) % T, n = 32 * s_done[d] + (j & 31);
            if (n >= H) continue;
            float s = 0.f;
            for (int q = 0; q < k; ++q) {
                const int slot = pos[(size_t)t * k + q];
                if (slot >= 0) s += ldcg(ybuf + (size_t)slot * H + n);
            }
            out[(size_t)t * H + n] = __float2bfloat16(rsf * s);
        }
        if (blockIdx.x == 0 && offsets[E] == 0)          // no valid pair: no tile, no ticket; moe_combine writes zeros
            for (int j = tid; j < T * H; j += blockDim.x) out[j] = __float2bfloat16(rsf * 0.f);
    }
}

extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_pdl_early(DN_ARGS) {
    down_pdl_x<true, false>(DN_PASS, nullptr, 0, 0, 0, 0.f, nullptr, nullptr);
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_pdl_tc(TC_ARGS) {
    down_pdl_x<false, true>(DN_PASS, pos, T, k, E, rsf, out, ticket);
}
