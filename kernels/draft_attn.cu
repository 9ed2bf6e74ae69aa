// draft_attn.cu: a DFlash drafter's block attention (issue 17) in ONE launch. The block's T rows bring their keys and values
// kb, vb, which go to the cache rows [L, L + T) (L = *length, the committed context); the block's R = g x T query rows of a
// KV head (g query heads share it) attend to that head's keys [0, min(L + T, S)) of one layer's K/V cache, the block's own
// read from kb / vb: only the live prefix is read, and no mask, transpose, permute or index copy is launched.
// See nbs/05a_drafter.ipynb for the torch reference (`drafter.block_attention`) and the tests.
//
// Grid (nsplit, nkv), DA_THREADS threads (nsplit: drafter.draft_blocks). Block (s, h) stages its keys [s * chunk, (s + 1) *
// chunk) in tiles of DA_TILE keys (chunk: the live keys over the splits in whole tiles, so a short context in a long cache
// still spreads over the splits) and keeps an online softmax (log2 domain, fp32); scores and P stay fp32 (the reference rounds P to bf16 for its
// PV product: the two differ by that rounding). With one split a block writes `out` itself; otherwise it writes its
// normalised partial and log2-sum-exp to the caller's workspace, and the last block of a head to arrive (a ticket
// from `counter[h]`, which it puts back to 0) merges the head's splits: no second launch, no block waits for another.
// Keys past the live length are never loaded nor multiplied (a NaN in a scratch row cannot leak in).
// The blocks of split 0 write kb, vb into the cache; no block reads those rows from the cache, so no block waits for them.
// The _tc kernels do the tile's QK and PV on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulators): q (unscaled;
// the scores take scale * log2(e) in fp32), the K/V tiles and P (rounded to bf16 after the online softmax, as the torch
// reference rounds it for its PV product) as bf16 rows padded by 8 elements; zero-filled keys past the live ones are
// multiplied by P = 0 there.
// The _nr kernels take q and kb as the raw projections: each block RMS-norms its head's rows (weights qw, kw) and rotates
// them (rotate-half RoPE of base theta at positions L + t) in fp32 first, keeping the block's keys in shared memory as bf16;
// draft_kv_write does the same for the context rows `extend` appends (keys normed and rotated, values copied).
// Layouts: q [T, nkv * g, HD], kb, vb [T, nkv, HD] bf16 with row strides ldq, ldk, ldv (elements, multiples of 8); out [T, nkv * g, HD]; k, v [S, nkv, HD] bf16 (a cache layer); row r of a head =
// (t = r / g, j = r % g).
#include <cuda_bf16.h>
#include <stdint.h>
#include <cooperative_groups.h>   // the cluster kernels: rank, barrier, distributed shared memory

#define DA_THREADS 256
#define DA_TILE 64        // keys staged at once: scores are DA_TILE keys x R rows
#define DA_MAXSPLIT 32    // splits a head's merge takes (its weights are R x DA_MAXSPLIT floats of shared memory)
#define DA_MAXL 8         // layers draft_kv_write_layers takes in one launch (a key norm weight pointer each)

// Shared memory of one block, in floats: q [R][HD], K and V tiles [DA_TILE][HD/2 + 1] bf16 pairs, P [R][DA_TILE + 1],
// row stats (max, sum, rescale) [3][R], and for _nr the block's keys [T][HD] bf16 and RoPE's (cos, sin) [T][HD/2] (drafter.draft_smem).
// The merge's weights [R][DA_MAXSPLIT] reuse the K tile. The _tc kernels: q [R][HD + 8], K and V tiles [DA_TILE][HD + 8]
// bf16, P [R][DA_TILE + 1] fp32 and [R][DA_TILE + 8] bf16, then the same (drafter.draft_smem(..., tc=True)).

__device__ __forceinline__ float2 bf2f(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// RoPE's inverse frequency j of HD/2, theta^(-2j/HD) through double rounded to fp32 (torch's fp32 pow and reciprocal: within an ulp).
__device__ __forceinline__ float rope_inv_freq(float theta, int j, int HD) { return (float)pow((double)theta, -2.0 * j / HD); }

// (cos, sin) of position pos at inverse frequency f: the angle is the fp32 product (as torch forms it); the reduction to
// [-pi, pi] is done in double, so the fast sine and cosine stay accurate at any position.
__device__ __forceinline__ float2 rope_cs(int pos, float f) {
    const double a = (double)((float)pos * f);
    float sn, cs;
    __sincosf((float)(a - rint(a * 0.15915494309189535) * 6.283185307179586), &sn, &cs);
    return make_float2(cs, sn);
}

__device__ __forceinline__ float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float as_float(float x) { return x; }

// One warp: row x (HD values, bf16 or fp32) RMS-normed by weight w (eps) and rotated (rotate-half) by cs [HD/2] (cos, sin);
// lane l holds elements l + 32 i of the result in y (fp32). Every lane reads its elements before any write: x may be y's home.
template <int HD, typename X>
__device__ __forceinline__ void norm_rope_row(const X *x, const __nv_bfloat16 *__restrict__ w, float eps,
                                              const float2 *cs, float (&y)[HD / 32]) {
    constexpr int E = HD / 32, H2 = E / 2;
    const int lane = threadIdx.x & 31;
    float ss = 0.f;
    #pragma unroll
    for (int i = 0; i < E; ++i) { y[i] = as_float(x[lane + 32 * i]); ss = fmaf(y[i], y[i], ss); }
    #pragma unroll
    for (int off = 16; off; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float inv = rsqrtf(ss / HD + eps);
    #pragma unroll
    for (int i = 0; i < E; ++i) y[i] *= inv * __bfloat162float(w[lane + 32 * i]);
    #pragma unroll
    for (int i = 0; i < H2; ++i) {        // the pair (j, j + HD/2), j = lane + 32 i
        const float2 c = cs[lane + 32 * i];
        const float a = y[i], b = y[i + H2];
        y[i] = a * c.x - b * c.y; y[i + H2] = b * c.x + a * c.y;
    }
}

// Tensor-core pieces (the _tc kernels, sm_80+): one m16n8k16 bf16 MMA with fp32 accumulators, a 32-bit shared-memory
// load (two bf16), and the B fragment of a [k][n] row-major bf16 tile through ldmatrix.trans (rows k0..k0+15, 8 columns).
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t ld32(const __nv_bfloat16 *p) { return *reinterpret_cast<const uint32_t *>(p); }
__device__ __forceinline__ void ldsm_x2_trans(uint32_t &b0, uint32_t &b1, const __nv_bfloat16 *p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(a));
}

template <int HD> struct Tile {   // a thread's share of a tile of keys (or values) of one head, in registers between fetch and store
    static constexpr int CPR = HD / 8, N = DA_TILE * CPR / DA_THREADS, PW = HD / 2 + 1;   // 16-byte chunks a row and a thread; padded row
    uint4 x[N];
    // keys [key0, key0 + nk) of head h, rows [L, L + T) from the block's own (blk: head h's row 0, row stride ldb; global or
    // shared memory), the rest zero: every load in flight
    __device__ __forceinline__ void fetch(const __nv_bfloat16 *__restrict__ src, const __nv_bfloat16 *blk, int ldb,
                                          int key0, int nk, int L, int T, int nkv, int h) {
        #pragma unroll
        for (int j = 0; j < N; ++j) {
            const int c = threadIdx.x + j * DA_THREADS, kk = c / CPR, key = key0 + kk;
            if (kk >= nk) x[j] = make_uint4(0, 0, 0, 0);
            else if (key >= L && key < L + T) x[j] = *reinterpret_cast<const uint4 *>(blk + (size_t)(key - L) * ldb + c % CPR * 8);
            else x[j] = __ldg(reinterpret_cast<const uint4 *>(src + ((size_t)key * nkv + h) * HD + c % CPR * 8));   // a cache row: read-only here
        }
    }
    __device__ __forceinline__ void store_rows(__nv_bfloat16 *dst, int ld) const {   // rows of ld bf16 (16-byte aligned): the _tc layout
        #pragma unroll
        for (int j = 0; j < N; ++j) {
            const int c = threadIdx.x + j * DA_THREADS;
            *reinterpret_cast<uint4 *>(dst + c / CPR * ld + c % CPR * 8) = x[j];
        }
    }
    __device__ __forceinline__ void store(uint32_t *dst) const {   // padded rows are only 4-byte aligned
        #pragma unroll
        for (int j = 0; j < N; ++j) {
            const int c = threadIdx.x + j * DA_THREADS;
            uint32_t *d = dst + c / CPR * PW + c % CPR * 4;
            d[0] = x[j].x; d[1] = x[j].y; d[2] = x[j].z; d[3] = x[j].w;
        }
    }
};

// The cluster merge (CS > 1: the CS splits of a head are one thread-block cluster). Each block has staged its normalised
// partial po [R][HD] and log2-sum-exp pl [R] in its own shared memory; after a cluster barrier, block `rank` merges rows
// [rank * R / CS, (rank + 1) * R / CS) of all CS partials through distributed shared memory and writes them to `out`; a
// second barrier keeps every block's shared memory alive until the others have read it. No workspace, ticket or fence.
template <int R, int HD, int CS>
__device__ __forceinline__ void cluster_merge(float *po, float *pl, __nv_bfloat16 *__restrict__ out, int g, int nh, int h) {
#if __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    constexpr int RB = R / CS, NP = HD / 2;                    // rows a block merges; bf16 pairs a row
    static_assert(R % CS == 0, "R a multiple of the cluster size");
    cl.sync();                                                  // every block's partial staged
    const int rank = (int)cl.block_rank();
    for (int task = threadIdx.x; task < RB * NP; task += DA_THREADS) {
        const int r = rank * RB + task / NP, p = task % NP;
        float l[CS], M = -INFINITY;
        #pragma unroll
        for (int c = 0; c < CS; ++c) { l[c] = *cl.map_shared_rank(pl + r, c); M = fmaxf(M, l[c]); }
        float2 x[CS];
        #pragma unroll
        for (int c = 0; c < CS; ++c)                            // every partial in flight at once (an empty split: none)
            if (l[c] != -INFINITY) x[c] = *cl.map_shared_rank(reinterpret_cast<float2 *>(po + r * HD) + p, c);
        float tot = 0.f, ax = 0.f, ay = 0.f;
        #pragma unroll
        for (int c = 0; c < CS; ++c)
            if (l[c] != -INFINITY) { const float w = exp2f(l[c] - M); tot += w; ax = fmaf(w, x[c].x, ax); ay = fmaf(w, x[c].y, ay); }
        const float inv = tot > 0.f ? 1.f / tot : 0.f;          // a row with no key: 0
        *reinterpret_cast<__nv_bfloat162 *>(out + ((size_t)(r / g) * nh + h * g + r % g) * HD + 2 * p) = __floats2bfloat162_rn(ax * inv, ay * inv);
    }
    cl.sync();                                                  // no block leaves while another reads its shared memory
#endif
}

template <int R, int HD, bool NR, int CS, bool TC>
__device__ void draft_attn_body(const __nv_bfloat16 *__restrict__ q, int ldq, const __nv_bfloat16 *__restrict__ kb, int ldk,
                                const __nv_bfloat16 *__restrict__ vb, int ldv, __nv_bfloat16 *__restrict__ k, __nv_bfloat16 *__restrict__ v,
                                const int *__restrict__ length, int S, int g, int nkv, float scale, int nsplit,
                                __nv_bfloat16 *__restrict__ out, float *__restrict__ ws_o, float *__restrict__ ws_l,
                                int *__restrict__ counter, const __nv_bfloat16 *__restrict__ qw, const __nv_bfloat16 *__restrict__ kw,
                                float qeps, float keps, float theta) {
    constexpr int PW = HD / 2 + 1, NP = HD / 2, NRG = DA_THREADS / NP, RPV = R / NRG, RPS = R / 4, PS = DA_TILE + 1;
    static_assert(R % 8 == 0 && R <= 64 && (HD == 64 || HD == 128), "R in {8, 16, ..., 64}, HD 64 or 128");
    static_assert(!TC || R % 16 == 0, "the _tc kernels take 16-row MMA tiles");
    // _tc: q, the tiles and P as bf16 rows of 16-byte multiples (+8 elements: conflict-free 32-bit fragment loads and ldmatrix)
    constexpr int LQ = HD + 8, LT = HD + 8, LP = DA_TILE + 8;
    constexpr int Q_BYTES = TC ? R * LQ * 2 : R * HD * 4, T_BYTES = TC ? DA_TILE * LT * 2 : DA_TILE * PW * 4;
    constexpr int P_BYTES = R * PS * 4 + (TC ? R * LP * 2 : 0);
    static_assert(!TC || R * HD * 4 <= 2 * T_BYTES, "_tc: a block's fp32 partial fits the two tiles' space");
    static_assert(R * DA_MAXSPLIT * 4 <= T_BYTES, "the ticket merge's weights fit the K tile's space");
    extern __shared__ float smem[];
    unsigned char *sb = reinterpret_cast<unsigned char *>(smem);
    float *qs = smem;                                           // [R][HD], pre-scaled by scale * log2(e) (_tc: qb, bf16 [R][LQ])
    __nv_bfloat16 *qb = reinterpret_cast<__nv_bfloat16 *>(sb);
    uint32_t *ks = reinterpret_cast<uint32_t *>(sb + Q_BYTES);  // [DA_TILE][PW] (_tc: bf16 [DA_TILE][LT])
    uint32_t *vs = reinterpret_cast<uint32_t *>(sb + Q_BYTES + T_BYTES);
    float *ps = reinterpret_cast<float *>(sb + Q_BYTES + 2 * T_BYTES);   // [R][PS]
    __nv_bfloat16 *pb = reinterpret_cast<__nv_bfloat16 *>(ps + R * PS);  // _tc: P as bf16 [R][LP]
    float *rmax = reinterpret_cast<float *>(sb + Q_BYTES + 2 * T_BYTES + P_BYTES), *rsum = rmax + R, *rcor = rsum + R;
    __nv_bfloat16 *kn = reinterpret_cast<__nv_bfloat16 *>(rcor + R);   // _nr: the block's keys of this head [T][HD], normed and rotated
    __shared__ int last;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, s = blockIdx.x, h = blockIdx.y, nh = nkv * g;
    const int T = R / g;
    constexpr int QC = R * HD / 8, NQ = (QC + DA_THREADS - 1) / DA_THREADS;   // q's 16-byte chunks, a thread's share
    auto qrow = [&](int c) { return qb + c / (HD / 8) * LQ + c % (HD / 8) * 8; };   // _tc: where q's 16-byte chunk c goes
    uint4 qr[NQ], kr[NR ? NQ : 1];                              // _nr: the block's raw keys too (T * HD / 8 <= QC chunks)
    #pragma unroll
    for (int j = 0; j < NQ; ++j) {                              // q (and raw kb) rows of this head: in flight before the length is known
        const int c = tid + j * DA_THREADS, r = c / (HD / 8);
        if (c < QC) qr[j] = *reinterpret_cast<const uint4 *>(q + (size_t)(r / g) * ldq + (h * g + r % g) * HD + c % (HD / 8) * 8);
        if (NR && c < T * (HD / 8)) kr[j] = *reinterpret_cast<const uint4 *>(kb + (size_t)r * ldk + h * HD + c % (HD / 8) * 8);
    }
    const int L = max(0, __ldg(length)), n_live = min(S, L + T);
    const int chunk = ((n_live + nsplit - 1) / nsplit + DA_TILE - 1) / DA_TILE * DA_TILE;
    const int k_begin = s * chunk, k_end = min(n_live, k_begin + chunk);
    const float qscale = scale * 1.4426950408889634f;
    const __nv_bfloat16 *kbh = NR ? kn : kb + h * HD;            // the block's keys of this head, row t at kbh + t * ldkb
    const int ldkb = NR ? HD : ldk;
    Tile<HD> kt, vt;                                            // the next tile, in flight while the current one is used
    const bool early = k_begin < k_end && (!NR || k_begin + DA_TILE <= L);   // a first tile that needs no block key: now
    if (early) {
        kt.fetch(k, kbh, ldkb, k_begin, min(DA_TILE, k_end - k_begin), L, T, nkv, h);
        vt.fetch(v, vb + h * HD, ldv, k_begin, min(DA_TILE, k_end - k_begin), L, T, nkv, h);
    }
    if (NR) {                                                   // q and the block's keys: RMS norm, then RoPE at L + t
        float2 *cs = reinterpret_cast<float2 *>(kn + T * HD);   // [T][HD/2]
        float *kst = reinterpret_cast<float *>(ks);             // the raw keys [T][HD] fp32, in the tiles' space (free until the loop)
        #pragma unroll
        for (int j = 0; j < NQ; ++j) {                          // raw rows to shared memory (q unscaled for now)
            const int c = tid + j * DA_THREADS;
            if (TC) {                                           // as they are (bf16): q into its rows, the keys into kn
                if (c < QC) *reinterpret_cast<uint4 *>(qrow(c)) = qr[j];
                if (c < T * (HD / 8)) *reinterpret_cast<uint4 *>(kn + c * 8) = kr[j];
                continue;
            }
            const uint32_t wq[4] = {qr[j].x, qr[j].y, qr[j].z, qr[j].w}, wk[4] = {kr[j].x, kr[j].y, kr[j].z, kr[j].w};
            #pragma unroll
            for (int e = 0; e < 4; ++e) {                       // as fp32
                if (c < QC) *reinterpret_cast<float2 *>(qs + c * 8 + 2 * e) = bf2f(wq[e]);
                if (c < T * (HD / 8)) *reinterpret_cast<float2 *>(kst + c * 8 + 2 * e) = bf2f(wk[e]);
            }
        }
        const float f = rope_inv_freq(theta, tid % (HD / 2), HD);   // DA_THREADS is a multiple of HD/2: one frequency a thread
        for (int i = tid; i < T * (HD / 2); i += DA_THREADS) cs[i] = rope_cs(L + i / (HD / 2), f);
        __syncthreads();
        for (int r = warp; r < R + T; r += DA_THREADS / 32) {   // a warp per row: R query rows, then T key rows
            const bool isq = r < R;
            const int t = isq ? r / g : r - R;
            float y[HD / 32];
            if (TC) norm_rope_row<HD>(isq ? qb + r * LQ : kn + t * HD, isq ? qw : kw, isq ? qeps : keps, cs + t * (HD / 2), y);   // in place
            else norm_rope_row<HD>(isq ? qs + r * HD : kst + t * HD, isq ? qw : kw, isq ? qeps : keps, cs + t * (HD / 2), y);
            #pragma unroll
            for (int i = 0; i < HD / 32; ++i) {
                if (isq && TC) qb[r * LQ + lane + 32 * i] = __float2bfloat16_rn(y[i]);   // unscaled: the scores take qscale
                else if (isq) qs[r * HD + lane + 32 * i] = y[i] * qscale;
                else kn[t * HD + lane + 32 * i] = __float2bfloat16_rn(y[i]);
            }
        }
        __syncthreads();
    }
    if (!early && k_begin < k_end) {
        kt.fetch(k, kbh, ldkb, k_begin, min(DA_TILE, k_end - k_begin), L, T, nkv, h);
        vt.fetch(v, vb + h * HD, ldv, k_begin, min(DA_TILE, k_end - k_begin), L, T, nkv, h);
    }
    if (s == 0)                                                 // the block's K/V into the cache rows [L, L + T)
        for (int c = tid; c < 2 * T * (HD / 8); c += DA_THREADS) {
            const int which = c / (T * (HD / 8)), t = c / (HD / 8) % T, cc = c % (HD / 8);
            if (L + t >= S) continue;
            const __nv_bfloat16 *from = which ? vb + (size_t)t * ldv + h * HD : kbh + (size_t)t * ldkb;
            *reinterpret_cast<uint4 *>((which ? v : k) + ((size_t)(L + t) * nkv + h) * HD + cc * 8) = *reinterpret_cast<const uint4 *>(from + cc * 8);
        }
    for (int r = tid; r < R; r += DA_THREADS) { rmax[r] = -INFINITY; rsum[r] = 0.f; }
    if (!NR) {
        #pragma unroll
        for (int j = 0; j < NQ; ++j) {                          // q, scaled by scale * log2(e), as fp32
            const int c = tid + j * DA_THREADS;
            if (c >= QC) break;
            if constexpr (TC) *reinterpret_cast<uint4 *>(qrow(c)) = qr[j];   // as given (bf16)
            else {
                const uint32_t w[4] = {qr[j].x, qr[j].y, qr[j].z, qr[j].w};
                float *d = qs + c / (HD / 8) * HD + c % (HD / 8) * 8;
                #pragma unroll
                for (int e = 0; e < 4; ++e) { const float2 f = bf2f(w[e]); d[2 * e] = f.x * qscale; d[2 * e + 1] = f.y * qscale; }
            }
        }
    }
    float o[TC ? 1 : RPV][2];
    #pragma unroll
    for (int i = 0; i < (TC ? 1 : RPV); ++i) o[i][0] = o[i][1] = 0.f;
    const int dp = tid % NP, rg = tid / NP;                     // PV: a bf16 pair of columns, rows rg + NRG * i
    // _tc: O as MMA tiles (16 rows x 8 columns); warp w owns tiles w + 8 j, j < OWN (lane: rows g8, g8 + 8, columns 2 t4, 2 t4 + 1)
    constexpr int MT = R / 16, NTD = HD / 8, OWN = TC ? MT * NTD / (DA_THREADS / 32) : 1;
    const int g8 = lane >> 2, t4 = lane & 3;
    float acc[OWN][4];
    #pragma unroll
    for (int j = 0; j < OWN; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    // every (row, column pair) this thread holds of O: f(row, column, x, y)
    auto each = [&](auto f) {
        if constexpr (TC) {
            #pragma unroll
            for (int j = 0; j < OWN; ++j) {
                const int tile = warp + (DA_THREADS / 32) * j, r = tile / NTD * 16 + g8, d = tile % NTD * 8 + 2 * t4;
                f(r, d, acc[j][0], acc[j][1]); f(r + 8, d, acc[j][2], acc[j][3]);
            }
        } else {
            #pragma unroll
            for (int i = 0; i < RPV; ++i) f(rg + NRG * i, 2 * dp, o[i][0], o[i][1]);
        }
    };

    for (int key0 = k_begin; key0 < k_end; key0 += DA_TILE) {
        const int nk = min(DA_TILE, k_end - key0);
        __syncthreads();                                        // the previous tile's PV is done with ks, vs, ps
        if (TC) { kt.store_rows(reinterpret_cast<__nv_bfloat16 *>(ks), LT); vt.store_rows(reinterpret_cast<__nv_bfloat16 *>(vs), LT); }
        else { kt.store(ks); vt.store(vs); }
        __syncthreads();
        if (key0 + DA_TILE < k_end) {                           // the next tile's loads, during this one's math
            kt.fetch(k, kbh, ldkb, key0 + DA_TILE, min(DA_TILE, k_end - key0 - DA_TILE), L, T, nkv, h);
            vt.fetch(v, vb + h * HD, ldv, key0 + DA_TILE, min(DA_TILE, k_end - key0 - DA_TILE), L, T, nkv, h);
        }
        if constexpr (TC) {   // scores on tensor cores: warp w takes the 16 x 8 tiles w + 8 j of [R][DA_TILE]
            const __nv_bfloat16 *kt_s = reinterpret_cast<const __nv_bfloat16 *>(ks);
            #pragma unroll
            for (int tile = warp; tile < MT * (DA_TILE / 8); tile += DA_THREADS / 32) {
                const int mt = tile / (DA_TILE / 8), nt = tile % (DA_TILE / 8);
                const __nv_bfloat16 *qa = qb + (mt * 16 + g8) * LQ + 2 * t4, *kbp = kt_s + (nt * 8 + g8) * LT + 2 * t4;
                float c[4] = {0.f, 0.f, 0.f, 0.f};
                #pragma unroll
                for (int k0 = 0; k0 < HD; k0 += 16)
                    mma16816(c, ld32(qa + k0), ld32(qa + 8 * LQ + k0), ld32(qa + k0 + 8), ld32(qa + 8 * LQ + k0 + 8), ld32(kbp + k0), ld32(kbp + k0 + 8));
                const int r = mt * 16 + g8, key = nt * 8 + 2 * t4;   // q is unscaled in qb: scale * log2(e) here, in fp32
                ps[r * PS + key] = key < nk ? c[0] * qscale : -INFINITY;        ps[r * PS + key + 1] = key + 1 < nk ? c[1] * qscale : -INFINITY;
                ps[(r + 8) * PS + key] = key < nk ? c[2] * qscale : -INFINITY;  ps[(r + 8) * PS + key + 1] = key + 1 < nk ? c[3] * qscale : -INFINITY;
            }
        } else {   // scores: key kk = tid % 64, rows tid / 64 + 4 i
            const int kk = tid % DA_TILE, r0 = tid / DA_TILE;
            float acc[RPS];
            #pragma unroll
            for (int i = 0; i < RPS; ++i) acc[i] = 0.f;
            const uint32_t *kr = ks + kk * PW;
            #pragma unroll 8
            for (int w = 0; w < NP; ++w) {
                const float2 kf = bf2f(kr[w]);
                #pragma unroll
                for (int i = 0; i < RPS; ++i) {
                    const float2 qf = *reinterpret_cast<const float2 *>(qs + (r0 + 4 * i) * HD + 2 * w);
                    acc[i] = fmaf(qf.x, kf.x, fmaf(qf.y, kf.y, acc[i]));
                }
            }
            #pragma unroll
            for (int i = 0; i < RPS; ++i) ps[(r0 + 4 * i) * PS + kk] = kk < nk ? acc[i] : -INFINITY;
        }
        __syncthreads();
        for (int r = warp; r < R; r += DA_THREADS / 32) {       // online softmax: a warp per row
            const float a = ps[r * PS + lane], b = ps[r * PS + lane + 32];
            float m = fmaxf(a, b);
            #pragma unroll
            for (int off = 16; off; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
            const float m_old = rmax[r], m_new = fmaxf(m_old, m);
            const float pa = m_new == -INFINITY ? 0.f : exp2f(a - m_new), pb_ = m_new == -INFINITY ? 0.f : exp2f(b - m_new);
            float sum = pa + pb_;
            #pragma unroll
            for (int off = 16; off; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            if (TC) { pb[r * LP + lane] = __float2bfloat16_rn(pa); pb[r * LP + lane + 32] = __float2bfloat16_rn(pb_); }
            else { ps[r * PS + lane] = pa; ps[r * PS + lane + 32] = pb_; }
            __syncwarp();
            if (lane == 0) {
                const float c = m_old == -INFINITY ? 0.f : exp2f(m_old - m_new);
                rcor[r] = c; rsum[r] = rsum[r] * c + sum; rmax[r] = m_new;
            }
        }
        __syncthreads();
        if constexpr (TC) {                                     // O = O * rescale + P V on tensor cores (P bf16, as the reference rounds it)
            const __nv_bfloat16 *vt_s = reinterpret_cast<const __nv_bfloat16 *>(vs);
            #pragma unroll
            for (int j = 0; j < OWN; ++j) {
                const int tile = warp + (DA_THREADS / 32) * j, mt = tile / NTD, nt = tile % NTD;
                const float c0 = rcor[mt * 16 + g8], c1 = rcor[mt * 16 + g8 + 8];
                acc[j][0] *= c0; acc[j][1] *= c0; acc[j][2] *= c1; acc[j][3] *= c1;
                const __nv_bfloat16 *pa = pb + (mt * 16 + g8) * LP + 2 * t4;
                #pragma unroll
                for (int k0 = 0; k0 < DA_TILE; k0 += 16) {
                    if (k0 >= nk) break;                        // past the live keys: P is 0 there
                    uint32_t b0, b1;
                    ldsm_x2_trans(b0, b1, vt_s + (k0 + (lane & 15)) * LT + nt * 8);
                    mma16816(acc[j], ld32(pa + k0), ld32(pa + 8 * LP + k0), ld32(pa + k0 + 8), ld32(pa + 8 * LP + k0 + 8), b0, b1);
                }
            }
        } else {
        #pragma unroll
        for (int i = 0; i < RPV; ++i) { const float c = rcor[rg + NRG * i]; o[i][0] *= c; o[i][1] *= c; }
        #pragma unroll 4
        for (int kk = 0; kk < nk; ++kk) {                       // O = O * rescale + P V over the tile's live keys
            const float2 vf = bf2f(vs[kk * PW + dp]);
            #pragma unroll
            for (int i = 0; i < RPV; ++i) {
                const float p = ps[(rg + NRG * i) * PS + kk];
                o[i][0] = fmaf(p, vf.x, o[i][0]); o[i][1] = fmaf(p, vf.y, o[i][1]);
            }
        }
        }
    }
    __syncthreads();                                            // rsum / rmax final

    if (CS > 1) {                                               // a cluster of CS = nsplit blocks: partials merged in shared memory
        float *po = TC ? reinterpret_cast<float *>(ks) : qs;    // the normalised partial [R][HD] where q or the tiles were (read no more)
        each([&](int r, int d, float x, float y) {
            const float inv = rsum[r] > 0.f ? 1.f / rsum[r] : 0.f;
            *reinterpret_cast<float2 *>(po + r * HD + d) = make_float2(x * inv, y * inv);
        });
        for (int r = tid; r < R; r += DA_THREADS) rcor[r] = rsum[r] > 0.f ? rmax[r] + log2f(rsum[r]) : -INFINITY;
        cluster_merge<R, HD, CS>(po, rcor, out, g, nh, h);
        return;
    }
    if (nsplit == 1) {                                          // one split: out directly (a row with no key: 0)
        each([&](int r, int d, float x, float y) {
            const float inv = rsum[r] > 0.f ? 1.f / rsum[r] : 0.f;
            *reinterpret_cast<__nv_bfloat162 *>(out + ((size_t)(r / g) * nh + h * g + r % g) * HD + d) = __floats2bfloat162_rn(x * inv, y * inv);
        });
        return;
    }
    float *wo = ws_o + ((size_t)h * nsplit + s) * R * HD, *wl = ws_l + ((size_t)h * nsplit + s) * R;
    each([&](int r, int d, float x, float y) {                  // the normalised partial and its log2-sum-exp
        const float inv = rsum[r] > 0.f ? 1.f / rsum[r] : 0.f;
        __stcg(reinterpret_cast<float2 *>(wo + r * HD + d), make_float2(x * inv, y * inv));
    });
    for (int r = tid; r < R; r += DA_THREADS) __stcg(wl + r, rsum[r] > 0.f ? rmax[r] + log2f(rsum[r]) : -INFINITY);
    __threadfence();                                            // this block's partial is visible before its ticket
    __syncthreads();
    if (tid == 0) last = atomicAdd(counter + h, 1) == nsplit - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();                                            // every other block's partial is visible to this one

    float *wgt = reinterpret_cast<float *>(ks);                 // [R][DA_MAXSPLIT]: the splits' lse, then their weights
    #pragma unroll
    for (int j = 0; j < R * DA_MAXSPLIT / DA_THREADS; ++j) {    // every load in flight at once; a warp's stores to one row
        const int i = tid + j * DA_THREADS, r = i / nsplit, t = i % nsplit;
        if (i < R * nsplit) wgt[r * DA_MAXSPLIT + t] = __ldcg(ws_l + ((size_t)h * nsplit + t) * R + r);
    }
    __syncthreads();
    for (int r = warp; r < R; r += DA_THREADS / 32) {           // a warp per row, a lane per split (nsplit <= 32)
        const float l = lane < nsplit ? wgt[r * DA_MAXSPLIT + lane] : -INFINITY;
        float M = l;
        #pragma unroll
        for (int off = 16; off; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
        const float w = l == -INFINITY ? 0.f : exp2f(l - M);
        float tot = w;
        #pragma unroll
        for (int off = 16; off; off >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, off);
        if (lane < nsplit) wgt[r * DA_MAXSPLIT + lane] = w;
        if (lane == 0) rsum[r] = tot > 0.f ? 1.f / tot : 0.f;
    }
    __syncthreads();
    for (int i = 0; i < RPV; ++i) {                             // an empty split has weight 0 and is not read
        const int r = rg + NRG * i;
        const float *p = ws_o + ((size_t)h * nsplit * R + r) * HD + 2 * dp;
        float2 pt[DA_MAXSPLIT];
        float w[DA_MAXSPLIT];
        #pragma unroll
        for (int t = 0; t < DA_MAXSPLIT; ++t) {                 // a row's partials all in flight (a split with no live key: none)
            w[t] = t < nsplit ? wgt[r * DA_MAXSPLIT + t] : 0.f;
            if (w[t] != 0.f) pt[t] = __ldcg(reinterpret_cast<const float2 *>(p + (size_t)t * R * HD));
        }
        float x = 0.f, y = 0.f;
        #pragma unroll
        for (int t = 0; t < DA_MAXSPLIT; ++t)
            if (w[t] != 0.f) { x = fmaf(w[t], pt[t].x, x); y = fmaf(w[t], pt[t].y, y); }
        *reinterpret_cast<__nv_bfloat162 *>(out + ((size_t)(r / g) * nh + h * g + r % g) * HD + 2 * dp) =
            __floats2bfloat162_rn(x * rsum[r], y * rsum[r]);
    }
    if (tid == 0) counter[h] = 0;                               // ready for the next launch
}

#define DA_PARAMS const __nv_bfloat16 *q, int ldq, const __nv_bfloat16 *kb, int ldk, const __nv_bfloat16 *vb, int ldv,         \
    __nv_bfloat16 *k, __nv_bfloat16 *v, const int *length, int S, int g, int nkv, float scale, int nsplit, __nv_bfloat16 *out,   \
    float *ws_o, float *ws_l, int *counter, const __nv_bfloat16 *qw, const __nv_bfloat16 *kw, float qeps, float keps, float theta
#define DA_ARGS q, ldq, kb, ldk, vb, ldv, k, v, length, S, g, nkv, scale, nsplit, out, ws_o, ws_l, counter, qw, kw, qeps, keps, theta
#define DRAFT_ATTN(name, R, HD, NR, TC) extern "C" __global__ void __launch_bounds__(DA_THREADS) name(DA_PARAMS) {             \
    draft_attn_body<R, HD, NR, 1, TC>(DA_ARGS); }
// The cluster kernels (sm_90 and later): grid (CS, nkv) in clusters of CS blocks along the splits (nsplit = CS), _nr only;
// ws_o, ws_l and counter are not touched.
#if __CUDA_ARCH__ >= 900
#define DRAFT_ATTN_CLUSTER(name, R, HD, CS, TC) extern "C" __global__ void __cluster_dims__(CS, 1, 1)                       \
    __launch_bounds__(DA_THREADS) name(DA_PARAMS) { draft_attn_body<R, HD, true, CS, TC>(DA_ARGS); }
#else
#define DRAFT_ATTN_CLUSTER(name, R, HD, CS, TC)
#endif
DRAFT_ATTN(draft_attn_r16_d64, 16, 64, false, false)
DRAFT_ATTN(draft_attn_r32_d64, 32, 64, false, false)
DRAFT_ATTN(draft_attn_r64_d64, 64, 64, false, false)
DRAFT_ATTN(draft_attn_r16_d128, 16, 128, false, false)
DRAFT_ATTN(draft_attn_r32_d128, 32, 128, false, false)
DRAFT_ATTN(draft_attn_r64_d128, 64, 128, false, false)
DRAFT_ATTN(draft_attn_r16_d64_nr, 16, 64, true, false)
DRAFT_ATTN(draft_attn_r32_d64_nr, 32, 64, true, false)
DRAFT_ATTN(draft_attn_r64_d64_nr, 64, 64, true, false)
DRAFT_ATTN(draft_attn_r16_d128_nr, 16, 128, true, false)
DRAFT_ATTN(draft_attn_r32_d128_nr, 32, 128, true, false)
DRAFT_ATTN(draft_attn_r64_d128_nr, 64, 128, true, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c2, 16, 64, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c2, 32, 64, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c2, 64, 64, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c2, 16, 128, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c2, 32, 128, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c2, 64, 128, 2, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c4, 16, 64, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c4, 32, 64, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c4, 64, 64, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c4, 16, 128, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c4, 32, 128, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c4, 64, 128, 4, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c8, 16, 64, 8, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c8, 32, 64, 8, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c8, 64, 64, 8, false)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c8, 16, 128, 8, false)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c8, 32, 128, 8, false)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c8, 64, 128, 8, false)
DRAFT_ATTN(draft_attn_r16_d64_nr_tc, 16, 64, true, true)
DRAFT_ATTN(draft_attn_r32_d64_nr_tc, 32, 64, true, true)
DRAFT_ATTN(draft_attn_r64_d64_nr_tc, 64, 64, true, true)
DRAFT_ATTN(draft_attn_r16_d128_nr_tc, 16, 128, true, true)
DRAFT_ATTN(draft_attn_r32_d128_nr_tc, 32, 128, true, true)
DRAFT_ATTN(draft_attn_r64_d128_nr_tc, 64, 128, true, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c2_tc, 16, 64, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c2_tc, 32, 64, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c2_tc, 64, 64, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c2_tc, 16, 128, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c2_tc, 32, 128, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c2_tc, 64, 128, 2, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c4_tc, 16, 64, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c4_tc, 32, 64, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c4_tc, 64, 64, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c4_tc, 16, 128, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c4_tc, 32, 128, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c4_tc, 64, 128, 4, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d64_nr_c8_tc, 16, 64, 8, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d64_nr_c8_tc, 32, 64, 8, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d64_nr_c8_tc, 64, 64, 8, true)
DRAFT_ATTN_CLUSTER(draft_attn_r16_d128_nr_c8_tc, 16, 128, 8, true)
DRAFT_ATTN_CLUSTER(draft_attn_r32_d128_nr_c8_tc, 32, 128, 8, true)
DRAFT_ATTN_CLUSTER(draft_attn_r64_d128_nr_c8_tc, 64, 128, 8, true)

// ---------------------------------------------------------------- the context rows `extend` appends
// Row r of kr, vr [R, nkv, HD] (row strides ldk, ldv) to cache row L + r (L = *length; rows at or past S are dropped): the
// key RMS-normed by kw and rotated at position L + r, the value copied. A warp per (row, head), DA_THREADS / 32 a block.
template <int HD>
__device__ void kv_write_body(const __nv_bfloat16 *__restrict__ kr, int ldk, const __nv_bfloat16 *__restrict__ vr, int ldv,
                              __nv_bfloat16 *__restrict__ k, __nv_bfloat16 *__restrict__ v, const int *__restrict__ length, int S,
                              int R, int nkv, const __nv_bfloat16 *__restrict__ kw, float eps, float theta) {
    __shared__ float2 cs[DA_THREADS / 32][HD / 2];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i = blockIdx.x * (DA_THREADS / 32) + warp, r = i / nkv, h = i % nkv;
    const int L = max(0, __ldg(length));
    if (r >= R || L + r >= S) return;                           // whole warps; no block barrier follows
    for (int j = lane; j < HD / 2; j += 32) cs[warp][j] = rope_cs(L + r, rope_inv_freq(theta, j, HD));
    __syncwarp();
    float y[HD / 32];
    norm_rope_row<HD>(kr + (size_t)r * ldk + h * HD, kw, eps, cs[warp], y);
    const size_t row = ((size_t)(L + r) * nkv + h) * HD;
    #pragma unroll
    for (int e = 0; e < HD / 32; ++e) k[row + lane + 32 * e] = __float2bfloat16_rn(y[e]);
    if (lane < HD / 8) *reinterpret_cast<uint4 *>(v + row + lane * 8) = *reinterpret_cast<const uint4 *>(vr + (size_t)r * ldv + h * HD + lane * 8);
}

#define KV_WRITE(name, HD) extern "C" __global__ void __launch_bounds__(DA_THREADS) name(                                      \
    const __nv_bfloat16 *kr, int ldk, const __nv_bfloat16 *vr, int ldv, __nv_bfloat16 *k, __nv_bfloat16 *v, const int *length, \
    int S, int R, int nkv, const __nv_bfloat16 *kw, float eps, float theta) {                                                  \
    kv_write_body<HD>(kr, ldk, vr, ldv, k, v, length, S, R, nkv, kw, eps, theta); }
KV_WRITE(draft_kv_write_d64, 64)
KV_WRITE(draft_kv_write_d128, 128)

// Every drafter layer's context rows in one launch: layer y = blockIdx.y (< DA_MAXL) takes kr + y * lsk, vr + y * lsv (one
// batched GEMM's output), cache layer k + y * lsc, v + y * lsc and its key norm's weight kw<y>; the rest as draft_kv_write.
#define KV_WRITE_LAYERS(name, HD) extern "C" __global__ void __launch_bounds__(DA_THREADS) name(                               \
    const __nv_bfloat16 *kr, int ldk, long long lsk, const __nv_bfloat16 *vr, int ldv, long long lsv, __nv_bfloat16 *k,       \
    __nv_bfloat16 *v, long long lsc, const int *length, int S, int R, int nkv, const __nv_bfloat16 *kw0,                       \
    const __nv_bfloat16 *kw1, const __nv_bfloat16 *kw2, const __nv_bfloat16 *kw3, const __nv_bfloat16 *kw4,                   \
    const __nv_bfloat16 *kw5, const __nv_bfloat16 *kw6, const __nv_bfloat16 *kw7, float eps, float theta) {                   \
    const int y = blockIdx.y;                                   /* a select chain: no local-memory array */                \
    const __nv_bfloat16 *kw = y < 4 ? (y < 2 ? (y ? kw1 : kw0) : (y == 2 ? kw2 : kw3)) : (y < 6 ? (y == 4 ? kw4 : kw5) : (y == 6 ? kw6 : kw7)); \
    kv_write_body<HD>(kr + y * lsk, ldk, vr + y * lsv, ldv, k + y * lsc, v + y * lsc, length, S, R, nkv, kw, eps, theta); }
KV_WRITE_LAYERS(draft_kv_write_layers_d64, 64)
KV_WRITE_LAYERS(draft_kv_write_layers_d128, 128)
