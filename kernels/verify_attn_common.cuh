// verify_attn_common.cuh: what the verify attention kernels share (verify_attn.cu: v2 and the combine, sm_80+;
// verify_attn_sm90.cu: the wgmma version, sm_90a; dev/verify_attn_v1.cu: v1, the history): dimensions, the prefix clamp, the tree mask, the split of the key
// tiles, cp.async, and the edge-case rules (non-finite V rows under the mask, rows that see nothing).
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf162;

namespace {
constexpr int DC = 512, DR = 64, DQK = DC + DR;  // latent width, rope width, score width (= kv row)
constexpr int ROW_BYTES = DQK * 2;               // 1152 bytes: one cache row, one query row
constexpr int CHUNKS = ROW_BYTES / 16;           // 72 16-byte chunks per row
constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
}

__device__ __forceinline__ int clamp_prefix(int p, int T, int S) { return max(0, min(p, S - T)); }

__device__ __forceinline__ bool tree_visible(const uint32_t *__restrict__ vis, int W, int t, int j) {
    return (vis[(size_t)t * W + (j >> 5)] >> (j & 31)) & 1u;
}

// key tiles [tile0, tile1) of split `split` when `n_tiles` are cut into `splits` equal runs (the last may be short or empty)
__device__ __forceinline__ void split_tiles(int n_tiles, int splits, int split, int &tile0, int &tile1) {
    const int tps = (n_tiles + splits - 1) / splits;
    tile0 = split * tps;
    tile1 = min(n_tiles, tile0 + tps);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// all of this thread's cp.async groups complete except the newest N (N in flight)
template <int N> __device__ __forceinline__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// cp.async of a [rows x 576] bf16 tile into shared memory, 16-byte chunk (row, ch) at dst + off(row, ch), all threads:
// query rows m0 + row (q_latent | q_pe), zero-filled from row M on ...
// q_latent row r starts at q_lat_row(r): r * DC where its rows are packed (q_ld = 0), else token r / H at q_ld elements a token
// (token-major rows inside a wider one, e.g. the folded q_b_proj's output [T, H * DC | H * DR]: no copy out of it)
__device__ __forceinline__ size_t q_lat_row(int r, int H, int q_ld) {
    return q_ld ? (size_t)(r / H) * q_ld + (size_t)(r % H) * DC : (size_t)r * DC;
}
template <class Off>
__device__ __forceinline__ void load_q_tile(uint32_t dst, const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe, int m0,
                                            int M, int H, int q_ld, int rows, int tid, int nthreads, Off off) {
    for (int c = tid; c < rows * CHUNKS; c += nthreads) {
        const int row = c / CHUNKS, ch = c - row * CHUNKS, gr = m0 + row;
        const bool ok = gr < M;
        const bf16 *src = !ok ? q_lat : ch < 64 ? q_lat + q_lat_row(gr, H, q_ld) + ch * 8 : q_pe + (size_t)gr * DR + (ch - 64) * 8;
        cp_async16(dst + off(row, ch), src, ok ? 16 : 0);
    }
}
// ... and cache rows kb + row, zero-filled from key n_keys on (so a masked p = 0 never meets garbage)
template <class Off>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const bf16 *__restrict__ kv, int kb, int n_keys, int rows, int tid,
                                             int nthreads, Off off) {
    for (int c = tid; c < rows * CHUNKS; c += nthreads) {
        const int row = c / CHUNKS, ch = c - row * CHUNKS, s = kb + row;
        const bool ok = s < n_keys;
        cp_async16(dst + off(row, ch), kv + (size_t)(ok ? s : 0) * DQK + ch * 8, ok ? 16 : 0);
    }
}

__device__ __forceinline__ float quad_max(float x) {  // over the 4 lanes that share a row of an mma fragment
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Masked keys only live in the tree part [P, P + T): a p = 0 there must never multiply a NaN/inf V in the PV
// product (0 * NaN = NaN), so the kernels zero the non-finite 16-byte V chunks of those key rows in shared memory and
// mark the key (bit `row` of `bad`); a row that does see a marked key gets a NaN score (mask_score).
__device__ __forceinline__ bool has_nonfinite_bf16x8(const uint4 v) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    bool bad = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) bad |= ((w[i] & 0x7F80u) == 0x7F80u) | ((w[i] & 0x7F800000u) == 0x7F800000u);
    return bad;
}
// key rows [r0, r1) of a shared-memory tile whose 16-byte chunk (row, ch) lives at tile + off(row, ch)
template <class Off>
__device__ __forceinline__ void scrub_tree_rows(unsigned char *tile, int r0, int r1, int tid, int nthreads, uint32_t *bad, Off off) {
    for (int c = tid; c < (r1 - r0) * (DC / 8); c += nthreads) {
        const int row = r0 + c / (DC / 8), ch = c % (DC / 8);
        uint4 *p16 = reinterpret_cast<uint4 *>(tile + off(row, ch));
        if (has_nonfinite_bf16x8(*p16)) {
            *p16 = make_uint4(0u, 0u, 0u, 0u);
            atomicOr(&bad[row >> 5], 1u << (row & 31));
        }
    }
}

// score v of key `key` (row kr of its tile) for tree token tq (-1: a padding row): -inf where not visible, NaN where
// the key's V row was non-finite, else v
__device__ __forceinline__ float mask_score(float v, int key, int kr, int P, int n_keys, int tq, const uint32_t *__restrict__ vis,
                                            int W, const uint32_t *bad) {
    bool ok = key < n_keys;
    if (ok && key >= P) {
        if (tq >= 0) ok = tree_visible(vis, W, tq, key - P);
        if (ok && ((bad[kr >> 5] >> (kr & 31)) & 1u)) v = __int_as_float(0x7fc00000);  // sees a NaN/inf row
    }
    if (!ok) v = -INFINITY;
    return v;
}

// online softmax, one row (log2 units): fold the tile max mt into the running max m, rescale the running sum l;
// returns the shift for this tile's exponents (0 while everything seen is -inf, so exp2(-inf - 0) = 0, not NaN)
__device__ __forceinline__ float softmax_step(float &m, float &l, float mt, float &alpha) {
    const float mn = fmaxf(m, mt), mu = mn == -INFINITY ? 0.f : mn;
    alpha = exp2f(m - mu);
    m = mn;
    l *= alpha;
    return mu;
}

// natural-log lse of a row from its max (log2 units) and sum: -inf when it saw nothing; a NaN sum stays NaN
__device__ __forceinline__ float row_lse(float m, float L) { return L == 0.f ? -INFINITY : (m + log2f(L)) * LN2; }

// per tile, called by every thread of the block: the quad's row maxima of rows r and r + 8 over column group `grp`,
// published by lane 0 of the quad, then a block barrier
__device__ __forceinline__ void publish_row_max(float *rmax, int grp, int bm, int r, float (&mx)[2], bool quad_lead) {
#pragma unroll
    for (int e = 0; e < 2; ++e) mx[e] = quad_max(mx[e]);
    if (quad_lead) { rmax[grp * bm + r] = mx[0]; rmax[grp * bm + r + 8] = mx[1]; }
    __syncthreads();
}

// epilogue, called by every thread of the block: the thread holding rows r and r + 8 of column group `grp` sums its
// quad's row sums l, lane 0 of the quad publishes them (group 0 the row maxima m too), then a block barrier
__device__ __forceinline__ void publish_row_stats(float *sum, float *mfin, int grp, int bm, int r, float (&l)[2],
                                                  const float (&m)[2], bool quad_lead) {
#pragma unroll
    for (int e = 0; e < 2; ++e) l[e] = quad_sum(l[e]);
    if (quad_lead) {
        sum[grp * bm + r] = l[0];
        sum[grp * bm + r + 8] = l[1];
        if (grp == 0) { mfin[r] = m[0]; mfin[r + 8] = m[1]; }
    }
    __syncthreads();
}

// where a block writes its rows: out when the key range is not split, else split `split`'s partial in the workspace
__device__ __forceinline__ bf16 *row_dst(bf16 *out, bf16 *ws_o, int splits, int split, int M) {
    return splits == 1 ? out : ws_o + (size_t)split * M * DC;
}
