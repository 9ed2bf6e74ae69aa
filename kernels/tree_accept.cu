// tree_accept.cu: DDTree's acceptance walk over a draft tree plus latent-cache compaction, in ONE launch.
// See nbs/04_accept.ipynb for the algorithm, the sampling rule and the torch references it is checked against.
// The previous version is kernels/dev/tree_accept_v1.cu (benchmarks/bench_accept.py times both).
//
// Grid: G <= MAXG blocks of NT threads, G = SM count, which the launcher checks against the occupancy computed from
// this kernel's registers and shared memory (all blocks co-resident, at least 2 blocks per SM by __launch_bounds__).
// The blocks meet at a software grid barrier once per "pass"; a pass scores the speculative first-child chain
// starting at the walk's current node (up to CHAIN rows; every block owns a column segment of each chain row and
// splits it over all its warps: NW / (chain length) warps per row), every block then reduces the partials and
// replays the same walk redundantly, so all blocks agree on the path with no extra barrier.
// After the last pass every block knows the path and does its share of the compaction.
// Scratch (partials, barrier, status) belongs to the caller's workspace, so launches on different streams or in
// different CUDA graphs never share a barrier; the barrier returns to its initial arrivals count after every use.
//
// Sampling (T > 0) is a Gumbel-max draw whose noise is a counter-based hash of (keys, node, token) pushed through
// a log built only from correctly rounded + - * / (no FMA contraction: explicit __d*_rn intrinsics), so the torch
// reference computes bit-identical scores and the argmax (ties -> smallest token id) is identical.
// NaN logits count as -inf (both temperatures, as in the torch reference): a row of NaN / -inf only chooses token 0.
#include <stdint.h>
#include "common.cuh"   // MAX_DEPTH, MAX_BUDGET, MAX_PATH, MAX_NODES

#define NT 512          // threads per block = 16 warps
#define NW (NT / 32)
#define CHAIN 16        // rows scored per pass (NW / chain length warps each)
#define MAXG 256        // most blocks: each lane reads MAXG / 32 partials per row in one round
#define MAXN MAX_NODES  // tree nodes with the root
#define CV 36           // uint4 columns per compaction unit (576 bf16 = 72 uint4 -> 2 units per layer)
#define PER ((MAX_PATH * CV + NT - 1) / NT)
#define BIG 0x7fffffff
#define ERR_PAST_CACHE 1   // status bit: a compaction row past the cache (nothing compacted, prefix_len kept)
static_assert(CHAIN <= NW && MAXG % 32 == 0, "a chain row needs a warp; partials are read 32 at a time");

__device__ __forceinline__ uint32_t mix32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16; return x;
}

// log(y) for finite y > 0: y = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1).
__device__ __forceinline__ double plog(double y) {
    int e; double m = frexp(y, &e);
    if (m < 0.7071067811865476) { m = __dmul_rn(m, 2.0); e -= 1; }
    double s = __ddiv_rn(__dadd_rn(m, -1.0), __dadd_rn(m, 1.0));
    double z = __dmul_rn(s, s);
    double p = 0.047619047619047616;
    p = __dadd_rn(__dmul_rn(p, z), 0.05263157894736842);
    p = __dadd_rn(__dmul_rn(p, z), 0.058823529411764705);
    p = __dadd_rn(__dmul_rn(p, z), 0.06666666666666667);
    p = __dadd_rn(__dmul_rn(p, z), 0.07692307692307693);
    p = __dadd_rn(__dmul_rn(p, z), 0.09090909090909091);
    p = __dadd_rn(__dmul_rn(p, z), 0.1111111111111111);
    p = __dadd_rn(__dmul_rn(p, z), 0.14285714285714285);
    p = __dadd_rn(__dmul_rn(p, z), 0.2);
    p = __dadd_rn(__dmul_rn(p, z), 0.3333333333333333);
    p = __dadd_rn(__dmul_rn(p, z), 1.0);
    double lm = __dmul_rn(__dmul_rn(s, 2.0), p);
    return __dadd_rn(__dmul_rn((double)e, 0.6931471805599453), lm);
}

// log E, E = -log u ~ Exp(1), for the noise of (node row, token col): ha, hb = mix32(mix32(t ^ 2 row)), ... ^ (2 row + 1)),
// t = mix32(mix32(col ^ k0) ^ k1); u = (2j + 1) 2^-53 with j = (ha >> 6) << 26 | hb >> 6. The Gumbel noise is -log E.
__device__ __forceinline__ double log_exp(uint32_t ha, uint32_t hb) {
    unsigned long long j = ((unsigned long long)(ha >> 6) << 26) | (unsigned long long)(hb >> 6);
    double u = __dmul_rn((double)(2ull * j + 1ull), 1.1102230246251565e-16);   // (2j+1) 2^-53, exact
    return plog(-plog(u));
}

__device__ __forceinline__ bool better(double v, int i, double bv, int bi) { return v > bv || (v == bv && i < bi); }

__device__ __forceinline__ void warp_best(double &v, int &i) {
    for (int o = 16; o; o >>= 1) {
        double ov = __shfl_xor_sync(0xffffffffu, v, o); int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (better(ov, oi, v, i)) { v = ov; i = oi; }
    }
}

// Sense-free generation barrier; bar[0] = arrivals (returns to 0), bar[1] = generation. All blocks resident.
__device__ void grid_sync(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned *vgen = bar + 1;
        unsigned gen = *vgen;
        __threadfence();
        if (atomicAdd(bar, 1u) == gridDim.x - 1) { atomicExch(bar, 0u); __threadfence(); atomicAdd(bar + 1, 1u); }
        else { while (*vgen == gen) __nanosleep(20); }
        __threadfence();
    }
    __syncthreads();
}

__device__ __forceinline__ float no_nan(float x) { return isnan(x) ? -INFINITY : x; }

// nthr threads (thread t0 of them, a whole number of warps): this thread's best (score, token) of logits row `row`
// over its columns of [c0, c1) (interleaved: t0, t0 + nthr, ...; float4 units when vec). Per-thread, no reduction.
__device__ void score_segment(const float *__restrict__ lrow, int c0, int c1, int t0, int nthr, bool vec, int sample,
                              double inv_t, uint32_t k0, uint32_t k1, uint32_t row, double &bv, int &bi) {
    bv = -INFINITY; bi = BIG;
    if (!sample) {
        if (vec) {
            const float4 *p = reinterpret_cast<const float4 *>(lrow);
            #pragma unroll 4
            for (int c = c0 + 4 * t0; c < c1; c += 4 * nthr) {
                float4 x = __ldg(p + (c >> 2));
                x.x = no_nan(x.x); x.y = no_nan(x.y); x.z = no_nan(x.z); x.w = no_nan(x.w);
                if (better(x.x, c, bv, bi)) { bv = x.x; bi = c; }
                if (better(x.y, c + 1, bv, bi)) { bv = x.y; bi = c + 1; }
                if (better(x.z, c + 2, bv, bi)) { bv = x.z; bi = c + 2; }
                if (better(x.w, c + 3, bv, bi)) { bv = x.w; bi = c + 3; }
            }
        } else {
            for (int c = c0 + t0; c < c1; c += nthr) { double x = no_nan(__ldg(lrow + c)); if (better(x, c, bv, bi)) { bv = x; bi = c; } }
        }
        return;
    }
    // T > 0, lazily: with running best bv, a token of scaled logit a can only win if its noise g = -log E > bv - a,
    // i.e. E < exp(-(bv - a)). E = -log u >= 1 - u >= wl, a lower bound from the first hash word alone, so tokens with
    // wl > 1.02 * exp(-(bv - a)) (fp32, the 2% covers every rounding) are skipped exactly; only the few others pay
    // for the second hash word and the two fp64 logs. Skipped tokens score strictly below bv: the result is unchanged.
    for (int c = c0 + t0; c < c1; c += nthr) {
        const double a = __dmul_rn((double)no_nan(__ldg(lrow + c)), inv_t);
        const uint32_t t = mix32(mix32((uint32_t)c ^ k0) ^ k1);
        const uint32_t ha = mix32(mix32(t ^ (2u * row)));
        if (bv > -INFINITY) {
            const float wl = (float)((1u << 26) - (ha >> 6) - 1u) * 1.4901161193847656e-08f;   // 2^-26
            const float ef = __expf(-(float)(bv - a));
            if (wl > 1.02f * ef) continue;
        }
        const uint32_t hb = mix32(mix32(t ^ (2u * row + 1u)));
        const double v = __dadd_rn(a, -log_exp(ha, hb));
        if (better(v, c, bv, bi)) { bv = v; bi = c; }
    }
}

extern "C" __global__ void __launch_bounds__(NT, 2) tree_accept(
    const float *__restrict__ logits, int rows, int V, long long ld,     // target logits [rows, V], row stride ld
    const int *__restrict__ n_nodes, const int *__restrict__ parents, const int *__restrict__ tokens, int max_nodes,
    double inv_t, int sample, const long long *__restrict__ keys,       // sample=0: argmax; 1: Gumbel with keys[2]
    int *__restrict__ path_out, int *__restrict__ acc_len, int *__restrict__ bonus,
    double *__restrict__ part_val, int *__restrict__ part_idx, unsigned *__restrict__ bar,  // workspace: partials
    int *__restrict__ status,                                           // [2]: this launch's error bits, all launches' (OR)
    uint4 *kv, int n_layers, long long slots, int row_vec, int *prefix_len,                 // cache [L, slots, row_vec]
    const uint4 *__restrict__ hidden, int feat_vec, uint4 *__restrict__ feats_out)          // features [*, feat_vec]
{
    __shared__ int s_par[MAXN], s_tok[MAXN], s_fc[MAXN];
    __shared__ int s_chain[CHAIN], s_choice[CHAIN], s_nxt[CHAIN], s_path[MAX_PATH];
    __shared__ double s_wv[NW];
    __shared__ int s_wi[NW];
    __shared__ int s_clen, s_plen, s_cur, s_done, s_bonus;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, G = gridDim.x, b = blockIdx.x;

    // The whole tree buffers (max_nodes <= MAXN entries) load in the same round as n_nodes: no dependent round trip.
    const int nbuf = min(max_nodes, MAXN);
    for (int j = tid; j < nbuf; j += NT) { s_par[j] = __ldg(parents + j); s_tok[j] = __ldg(tokens + j); s_fc[j] = BIG; }
    int n = *n_nodes;
    n = min(n, min(rows - 1, nbuf - 1)); n = max(n, 0);
    const int P = prefix_len ? *prefix_len : 0;
    if (tid == 0) { s_plen = 0; s_cur = 0; s_done = 0; s_bonus = 0; }
    __syncthreads();
    for (int j = 1 + tid; j <= n; j += NT) { int p = s_par[j]; if (p >= 0 && p < j) atomicMin(&s_fc[p], j); }

    const uint32_t k0 = sample ? (uint32_t)keys[0] : 0u, k1 = sample ? (uint32_t)keys[1] : 0u;
    const bool vec = (V % 4 == 0) && (ld % 4 == 0) && ((reinterpret_cast<uintptr_t>(logits) & 15) == 0);
    int seg = (V + G - 1) / G; seg = (seg + 3) & ~3;
    const int c0 = min(V, b * seg), c1 = min(V, c0 + seg);

    for (int pass = 0; ; ++pass) {
        __syncthreads();
        if (tid == 0) {                                    // the speculative chain: cur, its first child, ...
            int x = s_cur, k = 0;
            s_chain[k++] = x;
            while (k < CHAIN && s_fc[x] != BIG) { x = s_fc[x]; s_chain[k++] = x; }
            s_clen = k;
        }
        if (tid < CHAIN) s_nxt[tid] = -1;
        __syncthreads();
        const int clen = s_clen, buf = (pass & 1) * CHAIN, wpr = NW / clen, r0 = warp / wpr;
        if (r0 < clen) {                                   // wpr warps per chain row, the block's segment interleaved
            double bv; int bi;
            const int row = s_chain[r0];
            score_segment(logits + (long long)row * ld, c0, c1, (warp % wpr) * 32 + lane, wpr * 32, vec, sample, inv_t,
                          k0, k1, (uint32_t)row, bv, bi);
            warp_best(bv, bi);
            if (lane == 0) { s_wv[warp] = bv; s_wi[warp] = bi; }
        }
        __syncthreads();
        if (tid < clen) {                                  // the block's partial of row tid
            double bv = -INFINITY; int bi = BIG;
            for (int w = tid * wpr; w < (tid + 1) * wpr; ++w) if (better(s_wv[w], s_wi[w], bv, bi)) { bv = s_wv[w]; bi = s_wi[w]; }
            part_val[(buf + tid) * G + b] = bv; part_idx[(buf + tid) * G + b] = bi;
        }
        grid_sync(bar);
        if (warp < clen) {                                 // every block reduces every chain row's partials, one round of loads
            double v[MAXG / 32]; int ix[MAXG / 32];
            #pragma unroll
            for (int k = 0; k < MAXG / 32; ++k) {
                const int g = lane + 32 * k;
                v[k] = -INFINITY; ix[k] = BIG;
                if (g < G) { v[k] = __ldcg(part_val + (buf + warp) * G + g); ix[k] = __ldcg(part_idx + (buf + warp) * G + g); }
            }
            double bv = v[0]; int bi = ix[0];
            #pragma unroll
            for (int k = 1; k < MAXG / 32; ++k) if (better(v[k], ix[k], bv, bi)) { bv = v[k]; bi = ix[k]; }
            warp_best(bv, bi);
            if (lane == 0) s_choice[warp] = bi;
        }
        __syncthreads();
        for (int j = 1 + tid; j <= n; j += NT) {           // which child of each chain node holds its choice
            const int p = s_par[j], t = s_tok[j];
            for (int r = 0; r < clen; ++r) if (s_chain[r] == p && s_choice[r] == t) s_nxt[r] = j;
        }
        __syncthreads();
        if (tid == 0) {
            int r = 0;
            while (true) {
                s_path[s_plen++] = s_chain[r];
                const int c = s_choice[r], j = s_nxt[r];
                if (j < 0 || s_plen == MAX_PATH) { s_done = 1; s_bonus = c; break; }
                if (r + 1 < clen && j == s_chain[r + 1]) { ++r; continue; }
                s_cur = j; break;                           // left the chain: score a new one from j
            }
        }
        __syncthreads();
        if (s_done) break;
    }
    const int A = s_plen;
    // Rows past the cache (or a negative prefix): nothing is compacted or gathered and prefix_len stays; the status
    // word says so (the launcher raises on it when it may sync). Every block reads the same P and path: same verdict.
    const bool past = prefix_len && (P < 0 || (long long)P + s_path[A - 1] >= slots);
    if (b == 0) {
        for (int i = tid; i < MAX_PATH; i += NT) path_out[i] = i < A ? s_path[i] : -1;
        if (tid == 0) {
            *acc_len = A; *bonus = s_bonus;
            if (prefix_len && !past) *prefix_len = P + A;
            status[0] = past ? ERR_PAST_CACHE : 0;
            if (past) atomicOr(status + 1, ERR_PAST_CACHE);
        }
    }
    if (past) return;
    // Compaction: kv[l, P+i] = kv[l, P+path[i]]. A unit is (layer, CV-column chunk); it loads all its source rows
    // into registers, then (after a barrier) stores them: in-place moves can't read a row already overwritten.
    int first = 0;
    while (first < A && s_path[first] == first) ++first;   // identity prefix: nothing to move
    const int nchunk = (row_vec + CV - 1) / CV, units = n_layers * nchunk;
    for (int u = b; u < units; u += G) {
        const int l = u / nchunk, c0u = (u % nchunk) * CV, cw = min(CV, row_vec - c0u);
        uint4 *base = kv + (long long)l * slots * row_vec + c0u;
        const int tot = (A - first) * cw;
        uint4 reg[PER];
        #pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int e = tid + k * NT;
            if (e < tot) {
                const int i = first + e / cw, c = e % cw;
                reg[k] = base[(long long)(P + s_path[i]) * row_vec + c];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int e = tid + k * NT;
            if (e < tot) {
                const int i = first + e / cw, c = e % cw;
                base[(long long)(P + i) * row_vec + c] = reg[k];
            }
        }
        __syncthreads();
    }
    // Hidden features of the accepted nodes, in path order.
    if (feat_vec > 0) {
        const long long tot = (long long)A * feat_vec;
        for (long long e = (long long)b * NT + tid; e < tot; e += (long long)G * NT) {
            const int i = (int)(e / feat_vec), c = (int)(e % feat_vec);
            feats_out[e] = hidden[(long long)s_path[i] * feat_vec + c];
        }
    }
}
