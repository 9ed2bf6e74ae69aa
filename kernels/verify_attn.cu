// verify_attn.cu: tree-masked absorbed-MLA verify attention over the latent cache (nbs/03_verify).
//
// Queries: q_latent [T, H, 512], q_pe [T, H, 64] (bf16), flattened to M = T*H rows: r = t*H + h (token-major, the
// tensors contiguous) or, with head_major = 1, r = h*T + t (each a transpose(0, 1) of a contiguous [H, T, ...], as
// the W_UK product leaves q_latent). out and lse take the same row order. q_ld != 0: token-major q_latent rows at q_ld
// elements a token (a view into a wider row, as the folded q_b_proj leaves it); q_pe, out and lse stay packed.
// Cache layer kv [S, 576] (bf16): columns 0..511 = c_kv (keys AND values), 512..575 = k_pe (keys only).
// Key s < P is seen by every row; key P + j (tree slot j) is seen by row r iff bit j of vis[t, :] is set.
// Outputs: out [M, 512] bf16 = softmax(scale * q.k) . c_kv, lse [M] fp32 (natural log).
// Edge cases (all versions, direct and split): a row that sees no key at all gets out = 0 and lse = -inf; a cache
// row with a non-finite c_kv value poisons exactly the rows that see it (their out is NaN), never a row that
// doesn't (a masked key's p = 0 must not meet a NaN/inf V: 0 * NaN = NaN inside the PV mma, so v2 zeroes such V
// chunks in shared memory and marks their key, and a row that sees a marked key gets a NaN score).
// Dc = 512 and Dr = 64 are fixed (Kimi K2 / DeepSeek-V3 dims).
//
// v1 (one block per query row, fp32 CUDA cores: the simple, obviously-correct version) is history: kernels/dev/verify_attn_v1.cu.
// v2: bf16 tensor cores (mma.sync m16n8k16, fp32 accumulate) for QK^T and PV, BM query rows x BN keys per
//     tile, all heads sharing one latent K tile in shared memory (K and V are the same c_kv rows), online
//     softmax, and a split of the key range across blocks (flash-decoding) merged by verify_attn_combine.
// Only sm_80 instructions (cp.async, ldmatrix, mma.sync): builds for sm_80, sm_90 and sm_120.
#include "verify_attn_common.cuh"  // bf16, dims, prefix clamp, tree mask, split ranges, tile loads, the edge-case rules
#include "pdl.cuh"                 // the combine as a programmatic dependent (verify_attn_combine_pdl), the early trigger

// ---------------------------------------------------------------------------------------------------------
// v2 building blocks (sm_80+ PTX)
// ---------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void ldsm_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t &r0, uint32_t &r1, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3, uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
// d += A(16x16, row) * B(16x8, col), bf16 in, fp32 accumulate
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rows of 576 bf16 (72 chunks of 16 B) in shared memory, chunk index XOR (row & 7): the 8 rows an ldmatrix
// phase reads sit in 8 different 16-byte bank groups, with no padding (the 64x64 config needs every byte).
__device__ __forceinline__ uint32_t swz(int row, int chunk) {
    return (uint32_t)(row * ROW_BYTES + ((chunk ^ (row & 7)) << 4));
}

// Tile configuration. 8 warps. QK^T: warps form WM x WN over the [BM x BN] score tile (warp: 16 rows x KPW
// keys, full 576-deep reduction). PV: warp w owns output columns [64w, 64w+64) for all BM rows.
// Shared memory (bytes): Q [BM x 1152] | K/V stages [NS x BN x 1152] | P [BM x (BN+8)] bf16 |
// row max partials [WN x BM] | row sum partials [WN x BM] | alpha [BM] | final max [BM] | bad-key bits [2 words].
// The Python side mirrors SMEM in `v2_smem`.
template <int BM, int BN, int NS> struct Cfg {
    static constexpr int WM = BM / 16, WN = 8 / WM, KPW = BN / WN, NTQ = KPW / 8, MT = BM / 16, PST = BN + 8;
    static constexpr int Q_OFF = 0, K_OFF = BM * ROW_BYTES, P_OFF = K_OFF + NS * BN * ROW_BYTES;
    static constexpr int RMAX_OFF = P_OFF + BM * PST * 2, RSUM_OFF = RMAX_OFF + WN * BM * 4;
    static constexpr int ALPHA_OFF = RSUM_OFF + WN * BM * 4, MFIN_OFF = ALPHA_OFF + BM * 4;
    static constexpr int BAD_OFF = MFIN_OFF + BM * 4, SMEM = BAD_OFF + 8;
    static_assert(WM * WN == 8 && KPW % 8 == 0 && NTQ >= 1 && BN % 16 == 0 && BN <= 64, "bad tile config");
};

template <int BM, int BN, int NS>
__device__ __forceinline__ void verify_v2(const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe,
                                          const bf16 *__restrict__ kv, const uint32_t *__restrict__ vis, int W,
                                          int T, int H, int P, const int *__restrict__ p_dev, int S, float scale,
                                          bf16 *__restrict__ out, float *__restrict__ lse, bf16 *__restrict__ ws_o,
                                          float *__restrict__ ws_lse, int splits, int head_major, int q_ld) {
    using C = Cfg<BM, BN, NS>;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tig = lane & 3, x7 = lane & 7;
    const int M = T * H, m0 = blockIdx.x * BM, split = blockIdx.y;
    if (p_dev) P = clamp_prefix(*p_dev, T, S);
    const int n_keys = P + T;
    int tile0, tile1;
    split_tiles((n_keys + BN - 1) / BN, splits, split, tile0, tile1);

    const uint32_t sQ = smem_u32(smem + C::Q_OFF), sK0 = smem_u32(smem + C::K_OFF), sPb = smem_u32(smem + C::P_OFF);
    bf16 *sP = reinterpret_cast<bf16 *>(smem + C::P_OFF);
    float *sRmax = reinterpret_cast<float *>(smem + C::RMAX_OFF), *sRsum = reinterpret_cast<float *>(smem + C::RSUM_OFF);
    float *sAlpha = reinterpret_cast<float *>(smem + C::ALPHA_OFF), *sMfin = reinterpret_cast<float *>(smem + C::MFIN_OFF);
    uint32_t *sBad = reinterpret_cast<uint32_t *>(smem + C::BAD_OFF);  // bit i: key tile row i had a non-finite V chunk
    if (tid < 2) sBad[tid] = 0u;  // ordered before the first scrub by the first barrier of the key loop

    load_q_tile(sQ, q_lat, q_pe, m0, M, H, q_ld, BM, tid, 256, swz);  // rows past M zero-filled
    auto load_k = [&](int tile, int buf) { load_kv_tile(sK0 + buf * (BN * ROW_BYTES), kv, tile * BN, n_keys, BN, tid, 256, swz); };
    if (NS == 2 && tile0 < tile1) load_k(tile0, 0);
    cp_async_commit();

    const int wm = warp / C::WN, wn = warp % C::WN, lr0 = wm * 16 + g;  // QK layout: this thread's rows lr0, lr0+8
    uint32_t offA[4], offB[4];  // XOR-swizzled chunk offsets for k-steps 4q+u (A/V: chunk 2u + lane/16, B: 2u + bit 3)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        offA[u] = ((2 * u + (lane >> 4)) ^ x7) << 4;
        offB[u] = ((2 * u + ((lane >> 3) & 1)) ^ x7) << 4;
    }
    const uint32_t aQ = sQ + (wm * 16 + (lane & 15)) * ROW_BYTES;
    const uint32_t bK = (wn * C::KPW + x7) * ROW_BYTES;                      // x2: keys j*8 + lane%8
    const uint32_t bK4 = (wn * C::KPW + x7 + ((lane >> 4) << 3)) * ROW_BYTES;  // x4: keys 16jp + lane%8 (+8 for lanes 16..31)
    const uint32_t vK = (lane & 15) * ROW_BYTES + warp * 128;
    const uint32_t aP = sPb + ((lane & 15) * C::PST + (lane >> 4) * 8) * 2;
    int tq[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) { const int gr = m0 + lr0 + 8 * e; tq[e] = gr >= M ? -1 : head_major ? gr % T : gr / H; }

    float o[C::MT][8][4];
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[mt][n][e] = 0.f;
    float mr[2] = {-INFINITY, -INFINITY}, lr[2] = {0.f, 0.f};
    const float sl2 = scale * LOG2E;

    for (int it = tile0; it < tile1; ++it) {
        const int buf = NS == 2 ? ((it - tile0) & 1) : 0;
        if (NS == 2) {
            cp_async_wait_all();
            __syncthreads();  // tile `it` visible to all; everyone is done with the other buffer
            if (it + 1 < tile1) load_k(it + 1, buf ^ 1);
            cp_async_commit();
        } else {
            __syncthreads();
            load_k(it, 0);
            cp_async_commit();
            cp_async_wait_all();
            __syncthreads();
        }
        const uint32_t sK = sK0 + buf * (BN * ROW_BYTES);
        const bool need_mask = (it + 1) * BN > P;  // tile reaches the tree part or the tail

        // Masked keys only live in the tree part [P, n_keys) (the tail is zero-filled, the prefix is seen by all):
        // scrub its rows (verify_attn_common.cuh). Only tiles that reach the tree part pay for it (one tile of the AR
        // step, T rows of a verify).
        if (need_mask) {
            scrub_tree_rows(smem + C::K_OFF + buf * (BN * ROW_BYTES), max(P - it * BN, 0), min(n_keys - it * BN, BN), tid, 256,
                            sBad, swz);
            __syncthreads();
        }

        // S = Q K^T for this warp's 16 rows x KPW keys
        float sc[C::NTQ][4];
#pragma unroll
        for (int j = 0; j < C::NTQ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) sc[j][e] = 0.f;
#pragma unroll
        for (int q8 = 0; q8 < CHUNKS / 8; ++q8)
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                uint32_t a[4];
                ldsm_x4(a[0], a[1], a[2], a[3], aQ + q8 * 128 + offA[u]);
                if constexpr (C::NTQ % 2 == 0) {  // two key n-tiles per ldmatrix.x4
#pragma unroll
                    for (int jp = 0; jp < C::NTQ / 2; ++jp) {
                        uint32_t b0, b1, b2, b3;
                        ldsm_x4(b0, b1, b2, b3, sK + bK4 + jp * 16 * ROW_BYTES + q8 * 128 + offB[u]);
                        mma_bf16(sc[2 * jp], a, b0, b1);
                        mma_bf16(sc[2 * jp + 1], a, b2, b3);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < C::NTQ; ++j) {
                        uint32_t b0, b1;
                        ldsm_x2(b0, b1, sK + bK + j * 8 * ROW_BYTES + q8 * 128 + offB[u]);
                        mma_bf16(sc[j], a, b0, b1);
                    }
                }
            }

        // scale to log2 units, mask, row max over the block's warps
        const int kb = it * BN + wn * C::KPW + 2 * tig;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < C::NTQ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float v = sc[j][e] * sl2;
                if (need_mask) {
                    const int key = kb + j * 8 + (e & 1);
                    v = mask_score(v, key, key - it * BN, P, n_keys, tq[e >> 1], vis, W, sBad);
                }
                sc[j][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        publish_row_max(sRmax, wn, BM, lr0, mx, tig == 0);
        if (need_mask && tid < 2) sBad[tid] = 0u;  // last read above; the next scrub comes after the next loop barrier

        // online softmax: new running max, rescale factor, P = exp2(s - m) as bf16 into shared memory
        float al[2], mu[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            float mt = sRmax[lr0 + 8 * e];
#pragma unroll
            for (int w = 1; w < C::WN; ++w) mt = fmaxf(mt, sRmax[w * BM + lr0 + 8 * e]);
            mu[e] = softmax_step(mr[e], lr[e], mt, al[e]);
        }
#pragma unroll
        for (int j = 0; j < C::NTQ; ++j) {
            const float p0 = exp2f(sc[j][0] - mu[0]), p1 = exp2f(sc[j][1] - mu[0]);
            const float p2 = exp2f(sc[j][2] - mu[1]), p3 = exp2f(sc[j][3] - mu[1]);
            lr[0] += p0 + p1;
            lr[1] += p2 + p3;
            const int col = wn * C::KPW + j * 8 + 2 * tig;
            *reinterpret_cast<bf162 *>(sP + lr0 * C::PST + col) = __floats2bfloat162_rn(p0, p1);
            *reinterpret_cast<bf162 *>(sP + (lr0 + 8) * C::PST + col) = __floats2bfloat162_rn(p2, p3);
        }
        if (wn == 0 && tig == 0) { sAlpha[lr0] = al[0]; sAlpha[lr0 + 8] = al[1]; }
        __syncthreads();

        // O = alpha * O + P V, this warp's 64 output columns for all BM rows
#pragma unroll
        for (int mt = 0; mt < C::MT; ++mt) {
            const float a0 = sAlpha[mt * 16 + g], a1 = sAlpha[mt * 16 + g + 8];
#pragma unroll
            for (int n = 0; n < 8; ++n) { o[mt][n][0] *= a0; o[mt][n][1] *= a0; o[mt][n][2] *= a1; o[mt][n][3] *= a1; }
        }
#pragma unroll
        for (int ks = 0; ks < BN / 16; ++ks) {
            uint32_t a[C::MT][4];
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt)
                ldsm_x4(a[mt][0], a[mt][1], a[mt][2], a[mt][3], aP + (mt * 16 * C::PST + ks * 16) * 2);
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                uint32_t b0, b1, b2, b3;
                ldsm_x4_t(b0, b1, b2, b3, sK + vK + ks * 16 * ROW_BYTES + offA[np]);
#pragma unroll
                for (int mt = 0; mt < C::MT; ++mt) { mma_bf16(o[mt][2 * np], a[mt], b0, b1); mma_bf16(o[mt][2 * np + 1], a[mt], b2, b3); }
            }
        }
    }
    cp_async_wait_all();

    // epilogue: total row sums, normalise, write bf16 (direct) or a bf16 partial + lse per split
    publish_row_stats(sRsum, sMfin, wn, BM, lr0, lr, mr, tig == 0);
    const bool direct = splits == 1;
    bf16 *dst = row_dst(out, ws_o, splits, split, M);
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
            const int lrow = mt * 16 + g + 8 * h2, gr = m0 + lrow;
            if (gr >= M) continue;
            float L = 0.f;
#pragma unroll
            for (int w = 0; w < C::WN; ++w) L += sRsum[w * BM + lrow];
            const float inv = L == 0.f ? 0.f : 1.f / L;  // nothing visible: 0 (o is 0 too); NaN stays NaN
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const int col = warp * 64 + n * 8 + 2 * tig;
                *reinterpret_cast<bf162 *>(dst + (size_t)gr * DC + col) =
                    __floats2bfloat162_rn(o[mt][n][2 * h2] * inv, o[mt][n][2 * h2 + 1] * inv);
            }
        }
    if (tid < BM && m0 + tid < M) {
        float L = 0.f;
#pragma unroll
        for (int w = 0; w < C::WN; ++w) L += sRsum[w * BM + tid];
        const float ls = row_lse(sMfin[tid], L);
        if (direct) lse[m0 + tid] = ls;
        else ws_lse[(size_t)split * M + m0 + tid] = ls;
    }
}

#define VERIFY_V2(NAME, BM, BN, NS)                                                                              \
    extern "C" __global__ void __launch_bounds__(256, 1)                                                        \
    NAME(const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe, const bf16 *__restrict__ kv,             \
         const uint32_t *__restrict__ vis, int W, int T, int H, int P, const int *__restrict__ p_dev, int S,      \
         float scale, bf16 *__restrict__ out, float *__restrict__ lse, bf16 *__restrict__ ws_o,                  \
         float *__restrict__ ws_lse, int splits, int head_major, int q_ld) {                                     \
        pdl_launch_dependents();   /* a PDL combine's blocks may wait on idle SMs (a no-op for a plain one) */    \
        verify_v2<BM, BN, NS>(q_lat, q_pe, kv, vis, W, T, H, P, p_dev, S, scale, out, lse, ws_o, ws_lse, splits,   \
                              head_major, q_ld);                                                                 \
    }

VERIFY_V2(verify_attn_v2_64x64x2, 64, 64, 2)  // 231,944 B smem: H100/H200 (227 KB opt-in)
VERIFY_V2(verify_attn_v2_64x32x2, 64, 32, 2)  // 154,120 B: A100 (163 KB)
VERIFY_V2(verify_attn_v2_32x32x1, 32, 32, 1)  //  77,576 B: RTX 30xx/40xx/50xx (99 KB)

// ---------------------------------------------------------------------------------------------------------
// Split merge: out[r] = sum_s w_s o_s / sum_s w_s, w_s = exp(lse_s - max), lse[r] = max + log(sum_s w_s).
// grid (M, 512 / (8 L)), block (L, G): a block merges 8L columns of one row; thread (x, y) reads 16 bytes of
// every G-th split starting at y, so all of a row's partial reads are in flight at once. L*G in {64..256},
// splits <= MAX_SPLITS. A row whose splits are all empty (lse -inf everywhere: it sees no key) gets out = 0 and
// lse = -inf, as the direct path writes; a NaN partial stays NaN. The host picks (8, 32) for many splits (the AR step: 64 rows, ~129 splits) and (64, <=4)
// for a few (trees: thousands of rows, 2..8 splits).
// ---------------------------------------------------------------------------------------------------------
#define MAX_SPLITS 1024   // splits the combine merges: one lse each in shared memory
// PDL: the partials are read coherently (ld.global.cg), as a programmatic dependent of the split kernel must (pdl.cuh)
template <bool PDL>
__device__ __forceinline__ void combine_splits(const bf16 *__restrict__ ws_o, const float *__restrict__ ws_lse, int splits, int M,
                                               bf16 *__restrict__ out, float *__restrict__ lse) {
    const int L = blockDim.x, G = blockDim.y, CW = 8 * L, nthr = L * G, nwarps = nthr >> 5;
    const int r = blockIdx.x, c0 = blockIdx.y * CW, gy = threadIdx.y, tid = gy * L + threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31, col = c0 + threadIdx.x * 8;
    __shared__ float sl[MAX_SPLITS], red[2048], smax[8], sden[8];
    // this thread's first KP partial chunks are requested before the lse values, so the block waits on one round trip to
    // L2, not two (the weights need every split's lse first): with 32 groups, all of up to 256 splits. The sums below run
    // in the same order as before.
    constexpr int KP = 8;
    auto src = [&](int s) { return reinterpret_cast<const uint4 *>(ws_o + ((size_t)s * M + r) * DC + col); };
    uint4 pre[KP];
#pragma unroll
    for (int k = 0; k < KP; ++k)
        if (gy + k * G < splits) pre[k] = PDL ? ldcg(src(gy + k * G)) : *src(gy + k * G);
    float mx = -INFINITY;
    for (int s = tid; s < splits; s += nthr) {
        const float v = PDL ? ldcg(ws_lse + (size_t)s * M + r) : ws_lse[(size_t)s * M + r];
        sl[s] = v;
        mx = fmaxf(mx, v);
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (lane == 0) smax[warp] = mx;
    __syncthreads();
    mx = smax[0];
    for (int w = 1; w < nwarps; ++w) mx = fmaxf(mx, smax[w]);
    float den = 0.f;
    for (int s = tid; s < splits; s += nthr) if (sl[s] != -INFINITY) den += exp2f((sl[s] - mx) * LOG2E);
#pragma unroll
    for (int o = 16; o; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
    if (lane == 0) sden[warp] = den;
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = 0.f;
    auto add = [&](int s, uint4 v) {   // split s's weighted chunk into acc (an empty split, lse -inf, adds nothing)
        const float ls = sl[s];
        if (ls == -INFINITY) return;
        const float w = exp2f((ls - mx) * LOG2E);
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};   // bf16 pairs, the lower column in the low half: exact as floats
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            acc[2 * i] += w * __uint_as_float(u[i] << 16);
            acc[2 * i + 1] += w * __uint_as_float(u[i] & 0xffff0000u);
        }
    };
#pragma unroll
    for (int k = 0; k < KP; ++k)
        if (gy + k * G < splits) add(gy + k * G, pre[k]);
#pragma unroll 4
    for (int s = gy + KP * G; s < splits; s += G) add(s, PDL ? ldcg(src(s)) : *src(s));
#pragma unroll
    for (int i = 0; i < 8; ++i) red[gy * CW + threadIdx.x * 8 + i] = acc[i];
    __syncthreads();
    float dsum = 0.f;
    for (int w = 0; w < nwarps; ++w) dsum += sden[w];
    for (int c = tid; c < CW; c += nthr) {
        float tot = 0.f;
        for (int g = 0; g < G; ++g) tot += red[g * CW + c];
        out[(size_t)r * DC + c0 + c] = __float2bfloat16(dsum == 0.f ? 0.f : tot / dsum);
    }
    if (blockIdx.y == 0 && tid == 0) lse[r] = dsum == 0.f ? -INFINITY : mx + logf(dsum);
}
extern "C" __global__ void __launch_bounds__(256)
verify_attn_combine(const bf16 *__restrict__ ws_o, const float *__restrict__ ws_lse, int splits, int M,
                    bf16 *__restrict__ out, float *__restrict__ lse) {
    combine_splits<false>(ws_o, ws_lse, splits, M, out, lse);
}
// the same, launched as a programmatic dependent of the split kernel (verify.py, pdl=True): its blocks may start while the
// split kernel's last blocks run, and wait for all of it before reading the partials
extern "C" __global__ void __launch_bounds__(256)
verify_attn_combine_pdl(const bf16 *__restrict__ ws_o, const float *__restrict__ ws_lse, int splits, int M,
                        bf16 *__restrict__ out, float *__restrict__ lse) {
    pdl_wait();
    combine_splits<true>(after_here(ws_o), after_here(ws_lse), splits, M, out, lse);
}
