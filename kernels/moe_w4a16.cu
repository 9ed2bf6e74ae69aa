// moe_w4a16.cu: routed MoE experts with INT4 weights kept packed (W4A16), for one MoE layer (nbs/03a_moe_w4a16).
// The layout and the shared building blocks: moe_w4a16_common.cuh.
//
// Four launches, no host synchronisation, nothing allocated (all buffers come from the caller's workspace):
//   1. moe_group    (1 block)  counting sort of the pairs by expert: counts, exclusive scan -> offsets, the
//                              compact list of hit experts, scatter -> sorted_pair[slot] = p, pos[p] = slot.
//      or moe_route_group (1 block) the router's top-k from its logits, then the same grouping (1' below),
//      or moe_router_group (ceil(E/3) blocks) the router's GEMV too, the last block to finish routing (1'').
//   2. moe_gate_up_v1x  act[slot, n] = silu(x.Wg[n]) * (x.Wu[n]) (bf16 workspace [P, I]), persistent (below).
//   3. moe_down_v1x     ybuf[slot, n] = topk_w[p] * act[slot].Wd[n] (workspace [P, H] fp32).
//   4. moe_combine  out[t, n] = bf16(routed_scaling_factor * sum_j ybuf[pos[t*k+j], n]), j in order
//                   (deterministic: no atomics on the output).
// v24 at T <= 8 (P <= SG_MAXP pairs) drops launch 1: gate/up and down each group the pairs in shared memory (1b below).
// The gate/up and down kernels come in numbered versions (llm.c style), each validated and timed by
// benchmarks/bench_moe.py (benchmarks/moe_w4a16.md): v1..v10 live in kernels/dev/moe_w4a16_v1_v10.cu and can still be
// run (ddtree_nb.moe.moe_w4a16(..., version=v)); v11..v14 are here, one loop switched by template flags (v12: one lop3
// per weight pair, v13: an expert's 8-token passes tile-major, v14: work shared out by cost); nbs/03a_moe_w4a16 picks
// the default, CUDA_VERSION (14; v13's kernels at T <= 8).
#include "moe_w4a16_common.cuh"
#include "pdl.cuh"   // pdl_wait, pdl_launch_dependents, after_here: the _pdl kernels at the end of this file


// ---------------------------------------------------------------------------------------------------------
// 1. grouping: one block of MAXE threads
// ---------------------------------------------------------------------------------------------------------
// The grouping itself, shared by moe_group and moe_route_group (one block of MAXE threads; topk_idx may have been
// written by this block before a __syncthreads, so it is not __restrict__ here).
__device__ __forceinline__ void group_pairs(const int *topk_idx, int P, int E, int *__restrict__ counts,
        int *__restrict__ offsets, int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos) {
    __shared__ int s_cnt[MAXE], s_sum[64], s_hit[64];   // MAXE = 32 warps of 32
    const int tid = threadIdx.x;
    s_cnt[tid] = 0;
    __syncthreads();
#pragma unroll 1
    for (int p = tid; p < P; p += MAXE) {
        int e = topk_idx[p];
        if (e >= 0 && e < E) atomicAdd(&s_cnt[e], 1);
    }
    __syncthreads();
    const int c = tid < E ? s_cnt[tid] : 0;
    int incl = c, nh = c > 0;                     // inclusive scans of counts and of (count > 0): in the warp by
    const int lane = tid & 31, wid = tid >> 5;    // shuffles, then over the 32 warp totals by warp 0
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const int a = __shfl_up_sync(0xffffffffu, incl, off), b = __shfl_up_sync(0xffffffffu, nh, off);
        if (lane >= off) { incl += a; nh += b; }
    }
    if (lane == 31) { s_sum[wid] = incl; s_hit[wid] = nh; }
    __syncthreads();
    if (wid == 0) {
        int a = s_sum[lane], b = s_hit[lane];
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const int ya = __shfl_up_sync(0xffffffffu, a, off), yb = __shfl_up_sync(0xffffffffu, b, off);
            if (lane >= off) { a += ya; b += yb; }
        }
        s_sum[32 + lane] = a - s_sum[lane]; s_hit[32 + lane] = b - s_hit[lane];   // exclusive warp offsets
    }
    __syncthreads();
    incl += s_sum[32 + wid]; nh += s_hit[32 + wid];
    const int ex = incl - c;
    if (tid < E) {
        counts[tid] = c; offsets[tid] = ex;
        if (c > 0) hit[nh - 1] = tid;
        if (tid == E - 1) { offsets[E] = incl; n_hit[0] = nh; }
    }
    __syncthreads();
    s_cnt[tid] = ex;                              // reuse as the per-expert cursor
    __syncthreads();
#pragma unroll 1
    for (int p = tid; p < P; p += MAXE) {
        int e = topk_idx[p];
        if (e >= 0 && e < E) { int slot = atomicAdd(&s_cnt[e], 1); sorted_pair[slot] = p; pos[p] = slot; }
        else pos[p] = -1;                         // an invalid expert id contributes nothing
    }
}

extern "C" __global__ void __launch_bounds__(MAXE)
moe_group(const int *__restrict__ topk_idx, int P, int E, int *__restrict__ counts, int *__restrict__ offsets,
          int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos) {
    group_pairs(topk_idx, P, E, counts, offsets, hit, n_hit, sorted_pair, pos);
}

// ---------------------------------------------------------------------------------------------------------
// 1b. v24 (T <= 8, P <= SG_MAXP pairs): no grouping launch. The gate/up and down launches each group the pairs in shared
//     memory, one thread per pair, in a stable order (slot = pairs of a smaller expert + earlier pairs of the same one), so
//     both get the same slots without talking to each other. Down also stores the grouping in the workspace as moe_group
//     would (the combine reads pos there, after its wait for down; ws.grouping() stays what it was). The grouping launch
//     cost 2.2-2.5 us of a Kimi layer's ~68 in a graph of layers at T = 1 (benchmarks/moe_w4a16.md, "Session 17").
// ---------------------------------------------------------------------------------------------------------
#define SG_MAXP 128                 // pairs: one per thread of a 128-thread block (4 warps)
struct SmemGroup {
    int e[SG_MAXP];                 // pair -> its expert (-1: no pair, or an invalid expert id)
    int sorted[SG_MAXP];            // slot -> pair
    int hit[SG_MAXP];               // hit slot -> expert
    int off[MAXE + 1];              // expert e -> its first slot (off[e]) and one past its last (off[e + 1]): hit experts only
    int nh, nv, wstart[4];          // hit experts, valid pairs; starts of an expert's slots per warp
};
// the block's grouping into g (blockDim.x == SG_MAXP, P <= SG_MAXP); returns this thread's pair's slot (-1: none)
__device__ __forceinline__ int group_in_block(const int *topk_idx, int P, int E, SmemGroup &g) {
    if (P > SG_MAXP || blockDim.x != SG_MAXP || E > MAXE) __trap();   // moe.py never launches these; a caller who does fails loudly
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int e = -1;
    if (tid < P) { const int v = topk_idx[tid]; e = v >= 0 && v < E ? v : -1; }
    g.e[tid] = e;
    const int nv = __syncthreads_count(e >= 0);   // valid pairs
    int slot = -1;
    if (e >= 0) {
        int lt = 0, before = 0;
        for (int q = 0; q < P; ++q) { const int f = g.e[q]; lt += (unsigned)f < (unsigned)e; before += (f == e) & (q < tid); }
        slot = lt + before;
        g.sorted[slot] = tid;
    }
    __syncthreads();
    int se = -1;
    bool start = false;
    if (tid < nv) {                                 // thread = slot: its expert's first slot? its last?
        se = g.e[g.sorted[tid]];
        start = tid == 0 || g.e[g.sorted[tid - 1]] != se;
        if (tid == nv - 1 || g.e[g.sorted[tid + 1]] != se) g.off[se + 1] = tid + 1;
    }
    const unsigned b = __ballot_sync(0xffffffffu, start);
    if (lane == 0) g.wstart[warp] = __popc(b);
    __syncthreads();                                // the ends above, the starts below: off[se] may be off[se - 1 + 1]
    if (start) {
        int y = __popc(b & ((1u << lane) - 1));
        for (int w = 0; w < warp; ++w) y += g.wstart[w];
        g.hit[y] = se;
        g.off[se] = tid;
    }
    if (tid == 0) { g.nh = g.wstart[0] + g.wstart[1] + g.wstart[2] + g.wstart[3]; g.nv = nv; }
    __syncthreads();
    return slot;
}
// what moe_group writes (counts and offsets of every expert, hit, n_hit, sorted_pair, pos), from a block's g, spread over
// the grid: counts[e], offsets[e] by thread e of the grid, the rest by block 0
__device__ __forceinline__ void store_group(const SmemGroup &g, int slot, int P, int E, int *__restrict__ counts,
        int *__restrict__ offsets, int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos) {
    const int tid = threadIdx.x;
    for (int e = blockIdx.x * blockDim.x + tid; e <= E; e += gridDim.x * blockDim.x) {
        int lt = 0, eq = 0;
        for (int q = 0; q < P; ++q) { const int f = g.e[q]; lt += (unsigned)f < (unsigned)e; eq += f == e; }
        offsets[e] = lt;
        if (e < E) counts[e] = eq;
    }
    if (blockIdx.x == 0) {
        if (tid < P) pos[tid] = slot;
        if (tid < g.nv) sorted_pair[tid] = g.sorted[tid];
        if (tid < g.nh) hit[tid] = g.hit[tid];
        if (tid == 0) n_hit[0] = g.nh;
    }
}

// ---------------------------------------------------------------------------------------------------------
// 1'. routing + grouping in one launch (a sigmoid router with one expert group: DeepSeek-V3 / Kimi K2 at
//     n_group = topk_group): one warp per token holds sigmoid(logit) + bias of its experts in registers (NPL per
//     lane, read once) and picks the top-k by k warp-argmax rounds (value desc, expert id asc on ties; a NaN ranks
//     above everything, as in torch.topk, and its weight is NaN, so a NaN router output reaches the layer's output);
//     the weights are sigmoid(logit) of the picks, normalised if `norm` (sum + 1e-20, as the torch Router), times
//     rsf; then the block groups the pairs as moe_group does. Replaces the router's sigmoid/add/topk/gather/sum/div/
//     mul launches and moe_group. One block: meant for small T (the AR step, small trees); moe.py takes the torch
//     top-k + moe_group above ROUTE_FUSED_MAX_T tokens.
// ---------------------------------------------------------------------------------------------------------
__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

template <int NPL>   // experts per lane: E <= 32 * NPL. lg is read with ld.global.cg (L2): the fused router kernel
__device__ __forceinline__ void route_token(const float *lg, const float *__restrict__ bias, int E, int k, int norm,   // writes it in the same launch
                                            float rsf, int *__restrict__ idx_out, float *__restrict__ w_out) {
    const int lane = threadIdx.x & 31;
    constexpr bool HOLD = NPL <= 16;       // the weights too in registers (at NPL = 32 they would spill: read them again)
    float v[NPL], sg[HOLD ? NPL : 1];      // the choice score sigmoid + bias, and the weight sigmoid, of expert lane + 32 j
#pragma unroll
    for (int j = 0; j < NPL; ++j) {        // -inf = not pickable (past E, or taken); NaN -> +inf: ranks first, as in torch.topk
        const int e = lane + 32 * j;
        const float sj = e < E ? sigmoidf(__ldcg(lg + e)) : 0.f;
        if constexpr (HOLD) sg[j] = sj;
        const float x = e < E ? sj + bias[e] : -INFINITY;
        v[j] = isnan(x) ? INFINITY : x;
    }
    float wsum = 0.f;
#pragma unroll 1
    for (int r = 0; r < k; ++r) {
        float best = -INFINITY; int be = 0x7fffffff;
        if constexpr (HOLD) {              // the lane's best as a tree (depth log2 NPL, not a chain of NPL dependent compares)
            constexpr int NH = (NPL + 1) / 2;
            float tv[NH]; int ti[NH];      // level 1 straight from v: the winner of slots 2h, 2h + 1
#pragma unroll
            for (int h = 0; h < NH; ++h) {
                tv[h] = v[2 * h]; ti[h] = v[2 * h] != -INFINITY ? lane + 64 * h : 0x7fffffff;
                if (2 * h + 1 < NPL && v[2 * h + 1] != -INFINITY && v[2 * h + 1] > tv[h]) { tv[h] = v[2 * h + 1]; ti[h] = lane + 64 * h + 32; }
            }
#pragma unroll
            for (int st = 1; st < NH; st <<= 1)
#pragma unroll
                for (int h = 0; h + st < NH; h += 2 * st)
                    if (tv[h + st] > tv[h] || (tv[h + st] == tv[h] && ti[h + st] < ti[h])) { tv[h] = tv[h + st]; ti[h] = ti[h + st]; }
            best = tv[0]; be = ti[0];
        } else {
#pragma unroll
            for (int j = 0; j < NPL; ++j)
                if (v[j] != -INFINITY && (v[j] > best || (v[j] == best && lane + 32 * j < be))) { best = v[j]; be = lane + 32 * j; }
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, o); const int oe = __shfl_xor_sync(0xffffffffu, be, o);
            if (ov > best || (ov == best && oe < be)) { best = ov; be = oe; }
        }
        const bool ok = be < E;
        const int jb = be >> 5;
        float own = 0.f;                   // the pick's weight: lane be & 31 holds it in slot jb
        if constexpr (HOLD) {
#pragma unroll
            for (int j = 0; j < NPL; ++j) own = j == jb ? sg[j] : own;
        } else own = ok ? sigmoidf(__ldcg(lg + be)) : 0.f;
        if (ok && (be & 31) == lane) {
#pragma unroll
            for (int j = 0; j < NPL; ++j) if (j == jb) v[j] = -INFINITY;   // taken: never picked again
        }
        const float w = ok ? __shfl_sync(0xffffffffu, own, be & 31) : 0.f;
        wsum += w;
        if (lane == 0) { idx_out[r] = ok ? be : -1; w_out[r] = w; }
    }
    __syncwarp();
    const float f = norm ? rsf / (wsum + 1e-20f) : rsf;
    for (int j = lane; j < k; j += 32) w_out[j] *= f;
}

// One token (T = 1, the AR step), k <= 8, E <= 384: in parallel instead of one warp's k serial rounds (2,442
// dependent instructions in one warp, ~6 µs, measured with ncu). Warp c sorts experts [32c, 32c + 32) best first by
// a bitonic network over its lanes and keeps its top k; then every one of the <= 96 candidates counts the candidates
// better than itself (its rank) and the ranks < k write their pick. Same order (value desc, id asc; NaN first), same
// weights, same sum order as route_token. Candidates past E or at -inf give id -1, weight 0, as there.
#define R1_MAXK 8      // picks
#define R1_CHUNKS 12   // 32-expert warps: E <= 384
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

__device__ __forceinline__ void route_one_token(const float *lg, const float *__restrict__ bias, int E, int k, int norm, float rsf,
                                                int *__restrict__ idx_out, float *__restrict__ w_out) {
    __shared__ float c_v[R1_CHUNKS * R1_MAXK], c_s[R1_CHUNKS * R1_MAXK], c_w[R1_MAXK];
    __shared__ int c_i[R1_CHUNKS * R1_MAXK];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = (E + 31) >> 5;
    if (warp < nc) {
        const int e = 32 * warp + lane;
        const float sg = e < E ? sigmoidf(__ldcg(lg + e)) : 0.f, x = e < E ? sg + bias[e] : -INFINITY;
        float v = isnan(x) ? INFINITY : x, s = sg; int id = e;       // ids stay distinct (past E too): a strict order
#pragma unroll
        for (int size = 2; size <= 32; size <<= 1)
#pragma unroll
            for (int st = size >> 1; st; st >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, v, st), os = __shfl_xor_sync(0xffffffffu, s, st);
                const int oi = __shfl_xor_sync(0xffffffffu, id, st);
                const bool lower = !(lane & st), best_first = !(lane & size) || size == 32;
                if (better(ov, oi, v, id) == (lower == best_first)) { v = ov; s = os; id = oi; }
            }
        if (lane < k) { c_v[warp * k + lane] = v; c_s[warp * k + lane] = s; c_i[warp * k + lane] = id; }
    }
    __syncthreads();
    const int n = nc * k, c = threadIdx.x;
    if (c < n) {
        const float v = c_v[c]; const int id = c_i[c];
        int rank = 0;
        for (int j = 0; j < n; ++j) rank += better(c_v[j], c_i[j], v, id);
        if (rank < k) {
            const bool ok = id < E && v != -INFINITY;
            idx_out[rank] = ok ? id : -1; c_w[rank] = ok ? c_s[c] : 0.f;
        }
    }
    __syncthreads();
    if (threadIdx.x < k) {                                            // route_token's sum: in rank order
        float wsum = 0.f;
        for (int r = 0; r < k; ++r) wsum += c_w[r];
        w_out[threadIdx.x] = c_w[threadIdx.x] * (norm ? rsf / (wsum + 1e-20f) : rsf);
    }
}

template <int NPL>
__device__ __forceinline__ void route_group(const float *logits, const float *__restrict__ bias, int T, int E, int k, int norm,
        float rsf, int *__restrict__ topk_idx, float *__restrict__ topk_w, int *__restrict__ counts, int *__restrict__ offsets,
        int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos) {
    if (T == 1 && k <= R1_MAXK && E <= R1_CHUNKS * 32) route_one_token(logits, bias, E, k, norm, rsf, topk_idx, topk_w);
    else {
#pragma unroll 1
        for (int t = threadIdx.x >> 5; t < T; t += MAXE / 32)
            route_token<NPL>(logits + (size_t)t * E, bias, E, k, norm, rsf, topk_idx + t * k, topk_w + t * k);
    }
    __syncthreads();                                       // the block's topk_idx writes are visible to the grouping
    group_pairs(topk_idx, T * k, E, counts, offsets, hit, n_hit, sorted_pair, pos);
}

#define ROUTE_GROUP(name, NPL) extern "C" __global__ void __launch_bounds__(MAXE) name(const float *__restrict__ logits, \
    const float *__restrict__ bias, int T, int E, int k, int norm, float rsf, int *__restrict__ topk_idx, float *__restrict__ topk_w, \
    int *__restrict__ counts, int *__restrict__ offsets, int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, \
    int *__restrict__ pos) { route_group<NPL>(logits, bias, T, E, k, norm, rsf, topk_idx, topk_w, counts, offsets, hit, n_hit, sorted_pair, pos); }
ROUTE_GROUP(moe_route_group_e384, 12)     // Kimi K2 / DeepSeek-V3 sizes (256, 384 experts)
ROUTE_GROUP(moe_route_group_e1024, 32)    // up to MAXE

// ---------------------------------------------------------------------------------------------------------
// 1''. the router's GEMV, routing and grouping in one launch (small T): logits[t, e] = x[t] . W[e] in fp32 (x bf16,
//      the router weight fp32 [E, H], as F.linear(x.float(), W)), then 1' in the block that finishes last.
//      Grid ceil(E / RT_EPB) blocks of MAXE threads: block b computes experts [RT_EPB b, RT_EPB b + RT_EPB), RT_WPE
//      warps per expert, each over one contiguous 1/RT_WPE of H with its weights held in registers (read once for
//      all T tokens), partial sums added in a fixed order (deterministic). Each block fences its logits and takes a
//      ticket (atomicInc wraps it back to 0 for the next launch or graph replay); the last one routes and groups.
//      Needs T <= RT_MAXT, H % 4 == 0, H <= RT_WPE * 32 * 4 * RT_NW4 (moe.py checks; else the GEMV runs in torch).
// ---------------------------------------------------------------------------------------------------------
#define RT_WPE 10                      // warps per expert (3 experts a block: 128 blocks for 384 experts, one wave on 132 SMs)
#define RT_EPB (MAXE / 32 / RT_WPE)    // experts per block: 3 (warps 30, 31 idle in the GEMV)
#define RT_NW4 8                       // float4 of weights per lane: H <= 10240
#define RT_MAXT 64                     // tokens (ROUTE_FUSED_MAX_T)

__device__ __forceinline__ void router_logits(const bf16 *__restrict__ x, const float *__restrict__ W, int T, int H, int E,
                                              float *__restrict__ logits) {
    __shared__ float s_part[RT_MAXT][MAXE / 32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int e = warp < RT_EPB * RT_WPE ? blockIdx.x * RT_EPB + warp / RT_WPE : E, ks = warp % RT_WPE, n4 = H >> 2;
    const int c0 = ks * n4 / RT_WPE, c1 = (ks + 1) * n4 / RT_WPE;
    float4 w[RT_NW4];
#pragma unroll
    for (int j = 0; j < RT_NW4; ++j) {
        const int c = c0 + lane + 32 * j;
        w[j] = e < E && c < c1 ? __ldcs(reinterpret_cast<const float4 *>(W + (size_t)e * H) + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int t = 0; t < T; ++t) {
        const uint2 *xr = reinterpret_cast<const uint2 *>(x + (size_t)t * H);   // 4 bf16 per float4 of weights
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < RT_NW4; ++j) {
            const int c = c0 + lane + 32 * j;
            if (c < c1) {
                const uint2 u = __ldg(xr + c);
                const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
                const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
                acc = fmaf(w[j].x, a.x, acc); acc = fmaf(w[j].y, a.y, acc); acc = fmaf(w[j].z, b.x, acc); acc = fmaf(w[j].w, b.y, acc);
            }
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) s_part[t][warp] = acc;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < T * RT_EPB; i += MAXE) {
        const int t = i / RT_EPB, el = i % RT_EPB, ee = blockIdx.x * RT_EPB + el;
        float acc = 0.f;
#pragma unroll
        for (int q = 0; q < RT_WPE; ++q) acc += s_part[t][el * RT_WPE + q];
        if (ee < E) logits[(size_t)t * E + ee] = acc;
    }
}

#define ROUTER_GROUP(name, NPL) extern "C" __global__ void __launch_bounds__(MAXE) name(const bf16 *__restrict__ x, \
    const float *__restrict__ W, int T, int H, const float *__restrict__ bias, int E, int k, int norm, float rsf, float *logits, \
    int *__restrict__ topk_idx, float *__restrict__ topk_w, int *__restrict__ counts, int *__restrict__ offsets, int *__restrict__ hit, \
    int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos, unsigned *__restrict__ ticket) { \
    __shared__ bool s_last; \
    router_logits(x, W, T, H, E, logits); \
    __threadfence();                                       /* this thread's logits, before the ticket */ \
    __syncthreads(); \
    if (threadIdx.x == 0) s_last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1; \
    __syncthreads(); \
    if (!s_last) return; \
    __threadfence();                                       /* every block's logits, before reading them (ld.cg) */ \
    route_group<NPL>(logits, bias, T, E, k, norm, rsf, topk_idx, topk_w, counts, offsets, hit, n_hit, sorted_pair, pos); }
ROUTER_GROUP(moe_router_group_e384, 12)
ROUTER_GROUP(moe_router_group_e1024, 32)

// ---------------------------------------------------------------------------------------------------------
// 4. combine: each token sums its k pair rows in order (deterministic), scaled, to bf16
// ---------------------------------------------------------------------------------------------------------
// grid (ceil(H/256), min(T, 65535)): block y takes tokens y, y + gridDim.y, ... (grid.y caps at 65,535: a long prefill)
template <bool NC = true>   // false: ybuf read coherently (ldcg), as a PDL dependent of the down launch must
__device__ __forceinline__ void combine_tokens(const float *__restrict__ ybuf, const int *__restrict__ pos, int T, int k, int H, float rsf,
                                               bf16 *__restrict__ out) {
    const int n = blockIdx.x * 256 + threadIdx.x;
    if (n >= H) return;
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        float s = 0.f;
        for (int j = 0; j < k; ++j) {
            const int slot = pos[(size_t)t * k + j];
            if (slot >= 0) s += NC ? ybuf[(size_t)slot * H + n] : ldcg(ybuf + (size_t)slot * H + n);
        }
        out[(size_t)t * H + n] = __float2bfloat16(rsf * s);
    }
}
extern "C" __global__ void __launch_bounds__(256)
moe_combine(const float *__restrict__ ybuf, const int *__restrict__ pos, int T, int k, int H, float rsf, bf16 *__restrict__ out) {
    combine_tokens(ybuf, pos, T, k, H, rsf, out);
}

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
// Launch: grid (resident blocks, 1), 128 threads; an expert's tokens beyond 8 take more 8-token passes over its tiles.
// =========================================================================================================

// a tile's sums: the NW warps' partials of this lane's accumulators in one reduction slot, added in warp order
template <int NT, int NW> __device__ __forceinline__ void slot_sums(const float *slot, int lane, float (&s)[NT][4]) {
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            float v = 0.f;
#pragma unroll
            for (int w = 0; w < NW; ++w) v += slot[((w * NT + i) * 4 + q) * 32 + lane];
            s[i][q] = v;
        }
}

// One run of R consecutive row tiles (starting at row n0) of one expert with m tokens: tile r's sub-tile i is rows
// n0 + r*RS + i*IS + {g, g + 8} of matrix W[i] (clamped to N - 1, outputs past N masked by `epi`). `xrow_of(t0, mt)`
// gives this lane's x row for the 8-token tile at t0 (nullptr past mt); `epi(r, t0, mt, acc)` writes tile r. RS = 0: the
// row steps come at run time (rs, is), for one loop that streams both gate/up and down items (kernels/dev/moe_w4a16_fused.cu)
template <int NT, int NW, int RS, int IS, bool L3, bool TM, bool XNC = true, class XRow, class Epi>
__device__ __forceinline__ void v11_run(const uint4 *const (&W)[NT], const unsigned short *const (&S)[NT], int n0, int N, int G,
                                        int R, const int *mp, float *red, XRow xrow_of, Epi epi, int rs = RS, int is = IS) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nloc = (((G + 3) >> 2) + NW - 1) / NW;    // chunks per warp per tile, the same for every warp
    uint32_t off[NT][2];                                 // row * G of the tile being loaded (32 bits: fewer registers)
    auto point = [&](int r) {
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) off[i][rr] = (uint32_t)min(n0 + r * (RS ? RS : rs) + i * (RS ? IS : is) + 8 * rr + g, N - 1) * (uint32_t)G;
    };
    auto load_w = [&](StageV2<NT> &st, int q) {
        PtrsV2<NT> p;
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) { p.w[i][rr] = W[i] + off[i][rr]; p.s[i][rr] = S[i] + off[i][rr]; }
        load_chunk_w<NT, true>(st, p, q, G);
    };
    // the run is a sequence of (tile, 8-token pass) pairs. Pass-major (v11, v12): every tile of the run for tokens 0-7,
    // then again for 8-15, ...: an expert with m > 8 tokens re-reads the whole run's weights from HBM once per pass (the
    // run is up to ~10 MB at T = 256). Tile-major (TM, v13): a tile's passes back to back, the later ones from L2.
    StageV2<NT> A, B;
    point(0);
    load_w(A, 4 * warp + t);                             // in flight while the token chain below resolves
    const int start = mp[0], m = mp[1] - start, J = (m + 7) >> 3, NP = R * J;
    const uint4 *xrow = xrow_of(start, min(8, m));
    load_chunk_x<NT, XNC>(A, xrow, 4 * warp + t, G);
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    int np = 0, nj = 0, lr = 0, lp = 0;                  // pair and local chunk of the last stage loaded, its tile and pass
    int cp = 0, cj = 0, cr = 0, cq = 0;                  // pair and local chunk next computed, its tile and pass
    auto next = [&](StageV2<NT> &st) {
        if (++nj == nloc) {
            nj = 0;
            if (++np < NP) {
                if (TM) { if (++lp == J) { lp = 0; point(++lr); } }
                else { if (++lr == R) { lr = 0; ++lp; } point(lr); }
                if (J > 1) xrow = xrow_of(start + 8 * lp, min(8, m - 8 * lp));
            }
        }
        if (np < NP) {
            const int q = 4 * (warp + nj * NW) + t;
            load_w(st, q); load_chunk_x<NT, XNC>(st, xrow, q, G);
        }
    };
    auto finish = [&](const StageV2<NT> &st) {
        v2_compute<NT, L3>(st, acc);
        if (++cj < nloc) return;
        cj = 0;
        float *slot = red + (cp & 1) * (NW * NT * 4 * 32);
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int q = 0; q < 4; ++q) { slot[((warp * NT + i) * 4 + q) * 32 + lane] = acc[i][q]; acc[i][q] = 0.f; }
        __syncthreads();
        if (warp == (cp & (NW - 1))) {
            float s[NT][4];
            slot_sums<NT, NW>(slot, lane, s);
            epi(cr, 8 * cq, min(8, m - 8 * cq), s);
        }
        ++cp;
        if (TM) { if (++cq == J) { cq = 0; ++cr; } }
        else if (++cr == R) { cr = 0; ++cq; }
    };
    while (true) {
        next(B); finish(A);
        if (cp >= NP) break;
        next(A); finish(B);
        if (cp >= NP) break;
    }
    __syncthreads();   // the slots start over with the next run
}

// share sb's items [a, b) of `items` cut into gridDim.x equal shares, in order (sb: this block's by default)
__device__ __forceinline__ void v11_share(long long items, int &a, int &b, unsigned sb = blockIdx.x) {
    a = (int)(items * sb / gridDim.x);
    b = (int)(items * (sb + 1) / gridDim.x);
}
// share sb (this block's by default) of the n_hit x tiles work items, walked as runs within one expert: run(y, r0, R)
template <class Run>
__device__ __forceinline__ void v11_items(int nh, int tiles, Run run, unsigned sb = blockIdx.x) {
    int a, b;
    v11_share((long long)nh * tiles, a, b, sb);
    while (a < b) {
        const int y = a / tiles, r0 = a - y * tiles, R = min(b - a, tiles - r0);
        run(y, r0, R);
        a += R;
    }
}

// v14: block b's share by cost. Item (y, r) of hit expert y costs J_y = ceil(m_y / 8) passes; the block reads every hit
// expert's token count, scans the costs in shared memory (cum[y] = passes before expert y) and takes the items whose cost
// start tiles * cum[y] + r * J_y lies in [b C / G, (b + 1) C / G), C = tiles * cum[nh]. With the count share (v11-v13) a
// block on a hot expert (m = 100 tokens: 13 passes) set the launch's time; at T = 256 the busiest SM was active 1.5x the
// average (ncu, gate/up).
template <class Run>
__device__ __forceinline__ void v14_items(int nh, int tiles, const int *hit, const int *offsets, Run run) {
    __shared__ int cum[MAXE + 1];
    __shared__ int wsum[32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int per = (nh + blockDim.x - 1) / blockDim.x, y0 = min(nh, tid * per), y1 = min(nh, y0 + per);
    int sum = 0;
    for (int y = y0; y < y1; ++y) { const int e = hit[y], J = (offsets[e + 1] - offsets[e] + 7) >> 3; cum[y + 1] = J; sum += J; }
    int incl = sum;                                      // inclusive scan of the threads' sums: warps, then their totals
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) { const int v = __shfl_up_sync(0xffffffffu, incl, off); if (lane >= off) incl += v; }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    int before = incl - sum;
    for (int w = 0; w < warp; ++w) before += wsum[w];
    for (int y = y0; y < y1; ++y) { before += cum[y + 1]; cum[y + 1] = before; }
    if (tid == 0) cum[0] = 0;
    __syncthreads();
    const long long C = (long long)cum[nh] * tiles, lo = C * blockIdx.x / gridDim.x, hi = C * (blockIdx.x + 1) / gridDim.x;
    int a = 0, b = nh;                                   // the last expert y with tiles * cum[y] <= lo
    while (b - a > 1) { const int mid = (a + b) >> 1; if ((long long)tiles * cum[mid] <= lo) a = mid; else b = mid; }
    for (int y = a; y < nh; ++y) {
        const long long base = (long long)tiles * cum[y];
        if (base >= hi) break;
        const int J = cum[y + 1] - cum[y];
        const int r0 = lo > base ? (int)((lo - base + J - 1) / J) : 0;
        const int r1 = (int)min((long long)tiles, (hi - base + J - 1) / J);
        if (r1 > r0) run(y, r0, r1 - r0);
    }
}

template <bool BAL, class Run>
__device__ __forceinline__ void share_items(int nh, int tiles, const int *hit, const int *offsets, Run run) {
    if constexpr (BAL) v14_items(nh, tiles, hit, offsets, run); else v11_items(nh, tiles, run);
}

// a gate/up tile's epilogue (lane g, t of its warp): act[slot0 + tok, nb + row] = silu(gate) * up, for c0, c1: row g, tokens
// 2t, 2t+1; c2, c3: row g+8
__device__ __forceinline__ void store_act(bf16 *__restrict__ act, int I, int slot0, int nb, int g, int t, int mt, const float (&s)[2][4]) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int n = nb + g + (q >= 2 ? 8 : 0), tok = 2 * t + (q & 1);
        if (n < I && tok < mt) act[(size_t)(slot0 + tok) * I + n] = __float2bfloat16(s[0][q] / (1.f + __expf(-s[0][q])) * s[1][q]);
    }
}
// a down tile's epilogue (two 16-row halves from row nb): ybuf[slot0 + tok, n] = topk_w[pair] * sum
__device__ __forceinline__ void store_ybuf(float *__restrict__ ybuf, int H, const int *__restrict__ sorted_pair, const float *__restrict__ topk_w,
                                           int slot0, int nb, int g, int t, int mt, const float (&s)[2][4]) {
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int n = nb + 16 * i + g + (q >= 2 ? 8 : 0), tok = 2 * t + (q & 1);
            if (n < H && tok < mt) ybuf[(size_t)(slot0 + tok) * H + n] = topk_w[sorted_pair[slot0 + tok]] * s[i][q];
        }
}

// gate/up item: R row tiles of hit expert y from tile r0 (red: the block's reduction slots)
template <bool L3, bool TM> __device__ __forceinline__ void gate_up_item(GU_ARGS, int G, int y, int r0, int R, float *red) {
    const int e = hit[y];
    const size_t base = (size_t)e * I * G;
    const uint4 *const W[2] = {gate_packed + base, up_packed + base};
    const unsigned short *const S[2] = {reinterpret_cast<const unsigned short *>(gate_scale) + base,
                                        reinterpret_cast<const unsigned short *>(up_scale) + base};
    const int n0 = r0 * 16, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    v11_run<2, 4, 16, 0, L3, TM>(W, S, n0, I, G, R, offsets + e, red,
        [&](int s0, int mt) { return g < mt ? reinterpret_cast<const uint4 *>(x + (size_t)(sorted_pair[s0 + g] / k) * H) : nullptr; },
        [&](int r, int t0, int mt, const float (&s)[2][4]) { store_act(act, I, offsets[e] + t0, n0 + 16 * r, g, t, mt, s); });
}
template <bool L3, bool TM, bool BAL> __device__ __forceinline__ void gate_up_v11(GU_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int G = H / 32;   // groups per row
    share_items<BAL>(n_hit[0], (I + 15) >> 4, hit, offsets, [&](int y, int r0, int R) { gate_up_item<L3, TM>(GU_PASS, G, y, r0, R, red); });
}

// down item: R row tiles of hit expert y from tile r0. `act_ready()` is called once per 8-token pass, after the pass's first
// weight chunk is requested and before act is read, and returns the act pointer to read (XNC false: through ld.global.cg)
template <bool L3, bool TM, bool XNC, class Ready> __device__ __forceinline__ void down_item(DN_ARGS, int G, int y, int r0, int R,
                                                                                           float *red, Ready act_ready) {
    const int e = hit[y];
    const size_t base = (size_t)e * H * G;
    const uint4 *const W[2] = {down_packed + base, down_packed + base};
    const unsigned short *const S[2] = {reinterpret_cast<const unsigned short *>(down_scale) + base,
                                        reinterpret_cast<const unsigned short *>(down_scale) + base};
    const int n0 = r0 * 32, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    v11_run<2, 4, 32, 16, L3, TM, XNC>(W, S, n0, H, G, R, offsets + e, red,
        [&](int s0, int mt) {
            const bf16 *a = act_ready();
            return g < mt ? reinterpret_cast<const uint4 *>(a + (size_t)(s0 + g) * I) : nullptr;
        },
        [&](int r, int t0, int mt, const float (&s)[2][4]) { store_ybuf(ybuf, H, sorted_pair, topk_w, offsets[e] + t0, n0 + 32 * r, g, t, mt, s); });
}

// PDL: launched as gate/up's dependent, a block requests its first weight chunk (and reads the grouping, complete before
// gate/up let this grid launch) before it waits for gate/up's act, and lets the combine launch right after that wait (the
// combine's blocks then wait through down's tail on SMs down has left; the combine's own wait is for all of down)
template <bool L3, bool TM, bool BAL, bool PDL = false> __device__ __forceinline__ void down_v11(DN_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int G = I / 32;
    bool waited = false;
    const bf16 *actp = act;   // under PDL: re-read after the wait, so no act load is hoisted above it
    share_items<BAL>(n_hit[0], (H + 31) >> 5, hit, offsets, [&](int y, int r0, int R) {
        down_item<L3, TM, !PDL>(DN_PASS, G, y, r0, R, red, [&]() {
            if constexpr (PDL) {   // before the first act load
                if (!waited) { pdl_wait(); waited = true; actp = after_here(act); pdl_launch_dependents(); }
            }
            return actp;
        });
    });
    if constexpr (PDL) {
        if (!waited) pdl_wait();   // a block with no items still waits for gate/up before it lets the combine launch
        pdl_launch_dependents();   // (again, for the others: a no-op)
    }
}

// v12 = v11 with the dequantisation's mask and exponent in one lop3 (dq_pair_l3): the same bits, 64 fewer integer
// instructions per warp and chunk of 401 (ncu of v11 at T = 1: the integer pipe 66% busy, 3.1 lane-ops per weight)
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v11(GU_ARGS) { gate_up_v11<false, false, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v11(DN_ARGS) { down_v11<false, false, false>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v12(GU_ARGS) { gate_up_v11<true, false, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v12(DN_ARGS) { down_v11<true, false, false>(DN_PASS); }
// v13 = v12 with a run's 8-token passes tile-major (each tile's later passes read from L2): the same sums, in the same order
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v13(GU_ARGS) { gate_up_v11<true, true, false>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13(DN_ARGS) { down_v11<true, true, false>(DN_PASS); }
// v14 = v13 sharing the work out by cost (v14_items); launched only above 8 tokens (ONE_PASS_VERSION: v13 below)
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v14(GU_ARGS) { gate_up_v11<true, true, true>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v14(DN_ARGS) { down_v11<true, true, true>(DN_PASS); }

// =========================================================================================================
// The T <= 8 launches (v13's loop) as programmatic dependents (moe.py launches them with pdl=True on sm_90+, runtime.Kernel):
// gate/up, down and the combine may each start while the launch before it drains, so down's blocks request their first
// weights during gate/up's tail. Each lets its dependent launch only once past its own griddepcontrol.wait, so a dependent
// never starts before the grouping launch two back is complete:
//   gate/up: wait (for the grouping), launch_dependents, then v13's gate/up;
//   down:    v13's down with PDL: a block requests its first weight chunk before waiting for gate/up (down_v11<..., true>),
//            then launch_dependents (right after the wait since session 17: 0.2-1.8 us a layer less at T = 1..4, 1.5-7 at T = 8,
//            in graphs of 4 layers, benchmarks/moe_w4a16.md "Session 17");
//   combine: wait, then the combine.
// Under a plain launch every wait returns at once: the same kernels, the same bits as v13. Data the grid before writes (down's
// act, the combine's ybuf) is read after the wait, through pointers taken after it (after_here), with coherent loads (ldcg):
// that grid may still be writing it while this one runs its prologue, and ld.global.nc promises data that does not change
// during the kernel's life. With __ldg there, 23-26 of 100 runs at T = 8 differed from v13 (benchmarks/moe_w4a16.md, "Session 15").
// =========================================================================================================
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v13_pdl(GU_ARGS) {
    pdl_wait();
    pdl_launch_dependents();   // the grouping's output is read through pointers taken after the wait (after_here)
    gate_up_v11<true, true, false>(x, H, I, k, after_here(sorted_pair), after_here(offsets), after_here(hit), after_here(n_hit),
                                   gate_packed, gate_scale, up_packed, up_scale, act);
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_pdl(DN_ARGS) { down_v11<true, true, false, true>(DN_PASS); }
// v24: the T <= 8 chain without its grouping launch (1b above): gate/up waits, lets down launch, groups; down groups and stores
// the grouping before its wait (topk_idx was complete before gate/up let it launch), then runs as moe_down_v13_pdl; the
// combine is moe_combine(_pdl). Under a plain launch the waits return at once: the same kernels serve both.
extern "C" __global__ void __launch_bounds__(128, 4)
moe_gate_up_v24(const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ topk_idx, int P, int E,
                const uint4 *__restrict__ gate_packed, const bf16 *__restrict__ gate_scale, const uint4 *__restrict__ up_packed,
                const bf16 *__restrict__ up_scale, bf16 *__restrict__ act) {
    __shared__ SmemGroup g;
    pdl_wait();
    pdl_launch_dependents();
    group_in_block(after_here(topk_idx), P, E, g);
    gate_up_v11<true, true, false>(x, H, I, k, g.sorted, g.off, g.hit, &g.nh, gate_packed, gate_scale, up_packed, up_scale, act);
}
extern "C" __global__ void __launch_bounds__(128, 4)
moe_down_v24(const bf16 *__restrict__ act, int I, int H, const int *__restrict__ topk_idx, int P, int E, const float *__restrict__ topk_w,
             int *__restrict__ counts, int *__restrict__ offsets, int *__restrict__ hit, int *__restrict__ n_hit,
             int *__restrict__ sorted_pair, int *__restrict__ pos, const uint4 *__restrict__ down_packed,
             const bf16 *__restrict__ down_scale, float *__restrict__ ybuf) {
    __shared__ SmemGroup g;
    const int slot = group_in_block(topk_idx, P, E, g);
    store_group(g, slot, P, E, counts, offsets, hit, n_hit, sorted_pair, pos);
    down_v11<true, true, false, true>(act, I, H, g.sorted, topk_w, g.off, g.hit, &g.nh, down_packed, down_scale, ybuf);
}
extern "C" __global__ void __launch_bounds__(256)
moe_combine_pdl(const float *__restrict__ ybuf, const int *__restrict__ pos, int T, int k, int H, float rsf, bf16 *__restrict__ out) {
    pdl_wait();
    combine_tokens<false>(after_here(ybuf), after_here(pos), T, k, H, rsf, out);
}
