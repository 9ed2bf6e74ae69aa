// draft_fused.cu (dev, session 38; not used by the engine): a DFlash drafter's whole draft in ONE launch (issue 17).
// The compiled draft of the demo pair is 32 kernels (15 cuBLAS GEMMs of ~2.8 µs, 4 attention / K/V-write kernels, 13 inductor
// kernels; 85 µs of kernels a round, bench_compile.md "Session 38"), and at 16 rows every one of them is launch- and
// latency-bound. Here G blocks (at most one wave) run the draft's 17 stages back to back, separated by a grid barrier, each
// stage's work cut into units that blocks take round-robin:
//   A   fc of the context features (units of 64 columns) | layer 0's k, v, q of the block (a unit per head: RMS norm, RoPE)
//   B   every layer's context keys and values (norm, RoPE) into the cache rows [L, L + n)            then, for each layer l:
//   Q   (l > 0) the block's k, v, q of layer l                                                       (as A's second part)
//   C   attention: a unit per (head, 128 keys), 16 keys a warp on tensor cores, the block's partial (max, sum, O) to a workspace
//   D   the partials merged, o_proj, the residual                                                      (units of 16 columns)
//   E   post-attention norm, gate and up, SiLU x up                                                   (units of 16 columns)
//   F   down, the residual                                                                            (units of 16 columns)
//   H   the final norm of rows 1..T-1 and the lm_head, fp32 logits out                                (units of 64 columns)
// A unit's GEMM is Y[16, NC] = X[16, K] W[NC, K]^T: X (normed in the prologue where the model norms it) in shared memory, the 8
// warps splitting K in 32-wide steps (mma.sync m16n8k16, bf16 in, fp32 sums; each lane loads 16 B of X and W a step, the k
// order permuted alike for both, as kernels/dev/few_row_gemm.cu), the partials summed in shared memory, then the epilogue.
// Values are rounded to bf16 where the torch draft rounds them (each projection's output, the norms, SiLU, the residuals);
// the q / k norms and RoPE are fp32 as in draft_attn.cu's _nr kernels, whose helpers this file includes.
// Limits: T = 16 block rows, R <= 16 context rows, head_dim 64, num_heads == num_key_value_heads, K of every GEMM % 32 == 0,
// H % 64 == 0, I % 16 == 0, V % 64 == 0; cache rows >= S are not written (the torch path drops them too).
// The grid barrier is a counter in `bar` (2 words, zero between launches; the last block to finish puts them back to 0): every
// block must be resident at once, so G <= the SMs (one block an SM by its shared memory).
#include "draft_attn.cu"

#define DF_THREADS 256
#define DF_WARPS 8
#define DF_T 16
#define DF_HD 64
#define DF_PAD 32            // bf16 a shared X row is padded by (64 B: a quarter-warp's 16-B loads of 2 rows x 4 k chunks hit distinct banks)
#define DF_CHUNK 128         // keys an attention unit takes: 16 a warp
#define DF_TL 68             // floats a row of the reduced tile [16][64 + 4]
#define DF_VL 72             // bf16 a row of a warp's V tile and of Q [16][64 + 8]

typedef __nv_bfloat16 bf16;

// The pointer table P (int64 on the device): the drafter's weights, its cache and the kernel's workspace (what stays the same
// from draft to draft), then 8 a layer. A draft's own tensors (features, n_new, root token, logits) are arguments.
enum { P_FC, P_HNORM, P_EMBED, P_HEAD, P_NORM, P_K, P_V, P_LEN, P_WS, P_BAR, P_PART, P_LAYER0 = 16 };
enum { L_WKVQ, L_QN, L_KN, L_WO, L_LN1, L_LN2, L_WGU, L_WD, L_STRIDE };

__device__ __forceinline__ float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint4 ldcg16(const bf16 *p) { return __ldcg(reinterpret_cast<const uint4 *>(p)); }
__device__ __forceinline__ float ldcg1(const bf16 *p) { return __bfloat162float(__ushort_as_bfloat16(__ldcg(reinterpret_cast<const unsigned short *>(p)))); }
// bf16 elements of the X region of shared memory: 16 rows of ldx, or attention's Q and 8 warps' V tiles
__host__ __device__ __forceinline__ int df_xs_elems(int ldx) { return 16 * ldx > 9 * 16 * 72 ? 16 * ldx : 9 * 16 * 72; }

// All blocks wait here until every block has arrived at barrier number `k` (1, 2, ...): one counter, never reset mid-launch.
__device__ __forceinline__ void grid_sync(unsigned *bar, unsigned k) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        const unsigned target = k * gridDim.x;
        unsigned v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory"); } while (v < target);
    }
    __syncthreads();
}

// X rows into shared memory: row r (< nrows) from `first` (r == 0, when given) or src + r * lds, K columns; rows nrows..15 zero.
// g != nullptr: each row RMS-normed as model.RMSNorm rounds it, bf16(g * bf16(x * rsqrt(mean(x^2) + eps))).
__device__ void load_rows(bf16 *xs, int ldx, const bf16 *first, const bf16 *src, size_t lds, int K, int nrows,
                          const bf16 *__restrict__ g, float eps, float *rs) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, cpr = K / 8;
    for (int c = tid; c < DF_T * cpr; c += DF_THREADS) {
        const int r = c / cpr, k = c % cpr * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < nrows) v = ldcg16((r == 0 && first ? first : src + r * lds) + k);
        *reinterpret_cast<uint4 *>(xs + r * ldx + k) = v;
    }
    if (!g) { __syncthreads(); return; }
    __syncthreads();
    for (int r = warp; r < DF_T; r += DF_WARPS) {
        float s = 0.f;
        for (int k = lane * 2; k < K; k += 64) { const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(xs + r * ldx + k)); s += f.x * f.x + f.y * f.y; }
        #pragma unroll
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) rs[r] = rsqrtf(s / K + eps);
    }
    __syncthreads();
    for (int c = tid; c < DF_T * K / 2; c += DF_THREADS) {
        const int r = c / (K / 2), k = c % (K / 2) * 2;
        __nv_bfloat162 *p = reinterpret_cast<__nv_bfloat162 *>(xs + r * ldx + k);
        const float2 f = __bfloat1622float2(*p), w = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(g + k));
        *p = __floats2bfloat162_rn(w.x * bf16r(f.x * rs[r]), w.y * bf16r(f.y * rs[r]));
    }
    __syncthreads();
}

// Y[16][NJ * 8] = X W^T over K into tile [16][DF_TL] (fp32), tile j's 8 columns from rows wj[j] .. wj[j] + 7 of K bf16 each.
template <int NJ>
__device__ void unit_gemm(const bf16 *xs, int ldx, int K, const bf16 *const *wj, float *red, float *tile) {
    constexpr int NC = NJ * 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3;
    float c[NJ][4];
    #pragma unroll
    for (int j = 0; j < NJ; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
    for (int ks = warp; ks < K / 32; ks += DF_WARPS) {
        const int k = ks * 32 + 8 * t;
        uint4 b[NJ];
        #pragma unroll
        for (int j = 0; j < NJ; ++j) b[j] = __ldg(reinterpret_cast<const uint4 *>(wj[j] + (size_t)gr * K + k));
        const uint4 lo = *reinterpret_cast<const uint4 *>(xs + gr * ldx + k), hi = *reinterpret_cast<const uint4 *>(xs + (gr + 8) * ldx + k);
        #pragma unroll
        for (int j = 0; j < NJ; ++j) {   // the lane's k 0-3 feed slots 2t, 2t + 1, 8 + 2t, 9 + 2t of one mma, its k 4-7 the next
            mma16816(c[j], lo.x, hi.x, lo.y, hi.y, b[j].x, b[j].y);
            mma16816(c[j], lo.z, hi.z, lo.w, hi.w, b[j].z, b[j].w);
        }
    }
    float *mine = red + warp * DF_T * NC;
    #pragma unroll
    for (int j = 0; j < NJ; ++j) {
        *reinterpret_cast<float2 *>(mine + gr * NC + j * 8 + 2 * t) = make_float2(c[j][0], c[j][1]);
        *reinterpret_cast<float2 *>(mine + (gr + 8) * NC + j * 8 + 2 * t) = make_float2(c[j][2], c[j][3]);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < DF_T * NC; e += DF_THREADS) {
        float s = 0.f;
        #pragma unroll
        for (int w = 0; w < DF_WARPS; ++w) s += red[w * DF_T * NC + e];
        tile[e / NC * DF_TL + e % NC] = s;
    }
    __syncthreads();
}

// A head's 64 columns of the tile (rows < nrows) to dst rows (stride ld): rounded to bf16 as the projection's output, then with
// w != nullptr RMS-normed by w and rotated (rotate-half RoPE, base theta) at position pos0 + r, in fp32 as norm_rope_row does.
__device__ void head_out(float *tile, int nrows, const bf16 *w, float eps, float theta, int pos0, bf16 *dst, size_t ld,
                         float2 *cs) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < nrows; r += DF_WARPS) {
        float *x = tile + r * DF_TL;
        float y[2] = {bf16r(x[lane]), bf16r(x[lane + 32])};
        if (w) {
            cs[warp * 32 + lane] = rope_cs(pos0 + r, rope_inv_freq(theta, lane, DF_HD));
            x[lane] = y[0]; x[lane + 32] = y[1];
            __syncwarp();
            norm_rope_row<DF_HD, float>(x, w, eps, cs + warp * 32, y);
        }
        dst[r * ld + lane] = __float2bfloat16_rn(y[0]); dst[r * ld + lane + 32] = __float2bfloat16_rn(y[1]);
        __syncwarp();
    }
}

// The block's k, v or q of head `hu % NH` (kind hu / NH: 0 k, 1 v, 2 q) of one layer, X (normed rows) already in xs.
__device__ void qkv_unit(const unsigned long long *P, int l, int hu, const bf16 *xs, int ldx, int H, int NH, int S, int L1,
                         float eps, float theta, bf16 *qbuf, float *red, float *tile, float2 *cs) {
    const unsigned long long *LP = P + P_LAYER0 + l * L_STRIDE;
    const int kind = hu / NH, h = hu % NH;
    const bf16 *W = reinterpret_cast<const bf16 *>(LP[L_WKVQ]) + (size_t)(kind * NH + h) * DF_HD * H;
    const bf16 *wj[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) wj[j] = W + (size_t)j * 8 * H;
    unit_gemm<8>(xs, ldx, H, wj, red, tile);
    if (kind == 2) { head_out(tile, DF_T, reinterpret_cast<const bf16 *>(LP[L_QN]), eps, theta, L1, qbuf + h * DF_HD, (size_t)NH * DF_HD, cs); return; }
    const size_t lstride = (size_t)S * NH * DF_HD;
    bf16 *dst = reinterpret_cast<bf16 *>(P[kind == 0 ? P_K : P_V]) + l * lstride + ((size_t)L1 * NH + h) * DF_HD;
    head_out(tile, min(DF_T, S - L1), kind == 0 ? reinterpret_cast<const bf16 *>(LP[L_KN]) : nullptr, eps, theta, L1, dst, (size_t)NH * DF_HD, cs);
}

// Attention of the block's 16 query rows of head h over keys [key0, key0 + DF_CHUNK) of [0, Lk): warp w takes keys key0 + 16 w
// .. + 15 (scores and P V on tensor cores, P rounded to bf16 as the reference's PV product), the warps merge in shared memory
// and the block writes its partial: max (log2 domain) and sum [16], O [16][64] unnormalised, fp32.
__device__ void attn_unit(const bf16 *qbuf, int NH, const bf16 *kc, const bf16 *vc, int h, int key0, int Lk, float qscale,
                          bf16 *smem_bf, float *red, float *part) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2, t = lane & 3;
    bf16 *qs = smem_bf, *vt = smem_bf + DF_T * DF_VL + warp * DF_T * DF_VL;
    for (int c = tid; c < DF_T * 8; c += DF_THREADS) {
        const int r = c / 8, k = c % 8 * 8;
        *reinterpret_cast<uint4 *>(qs + r * DF_VL + k) = ldcg16(qbuf + (size_t)r * NH * DF_HD + h * DF_HD + k);
    }
    const int k0 = key0 + warp * 16;
    // this warp's V rows into its tile (zeros past Lk: a scratch row's NaN must not meet P = 0) and its K fragments
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = lane + 32 * i, r = e / 8, ch = e % 8 * 8, key = k0 + r;
        *reinterpret_cast<uint4 *>(vt + r * DF_VL + ch) = key < Lk ? ldcg16(vc + ((size_t)key * NH + h) * DF_HD + ch) : make_uint4(0, 0, 0, 0);
    }
    uint4 kb[2][2];
    #pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
        const int key = k0 + nt * 8 + gr;
        #pragma unroll
        for (int s = 0; s < 2; ++s) kb[nt][s] = key < Lk ? ldcg16(kc + ((size_t)key * NH + h) * DF_HD + s * 32 + 8 * t) : make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    #pragma unroll
    for (int s = 0; s < 2; ++s) {
        const uint4 lo = *reinterpret_cast<const uint4 *>(qs + gr * DF_VL + s * 32 + 8 * t), hi = *reinterpret_cast<const uint4 *>(qs + (gr + 8) * DF_VL + s * 32 + 8 * t);
        #pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
            mma16816(sc[nt], lo.x, hi.x, lo.y, hi.y, kb[nt][s].x, kb[nt][s].y);
            mma16816(sc[nt], lo.z, hi.z, lo.w, hi.w, kb[nt][s].z, kb[nt][s].w);
        }
    }
    float m[2] = {-INFINITY, -INFINITY};   // rows gr, gr + 8
    #pragma unroll
    for (int nt = 0; nt < 2; ++nt)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int key = k0 + nt * 8 + 2 * t + (i & 1);
            sc[nt][i] = key < Lk ? sc[nt][i] * qscale : -INFINITY;
            m[i >> 1] = fmaxf(m[i >> 1], sc[nt][i]);
        }
    #pragma unroll
    for (int i = 0; i < 2; ++i) { m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1)); m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2)); }
    float l[2] = {0.f, 0.f};
    #pragma unroll
    for (int nt = 0; nt < 2; ++nt)
        #pragma unroll
        for (int i = 0; i < 4; ++i) { const float mm = m[i >> 1]; sc[nt][i] = mm == -INFINITY ? 0.f : exp2f(sc[nt][i] - mm); l[i >> 1] += sc[nt][i]; }
    #pragma unroll
    for (int i = 0; i < 2; ++i) { l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1); l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2); }
    auto pk = [](float a, float b) { const __nv_bfloat162 v = __floats2bfloat162_rn(a, b); return *reinterpret_cast<const uint32_t *>(&v); };
    const uint32_t a0 = pk(sc[0][0], sc[0][1]), a1 = pk(sc[0][2], sc[0][3]), a2 = pk(sc[1][0], sc[1][1]), a3 = pk(sc[1][2], sc[1][3]);
    float o[8][4];
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
        uint32_t b0, b1;
        ldsm_x2_trans(b0, b1, vt + (lane & 15) * DF_VL + j * 8);
        mma16816(o[j], a0, a1, a2, a3, b0, b1);
    }
    // the warps' (m, l, O) to shared memory, then the block's merge over them
    float *wo = red + warp * DF_T * DF_HD, *wm = red + DF_WARPS * DF_T * DF_HD + warp * 2 * DF_T, *wl = wm + DF_T;
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<float2 *>(wo + gr * DF_HD + j * 8 + 2 * t) = make_float2(o[j][0], o[j][1]);
        *reinterpret_cast<float2 *>(wo + (gr + 8) * DF_HD + j * 8 + 2 * t) = make_float2(o[j][2], o[j][3]);
    }
    if (t == 0) { wm[gr] = m[0]; wm[gr + 8] = m[1]; wl[gr] = l[0]; wl[gr + 8] = l[1]; }
    __syncthreads();
    const float *wm0 = red + DF_WARPS * DF_T * DF_HD;
    for (int e = tid; e < DF_T * DF_HD; e += DF_THREADS) {
        const int r = e / DF_HD;
        float M = -INFINITY;
        #pragma unroll
        for (int w = 0; w < DF_WARPS; ++w) M = fmaxf(M, wm0[w * 2 * DF_T + r]);
        float s = 0.f, L = 0.f;
        #pragma unroll
        for (int w = 0; w < DF_WARPS; ++w) {
            const float mw = wm0[w * 2 * DF_T + r], f = mw == -INFINITY ? 0.f : exp2f(mw - M);
            s += f * red[w * DF_T * DF_HD + e]; L += f * wm0[w * 2 * DF_T + DF_T + r];
        }
        part[2 * DF_T + e] = s;
        if (e % DF_HD == 0) { part[r] = M; part[DF_T + r] = L; }
    }
    __syncthreads();
}

// o_proj's X: the attention partials of every head merged into bf16 rows [16][NH * 64] in xs.
__device__ void merge_parts(const float *parts, int NH, int nch, bf16 *xs, int ldx, float *wgt) {
    const int tid = threadIdx.x, PS = 2 * DF_T + DF_T * DF_HD;   // floats a partial
    for (int e = tid; e < NH * DF_T; e += DF_THREADS) {           // weights exp2(m_c - M) / sum, per (head, row, chunk)
        const int h = e / DF_T, r = e % DF_T;
        const float *p0 = parts + (size_t)h * nch * PS;
        float M = -INFINITY, L = 0.f;
        for (int c = 0; c < nch; ++c) M = fmaxf(M, __ldcg(p0 + c * PS + r));
        for (int c = 0; c < nch; ++c) { const float m = __ldcg(p0 + c * PS + r); L += m == -INFINITY ? 0.f : exp2f(m - M) * __ldcg(p0 + c * PS + DF_T + r); }
        for (int c = 0; c < nch; ++c) { const float m = __ldcg(p0 + c * PS + r); wgt[e * 32 + c] = m == -INFINITY ? 0.f : exp2f(m - M) / L; }
    }
    __syncthreads();
    for (int e = tid; e < NH * DF_T * DF_HD; e += DF_THREADS) {
        const int h = e / (DF_T * DF_HD), rd = e % (DF_T * DF_HD), r = rd / DF_HD, d = rd % DF_HD;
        const float *p0 = parts + (size_t)h * nch * PS + 2 * DF_T + rd;
        float s = 0.f;
        for (int c = 0; c < nch; ++c) s += wgt[(h * DF_T + r) * 32 + c] * __ldcg(p0 + c * PS);
        xs[r * ldx + h * DF_HD + d] = __float2bfloat16_rn(s);
    }
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(DF_THREADS, 1) draft_fused(
    const unsigned long long *__restrict__ P, const bf16 *__restrict__ feat, const int *__restrict__ n_new,
    const int *__restrict__ root_token, float *__restrict__ out, int R, int KF, int H, int I, int V, int NH, int NL, int S, int mask_id,
    float eps, float theta)
{
    extern __shared__ __align__(16) float df_smem[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(df_smem);
    const int ldx = max(max(KF, I), max(H, NH * DF_HD)) + DF_PAD;
    bf16 *xs = reinterpret_cast<bf16 *>(smem);                              // [16][ldx] (df_xs_elems)
    float *red = reinterpret_cast<float *>(smem + df_xs_elems(ldx) * 2);          // [8][16][64] + the attention merge's [8][2][16]
    float *tile = red + DF_WARPS * DF_T * DF_HD + DF_WARPS * 2 * DF_T;      // [16][DF_TL]
    float2 *cs = reinterpret_cast<float2 *>(tile + DF_T * DF_TL);           // [8][32]
    float *rs = reinterpret_cast<float *>(cs + DF_WARPS * 32);              // [16]
    float *wgt = rs + DF_T;                                                 // [NH * 16][32]
    const int G = gridDim.x, b = blockIdx.x, tid = threadIdx.x;
    const int L0 = *reinterpret_cast<const int *>(P[P_LEN]), n = *n_new, L1 = L0 + n;
    const long long root = *root_token;   // int32 on the device, as `Accepted.bonus`
    bf16 *ws = reinterpret_cast<bf16 *>(P[P_WS]);
    bf16 *xc = ws, *hbuf = xc + DF_T * H, *qbuf = hbuf + DF_T * H, *act = qbuf + DF_T * NH * DF_HD;
    float *parts = reinterpret_cast<float *>(P[P_PART]);
    unsigned *bar = reinterpret_cast<unsigned *>(P[P_BAR]);
    const bf16 *embed = reinterpret_cast<const bf16 *>(P[P_EMBED]);
    bf16 *kc = reinterpret_cast<bf16 *>(P[P_K]), *vc = reinterpret_cast<bf16 *>(P[P_V]);
    const size_t lstride = (size_t)S * NH * DF_HD;
    const int Lk = min(L1 + DF_T, S), nch = (Lk + DF_CHUNK - 1) / DF_CHUNK;
    const float qscale = rsqrtf((float)DF_HD) * 1.4426950408889634f;
    unsigned nb = 0;
    #define LPTR(l, f) reinterpret_cast<const bf16 *>(P[P_LAYER0 + (l) * L_STRIDE + (f)])

    // A: fc of the context rows (units of 64 columns) | layer 0's k, v, q (a unit per head)
    for (int u = b; u < H / 64 + 3 * NH; u += G) {
        if (u < H / 64) {
            load_rows(xs, ldx, nullptr, feat, KF, KF, R, nullptr, eps, rs);
            const bf16 *wj[8];
            for (int j = 0; j < 8; ++j) wj[j] = reinterpret_cast<const bf16 *>(P[P_FC]) + (size_t)(u * 64 + j * 8) * KF;
            unit_gemm<8>(xs, ldx, KF, wj, red, tile);
            head_out(tile, R, nullptr, eps, theta, 0, xc + u * 64, H, cs);
        } else {
            const int hu = u - H / 64;
            load_rows(xs, ldx, embed + root * H, embed + (size_t)mask_id * H, 0, H, DF_T, LPTR(0, L_LN1), eps, rs);
            if (hu == 0)   // the residual stream starts as the block's embeddings
                for (int c = tid; c < DF_T * H / 8; c += DF_THREADS) {
                    const int r = c / (H / 8), k = c % (H / 8) * 8;
                    *reinterpret_cast<uint4 *>(hbuf + r * H + k) = __ldg(reinterpret_cast<const uint4 *>((r ? embed + (size_t)mask_id * H : embed + root * H) + k));
                }
            qkv_unit(P, 0, hu, xs, ldx, H, NH, S, L1, eps, theta, qbuf, red, tile, cs);
        }
    }
    grid_sync(bar, ++nb);
    if (b == 0 && tid == 0) *reinterpret_cast<int *>(P[P_LEN]) = L1;   // every block read L0 before the barrier
    // B: every layer's context keys (normed, rotated at L0 + r) and values into the cache rows [L0, L0 + n)
    for (int u = b; u < NL * 2 * NH; u += G) {
        const int l = u / (2 * NH), kind = u % (2 * NH) / NH, h = u % NH;
        load_rows(xs, ldx, nullptr, xc, H, H, R, reinterpret_cast<const bf16 *>(P[P_HNORM]), eps, rs);
        const bf16 *W = LPTR(l, L_WKVQ) + (size_t)(kind * NH + h) * DF_HD * H, *wj[8];
        for (int j = 0; j < 8; ++j) wj[j] = W + (size_t)j * 8 * H;
        unit_gemm<8>(xs, ldx, H, wj, red, tile);
        bf16 *dst = (kind ? vc : kc) + l * lstride + ((size_t)L0 * NH + h) * DF_HD;
        head_out(tile, min(n, S - L0), kind ? nullptr : LPTR(l, L_KN), eps, theta, L0, dst, (size_t)NH * DF_HD, cs);
    }
    grid_sync(bar, ++nb);
    for (int l = 0; l < NL; ++l) {
        if (l > 0) {   // Q: the block's k, v, q of layer l
            for (int u = b; u < 3 * NH; u += G) {
                load_rows(xs, ldx, nullptr, hbuf, H, H, DF_T, LPTR(l, L_LN1), eps, rs);
                qkv_unit(P, l, u, xs, ldx, H, NH, S, L1, eps, theta, qbuf, red, tile, cs);
            }
            grid_sync(bar, ++nb);
        }
        // C: attention partials, a unit per (head, 128 keys)
        for (int u = b; u < NH * nch; u += G)
            attn_unit(qbuf, NH, kc + l * lstride, vc + l * lstride, u / nch, u % nch * DF_CHUNK, Lk, qscale, xs, red,
                      parts + (size_t)u * (2 * DF_T + DF_T * DF_HD));
        grid_sync(bar, ++nb);
        // D: merge, o_proj, residual
        for (int u = b; u < H / 16; u += G) {
            merge_parts(parts, NH, nch, xs, ldx, wgt);
            const bf16 *wj[2] = {LPTR(l, L_WO) + (size_t)u * 16 * NH * DF_HD, LPTR(l, L_WO) + (size_t)(u * 16 + 8) * NH * DF_HD};
            unit_gemm<2>(xs, ldx, NH * DF_HD, wj, red, tile);
            for (int e = tid; e < DF_T * 16; e += DF_THREADS) {
                const int r = e / 16, c = u * 16 + e % 16;
                hbuf[r * H + c] = __float2bfloat16_rn(ldcg1(hbuf + r * H + c) + bf16r(tile[r * DF_TL + e % 16]));
            }
        }
        grid_sync(bar, ++nb);
        // E: post-attention norm, gate | up, SiLU(gate) x up
        for (int u = b; u < I / 16; u += G) {
            load_rows(xs, ldx, nullptr, hbuf, H, H, DF_T, LPTR(l, L_LN2), eps, rs);
            const bf16 *W = LPTR(l, L_WGU);
            const bf16 *wj[4] = {W + (size_t)u * 16 * H, W + (size_t)(u * 16 + 8) * H, W + (size_t)(I + u * 16) * H, W + (size_t)(I + u * 16 + 8) * H};
            unit_gemm<4>(xs, ldx, H, wj, red, tile);
            for (int e = tid; e < DF_T * 16; e += DF_THREADS) {
                const int r = e / 16, c = e % 16;
                const float g = bf16r(tile[r * DF_TL + c]), up = bf16r(tile[r * DF_TL + 16 + c]);
                act[r * I + u * 16 + c] = __float2bfloat16_rn(bf16r(g / (1.f + __expf(-g))) * up);
            }
        }
        grid_sync(bar, ++nb);
        // F: down, residual
        for (int u = b; u < H / 16; u += G) {
            load_rows(xs, ldx, nullptr, act, I, I, DF_T, nullptr, eps, rs);
            const bf16 *wj[2] = {LPTR(l, L_WD) + (size_t)u * 16 * I, LPTR(l, L_WD) + (size_t)(u * 16 + 8) * I};
            unit_gemm<2>(xs, ldx, I, wj, red, tile);
            for (int e = tid; e < DF_T * 16; e += DF_THREADS) {
                const int r = e / 16, c = u * 16 + e % 16;
                hbuf[r * H + c] = __float2bfloat16_rn(ldcg1(hbuf + r * H + c) + bf16r(tile[r * DF_TL + e % 16]));
            }
        }
        grid_sync(bar, ++nb);
    }
    // H: final norm of rows 1 .. 15, lm_head, fp32 logits [15][V]
    for (int u = b; u < V / 64; u += G) {
        load_rows(xs, ldx, nullptr, hbuf + H, H, H, DF_T - 1, reinterpret_cast<const bf16 *>(P[P_NORM]), eps, rs);
        const bf16 *wj[8];
        for (int j = 0; j < 8; ++j) wj[j] = reinterpret_cast<const bf16 *>(P[P_HEAD]) + (size_t)(u * 64 + j * 8) * H;
        unit_gemm<8>(xs, ldx, H, wj, red, tile);
        for (int e = tid; e < (DF_T - 1) * 64; e += DF_THREADS) out[(size_t)(e / 64) * V + u * 64 + e % 64] = bf16r(tile[e / 64 * DF_TL + e % 64]);
        __syncthreads();
    }
    #undef LPTR
    // the last block to finish puts the barrier's words back to 0 for the next launch
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(bar + 1, 1u) == (unsigned)G - 1) { bar[0] = 0; bar[1] = 0; __threadfence(); }
    }
}
