// tree_accept_v1.cu (the previous kernels/tree_accept.cu, kept for benchmarks/bench_accept.py): DDTree's acceptance walk over a draft tree plus latent-cache compaction, in ONE launch.
// See nbs/04_accept.ipynb for the algorithm, the sampling rule and the torch references it is checked against.
//
// Grid: exactly one block per SM (gridDim.x <= number of co-resident blocks), NT threads. The blocks meet at a
// software grid barrier once per "pass"; a pass scores the speculative first-child chain starting at the walk's
// current node (up to CHAIN rows, one warp per row, each block a column segment), every block then reduces the
// partials and replays the same walk redundantly, so all blocks agree on the path with no extra barrier.
// After the last pass every block knows the path and does its share of the compaction.
//
// Sampling (T > 0) is a Gumbel-max draw whose noise is a counter-based hash of (keys, node, token) pushed through
// a log built only from correctly rounded + - * / (no FMA contraction: explicit __d*_rn intrinsics), so the torch
// reference computes bit-identical scores and the argmax (ties -> smallest token id) is identical.
#include <stdint.h>

#define NT 512          // threads per block = 16 warps
#define CHAIN 16        // rows scored per pass (one warp each)
#define MAX_PATH 33     // MAX_DEPTH + 1
#define MAXN 1025       // MAX_BUDGET + 1 nodes
#define CV 36           // uint4 columns per compaction unit (576 bf16 = 72 uint4 -> 2 units per layer)
#define PER ((MAX_PATH * CV + NT - 1) / NT)
#define BIG 0x7fffffff

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

// One warp: best (score, token) of logits row `row` over columns [c0, c1).
__device__ void score_segment(const float *__restrict__ lrow, int c0, int c1, bool vec, int sample, double inv_t,
                              uint32_t k0, uint32_t k1, uint32_t row, double &bv, int &bi) {
    const int lane = threadIdx.x & 31;
    bv = -INFINITY; bi = BIG;
    if (c0 >= c1) return;
    if (!sample) {
        if (vec) {
            const float4 *p = reinterpret_cast<const float4 *>(lrow);
            #pragma unroll 10
            for (int c = c0 + 4 * lane; c < c1; c += 128) {
                float4 x = __ldg(p + (c >> 2));
                if (better(x.x, c, bv, bi)) { bv = x.x; bi = c; }
                if (better(x.y, c + 1, bv, bi)) { bv = x.y; bi = c + 1; }
                if (better(x.z, c + 2, bv, bi)) { bv = x.z; bi = c + 2; }
                if (better(x.w, c + 3, bv, bi)) { bv = x.w; bi = c + 3; }
            }
        } else {
            for (int c = c0 + lane; c < c1; c += 32) { double x = __ldg(lrow + c); if (better(x, c, bv, bi)) { bv = x; bi = c; } }
        }
        return;
    }
    // T > 0, lazily: with running best bv, a token of scaled logit a can only win if its noise g = -log E > bv - a,
    // i.e. E < exp(-(bv - a)). E = -log u >= 1 - u >= wl, a lower bound from the first hash word alone, so tokens with
    // wl > 1.02 * exp(-(bv - a)) (fp32, the 2% covers every rounding) are skipped exactly; only the few others pay
    // for the second hash word and the two fp64 logs. Skipped tokens score strictly below bv: the result is unchanged.
    for (int c = c0 + lane; c < c1; c += 32) {
        const double a = __dmul_rn((double)__ldg(lrow + c), inv_t);
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

extern "C" __global__ void __launch_bounds__(NT, 1) tree_accept(
    const float *__restrict__ logits, int rows, int V, long long ld,     // target logits [rows, V], row stride ld
    const int *__restrict__ n_nodes, const int *__restrict__ parents, const int *__restrict__ tokens, int max_nodes,
    double inv_t, int sample, const long long *__restrict__ keys,       // sample=0: argmax; 1: Gumbel with keys[2]
    int *__restrict__ path_out, int *__restrict__ acc_len, int *__restrict__ bonus,
    double *__restrict__ part_val, int *__restrict__ part_idx, unsigned *__restrict__ bar,  // workspace
    uint4 *kv, int n_layers, long long slots, int row_vec, int *prefix_len,                 // cache [L, slots, row_vec]
    const uint4 *__restrict__ hidden, int feat_vec, uint4 *__restrict__ feats_out)          // features [*, feat_vec]
{
    __shared__ int s_par[MAXN], s_tok[MAXN], s_fc[MAXN];
    __shared__ int s_chain[CHAIN], s_choice[CHAIN], s_nxt[CHAIN], s_path[MAX_PATH];
    __shared__ int s_clen, s_plen, s_cur, s_done, s_bonus;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, G = gridDim.x, b = blockIdx.x;

    int n = *n_nodes;
    n = min(n, min(rows - 1, max_nodes - 1)); n = max(n, 0); n = min(n, MAXN - 1);
    const int P = prefix_len ? *prefix_len : 0;
    for (int j = tid; j <= n; j += NT) { s_par[j] = parents[j]; s_tok[j] = tokens[j]; s_fc[j] = BIG; }
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
        const int clen = s_clen, buf = (pass & 1) * CHAIN;
        if (warp < clen) {
            double bv; int bi;
            const int row = s_chain[warp];
            score_segment(logits + (long long)row * ld, c0, c1, vec, sample, inv_t, k0, k1, (uint32_t)row, bv, bi);
            warp_best(bv, bi);
            if (lane == 0) { part_val[(buf + warp) * G + b] = bv; part_idx[(buf + warp) * G + b] = bi; }
        }
        grid_sync(bar);
        if (warp < clen) {                                 // every block reduces every chain row's partials
            double bv = -INFINITY; int bi = BIG;
            for (int g = lane; g < G; g += 32) {
                double v = __ldcg(part_val + (buf + warp) * G + g); int i = __ldcg(part_idx + (buf + warp) * G + g);
                if (better(v, i, bv, bi)) { bv = v; bi = i; }
            }
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
    if (b == 0) {
        for (int i = tid; i < MAX_PATH; i += NT) path_out[i] = i < A ? s_path[i] : -1;
        if (tid == 0) { *acc_len = A; *bonus = s_bonus; if (prefix_len) *prefix_len = P + A; }
    }
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
                const long long src = P + s_path[i];
                if (src < slots) reg[k] = base[src * row_vec + c];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < PER; ++k) {
            const int e = tid + k * NT;
            if (e < tot) {
                const int i = first + e / cw, c = e % cw;
                if (P + s_path[i] < slots) base[(long long)(P + i) * row_vec + c] = reg[k];
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
