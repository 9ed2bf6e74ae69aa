// tree_build.cu: DDTree draft tree on the GPU, no host sync (nbs/02_tree_builder.ipynb).
//
// Phase 1, per depth row: exact top-k log q and tokens. v2 (the default), three launches:
//   tb_hist    grid (C, L), 256 thr: row max / sum-exp partials + a 4096-bin histogram of the top 12 bits of an
//              order-preserving key of every finite logit. The last block of a row (atomic ticket) finds the bin
//              b* holding the k-th best, the row's max and log sum-exp, and cleans the histogram for the next call.
//   tb_collect grid (C, L), 256 thr: appends the logits in bins > b* (fewer than k) and, if it fits, in bin b*.
//   tb_rowsort grid L, 1024 thr: exact top-k (value desc, token asc) of the candidates by a bitonic sort; if bin b*
//              was too full (massive ties) an exact radix refinement over the whole row. Writes log q (fp64)
//              and token of ranks 0..k_d-1.
// v4 (sm_90+, the default there): tb_rows_*, one launch, a cluster of 8 blocks per row (1 for V <= 32768): the
//   candidates above a bound from the thread maxima, ranked by counting; v3 = its histogram fallback forced.
// Phase 2, one block (tb_tree), launched as a programmatic dependent of phase 1 on sm_90+ (it waits for all of phase 1):
//   v1 (force_heap=1, also the fallback): the literal best-first heap on one thread.
//   threshold: a lower bound tau on the B-th best score from a histogram of the "comb" (main chain + one deviation), a
//       level-synchronous BFS materialising every prefix with score >= tau, a histogram that keeps the prefixes at
//       or above the B-th best's bin, their ranks (score desc, rank tuple lexicographic) by a bucket counting sort,
//       then indices, parents, depths, child links and the bitmask. (The radix-select + bitonic-sort version is in
//       kernels/dev/tree_build_v2.cu.)
// Scores are float64 sums in the reference's order (parent + own log q), so exact ties stay exact.
#include <cuda_bf16.h>
#include <stdint.h>
#include "common.cuh"   // MAX_DEPTH, MAX_BUDGET
#include "pdl.cuh"      // tb_tree as a programmatic dependent of phase 1 (sm_90+)
static_assert(MAX_DEPTH <= 32, "tb_tree gives each depth one lane of a warp");

#define NBINS 4096          // top 12 bits of the key
#define CHUNK 4096          // logits per phase-1 block (256 threads x 16)
#define MAX_VOCAB 262144    // longest row of draft logits
#define MAXC (MAX_VOCAB / CHUNK)   // phase-1 blocks per row: the row stride of stat
#define KMAX MAX_BUDGET     // max k = max budget
#define CAPB 3072           // room for the threshold bin's logits
#define CAND (KMAX + CAPB)  // candidates per row
#define UCAP 8192           // prefixes the BFS may materialise
#define SORTCAP 2048        // prefixes the final ranking takes
#define FULL 0xffffffffu

// ---------------------------------------------------------------- helpers
__device__ __forceinline__ float ld(const float *p, int i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, int i) { return __bfloat162float(p[i]); }

// order-preserving key: larger float -> larger key; -0 is folded to +0 so equal values tie
__device__ __forceinline__ uint32_t fkey(float x) {
    if (x == 0.f) x = 0.f;
    uint32_t u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float keyf(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ unsigned long long dkey(double x) {
    unsigned long long u = (unsigned long long)__double_as_longlong(x);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}
__device__ __forceinline__ double keyd(unsigned long long k) {
    return __longlong_as_double((long long)((k >> 63) ? (k & 0x7fffffffffffffffull) : ~k));
}

// Merge a (max, sum of exp(x - max)) partial into (M, S). S in float64: with one dominant logit the others' exp terms
// (~1e-11 each) vanish when added one by one to a float 1.0, yet they add up to ~4e-6 of log S over 262144 logits.
__device__ __forceinline__ void lse_merge(float &M, double &S, float m2, double s2) {
    float mm = fmaxf(M, m2);
    S = (mm == -INFINITY) ? 0.0 : S * (double)__expf(M - mm) + s2 * (double)__expf(m2 - mm);
    M = mm;
}

// The block's (max, Σexp) from each thread's (m, s), merged in float64; the result is valid in thread 0.
// NW = blockDim.x / 32 warps; wm, wsum: NW entries of shared memory. Contains __syncthreads: call from all threads.
template <int NW> __device__ __forceinline__ void block_lse(float &m, double &s, float *wm, double *wsum) {
    for (int o = 16; o; o >>= 1) lse_merge(m, s, __shfl_xor_sync(FULL, m, o), __shfl_xor_sync(FULL, s, o));
    if ((threadIdx.x & 31) == 0) { wm[threadIdx.x >> 5] = m; wsum[threadIdx.x >> 5] = s; }
    __syncthreads();
    if (threadIdx.x == 0) for (int w = 1; w < NW; ++w) lse_merge(m, s, wm[w], wsum[w]);
}

// inclusive block scan (blockDim.x a multiple of 32); ws: >= 33 ints of shared memory. Returns the inclusive
// prefix, *total the block sum. Contains __syncthreads: call from all threads.
__device__ int block_scan(int v, int *ws, int *total) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(FULL, v, o); if (lane >= o) v += t; }
    if (lane == 31) ws[w] = v;
    __syncthreads();
    if (w == 0) {
        int s = lane < nw ? ws[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(FULL, s, o); if (lane >= o) s += t; }
        ws[lane] = s;
    }
    __syncthreads();
    int r = v + (w ? ws[w - 1] : 0);
    *total = ws[nw - 1];
    __syncthreads();
    return r;
}

// Highest bin b of hist[0..PER * blockDim.x) with (count of bins > b) < need <= (count of bins >= b). hist in shared or
// global memory (read with plain loads; caller made it visible). out[0] = b, out[1] = count above b.
// need >= 1 and <= sum(hist). PER, the bins a thread sums, is a constant (as in cluster_find): with the bin count a runtime
// argument, each thread divided by blockDim.x and ran a loop of unknown length (ncu, tb_tree at B = 64: ~4.7 k of its 53 k
// warp instructions with the block scan it calls, tree_build.md "Session 28").
template <int PER> __device__ void find_desc(const int *hist, int need, int *ws, int *out) {
    const int hi = (blockDim.x - threadIdx.x) * PER;   // this thread: bins [hi-PER, hi), descending
    int s = 0;
#pragma unroll
    for (int b = 1; b <= PER; ++b) s += hist[hi - b];
    int tot, incl = block_scan(s, ws, &tot);
    int excl = incl - s;
    if (excl < need && need <= incl) {
        int c = excl;
        for (int b = hi - 1; b >= hi - PER; --b) {
            if (c + hist[b] >= need) { out[0] = b; out[1] = c; break; }
            c += hist[b];
        }
    }
    __syncthreads();
}

// The 2048-bin histograms of tb_tree's scores: v's bin over [lo, lo + span] is hist_bin(v, lo, hist_scale(span)). A bin
// only grows with v, so the bins at or above a bin hold exactly the scores at or above its smallest member. A span below
// ~1e-305 would make the scale inf (and inf * 0 a NaN): it is one bin then; a v below lo goes to bin 0.
__device__ __forceinline__ double hist_scale(double span) { const double s = span > 0 ? 2047.0 / span : 0.0; return s < INFINITY ? s : 0.0; }
__device__ __forceinline__ int hist_bin(double v, double lo, double scale) { return min(2047, max(0, (int)((v - lo) * scale))); }

// ---------------------------------------------------------------- phase 1a: stats + histogram
// rowinfo[row*8 + .]: 0 b*, 1 count above b*, 2 count in b*, 3 k_d, 4 cntA, 5 cntB; rowlse[2*row] max, [2*row+1] log sum-exp.
template <typename T>
__device__ void hist_body(const T *__restrict__ logits, int V, int k, int *hist, double2 *stat, int *row_done,
                          int *rowinfo, double *rowlse) {
    __shared__ int sh[NBINS];
    __shared__ float sm[8];
    __shared__ double ss[8];
    __shared__ int ws[33], last, fout[2], stot;
    int row = blockIdx.y, c = blockIdx.x, C = gridDim.x, tid = threadIdx.x;
    const T *x = logits + (size_t)row * V;
    for (int b = tid; b < NBINS; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    float v[16];
    int beg = c * CHUNK;
#pragma unroll
    for (int it = 0; it < 16; ++it) { int i = beg + it * 256 + tid; v[it] = i < V ? ld(x, i) : -INFINITY; }
    float m = -INFINITY;
#pragma unroll
    for (int it = 0; it < 16; ++it) m = fmaxf(m, v[it]);
    float sf = 0.f;
#pragma unroll
    for (int it = 0; it < 16; ++it) {
        if (v[it] != -INFINITY) { sf += __expf(v[it] - m); atomicAdd(&sh[fkey(v[it]) >> 20], 1); }
    }
    double s = sf;
    block_lse<8>(m, s, sm, ss);
    if (tid == 0) stat[row * MAXC + c] = make_double2((double)m, s);
    for (int b = tid; b < NBINS; b += blockDim.x)
        if (sh[b]) atomicAdd(&hist[row * NBINS + b], sh[b]);
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(&row_done[row], 1) == C - 1;
    __syncthreads();
    if (!last) return;
    // ---- last block of this row: threshold bin, logsumexp, clean up
    __threadfence();
    int *h = hist + row * NBINS;
    int tot = 0;
    for (int b = tid; b < NBINS; b += blockDim.x) { sh[b] = __ldcg(&h[b]); tot += sh[b]; h[b] = 0; }
    for (int o = 16; o; o >>= 1) tot += __shfl_xor_sync(FULL, tot, o);
    if (tid == 0) stot = 0;
    __syncthreads();
    if ((tid & 31) == 0) atomicAdd(&stot, tot);
    __syncthreads();
    int kd = min(k, stot);
    if (kd > 0) find_desc<NBINS / 256>(sh, kd, ws, fout);   // 256 threads (tb_hist_*)
    if (tid < 32) {   // logsumexp from the C partials, one warp
        float M = -INFINITY; double S = 0.0;
        for (int j = tid; j < C; j += 32) M = fmaxf(M, (float)__ldcg(&stat[row * MAXC + j]).x);
        for (int o = 16; o; o >>= 1) M = fmaxf(M, __shfl_xor_sync(FULL, M, o));
        for (int j = tid; j < C; j += 32) { double2 p = __ldcg(&stat[row * MAXC + j]); if (p.x != -INFINITY) S += p.y * (double)__expf((float)p.x - M); }
        for (int o = 16; o; o >>= 1) S += __shfl_xor_sync(FULL, S, o);
        if (tid == 0) {
            int *ri = rowinfo + row * 8;
            ri[0] = kd > 0 ? fout[0] : -1; ri[1] = kd > 0 ? fout[1] : 0; ri[2] = kd > 0 ? sh[fout[0]] : 0;
            ri[3] = kd; ri[4] = 0; ri[5] = 0;
            // the max and log(sum) stay apart: M + log S rounds log S away once |M| >> 1 (logits ~1e30: log 2 lost)
            rowlse[2 * row] = (double)M; rowlse[2 * row + 1] = log((double)S);
            row_done[row] = 0;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) tb_hist_bf16(const __nv_bfloat16 *logits, int V, int k, int *hist,
        double2 *stat, int *row_done, int *rowinfo, double *rowlse) {
    hist_body(logits, V, k, hist, stat, row_done, rowinfo, rowlse);
}
extern "C" __global__ void __launch_bounds__(256) tb_hist_f32(const float *logits, int V, int k, int *hist,
        double2 *stat, int *row_done, int *rowinfo, double *rowlse) {
    hist_body(logits, V, k, hist, stat, row_done, rowinfo, rowlse);
}

// ---------------------------------------------------------------- phase 1b: collect candidates
// cand[row*CAND + j] = (key << 32) | ~token: sorting these descending gives value desc, token asc.
template <typename T>
__device__ void collect_body(const T *__restrict__ logits, int V, int *rowinfo, unsigned long long *cand) {
    __shared__ unsigned long long sa[CHUNK];
    __shared__ int na, nb, ba, bb;
    int row = blockIdx.y, c = blockIdx.x, tid = threadIdx.x;
    int *ri = rowinfo + row * 8;
    int bstar = ri[0], inb = ri[2];
    if (bstar < 0) return;
    bool takeb = inb <= CAPB;
    if (tid == 0) { na = 0; nb = 0; }
    __syncthreads();
    const T *x = logits + (size_t)row * V;
    int beg = c * CHUNK;
    // pass: count, stage A items from the front of sa and B items from the back
#pragma unroll 4
    for (int it = 0; it < 16; ++it) {
        int i = beg + it * 256 + tid;
        if (i >= V) break;
        float v = ld(x, i);
        if (v == -INFINITY) continue;
        uint32_t key = fkey(v);
        int bin = key >> 20;
        unsigned long long e = ((unsigned long long)key << 32) | (uint32_t)~(uint32_t)i;
        if (bin > bstar) sa[atomicAdd(&na, 1)] = e;
        else if (bin == bstar && takeb) sa[CHUNK - 1 - atomicAdd(&nb, 1)] = e;
    }
    __syncthreads();
    if (tid == 0) { ba = na ? atomicAdd(&ri[4], na) : 0; bb = nb ? atomicAdd(&ri[5], nb) : 0; }
    __syncthreads();
    unsigned long long *ca = cand + (size_t)row * CAND, *cb = ca + KMAX;
    for (int j = tid; j < na; j += blockDim.x) ca[ba + j] = sa[j];
    for (int j = tid; j < nb; j += blockDim.x) cb[bb + j] = sa[CHUNK - 1 - j];
}
extern "C" __global__ void __launch_bounds__(256) tb_collect_bf16(const __nv_bfloat16 *logits, int V, int *rowinfo,
        unsigned long long *cand) { collect_body(logits, V, rowinfo, cand); }
extern "C" __global__ void __launch_bounds__(256) tb_collect_f32(const float *logits, int V, int *rowinfo,
        unsigned long long *cand) { collect_body(logits, V, rowinfo, cand); }

// ---------------------------------------------------------------- phase 1c: exact sorted top-k per row
__device__ void bitonic_desc_u64(unsigned long long *a, int P) {
    for (int k = 2; k <= P; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < P; i += blockDim.x) {
                int l = i ^ j;
                if (l > i) {
                    unsigned long long x = a[i], y = a[l];
                    if (((i & k) == 0) ? (y > x) : (x > y)) { a[i] = y; a[l] = x; }
                }
            }
            __syncthreads();
        }
}

template <typename T>
__device__ void rowsort_body(const T *__restrict__ logits, int V, const int *rowinfo, const double *rowlse,
                             const unsigned long long *cand, double *lq, int *ltok, int *kdo) {
    __shared__ unsigned long long s[4096];
    __shared__ int h[1024], ws[33], fout[2], cnt, taken;
    int row = blockIdx.x, tid = threadIdx.x;
    const int *ri = rowinfo + row * 8;
    int bstar = ri[0], above = ri[1], inb = ri[2], kd = ri[3];
    if (tid == 0) kdo[row] = kd;
    if (kd == 0) return;
    const unsigned long long *ca = cand + (size_t)row * CAND, *cb = ca + KMAX;
    int M;
    if (inb <= CAPB) {   // fast path: every candidate is in cand
        M = above + inb;
        for (int j = tid; j < above; j += blockDim.x) s[j] = __ldcg(&ca[j]);
        for (int j = tid; j < inb; j += blockDim.x) s[above + j] = __ldcg(&cb[j]);
    } else {             // slow path: the threshold bin is crowded; refine the key over the whole row
        const T *x = logits + (size_t)row * V;
        int need = kd - above;            // logits to take from bin b*
        uint32_t pre = (uint32_t)bstar;   // key bits fixed so far
        int shift = 20;
        for (int pass = 0; pass < 2; ++pass) {   // bits [19:10], then [9:0]
            for (int b = tid; b < 1024; b += blockDim.x) h[b] = 0;
            __syncthreads();
            for (int i = tid; i < V; i += blockDim.x) {
                float v = ld(x, i);
                if (v == -INFINITY) continue;
                uint32_t key = fkey(v);
                if ((key >> shift) == pre) atomicAdd(&h[(key >> (shift - 10)) & 1023], 1);
            }
            __syncthreads();
            find_desc<1>(h, need, ws, fout);   // 1024 bins, 1024 threads (tb_rowsort_*)
            need -= fout[1];
            pre = (pre << 10) | (uint32_t)fout[0];
            shift -= 10;
        }
        uint32_t kstar = pre;             // exact key of the k-th best; take `need` of its copies, smallest ids
        if (tid == 0) { cnt = 0; taken = 0; }
        __syncthreads();
        for (int i = tid; i < V; i += blockDim.x) {
            float v = ld(x, i);
            if (v == -INFINITY) continue;
            uint32_t key = fkey(v);
            if (key > kstar) s[atomicAdd(&cnt, 1)] = ((unsigned long long)key << 32) | (uint32_t)~(uint32_t)i;
        }
        __syncthreads();
        int base = cnt;
        for (int t0 = 0; t0 < V; t0 += blockDim.x) {   // ordered compaction of the ties
            int i = t0 + tid;
            int f = 0;
            if (i < V) { float v = ld(x, i); f = v != -INFINITY && fkey(v) == kstar; }
            int tot, incl = block_scan(f, ws, &tot);
            int pos = taken + incl - 1;
            if (f && pos < need) s[base + pos] = ((unsigned long long)kstar << 32) | (uint32_t)~(uint32_t)i;
            __syncthreads();
            if (tid == 0) taken += tot;
            __syncthreads();
            if (taken >= need) break;
        }
        M = kd;
    }
    int P = 1;
    while (P < M) P <<= 1;
    for (int j = M + tid; j < P; j += blockDim.x) s[j] = 0ull;
    __syncthreads();
    bitonic_desc_u64(s, P);
    double mx = rowlse[2 * row], lsum = rowlse[2 * row + 1];
    for (int r = tid; r < kd; r += blockDim.x) {
        unsigned long long e = s[r];
        lq[row * KMAX + r] = ((double)keyf((uint32_t)(e >> 32)) - mx) - lsum;   // log_softmax's order: (x - max) - log sum
        ltok[row * KMAX + r] = (int)~(uint32_t)e;
    }
}
extern "C" __global__ void __launch_bounds__(1024) tb_rowsort_bf16(const __nv_bfloat16 *logits, int V,
        const int *rowinfo, const double *rowlse, const unsigned long long *cand, double *lq, int *ltok, int *kd) {
    rowsort_body(logits, V, rowinfo, rowlse, cand, lq, ltok, kd);
}
extern "C" __global__ void __launch_bounds__(1024) tb_rowsort_f32(const float *logits, int V,
        const int *rowinfo, const double *rowlse, const unsigned long long *cand, double *lq, int *ltok, int *kd) {
    rowsort_body(logits, V, rowinfo, rowlse, cand, lq, ltok, kd);
}

// ---------------------------------------------------------------- phase 1, v4 (default on sm_90+): one launch
// A cluster of CLN blocks per row (8 for long rows, 1 for V <= 32768). Each thread holds E contiguous logits of its row
// in registers (the row is read once; tokens lie in (block, thread, element) order) and keeps their max.
// Fast path (no histogram): sorting the block's thread maxima gives t_b, its kb-th largest (kb = ceil(k / CLN)), so
// the block holds >= kb logits >= t_b; over the cluster, t = min t_b has >= k logits at or above it, and for spread-out
// rows only ~1-2 k of them. Those candidates (at most CAND4) go to every block, each ranks its share by counting.
// Fallback (more candidates than CAND4, or force_hist: what v3 did): three histogram levels (key bits 31..20, 19..10,
// 9..0) summed over the cluster through distributed shared memory give the exact key K of the k-th best and how many
// of its ties to take (smallest token first); the k candidates are ranked the same way.
// A thread's E contiguous logits of its row, held in registers as loaded: bf16 stays packed two to a register (E = 32
// floats would not fit the 64 registers a 1024-thread block leaves), read back as float by v[e]. (v4 and tb_small.)
template <typename T, int E> struct Vals;
template <int E> struct Vals<float, E> {
    float x[E];
    __device__ __forceinline__ float operator[](int e) const { return x[e]; }
    __device__ __forceinline__ void load(const float *p, int i0, int V, bool vec) {
        if (vec && E % 4 == 0 && i0 + E <= V) {
#pragma unroll
            for (int q = 0; q < E / 4; ++q) {
                float4 u = __ldg(reinterpret_cast<const float4 *>(p + i0) + q);
                x[q * 4] = u.x; x[q * 4 + 1] = u.y; x[q * 4 + 2] = u.z; x[q * 4 + 3] = u.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < E; ++e) x[e] = i0 + e < V ? p[i0 + e] : -INFINITY;
        }
    }
};
template <int E> struct Vals<__nv_bfloat16, E> {
    uint32_t w[E / 2];   // element 2j in the low half of w[j] (little-endian pairs), as a 16-byte load leaves them
    __device__ __forceinline__ float operator[](int e) const {
        uint32_t u = w[e >> 1];
        return __uint_as_float((e & 1) ? (u & 0xffff0000u) : (u << 16));
    }
    __device__ __forceinline__ void load(const __nv_bfloat16 *p, int i0, int V, bool vec) {
        if (vec && E % 8 == 0 && i0 + E <= V) {
#pragma unroll
            for (int q = 0; q < E / 8; ++q) {
                uint4 u = __ldg(reinterpret_cast<const uint4 *>(p + i0) + q);
                w[q * 4] = u.x; w[q * 4 + 1] = u.y; w[q * 4 + 2] = u.z; w[q * 4 + 3] = u.w;
            }
        } else {
            const unsigned short *h = reinterpret_cast<const unsigned short *>(p);
#pragma unroll
            for (int j = 0; j < E / 2; ++j) {
                uint32_t lo = i0 + 2 * j < V ? h[i0 + 2 * j] : 0xff80u, hi = i0 + 2 * j + 1 < V ? h[i0 + 2 * j + 1] : 0xff80u;
                w[j] = lo | (hi << 16);   // 0xff80 = bf16 -inf: past the row
            }
        }
    }
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define RT 1024   // threads per block

template <int CLN> __device__ __forceinline__ int cluster_bin(cg::cluster_group &cl, int *h, int b) {
    int t = 0;
#pragma unroll
    for (int r = 0; r < CLN; ++r) t += cl.map_shared_rank(h, r)[b];
    return t;
}

// Descending search over `nb` cluster-summed bins of h, thread t owning the nb/RT bins just below nb - t*nb/RT: the
// bin b where (count above b) < min(need, total) <= (count >= b). Returns the total of all bins; out[0] = b, out[1] = above.
template <int PER, int CLN> __device__ int cluster_find(cg::cluster_group &cl, int *h, int need, int *ws, int *out) {
    int hi = PER * RT - threadIdx.x * PER, c[PER], s = 0;
#pragma unroll
    for (int q = 0; q < PER; ++q) { c[q] = cluster_bin<CLN>(cl, h, hi - 1 - q); s += c[q]; }
    int tot, incl = block_scan(s, ws, &tot);
    int excl = incl - s;
    need = min(need, tot);   // fewer finite logits than asked for: the last one
    if (need >= 1 && excl < need && need <= incl) {
        int a = excl;
#pragma unroll
        for (int q = 0; q < PER; ++q) {
            if (a + c[q] >= need && a < need) { out[0] = hi - 1 - q; out[1] = a; }
            a += c[q];
        }
    }
    __syncthreads();
    return tot;
}

// Bitonic sort, descending, of one key per thread over the block's RT threads; returns the key at index threadIdx.x.
// Partners closer than a warp swap through shuffles, farther ones through shared memory s (RT entries).
__device__ uint32_t bitonic_desc_block(uint32_t x, uint32_t *s) {
    const int i = threadIdx.x;
    for (int k = 2; k <= RT; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            uint32_t y;
            if (j >= 32) { s[i] = x; __syncthreads(); y = s[i ^ j]; __syncthreads(); }
            else y = __shfl_xor_sync(FULL, x, j);
            x = (((i & j) == 0) == ((i & k) == 0)) ? max(x, y) : min(x, y);
        }
    return x;
}

#define CAND4 2048   // candidates the v4 fast path takes (the fallback takes exactly k <= KMAX)

// The 32 largest of one key per thread over the block's RT threads, for the kb-th largest when kb <= 32: each warp sorts
// its keys (descending, shuffles only), then warps merge in pairs over log2(RT / 32) levels, one barrier each. An owner
// warp takes max(its lane l, the partner's lane 31 - l): a bitonic sequence holding the top 32 of both lists, which five
// shuffle steps sort. Lane l of warp 0 returns the (l + 1)-th largest key (other warps: meaningless). Same result as
// bitonic_desc_block's first 32 keys, at 5 barriers instead of 30. s: RT entries; a slot is written once, read once.
__device__ uint32_t top32_block(uint32_t x, uint32_t *s) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int k = 2; k <= 32; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            uint32_t y = __shfl_xor_sync(FULL, x, j);
            x = (((lane & j) == 0) == ((lane & k) == 0)) ? max(x, y) : min(x, y);
        }
    for (int step = 1; step < RT / 32; step <<= 1) {
        if ((w & (2 * step - 1)) == step) s[threadIdx.x] = x;   // partners publish (each for the first and last time)
        __syncthreads();
        if ((w & (2 * step - 1)) == 0) {                        // owners keep the top 32 of both, sorted
            x = max(x, s[(w + step) * 32 + 31 - lane]);
#pragma unroll
            for (int j = 16; j > 0; j >>= 1) {
                uint32_t y = __shfl_xor_sync(FULL, x, j);
                x = (lane & j) ? min(x, y) : max(x, y);
            }
        }
    }
    return x;
}

// The fallback of rows_body: the exact key K of the kd-th best by three histogram levels, then every logit above K and
// the first `need` ties of K in token order into every block's cand (slots 0..kd-1). Leaves hx zeroed for the ranks.
// Not inlined: it is the rare path, and inlined it made rows_body spill.
template <typename T, int E, int CLN>
__device__ __noinline__ void rows_hist(cg::cluster_group &cl, const Vals<T, E> &v, int i0, int k, int kd, int *h1, int *h2, int *h3,
                          int *hx, unsigned long long *cand, int *cnt, int *ws, int *fout) {
    const int tid = threadIdx.x, rank = (int)cl.block_rank();
    for (int b = tid; b < NBINS; b += RT) h1[b] = 0;
    h2[tid] = 0; h3[tid] = 0;
    __syncthreads();
#pragma unroll
    for (int e = 0; e < E; ++e) if (v[e] != -INFINITY) atomicAdd(&h1[fkey(v[e]) >> 20], 1);
    __syncthreads();
    cl.sync();                                                   // #1: every block's h1 is final
    cluster_find<NBINS / RT, CLN>(cl, h1, k, ws, fout);
    const uint32_t b1 = kd > 0 ? (uint32_t)fout[0] : 0u;
    int need = kd - (kd > 0 ? fout[1] : 0);
#pragma unroll
    for (int e = 0; e < E; ++e) {
        uint32_t key = fkey(v[e]);
        if (kd > 0 && v[e] != -INFINITY && (key >> 20) == b1) atomicAdd(&h2[(key >> 10) & 1023], 1);
    }
    __syncthreads();
    cl.sync();                                                   // #2
    cluster_find<1, CLN>(cl, h2, need, ws, fout);
    const uint32_t p2 = (b1 << 10) | (kd > 0 ? (uint32_t)fout[0] : 0u);
    need -= kd > 0 ? fout[1] : 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        uint32_t key = fkey(v[e]);
        if (kd > 0 && v[e] != -INFINITY && (key >> 10) == p2) atomicAdd(&h3[key & 1023], 1);
    }
    __syncthreads();
    cl.sync();                                                   // #3
    cluster_find<1, CLN>(cl, h3, need, ws, fout);
    const uint32_t K = (p2 << 10) | (kd > 0 ? (uint32_t)fout[0] : 0u);
    need -= kd > 0 ? fout[1] : 0;                                // ties of K to take, smallest token first
    int cg_ = 0, ce = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        uint32_t key = fkey(v[e]);
        bool fin = kd > 0 && v[e] != -INFINITY;
        cg_ += fin && key > K; ce += fin && key == K;
    }
    int tg, ig = block_scan(cg_, ws, &tg) - cg_;
    int te, ie = block_scan(ce, ws, &te) - ce;
    if (tid == 0) { cnt[0] = tg; cnt[1] = te; }
    cl.sync();                                                   // #4: counts; no block reads h1..h3 any more
    for (int q = tid; q < 2048; q += RT) hx[q] = 0;
    int bg = 0, be = 0, G = 0;
#pragma unroll
    for (int r = 0; r < CLN; ++r) {
        const int *c = cl.map_shared_rank(cnt, r);
        if (r < rank) { bg += c[0]; be += c[1]; }
        G += c[0];
    }
    ig += bg; ie += be;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        uint32_t key = fkey(v[e]);
        bool fin = kd > 0 && v[e] != -INFINITY;
        int slot = -1;
        if (fin && key > K) slot = ig++;
        else if (fin && key == K) { if (ie < need) slot = G + ie; ++ie; }
        if (slot >= 0) {
            unsigned long long c = ((unsigned long long)key << 32) | (uint32_t)~(uint32_t)(i0 + e);
#pragma unroll 1
            for (int r = 0; r < CLN; ++r) cl.map_shared_rank(cand, r)[slot] = c;
        }
    }
}

// rowinfo[row*8 + 6] = path (1 fast, 2 histogram), [row*8 + 7] = candidates ranked. stamps[row*8 + i]: clock64 cycles
// since the start of the row's first block at the end of its stages (loaded, sorted, A, B, candidates, C, ranked);
// stamps[row*8 + 7]: that block's start on the global timer (ns), to see when each row's cluster began.
template <typename T, int E, int CLN>
__device__ void rows_body(const T *__restrict__ logits, int V, int k, int vec, int rta, int force_hist, double *rowlse,
                          double *lq, int *ltok, int *kdo, int *rowinfo, long long *stamps) {
    const long long t0 = clock64();
    pdl_launch_dependents();   // tb_tree may launch now and wait (pdl_wait) on an SM this launch leaves idle
    cg::cluster_group cl = cg::this_cluster();
    __shared__ __align__(16) unsigned long long cand[CAND4];   // candidates; the level-1 histogram before them
    __shared__ int hx[2048];                                     // level-2/3 histograms, then the ranks
    int *h1 = (int *)cand, *h2 = hx, *h3 = hx + 1024;
    uint32_t *skey = (uint32_t *)h3;                             // thread-max keys (dead before h3 is used)
    __shared__ float pm;
    __shared__ double ps;
    __shared__ int cnt[3], ws[33], fout[2];
    __shared__ uint32_t tb;
    __shared__ float wm[RT / 32], rM;
    __shared__ double wsum[RT / 32], rL;
    __shared__ int wn[RT / 32], rg[8], rtot;
    __shared__ uint32_t rt;
    const int rank = (int)cl.block_rank(), row = blockIdx.y, tid = threadIdx.x;
#define RSTAMP(i) do { if (rank == 0 && tid == 0) stamps[row * 8 + (i)] = clock64() - t0; } while (0)
    if (rank == 0 && tid == 0) { long long g; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g)); stamps[row * 8 + 7] = g; }
    Vals<T, E> v;
    const int i0 = (rank * rta + tid) * E;
    const bool live = tid < rta;   // threads past the row hold -inf only, and skip the per-logit loops (the same results)
    v.load(logits + (size_t)row * V, i0, live ? V : 0, vec);   // V = 0: -inf
    float m = -INFINITY, sf = 0.f;
    int nf = 0;
    if (live) {
#pragma unroll
        for (int e = 0; e < E; ++e) m = fmaxf(m, v[e]);
#pragma unroll
        for (int e = 0; e < E; ++e) if (v[e] != -INFINITY) { sf += __expf(v[e] - m); ++nf; }
    }
    RSTAMP(0);
    {   // per warp: (max, sum-exp) merged in float64, and the finite count; the sort's barriers publish them
        float a = m; double b = sf; int n = nf;
        for (int o = 16; o; o >>= 1) { lse_merge(a, b, __shfl_xor_sync(FULL, a, o), __shfl_xor_sync(FULL, b, o)); n += __shfl_xor_sync(FULL, n, o); }
        if ((tid & 31) == 0) { wm[tid >> 5] = a; wsum[tid >> 5] = b; wn[tid >> 5] = n; }
    }
    // t_b: the kb-th largest thread max of the block (key 0 = none: fewer than kb finite ones)
    const int kb = (k + CLN - 1) / CLN;
    const uint32_t mk = m == -INFINITY ? 0u : fkey(m);
    uint32_t sk = kb <= 32 ? top32_block(mk, skey) : bitonic_desc_block(mk, skey);   // kb is the same in every thread
    if (tid == kb - 1) tb = sk;
    RSTAMP(1);
    if (tid < 32) {   // the block's (max, sum-exp) and finite count: warp 0 over the 32 warps' partials
        float a = wm[tid]; double b = wsum[tid]; int n = wn[tid];
        for (int o = 16; o; o >>= 1) { lse_merge(a, b, __shfl_xor_sync(FULL, a, o), __shfl_xor_sync(FULL, b, o)); n += __shfl_xor_sync(FULL, n, o); }
        if (tid == 0) { pm = a; ps = b; cnt[2] = n; }
    }
    cl.sync();                                                   // A: (max, sum), t_b, finite counts
    RSTAMP(2);
    // Lane r of warp 0 reads rank r's values and the warp merges them (the same tree, so the same bits, in every block).
    // With every thread reading every rank's words (~24 remote loads each) this stage took 6.6 µs on the H200, 4.7 this way.
    if (tid < 32) {
        float a = -INFINITY; double b = 0.0; uint32_t tt = 0xffffffffu; int n = 0;
        if (tid < CLN) { a = *cl.map_shared_rank(&pm, tid); b = *cl.map_shared_rank(&ps, tid); tt = *cl.map_shared_rank(&tb, tid);
                         n = cl.map_shared_rank(cnt, tid)[2]; }
        for (int o = 16; o; o >>= 1) {
            lse_merge(a, b, __shfl_xor_sync(FULL, a, o), __shfl_xor_sync(FULL, b, o));
            tt = min(tt, __shfl_xor_sync(FULL, tt, o)); n += __shfl_xor_sync(FULL, n, o);
        }
        if (tid == 0) { rM = a; rL = log(b); rt = tt; rtot = n; }   // log sum-exp's log once a block, not once a thread
    }
    __syncthreads();
    const float M = rM;
    const uint32_t t = rt;
    const int total = rtot;
    const double mx = (double)M, lsum = rL;
    const int kd = min(k, total);
    // v is a candidate iff v != -inf and fkey(v) >= t. t is 0 or the key of a thread max (normal, zero or +inf: max.ftz
    // flushes subnormals), and under --use_fast_math both fkey and the float compare treat subnormals as 0, so for every
    // non-NaN v (the contract: no NaN logits) that is one float compare against tf (the key test was ~10 instructions).
    const float tf = t == 0u ? __uint_as_float(0xff7fffffu) : keyf(t);   // t = 0: -FLT_MAX, every v but -inf
    int c = 0;
    if (live) {
#pragma unroll
        for (int e = 0; e < E; ++e) c += v[e] >= tf;
    }
    int tc, ic = block_scan(c, ws, &tc) - c;
    if (tid == 0) cnt[0] = tc;
    cl.sync();                                                   // B: candidate counts
    RSTAMP(3);
    if (tid < CLN) rg[tid] = cl.map_shared_rank(cnt, tid)[0];
    __syncthreads();
    int G = 0;
#pragma unroll
    for (int r = 0; r < CLN; ++r) { int g = rg[r]; if (r < rank) ic += g; G += g; }
    const bool fast = !force_hist && G <= CAND4;
    int Mc;   // candidates every block holds after sync C
    if (fast) {
        for (int q = tid; q < 2048; q += RT) hx[q] = 0;
#pragma unroll
        for (int e = 0; e < E; ++e)
            if (live && v[e] >= tf) {
                unsigned long long cv = ((unsigned long long)fkey(v[e]) << 32) | (uint32_t)~(uint32_t)(i0 + e);
#pragma unroll 1
                for (int r = 0; r < CLN; ++r) cl.map_shared_rank(cand, r)[ic] = cv;
                ++ic;
            }
        Mc = G;
    } else {
        Mc = kd;
        rows_hist<T, E, CLN>(cl, v, i0, k, kd, h1, h2, h3, hx, cand, cnt, ws, fout);
    }
    RSTAMP(4);
    cl.sync();                                                   // C: every block holds all Mc candidates
    RSTAMP(5);
    // rank this block's share (candidates rank, rank + CLN, ...) by counting the larger ones
    const int nloc = Mc > rank ? (Mc - rank + CLN - 1) / CLN : 0;
    if (nloc > 0) {
        const int g = max(1, RT / nloc);
        for (int e = tid; e < nloc * g; e += RT) {
            int il = e % nloc, part = e / nloc, cc = 0;
            unsigned long long x = cand[rank + il * CLN];
            for (int j = part; j < Mc; j += g) cc += cand[j] > x;
            if (cc) atomicAdd(&hx[il], cc);
        }
    }
    __syncthreads();
    for (int il = tid; il < nloc; il += RT) {
        unsigned long long x = cand[rank + il * CLN];
        int r = hx[il];
        if (r < kd) {
            lq[row * KMAX + r] = ((double)keyf((uint32_t)(x >> 32)) - mx) - lsum;   // log_softmax's order: (x - max) - log sum
            ltok[row * KMAX + r] = (int)~(uint32_t)x;
        }
    }
    if (rank == 0 && tid == 0) {
        kdo[row] = kd; rowlse[2 * row] = mx; rowlse[2 * row + 1] = lsum;
        rowinfo[row * 8 + 6] = fast ? 1 : 2; rowinfo[row * 8 + 7] = Mc;
    }
    RSTAMP(6);
#undef RSTAMP
}

// tb_rows_<dtype>_c<blocks per row>_e<logits per thread>: c1 for V <= RT * 32, c8 above (tree.rows_shape picks).
#define ROWS(name, T, CLN, E) extern "C" __global__ void __cluster_dims__(CLN, 1, 1) __launch_bounds__(RT, 1) \
    name(const T *logits, int V, int k, int vec, int rta, int force_hist, double *rowlse, double *lq, int *ltok, int *kd, \
         int *rowinfo, long long *stamps) { rows_body<T, E, CLN>(logits, V, k, vec, rta, force_hist, rowlse, lq, ltok, kd, rowinfo, stamps); }
ROWS(tb_rows_bf16_c1_e4, __nv_bfloat16, 1, 4)
ROWS(tb_rows_bf16_c1_e8, __nv_bfloat16, 1, 8)
ROWS(tb_rows_bf16_c1_e16, __nv_bfloat16, 1, 16)
ROWS(tb_rows_bf16_c1_e32, __nv_bfloat16, 1, 32)
ROWS(tb_rows_bf16_c8_e8, __nv_bfloat16, 8, 8)
ROWS(tb_rows_bf16_c8_e16, __nv_bfloat16, 8, 16)
ROWS(tb_rows_bf16_c8_e32, __nv_bfloat16, 8, 32)
ROWS(tb_rows_f32_c1_e4, float, 1, 4)
ROWS(tb_rows_f32_c1_e8, float, 1, 8)
ROWS(tb_rows_f32_c1_e16, float, 1, 16)
ROWS(tb_rows_f32_c1_e32, float, 1, 32)
ROWS(tb_rows_f32_c8_e8, float, 8, 8)
ROWS(tb_rows_f32_c8_e16, float, 8, 16)
ROWS(tb_rows_f32_c8_e32, float, 8, 32)
#endif

// ---------------------------------------------------------------- phase 2: the tree (one block of 1024)
#define TB_THREADS 1024   // tb_tree's block (tree.TB_THREADS launches exactly this, checked on load): a constant, so a loop over bins or slots
                          // strided by it needs no division for its trip count (ncu: three 2048-bin clears took ~1.4 k warp
                          // instructions each at B = 64, most of it dividing by blockDim.x; tree_build.md "Session 28")
// Is the rank tuple of (parent pa, rank ra, depth da) lexicographically smaller than (pb, rb, db)? par/rank index
// nodes; the root (depth 0) is `never dereferenced` because two same-depth walks meet there at the latest.
__device__ __forceinline__ bool lex_less(int pa, int ra, int da, int pb, int rb, int db, const int *par, const int *rank) {
    bool lb = false;
    while (da > db) { ra = rank[pa]; pa = par[pa]; --da; }
    while (db > da) { rb = rank[pb]; pb = par[pb]; --db; lb = true; }
    if (pa == pb && ra == rb) return lb;   // one is a prefix of the other: the shorter first
    while (pa != pb) { ra = rank[pa]; pa = par[pa]; rb = rank[pb]; pb = par[pb]; }
    return ra < rb;
}

// Is materialised prefix x before prefix y in rank-tuple order (the reference's order among equal scores)? The BFS lays each
// depth's slots out in that order (depth 1 by rank; a level's children parent by parent, ranks ascending; depth t holds
// slots [lvl[t-1], lvl[t])), so at equal depth it is x < y, with no walk. Otherwise the deeper prefix walks up to the other's
// depth first, and a prefix comes before its extensions. lex_less walked both prefixes up to their common ancestor through
// global memory, a chain of dependent L2 loads per tie (the rank stage: 4.0-6.7 µs at B = 256 by bench_tree's stamps).
__device__ __forceinline__ bool slot_less(int x, int y, const int *lvl, const int *par) {
    int dx = 1, dy = 1;
    while (x >= lvl[dx]) ++dx;
    while (y >= lvl[dy]) ++dy;
    bool yd = false;
    for (; dx > dy; --dx) x = par[x];
    for (; dy > dx; --dy) { y = par[y]; yd = true; }
    return x == y ? yd : x < y;
}

struct Ws {   // global scratch of tb_tree
    double *u_score; int *u_par, *u_rank, *u_depth, *slot_idx;
    double *h_score; int *h_par, *h_rank, *h_depth, *h_prev;
};

// min of the per-warp minima w[0, nw) (nw <= 32), in every thread: a shuffle reduction in each warp. It replaced a serial
// loop over w in every thread (ncu: ~10 k of tb_tree's ~100 k warp instructions, a chain of 31 dependent fmin). fmin is
// exact and ignores a NaN operand, so the order does not change the result.
__device__ __forceinline__ double warp_min_of(const double *w, int nw) {
    double v = (threadIdx.x & 31) < nw ? w[threadIdx.x & 31] : INFINITY;
    for (int o = 16; o; o >>= 1) v = fmin(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

// count of ranks r < n with base + list[r] >= tau (list descending)
__device__ __forceinline__ int count_ge(const double *list, int n, double base, double tau) {
    int lo = 0, hi = n;
    while (lo < hi) { int mid = (lo + hi) >> 1; if (base + list[mid] >= tau) lo = mid + 1; else hi = mid; }
    return lo;
}

// v1 / fallback: the literal heap on thread 0. Fills node arrays (1-based) and scores; returns n.
__device__ __forceinline__ int heap_tree(const double *lq, int LS, const int *kd, int Leff, int B, Ws w, int *npar, int *nrank,
                         int *ndepth, int *nprev, double *nscore) {
    int hn = 0, n = 0;
    nscore[0] = 0.0; npar[0] = -1; nrank[0] = 0; ndepth[0] = 0;
    auto better = [&](int a, int b) {
        if (w.h_score[a] != w.h_score[b]) return w.h_score[a] > w.h_score[b];
        return lex_less(w.h_par[a], w.h_rank[a], w.h_depth[a], w.h_par[b], w.h_rank[b], w.h_depth[b], npar, nrank);
    };
    auto swp = [&](int a, int b) {
        double t = w.h_score[a]; w.h_score[a] = w.h_score[b]; w.h_score[b] = t;
        int q;
        q = w.h_par[a]; w.h_par[a] = w.h_par[b]; w.h_par[b] = q;
        q = w.h_rank[a]; w.h_rank[a] = w.h_rank[b]; w.h_rank[b] = q;
        q = w.h_depth[a]; w.h_depth[a] = w.h_depth[b]; w.h_depth[b] = q;
        q = w.h_prev[a]; w.h_prev[a] = w.h_prev[b]; w.h_prev[b] = q;
    };
    auto push = [&](double sc, int p, int r, int d, int pv) {
        int i = hn++;
        w.h_score[i] = sc; w.h_par[i] = p; w.h_rank[i] = r; w.h_depth[i] = d; w.h_prev[i] = pv;
        while (i > 0) { int up = (i - 1) >> 1; if (!better(i, up)) break; swp(i, up); i = up; }
    };
    if (Leff > 0) push(0.0 + lq[0], 0, 0, 1, 0);
    while (hn > 0 && n < B) {
        ++n;
        double sc = w.h_score[0]; int p = w.h_par[0], r = w.h_rank[0], d = w.h_depth[0];
        npar[n] = p; nrank[n] = r; ndepth[n] = d; nprev[n] = w.h_prev[0]; nscore[n] = sc;
        --hn;
        if (hn > 0) {
            swp(0, hn);
            int i = 0;
            for (;;) {
                int l = 2 * i + 1, rr = l + 1, b = i;
                if (l < hn && better(l, b)) b = l;
                if (rr < hn && better(rr, b)) b = rr;
                if (b == i) break;
                swp(i, b); i = b;
            }
        }
        if (r + 1 < kd[d - 1]) push(nscore[p] + lq[(d - 1) * LS + r + 1], p, r + 1, d, n);
        if (d < Leff) push(sc + lq[d * LS], n, 0, d + 1, 0);
    }
    return n;
}

// B-th best score (1-based B) among u_score[0..N): MSB-first radix select on the order-preserving key.
__device__ __forceinline__ double select_kth(const double *sc, int N, int B, int *h, int *ws, int *fout) {
    unsigned long long pre = 0;
    int need = B;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < N; i += blockDim.x) {
            unsigned long long k = dkey(sc[i]);
            if (shift == 56 || (k >> (shift + 8)) == pre) atomicAdd(&h[(k >> shift) & 255], 1);
        }
        __syncthreads();
        // 256 bins: let the first 256 threads scan, the others add zeros
        int hi = 256 - threadIdx.x;
        int s = threadIdx.x < 256 ? h[hi - 1] : 0;
        int tot, incl = block_scan(s, ws, &tot);
        if (threadIdx.x < 256 && incl - s < need && need <= incl) { fout[0] = hi - 1; fout[1] = incl - s; }
        __syncthreads();
        need -= fout[1];
        pre = (pre << 8) | (unsigned long long)fout[0];
        __syncthreads();
    }
    return keyd(pre);
}

// The tree's output arrays from its node lists (1-based; node i's parent npar[i], rank nrank[i] among its siblings, depth
// ndepth[i], previous sibling nprev[i]; nscore[i] already written), n nodes of at most Bmax: the node arrays, then the
// visibility rows (zeroed coalesced first, then each row's ancestor bits), then the child links. All NT threads of the
// block; contains __syncthreads. *stamp (thread 0, if given): clock64 before the links. ltok is read past L1 (__ldcg):
// in tb_small other blocks of the same launch wrote it.
template <int NT>
__device__ void emit_tree(int n, int Bmax, int W, const int *root_token, const int *ltok, const int *npar, const int *nrank,
                          const int *ndepth, const int *nprev, int *tokens, int *depths, int *parents, int *first_child,
                          int *next_sibling, unsigned *vis, double *nscore, long long *stamp) {
    const int tid = threadIdx.x;
    constexpr int nt = NT;
    for (int q = tid; q < (Bmax + 1) * W; q += nt) vis[q] = 0u;
    for (int i = tid; i <= Bmax; i += nt) {
        bool in = i >= 1 && i <= n;
        tokens[i] = i == 0 ? root_token[0] : in ? __ldcg(ltok + (ndepth[i] - 1) * KMAX + nrank[i]) : 0;
        depths[i] = in ? ndepth[i] : 0;
        parents[i] = in ? npar[i] : -1;
        first_child[i] = -1; next_sibling[i] = -1;
        if (!in && i) nscore[i] = 0.0;
    }
    __syncthreads();
    // self + ancestors. Ancestors come in decreasing index order, so their words too: accumulate one word in a
    // register and store it when the walk moves to a lower word.
    for (int i = tid; i <= n; i += nt) {
        unsigned *row = vis + (size_t)i * W;
        int a = i, q = i >> 5;
        unsigned word = 0;
        for (;;) {
            if ((a >> 5) != q) { row[q] = word; word = 0; q = a >> 5; }
            word |= 1u << (a & 31);
            if (a == 0) break;
            a = npar[a];
        }
        row[q] = word;
    }
    __syncthreads();
    if (stamp && tid == 0) *stamp = clock64();
    for (int i = tid + 1; i <= n; i += nt) {
        if (nrank[i] == 0) first_child[npar[i]] = i;
        else next_sibling[nprev[i]] = i;
    }
}

extern "C" __global__ void __launch_bounds__(TB_THREADS) tb_tree(
        const double *lq_g, const int *ltok, const int *kd_g, int L, int B, int Bmax, int W, int force_heap, int ks, int smem_flags,
        const int *root_token, double *u_score_g, int *u_par_g, int *u_rank, int *u_depth, int *slot_idx_g,
        double *h_score, int *h_par, int *h_rank, int *h_depth, int *h_prev, int *stats,
        int *n_nodes, int *tokens, int *depths, int *parents, int *first_child, int *next_sibling,
        unsigned *vis, double *nscore) {
    extern __shared__ __align__(16) unsigned char smem[];
    int *npar = (int *)smem, *nrank = npar + (KMAX + 1), *ndepth = nrank + (KMAX + 1), *nprev = ndepth + (KMAX + 1);
    int *off = nprev + (KMAX + 1);                       // UCAP ints, reused as the sort buffer
    double *s_sc = (double *)off;                        // SORTCAP doubles
    int *s_slot = (int *)(s_sc + SORTCAP);               // SORTCAP ints
    __shared__ int ws[33], fout[2], hsel[256], sh_i[8];
    __shared__ double chain[MAX_DEPTH + 1], sh_d[4], wmin[32];
    __shared__ int kd[MAX_DEPTH], lvl[MAX_DEPTH + 1];   // lvl[t]: one past the last BFS slot of depth t
    __shared__ long long tst[13], sh_tot;  // tst: clock64 at stage ends (thread 0): stats[4..15], cycles since start, -1 if skipped
    const int tid = threadIdx.x;
    constexpr int nt = TB_THREADS;
#define STAMP(i) do { if (tid == 0) tst[i] = clock64(); } while (0)
    if (tid < 13) tst[tid] = 0;
    // launched as a programmatic dependent of phase 1 (fill_tree's pdl), this block may start while phase 1 runs: wait for
    // all of it before the first global read, and read its lists through pointers the compiler cannot hoist above the wait
    pdl_wait();
    lq_g = after_here(lq_g); ltok = after_here(ltok); kd_g = after_here(kd_g);
    STAMP(0);
    // Shared-memory copies when they fit (bit 0: the lists, bit 1: the BFS scores); the binary searches and the BFS are
    // chains of dependent loads, shared memory makes each step ~10x cheaper than L2. Layout after off: the scores, then the
    // lists (tree.tree_smem sizes them). The BFS parent links and slot index stay in global memory: in shared memory too
    // (session 25's bit 2) they changed no stage by more than 0.1 µs at B = 16-1024 (tree_build.md, "Session 26").
    unsigned char *extra = (unsigned char *)(off + UCAP);
    double *u_score = (smem_flags & 2) ? (double *)extra : u_score_g;
    if (smem_flags & 2) extra += UCAP * sizeof(double);
    int *u_par = u_par_g, *slot_idx = slot_idx_g;
    const double *lq = lq_g;
    if (B > 0 && tid < L) kd[tid] = kd_g[tid];
    __syncthreads();
    if (B > 0 && (smem_flags & 1)) {
        double *l = (double *)extra;
        // four loads in flight per thread before any store: one L2 round trip for the lists (L * ks <= 4 * 1024 at B <= 256).
        // d = i / ks by a float reciprocal, not an integer division (~25 instructions each): i < 32 * 1024 and ks <= 1024, so
        // (i + 0.5) / ks is at least 0.5 / ks ~ 5e-4 from an integer and the float error (a few ulp of at most 32) ~1e-5.
        const float rks = 1.0f / ks;
        for (int i0 = tid; i0 < L * ks; i0 += 4 * nt) {
            double v[4]; int at[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                int i = i0 + u * nt, d = (int)(((float)i + 0.5f) * rks), r = i - d * ks;
                at[u] = i < L * ks && r < kd[d] ? d * (ks | 1) + r : -1;
                if (at[u] >= 0) v[u] = lq_g[d * KMAX + r];
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) if (at[u] >= 0) l[at[u]] = v[u];
        }
        lq = l;
    }
    __syncthreads();   // the lists copied above are read by thread 0 (chain) and by every warp below
    // row stride of lq. In shared memory an odd number of doubles: with ks = 256 (2 KB rows) the 15 lanes of a warp that
    // each binary-search their own depth's list hit one bank, a 15-way conflict on every step of the comb search.
    const int LS = (smem_flags & 1) ? (ks | 1) : KMAX;
#define LQ(d) (lq + (d) * LS)
    Ws w{u_score, u_par, u_rank, u_depth, slot_idx, h_score, h_par, h_rank, h_depth, h_prev};
    // reachable depth: rows past the first row with no finite token can't be drafted
    if (tid == 0) {
        int Leff = L;
        for (int d = 0; d < L; ++d) if (kd[d] == 0) { Leff = d; break; }
        sh_i[0] = B > 0 ? Leff : 0;
        sh_i[1] = force_heap;   // 1 = go to the heap
        sh_i[2] = 0;            // n
        chain[0] = 0.0;
        long long tot = 0;      // prefixes of length 1 the lists hold, summed once here, not in every thread
        for (int d = 0; d < sh_i[0]; ++d) { chain[d + 1] = chain[d] + LQ(d)[0]; tot += kd[d]; }
        sh_tot = tot;
    }
    __syncthreads();
    STAMP(1);
    int Leff = sh_i[0];
    int path = 0;   // stats[0]: 0 heap forced/none, 1 = all of U ranked, 2 = the histogram-selected part ranked; stats[1] BFS tries
    int tries = 0;
    if (Leff > 0 && !sh_i[1]) {
        // ---- tau0: a threshold the comb alone proves reaches count >= B. The comb's prefixes (the main chain to depth d,
        // then rank r there: chain[d] + LQ(d)[r], exactly the sums the BFS forms) go into a 2048-bin histogram over [their
        // worst, the best]; find_desc gives the bin b* holding the B-th best, and tau is the smallest comb score in bins
        // >= b*. A bin index only grows with the score, so every one of those >= B prefixes scores >= tau, and tau is within
        // a bin (1/2048 of the range) of the B-th best comb score. A depth's list is sorted, so its bins fall along r: a
        // warp (lanes on consecutive ranks of one depth) adds each run of equal bins with one atomic, and the prefixes at or
        // above b* are a run of ranks from 0 whose end one binary search per depth finds. Before session 27 it was the
        // highest of 32 evenly spaced thresholds, three zooming rounds, that the comb reaches (tree_build.md, "Session 27").
        const long long tot = sh_tot;
        double tau = -INFINITY;
        if (tot >= B) {
            int *hb = s_slot + SORTCAP;   // 2048 ints of the sort buffers, free until the BFS
            for (int b = tid; b < 2048; b += nt) hb[b] = 0;
            if (tid < 32) {   // the comb's worst score, lane d at depth d (Leff <= MAX_DEPTH = 32)
                double lo = tid < Leff ? chain[tid] + LQ(tid)[kd[tid] - 1] : INFINITY;
                for (int o = 16; o; o >>= 1) lo = fmin(lo, __shfl_xor_sync(FULL, lo, o));
                if (tid == 0) { sh_d[0] = fmin(chain[1], lo); sh_d[1] = chain[1]; }
            }
            __syncthreads();
            STAMP(9);
            const double lo = sh_d[0], scale = hist_scale(sh_d[1] - lo);
            auto bin = [&](double v) { return hist_bin(v, lo, scale); };
            int lg = 10;                                   // 2^lg threads a depth: Leff rounded up to a power of two
            while ((1 << (10 - lg)) < Leff) --lg;          // nt = 1024, Leff <= 32: lg >= 5, so a warp has one depth
            const int d = tid >> lg, lane = tid & 31, S = 1 << lg;
            if (d < Leff) {
                const double base = chain[d], *lst = LQ(d);
                const int n = kd[d];
                // four ranks a thread per pass, their loads and bins first, then one shuffle/ballot/atomic step each (session
                // 26's loop took one rank a step: 4.4-4.8 us at B = 1024, 16 ranks a thread; this one 3.7-4.4, tree_build.md)
                for (int r0 = tid & (S - 1); r0 - lane < n; r0 += 4 * S) {
                    int b[4];
#pragma unroll
                    for (int u = 0; u < 4; ++u) { const int r = r0 + u * S; b[u] = r < n ? bin(base + lst[r]) : -1; }
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        const int w0 = r0 + u * S - lane;   // the warp's first rank: the same in every lane
                        if (w0 >= n) break;
                        const int bp = __shfl_up_sync(FULL, b[u], 1);
                        const bool head = b[u] >= 0 && (lane == 0 || bp != b[u]);
                        const unsigned heads = __ballot_sync(FULL, head), later = (heads >> lane) >> 1;
                        if (head) atomicAdd(&hb[b[u]], later ? __ffs(later) : min(32, n - w0) - lane);
                    }
                }
            }
            __syncthreads();
            STAMP(10);
            find_desc<2048 / nt>(hb, B, ws, fout);
            const int bstar = fout[0];
            STAMP(11);
            if (tid < 32) {   // lane d: the last rank of depth d at or above b*; tau the smallest of their scores
                double m = INFINITY;
                if (tid < Leff) {
                    const double base = chain[tid], *lst = LQ(tid);
                    int a = 0, z = kd[tid];
                    while (a < z) { const int mid = (a + z) >> 1; if (bin(base + lst[mid]) >= bstar) a = mid + 1; else z = mid; }
                    if (a > 0) m = base + lst[a - 1];
                }
                for (int o = 16; o; o >>= 1) m = fmin(m, __shfl_xor_sync(FULL, m, o));
                if (tid == 0) sh_d[2] = m;
            }
            __syncthreads();
            tau = sh_d[2];
            STAMP(12);
        }
        STAMP(2);
        // ---- BFS at tau, retried with a higher tau while it overflows
        int N = 0;
        bool over = true;
        for (tries = 0; tries < 4 && over; ++tries) {
            over = false;
            int c1 = count_ge(LQ(0), kd[0], 0.0, tau);
            int n1 = min(c1, UCAP);
            for (int j = tid; j < n1; j += nt) { u_score[j] = 0.0 + LQ(0)[j]; u_par[j] = -1; u_rank[j] = j; u_depth[j] = 1; }
            over = c1 > UCAP;
            int s0 = 0, e0 = n1;
            if (tid == 0) { lvl[0] = 0; lvl[1] = n1; }   // read by slot_less, many barriers later
            for (int d = 1; d < Leff && !over && e0 > s0; ++d) {   // parents: slots [s0,e0) at depth d
                __syncthreads();
                const double *lst = LQ(d);
                int n = e0 - s0, carry = 0;
                for (int t0 = 0; t0 < n; t0 += nt) {
                    int i = t0 + tid, c = 0;
                    if (i < n) c = count_ge(lst, kd[d], u_score[s0 + i], tau);
                    int tt, incl = block_scan(c, ws, &tt);
                    if (i < n) off[i] = carry + incl;
                    carry += tt;
                }
                __syncthreads();
                int total = carry, room = UCAP - e0, m = min(total, room);
                over = total > room;
                for (int j = tid; j < m; j += nt) {
                    int lo = 0, hi = n;            // first parent i with off[i] > j
                    while (lo < hi) { int mid = (lo + hi) >> 1; if (off[mid] > j) hi = mid; else lo = mid + 1; }
                    int p = s0 + lo, r = j - (lo ? off[lo - 1] : 0), slot = e0 + j;
                    u_score[slot] = u_score[p] + lst[r]; u_par[slot] = p; u_rank[slot] = r; u_depth[slot] = d + 1;
                }
                s0 = e0; e0 += m;
                if (tid == 0) lvl[d + 1] = e0;
            }
            __syncthreads();
            N = e0;
            STAMP(3);
            if (over) {
                double t2 = select_kth(u_score, N, B, hsel, ws, fout);
                if (!(t2 > tau)) break;    // no progress (ties): heap
                tau = t2;
            }
        }
        if (over) sh_i[1] = 1;
        else {
            // ---- the B best of the N materialised prefixes. Every one scores in [tau, chain[1]]: a 2048-bin histogram over
            // that range finds the bin holding the B-th best; the prefixes at or above that bin are ranked by counting
            // (score desc, then rank tuple lexicographic: a strict total order, so the ranks are 0..M-1, no sort).
            int *hb = s_slot + SORTCAP, *s_rank = hb;   // 2048 ints after the sort buffers; the ranks reuse them
            int M;
            if (N <= B) {
                M = N; path = 1;
                for (int j = tid; j < N; j += nt) { s_sc[j] = u_score[j]; s_slot[j] = j; }
            } else {
                path = 2;
                double lo = tau;   // every materialised score is >= tau; with tau = -inf take the true minimum
                if (!(tau > -INFINITY)) {
                    lo = INFINITY;
                    for (int j = tid; j < N; j += nt) lo = fmin(lo, u_score[j]);
                    for (int o = 16; o; o >>= 1) lo = fmin(lo, __shfl_xor_sync(FULL, lo, o));
                    if ((tid & 31) == 0) wmin[tid >> 5] = lo;
                    __syncthreads();
                    lo = warp_min_of(wmin, nt >> 5);
                }
                const double scale = hist_scale(chain[1] - lo);
                for (int b = tid; b < 2048; b += nt) hb[b] = 0;
                __syncthreads();
                for (int j = tid; j < N; j += nt) atomicAdd(&hb[hist_bin(u_score[j], lo, scale)], 1);
                __syncthreads();
                find_desc<2048 / nt>(hb, B, ws, fout);
                int bstar = fout[0];
                if (tid == 0) sh_i[4] = 0;
                __syncthreads();
                for (int j = tid; j < N; j += nt)
                    if (hist_bin(u_score[j], lo, scale) >= bstar) {
                        int q = atomicAdd(&sh_i[4], 1);
                        if (q < SORTCAP) { s_sc[q] = u_score[j]; s_slot[q] = j; }
                    }
                __syncthreads();
                M = sh_i[4];
                if (M > SORTCAP) { sh_i[1] = 1; M = 0; }
            }
            __syncthreads();
            STAMP(4);
            if (!sh_i[1]) {
                // rank = (candidates in higher buckets) + (better ones in the same bucket): a counting sort into 2048
                // buckets over [worst candidate, best] leaves a few members per bucket, so the pairwise part is short.
                int *base = npar, *ord = ndepth;   // 2 x (KMAX+1) ints each, free until the node arrays are written
                double lo2 = INFINITY;
                for (int i = tid; i < M; i += nt) lo2 = fmin(lo2, s_sc[i]);
                for (int o = 16; o; o >>= 1) lo2 = fmin(lo2, __shfl_xor_sync(FULL, lo2, o));
                if ((tid & 31) == 0) wmin[tid >> 5] = lo2;
                for (int q = tid; q < 2048; q += nt) s_rank[q] = 0;   // bucket counts, then cursors, then the ranks
                __syncthreads();
                lo2 = warp_min_of(wmin, nt >> 5);
                const double sc2 = hist_scale(chain[1] - lo2);
#define BUCKET(x) hist_bin(x, lo2, sc2)
                for (int i = tid; i < M; i += nt) atomicAdd(&s_rank[BUCKET(s_sc[i])], 1);
                __syncthreads();
                {   // descending exclusive scan: thread t owns buckets 2047-2t and 2046-2t (nt = 1024)
                    int b0 = 2047 - 2 * tid, c0 = s_rank[b0], c1 = s_rank[b0 - 1], tot;
                    int ex = block_scan(c0 + c1, ws, &tot) - c0 - c1;
                    base[b0] = ex; base[b0 - 1] = ex + c0;
                    s_rank[b0] = 0; s_rank[b0 - 1] = 0;
                }
                __syncthreads();
                for (int i = tid; i < M; i += nt) { int q = BUCKET(s_sc[i]); ord[base[q] + atomicAdd(&s_rank[q], 1)] = i; }
                __syncthreads();
                for (int i = tid; i < M; i += nt) {
                    double x = s_sc[i];
                    int q = BUCKET(x), a = s_slot[i], r = base[q], end = q ? base[q - 1] : M;
                    for (int u = base[q]; u < end; ++u) {
                        int j = ord[u];
                        if (j == i) continue;
                        double y = s_sc[j];
                        if (y > x) ++r;
                        else if (y == x) {
                            int bj = s_slot[j];
                            r += slot_less(bj, a, lvl, u_par);
                        }
                    }
                    s_rank[i] = r;
                }
#undef BUCKET
                __syncthreads();
                STAMP(5);
                int n = min(B, M);
                for (int i = tid; i < M; i += nt) {
                    int r = s_rank[i], sl = s_slot[i];
                    if (r < n) {
                        slot_idx[sl] = r + 1;
                        nrank[r + 1] = u_rank[sl]; ndepth[r + 1] = u_depth[sl]; nscore[r + 1] = s_sc[i]; nprev[r + 1] = sl;
                    }
                }
                __syncthreads();
                STAMP(6);
                for (int i = tid; i < n; i += nt) {
                    int sl = nprev[i + 1], p = u_par[sl];
                    npar[i + 1] = p < 0 ? 0 : slot_idx[p];
                    nprev[i + 1] = nrank[i + 1] > 0 ? slot_idx[sl - 1] : 0;
                }
                if (tid == 0) { sh_i[2] = n; npar[0] = -1; nrank[0] = 0; ndepth[0] = 0; nscore[0] = 0.0; }
            }
        }
    }
    __syncthreads();
    if (Leff > 0 && sh_i[1] && tid == 0) sh_i[2] = heap_tree(lq, LS, kd, Leff, B, w, npar, nrank, ndepth, nprev, nscore);
    if (tid == 0 && Leff == 0) { sh_i[2] = 0; npar[0] = -1; nscore[0] = 0.0; }
    __syncthreads();
    // ---- emit: the node arrays, the visibility rows, the child links
    int n = sh_i[2];
    emit_tree<nt>(n, Bmax, W, root_token, ltok, npar, nrank, ndepth, nprev, tokens, depths, parents, first_child, next_sibling,
                  vis, nscore, &tst[7]);
    if (tid == 0) {
        n_nodes[0] = n; stats[0] = sh_i[1] ? 0 : path; stats[1] = tries; stats[2] = sh_i[1];
        tst[8] = clock64();
        for (int i = 1; i < 13; ++i) stats[3 + i] = tst[i] ? (int)(tst[i] - tst[0]) : -1;
    }
#undef STAMP
}

// ---------------------------------------------------------------- tb_small: short rows and small trees, one launch
// For V <= SMALL_T * E (E = 4, 8, 16: V <= 8192) and 1 <= B <= SMALL_B (k = min(B, V) <= 32), as the demo pair's drafter
// (V = 4096) drafts: the general pair (tb_rows + tb_tree) spends 19-24 µs there on a tree of 8-16 nodes (phase 2 alone 11-15,
// its BFS, histograms and ~40 barriers sized for B = 1024; bench_tree --vocab 4096, session 35). Grid L (one block a depth),
// SMALL_T threads, each holding E contiguous logits of its row.
// Phase 1 (every block, its depth): (max, sum-exp) as v4 computes them. Each warp finds its k-th largest key t_w by bisection
// over the key bits (one __reduce_add_sync a bit: 16 for bf16, 32 for float; two bits a step, three reductions each, were
// slower: 2.3 against 1.8 µs) and lists its own top k: the keys above
// t_w (fewer than k), then its ties at t_w smallest token first; a bitonic sort across the lanes orders the list (value
// desc, token asc, as 64-bit keys). Four levels of pairwise bitonic merges keep the best 32 of the 16 lists: the row's
// top k. (The first version took every logit above max_w t_w, up to 16 (k - 1) of them, and ranked them by counting: O(C^2),
// 37-39 µs a build at B = 32.)
// Phase 2 (the last block to finish, by an atomic ticket; it resets the ticket): the reference's best-first heap on one
// warp, its frontier (at most B + 1 entries) in registers, two slots a lane, scores as order-preserving 64-bit keys; each
// pop a branch-free max by shuffles and two ballots for its holder (equal scores by rank tuple, lex_less: the reference's
// order, on the rare path): ~0.5 µs a node on an H100, where v3's argmax, a chain of branches, took ~0.7 (tree_build.md,
// "Session 35" and "Session 36"). Then emit_tree with the whole block. No host read, graph-capturable.
// stats[4..10]: the last block's clock64 at its stage ends since its start (loaded, t_w, lists sorted, merged, ticket,
// heap, emitted).
#define SMALL_T 512
#define SMALL_B 32
static_assert(SMALL_B == 32, "tb_small: a depth's list is one warp wide (a key a lane: lst, slq's rows, the heap's slots)");
// a score's order-preserving key, -0 folded to +0 so that equal scores tie (as their float64 compare does)
__device__ __forceinline__ unsigned long long skey(double x) { return dkey(x == 0.0 ? 0.0 : x); }
__device__ __forceinline__ unsigned long long shfl_xor64(unsigned long long x, int o) {
    return ((unsigned long long)__shfl_xor_sync(FULL, (uint32_t)(x >> 32), o) << 32) | __shfl_xor_sync(FULL, (uint32_t)x, o);
}
// 32 keys, one a lane, sorted descending across the warp (lane 0 the largest): a bitonic network of shuffles
__device__ __forceinline__ unsigned long long warp_sort_desc(unsigned long long x) {
    const int lane = threadIdx.x & 31;
    for (int s = 2; s <= 32; s <<= 1)
        for (int j = s >> 1; j; j >>= 1) {
            const unsigned long long y = shfl_xor64(x, j);
            const bool up = ((lane & s) == 0) == ((lane & j) == 0);   // this lane keeps the larger of the pair
            x = up ? (x > y ? x : y) : (x < y ? x : y);
        }
    return x;
}
// a bitonic sequence across the warp, sorted descending
__device__ __forceinline__ unsigned long long warp_merge_desc(unsigned long long x) {
    const int lane = threadIdx.x & 31;
    for (int j = 16; j; j >>= 1) {
        const unsigned long long y = shfl_xor64(x, j);
        x = (lane & j) == 0 ? (x > y ? x : y) : (x < y ? x : y);
    }
    return x;
}
template <typename T, int E>
__device__ void small_body(const T *__restrict__ logits, int L, int V, int k, int vec, int B, int Bmax, int W, const int *root_token,
                           double *lq_g, int *ltok_g, int *kd_g, int *ticket, int *stats, int *n_nodes, int *tokens, int *depths,
                           int *parents, int *first_child, int *next_sibling, unsigned *vis, double *nscore) {
    constexpr int NW = SMALL_T / 32, KB = sizeof(T) == 2 ? 16 : 32;   // bf16: its 16-bit key (fkey >> 16) orders it exactly
    __shared__ unsigned long long lst[NW][32];                         // each warp's sorted top k (0: none), then the merges
    __shared__ float wm[NW]; __shared__ double wsum[NW]; __shared__ int wn[NW];
    __shared__ int last;
    __shared__ long long tst[8];
    const long long t0 = clock64();
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, i0 = tid * E;
#define SSTAMP(i) do { if (tid == 0) tst[i] = clock64() - t0; } while (0)
    Vals<T, E> v;
    v.load(logits + (size_t)row * V, i0, V, vec);
    uint32_t kk[E];
    float m = -INFINITY, sf = 0.f;
    int nf = 0;
#pragma unroll
    for (int e = 0; e < E; ++e) { m = fmaxf(m, v[e]); kk[e] = v[e] == -INFINITY ? 0u : fkey(v[e]) >> (32 - KB); }
#pragma unroll
    for (int e = 0; e < E; ++e) if (v[e] != -INFINITY) { sf += __expf(v[e] - m); ++nf; }
    SSTAMP(0);
    {   // the warp's (max, sum-exp) merged in float64 and its finite count, for warp 0 after the barrier
        float a = m; double b = sf; int n = nf;
        for (int o = 16; o; o >>= 1) { lse_merge(a, b, __shfl_xor_sync(FULL, a, o), __shfl_xor_sync(FULL, b, o)); n += __shfl_xor_sync(FULL, n, o); }
        if (lane == 0) { wm[wid] = a; wsum[wid] = b; wn[wid] = n; }
    }
    uint32_t t = 0;   // the warp's k-th largest key (0: it has fewer than k finite logits)
    for (int bit = KB - 1; bit >= 0; --bit) {
        const uint32_t c = t | (1u << bit);
        unsigned cnt = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) cnt += kk[e] >= c;
        if (__reduce_add_sync(FULL, cnt) >= (unsigned)k) t = c;
    }
    SSTAMP(1);
    {   // the warp's list: its keys above t (fewer than k), then ties at t smallest token first, up to k; then sorted
        int cs = 0, ct = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) { cs += kk[e] > t; ct += t > 0 && kk[e] == t; }
        int pk = (cs << 16) | ct, inc = pk;
        for (int o = 1; o < 32; o <<= 1) { const int u = __shfl_up_sync(FULL, inc, o); if (lane >= o) inc += u; }
        const int all = __shfl_sync(FULL, inc, 31), S = all >> 16, room = k - S;
        int sp = (inc - pk) >> 16, tp = (inc - pk) & 0xffff;
        lst[wid][lane] = 0ull;
        __syncwarp();
#pragma unroll
        for (int e = 0; e < E; ++e) {
            const unsigned long long cv = ((unsigned long long)fkey(v[e]) << 32) | (uint32_t)~(uint32_t)(i0 + e);
            if (kk[e] > t) lst[wid][sp++] = cv;
            else if (t > 0 && kk[e] == t) { if (tp < room) lst[wid][S + tp] = cv; ++tp; }
        }
        __syncwarp();
        lst[wid][lane] = warp_sort_desc(lst[wid][lane]);
    }
    SSTAMP(2);
    for (int s = 1; s < NW; s <<= 1) {   // pairwise merges: warp w takes lists w and w + s, keeps the best 32
        __syncthreads();
        if ((wid & (2 * s - 1)) == 0) {
            const unsigned long long a = lst[wid][lane], b = lst[wid + s][31 - lane];
            lst[wid][lane] = warp_merge_desc(a > b ? a : b);
        }
    }
    if (wid == 0) {   // the row's (max, log sum-exp), finite count, and its top kd written as tb_rows writes them
        float a = lane < NW ? wm[lane] : -INFINITY; double b = lane < NW ? wsum[lane] : 0.0; int n = lane < NW ? wn[lane] : 0;
        for (int o = 16; o; o >>= 1) { lse_merge(a, b, __shfl_xor_sync(FULL, a, o), __shfl_xor_sync(FULL, b, o)); n += __shfl_xor_sync(FULL, n, o); }
        const double mx = (double)a, lsum = log(b);
        const int kd = min(k, n);
        __syncwarp();
        const unsigned long long x = lst[0][lane];
        if (lane < kd) {
            lq_g[row * KMAX + lane] = ((double)keyf((uint32_t)(x >> 32)) - mx) - lsum;   // log_softmax's order, as tb_rows
            ltok_g[row * KMAX + lane] = (int)~(uint32_t)x;
        }
        if (lane == 0) kd_g[row] = kd;
    }
    SSTAMP(3);
    __threadfence();
    __syncthreads();                                                   // this row's list written
    if (tid == 0) last = atomicAdd(ticket, 1) == L - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    SSTAMP(4);
    // ---- phase 2 in the last block: the lists (read past L1: other blocks wrote them), then the heap on warp 0
    __shared__ double slq[MAX_DEPTH * SMALL_B], nsc[SMALL_B + 1];
    __shared__ int skd[MAX_DEPTH], npar[SMALL_B + 1], nrank[SMALL_B + 1], ndepth[SMALL_B + 1], nprev[SMALL_B + 1], sn;
    if (tid < L) skd[tid] = __ldcg(kd_g + tid);
    if (tid == 0) *ticket = 0;                                         // every block has taken its ticket: ready for the next launch
    __syncthreads();
    for (int i = tid; i < L * SMALL_B; i += SMALL_T) { const int d = i >> 5, r = i & 31; if (r < skd[d]) slq[i] = __ldcg(lq_g + d * KMAX + r); }
    __syncthreads();
    if (wid == 0) {
        int Leff = L;
        for (int d = 0; d < L; ++d) if (skd[d] == 0) { Leff = d; break; }
        // frontier slot s = lane + 32 j in lane `lane`'s registers k<j>, m<j>: its score as an order-preserving 64-bit key (0:
        // empty; finite scores have keys > 0) and (parent | rank << 8 | depth << 16 | prev node << 24)
        unsigned long long k0 = 0, k1 = 0;
        int m0 = 0, m1 = 0, nfr = 0, n = 0;
        if (Leff > 0 && B > 0) { nfr = 1; if (lane == 0) { k0 = skey(0.0 + slq[0]); m0 = 1 << 16; } }
        // lane 0 writes the node lists, a warp barrier publishes them
        if (lane == 0) { npar[0] = -1; nrank[0] = 0; ndepth[0] = 0; nprev[0] = 0; nsc[0] = 0.0; }
        __syncwarp();
        while (nfr > 0 && n < B) {
            // the best key by a branch-free max (v3's argmax compared scores, emptiness and ties in a chain of branches the
            // lanes took apart: ~0.7 µs a node); then who holds it, from two ballots
            unsigned long long K = k0 > k1 ? k0 : k1;
            for (int o = 16; o; o >>= 1) { const unsigned long long y = shfl_xor64(K, o); K = K > y ? K : y; }
            const unsigned b0 = __ballot_sync(FULL, k0 == K), b1 = __ballot_sync(FULL, k1 == K);
            int wslot = b0 ? __ffs(b0) - 1 : 32 + __ffs(b1) - 1;
            if (__popc(b0) + __popc(b1) > 1) {   // equal scores (rare): the smallest rank tuple, the reference heap's order
                int wmeta = __shfl_sync(FULL, (wslot >> 5) ? m1 : m0, wslot & 31);
                for (int j = 0; j < 2; ++j)
                    for (unsigned bb = j ? b1 : b0; bb; bb &= bb - 1) {
                        const int sl = 32 * j + __ffs(bb) - 1, mm = __shfl_sync(FULL, j ? m1 : m0, sl & 31);
                        if (lex_less(mm & 255, (mm >> 8) & 255, (mm >> 16) & 255, wmeta & 255, (wmeta >> 8) & 255, (wmeta >> 16) & 255,
                                     npar, nrank)) { wslot = sl; wmeta = mm; }
                    }
            }
            const int bm = __shfl_sync(FULL, (wslot >> 5) ? m1 : m0, wslot & 31);
            const double bs = keyd(K);
            const int p = bm & 255, r = (bm >> 8) & 255, d = (bm >> 16) & 255;
            ++n;
            if (lane == 0) { npar[n] = p; nrank[n] = r; ndepth[n] = d; nprev[n] = (bm >> 24) & 255; nsc[n] = bs; }
            __syncwarp();
            const int own = wslot & 31, oj = wslot >> 5;
            if (r + 1 < skd[d - 1]) {   // the next-rank sibling takes the popped slot
                const unsigned long long sk = skey(nsc[p] + slq[(d - 1) * SMALL_B + r + 1]);
                const int sm = p | (r + 1) << 8 | d << 16 | n << 24;
                if (lane == own) { if (oj) { k1 = sk; m1 = sm; } else { k0 = sk; m0 = sm; } }
            } else {                    // else the last slot moves into it
                --nfr;
                const int ll = nfr & 31, lj = nfr >> 5;
                const unsigned long long mk = __shfl_sync(FULL, lj ? k1 : k0, ll);
                const int mm = __shfl_sync(FULL, lj ? m1 : m0, ll);
                if (lane == ll) { if (lj) k1 = 0; else k0 = 0; }
                if (lane == own && wslot != nfr) { if (oj) { k1 = mk; m1 = mm; } else { k0 = mk; m0 = mm; } }
            }
            if (d < Leff) {             // the first child joins at the end
                const unsigned long long ck = skey(bs + slq[d * SMALL_B]);
                const int cm = n | (d + 1) << 16;
                if (lane == (nfr & 31)) { if (nfr >> 5) { k1 = ck; m1 = cm; } else { k0 = ck; m0 = cm; } }
                ++nfr;
            }
        }
        if (lane == 0) sn = n;
    }
    SSTAMP(5);
    __syncthreads();
    const int n = sn;
    for (int i = tid; i <= n; i += SMALL_T) nscore[i] = nsc[i];
    emit_tree<SMALL_T>(n, Bmax, W, root_token, ltok_g, npar, nrank, ndepth, nprev, tokens, depths, parents, first_child,
                       next_sibling, vis, nscore, nullptr);
    SSTAMP(6);
    if (tid == 0) {
        n_nodes[0] = n; stats[0] = 3; stats[1] = 0; stats[2] = 0;   // path 3: tb_small
        for (int i = 0; i < 12; ++i) stats[4 + i] = i < 7 ? (int)tst[i] : -1;
    }
#undef SSTAMP
}
#define SMALL(name, T, E) extern "C" __global__ void __launch_bounds__(SMALL_T) \
    name(const T *logits, int L, int V, int k, int vec, int B, int Bmax, int W, const int *root_token, double *lq, int *ltok,  \
         int *kd, int *ticket, int *stats, int *n_nodes, int *tokens, int *depths, int *parents, int *first_child,             \
         int *next_sibling, unsigned *vis, double *nscore) {                                                                   \
        small_body<T, E>(logits, L, V, k, vec, B, Bmax, W, root_token, lq, ltok, kd, ticket, stats, n_nodes, tokens, depths,  \
                         parents, first_child, next_sibling, vis, nscore); }
SMALL(tb_small_bf16_e4, __nv_bfloat16, 4)
SMALL(tb_small_bf16_e8, __nv_bfloat16, 8)
SMALL(tb_small_bf16_e16, __nv_bfloat16, 16)
SMALL(tb_small_f32_e4, float, 4)
SMALL(tb_small_f32_e8, float, 8)
SMALL(tb_small_f32_e16, float, 16)
