// tree_build.cu: DDTree draft tree on the GPU, no host sync (nbs/02_tree_builder.ipynb).
//
// Phase 1, per depth row (bandwidth-bound, all SMs):
//   tb_hist    grid (C, L), 256 thr: row max / sum-exp partials + a 4096-bin histogram of the top 12 bits of an
//              order-preserving key of every finite logit. The last block of a row (atomic ticket) finds the bin
//              b* holding the k-th best, the row's logsumexp, and cleans the histogram for the next call.
//   tb_collect grid (C, L), 256 thr: appends the logits in bins > b* (fewer than k) and, if it fits, in bin b*.
//   tb_rowsort grid L, 1024 thr: exact top-k (value desc, token asc) of the candidates by a bitonic sort; if bin b*
//              was too full (massive ties) an exact radix refinement over the whole row. Writes log q (fp64)
//              and token of ranks 0..k_d-1.
// Phase 2, one block (tb_tree):
//   v1 (force_heap=1, also the fallback): the literal best-first heap on one thread.
//   v2: a lower bound tau on the B-th best score from the "comb" (main chain + one deviation), a level-synchronous
//       BFS materialising every prefix with score >= tau, the B-th best of those (radix select), a bitonic sort by
//       (score desc, rank tuple lexicographic), then indices, parents, depths, child links and the bitmask.
// Scores are float64 sums in the reference's order (parent + own log q), so exact ties stay exact.
#include <cuda_bf16.h>
#include <stdint.h>

#define NBINS 4096          // top 12 bits of the key
#define CHUNK 4096          // logits per phase-1 block (256 threads x 16)
#define KMAX 1024           // max k = max budget
#define CAPB 3072           // room for the threshold bin's logits
#define CAND (KMAX + CAPB)  // candidates per row
#define UCAP 8192           // prefixes the BFS may materialise
#define SORTCAP 2048        // prefixes the final sort takes
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

// Highest bin b of hist[0..nbins) with (count of bins > b) < need <= (count of bins >= b). hist in shared or
// global memory (read with plain loads; caller made it visible). out[0] = b, out[1] = count above b.
// need >= 1 and <= sum(hist). nbins a multiple of blockDim.x.
__device__ void find_desc(const int *hist, int nbins, int need, int *ws, int *out) {
    int per = nbins / blockDim.x, hi = nbins - threadIdx.x * per;   // this thread: bins [hi-per, hi), descending
    int s = 0;
    for (int b = hi - 1; b >= hi - per; --b) s += hist[b];
    int tot, incl = block_scan(s, ws, &tot);
    int excl = incl - s;
    if (excl < need && need <= incl) {
        int c = excl;
        for (int b = hi - 1; b >= hi - per; --b) {
            if (c + hist[b] >= need) { out[0] = b; out[1] = c; break; }
            c += hist[b];
        }
    }
    __syncthreads();
}

// ---------------------------------------------------------------- phase 1a: stats + histogram
// rowinfo[row*8 + .]: 0 b*, 1 count above b*, 2 count in b*, 3 k_d, 4 cntA, 5 cntB; rowlse[row] logsumexp.
template <typename T>
__device__ void hist_body(const T *__restrict__ logits, int V, int k, int *hist, float2 *stat, int *row_done,
                          int *rowinfo, double *rowlse) {
    __shared__ int sh[NBINS];
    __shared__ float sm[8], ss[8];
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
    float s = 0.f;
#pragma unroll
    for (int it = 0; it < 16; ++it)
        if (v[it] != -INFINITY) { s += __expf(v[it] - m); atomicAdd(&sh[fkey(v[it]) >> 20], 1); }
    // block reduce (m, s)
    for (int o = 16; o; o >>= 1) {
        float m2 = __shfl_xor_sync(FULL, m, o), s2 = __shfl_xor_sync(FULL, s, o);
        float mm = fmaxf(m, m2);
        s = (mm == -INFINITY) ? 0.f : s * __expf(m - mm) + s2 * __expf(m2 - mm);
        m = mm;
    }
    if ((tid & 31) == 0) { sm[tid >> 5] = m; ss[tid >> 5] = s; }
    __syncthreads();
    if (tid == 0) {
        float M = sm[0], S = ss[0];
        for (int w = 1; w < 8; ++w) {
            float mm = fmaxf(M, sm[w]);
            S = (mm == -INFINITY) ? 0.f : S * __expf(M - mm) + ss[w] * __expf(sm[w] - mm);
            M = mm;
        }
        stat[row * 64 + c] = make_float2(M, S);
    }
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
    if (kd > 0) find_desc(sh, NBINS, kd, ws, fout);
    if (tid < 32) {   // logsumexp from the C partials, one warp
        float M = -INFINITY, S = 0.f;
        for (int j = tid; j < C; j += 32) M = fmaxf(M, __ldcg(&stat[row * 64 + j]).x);
        for (int o = 16; o; o >>= 1) M = fmaxf(M, __shfl_xor_sync(FULL, M, o));
        for (int j = tid; j < C; j += 32) { float2 p = __ldcg(&stat[row * 64 + j]); if (p.x != -INFINITY) S += p.y * __expf(p.x - M); }
        for (int o = 16; o; o >>= 1) S += __shfl_xor_sync(FULL, S, o);
        if (tid == 0) {
            int *ri = rowinfo + row * 8;
            ri[0] = kd > 0 ? fout[0] : -1; ri[1] = kd > 0 ? fout[1] : 0; ri[2] = kd > 0 ? sh[fout[0]] : 0;
            ri[3] = kd; ri[4] = 0; ri[5] = 0;
            rowlse[row] = (double)M + log((double)S);
            row_done[row] = 0;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) tb_hist_bf16(const __nv_bfloat16 *logits, int V, int k, int *hist,
        float2 *stat, int *row_done, int *rowinfo, double *rowlse) {
    hist_body(logits, V, k, hist, stat, row_done, rowinfo, rowlse);
}
extern "C" __global__ void __launch_bounds__(256) tb_hist_f32(const float *logits, int V, int k, int *hist,
        float2 *stat, int *row_done, int *rowinfo, double *rowlse) {
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
            find_desc(h, 1024, need, ws, fout);
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
    double lse = rowlse[row];
    for (int r = tid; r < kd; r += blockDim.x) {
        unsigned long long e = s[r];
        lq[row * KMAX + r] = (double)keyf((uint32_t)(e >> 32)) - lse;
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

// ---------------------------------------------------------------- phase 2: the tree (one block of 1024)
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

struct Ws {   // global scratch of tb_tree
    double *u_score; int *u_par, *u_rank, *u_depth, *slot_idx;
    double *h_score; int *h_par, *h_rank, *h_depth, *h_prev;
};

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

extern "C" __global__ void __launch_bounds__(1024) tb_tree(
        const double *lq_g, const int *ltok, const int *kd_g, int L, int B, int Bmax, int W, int force_heap, int ks, int smem_flags,
        const int *root_token, double *u_score_g, int *u_par, int *u_rank, int *u_depth, int *slot_idx,
        double *h_score, int *h_par, int *h_rank, int *h_depth, int *h_prev, int *stats,
        int *n_nodes, int *tokens, int *depths, int *parents, int *first_child, int *next_sibling,
        unsigned *vis, double *nscore) {
    extern __shared__ __align__(16) unsigned char smem[];
    int *npar = (int *)smem, *nrank = npar + (KMAX + 1), *ndepth = nrank + (KMAX + 1), *nprev = ndepth + (KMAX + 1);
    int *off = nprev + (KMAX + 1);                       // UCAP ints, reused as the sort buffer
    double *s_sc = (double *)off;                        // SORTCAP doubles
    int *s_slot = (int *)(s_sc + SORTCAP);               // SORTCAP ints
    __shared__ int ws[33], fout[2], hsel[256], sh_i[8];
    __shared__ double chain[33], sh_d[4];
    __shared__ int kd[32];
    int tid = threadIdx.x, nt = blockDim.x;
    // shared-memory copies when they fit (smem_flags bit 0: the lists, bit 1: the BFS scores); the binary searches
    // and the BFS are chains of dependent loads, shared memory makes each step ~10x cheaper than L2
    unsigned char *extra = (unsigned char *)(off + UCAP);
    double *u_score = (smem_flags & 2) ? (double *)extra : u_score_g;
    if (smem_flags & 2) extra += UCAP * sizeof(double);
    const double *lq = lq_g;
    if (B > 0 && tid < L) kd[tid] = kd_g[tid];
    __syncthreads();
    if (B > 0 && (smem_flags & 1)) {
        double *l = (double *)extra;
        for (int i = tid; i < L * ks; i += nt) { int d = i / ks, r = i - d * ks; if (r < kd[d]) l[d * ks + r] = lq_g[d * KMAX + r]; }
        lq = l;
    }
    __syncthreads();   // the lists copied above are read by thread 0 (chain) and by every warp below
    const int LS = (smem_flags & 1) ? ks : KMAX;   // row stride of lq
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
        for (int d = 0; d < sh_i[0]; ++d) chain[d + 1] = chain[d] + LQ(d)[0];
    }
    __syncthreads();
    int Leff = sh_i[0];
    int path = 0;   // stats[0]: 0 heap forced/none, 1 = sort of all, 2 = select + sort; stats[1] BFS tries
    int tries = 0;
    if (Leff > 0 && !sh_i[1]) {
        // ---- tau0: a threshold the comb alone proves reaches count >= B. 3 rounds of 32 evenly spaced thresholds
        // (warp j tests threshold j, lane d counts depth d), each round zooming into the best interval.
        long long tot = 0;
        for (int d = 0; d < Leff; ++d) tot += kd[d];
        double tau;
        if (tot < B) tau = -INFINITY;
        else {
            if (tid == 0) {
                double lo = chain[1];
                for (int d = 0; d < Leff; ++d) lo = fmin(lo, chain[d] + LQ(d)[kd[d] - 1]);
                sh_d[0] = lo; sh_d[1] = chain[1];
            }
            int j = tid >> 5, d = tid & 31;
            for (int round = 0; round < 3; ++round) {
                if (tid == 0) sh_i[3] = 0;
                __syncthreads();
                double lo = sh_d[0], hi = sh_d[1];
                double t = j == 31 ? hi : lo + (hi - lo) * ((double)j / 31.0);
                int c = d < Leff ? count_ge(LQ(d), kd[d], chain[d], t) : 0;
                for (int o = 16; o; o >>= 1) c += __shfl_xor_sync(FULL, c, o);
                if (d == 0 && c >= B) atomicMax(&sh_i[3], j);
                __syncthreads();
                int best = sh_i[3];
                if (d == 0 && j == best) sh_d[0] = t;
                if (d == 0 && (j == best + 1 || (best == 31 && j == 31))) sh_d[1] = t;
                __syncthreads();
            }
            tau = sh_d[0];
        }
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
            }
            __syncthreads();
            N = e0;
            if (over) {
                double t2 = select_kth(u_score, N, B, hsel, ws, fout);
                if (!(t2 > tau)) break;    // no progress (ties): heap
                tau = t2;
            }
        }
        if (over) sh_i[1] = 1;
        else {
            // ---- the candidates to sort: all of them, or those >= the B-th best
            int M;
            if (N <= SORTCAP) {
                M = N; path = 1;
                for (int j = tid; j < N; j += nt) { s_sc[j] = u_score[j]; s_slot[j] = j; }
            } else {
                path = 2;
                double tb = select_kth(u_score, N, B, hsel, ws, fout);
                if (tid == 0) sh_i[4] = 0;
                __syncthreads();
                for (int j = tid; j < N; j += nt)
                    if (u_score[j] >= tb) { int q = atomicAdd(&sh_i[4], 1); if (q < SORTCAP) { s_sc[q] = u_score[j]; s_slot[q] = j; } }
                __syncthreads();
                M = sh_i[4];
                if (M > SORTCAP) { sh_i[1] = 1; M = 0; }
            }
            __syncthreads();
            if (!sh_i[1]) {
                int P = 1;
                while (P < M) P <<= 1;
                for (int j = M + tid; j < P; j += nt) { s_sc[j] = -INFINITY; s_slot[j] = -1; }
                __syncthreads();
                // bitonic sort, best first: score desc, then rank tuple lexicographic
                for (int k = 2; k <= P; k <<= 1)
                    for (int j = k >> 1; j > 0; j >>= 1) {
                        for (int i = tid; i < P; i += nt) {
                            int l = i ^ j;
                            if (l > i) {
                                int a = s_slot[i], b = s_slot[l];
                                double x = s_sc[i], y = s_sc[l];
                                bool lb;   // is l better than i?
                                if (b < 0) lb = false;
                                else if (a < 0) lb = true;
                                else if (x != y) lb = y > x;
                                else lb = lex_less(u_par[b], u_rank[b], u_depth[b], u_par[a], u_rank[a], u_depth[a], u_par, u_rank);
                                bool sw = ((i & k) == 0) ? lb : (!lb && a != b);
                                if (sw) { s_sc[i] = y; s_sc[l] = x; s_slot[i] = b; s_slot[l] = a; }
                            }
                        }
                        __syncthreads();
                    }
                int n = min(B, M);
                for (int i = tid; i < n; i += nt) {
                    int sl = s_slot[i];
                    slot_idx[sl] = i + 1;
                    nrank[i + 1] = u_rank[sl]; ndepth[i + 1] = u_depth[sl]; nscore[i + 1] = s_sc[i];
                }
                __syncthreads();
                for (int i = tid; i < n; i += nt) {
                    int sl = s_slot[i], p = u_par[sl];
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
    // ---- emit
    int n = sh_i[2];
    for (int i = tid; i <= Bmax; i += nt) {
        bool in = i >= 1 && i <= n;
        tokens[i] = i == 0 ? root_token[0] : in ? ltok[(ndepth[i] - 1) * KMAX + nrank[i]] : 0;
        depths[i] = in ? ndepth[i] : 0;
        parents[i] = in ? npar[i] : -1;
        first_child[i] = -1; next_sibling[i] = -1;
        if (!in && i) nscore[i] = 0.0;
        // visibility row: self + ancestors. Ancestors come in decreasing index order, so their words too:
        // accumulate one word in a register and store it when the walk moves to a lower word.
        unsigned *row = vis + (size_t)i * W;
        for (int q = 0; q < W; ++q) row[q] = 0u;
        if (i <= n) {
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
    }
    __syncthreads();
    for (int i = tid + 1; i <= n; i += nt) {
        if (nrank[i] == 0) first_child[npar[i]] = i;
        else next_sibling[nprev[i]] = i;
    }
    if (tid == 0) { n_nodes[0] = n; stats[0] = sh_i[1] ? 0 : path; stats[1] = tries; stats[2] = sh_i[1]; }
}
