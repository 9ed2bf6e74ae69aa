// draft_fused.cu (dev, session 38; not used by the engine): a DFlash drafter's whole draft in ONE launch (issue 17).
// The compiled draft of the demo pair is 32 kernels (15 cuBLAS GEMMs of ~2.8 µs, 4 attention / K/V-write kernels, 13 inductor
// kernels: 85 µs of kernels, 94.6 µs a draft replayed), and at 16 rows every one of them is launch- and latency-bound. Here G
// blocks (at most one wave) run the draft's 17 stages back to back, a grid barrier between two, each stage's work cut into
// units that blocks take round-robin:
//   A   fc of the context features (units of 16 columns) | layer 0's k, v, q of the block (a unit per head: RMS norm, RoPE)
//   B   every layer's context keys and values (norm, RoPE) into the cache rows [L, L + n)            then, for each layer l:
//   Q   (l > 0) the block's k, v, q of layer l                                                       (as A's second part)
//   C   attention: a unit per (head, 128 keys), 16 keys a warp on tensor cores; a head's last unit (a ticket) merges its partials
//   D   o_proj, the residual                                                                           (units of 16 columns)
//   E   post-attention norm, gate and up, SiLU x up                                                   (units of 16 columns)
//   F   down, the residual                                                                            (units of 16 columns)
//   H   the final norm of rows 1..T-1 and the lm_head, fp32 logits out                                (units of 64 columns)
// A unit's weights are fetched (cp.async) into shared memory before the barrier that waits for the stage before. Its GEMM is
// Y[16, NC] = X[16, K] W[NC, K]^T: X (normed in the prologue where the model norms it) in shared memory, mma.sync m16n8k16 (bf16
// in, fp32 sums; each lane loads 16 B of X and W a 32-wide k step, the k order permuted alike for both, as
// kernels/dev/few_row_gemm.cu); a 64-column unit gives each warp an 8-column tile, a narrower one splits K over the 8 warps
// and sums their partials in shared memory (v1-v2 split K everywhere); then the epilogue. Values are rounded to
// bf16 where the torch draft rounds them (each projection's output, the norms, SiLU, the residuals); the q / k norms and RoPE
// are fp32 as in draft_attn.cu's _nr kernels, whose helpers this file includes.
// Verdict (benchmarks/bench_draft_fused.py, an H100, bench_compile.md "Session 38"): correct on its first run (the logits as
// close to float32 as the torch bf16 draft's, every depth's argmax equal, the cache rows within a bf16 step), and SLOWER than
// the compiled draft: 103.3 µs against 94.6 (v1, the partials merged in o_proj's prologue and no prefetch: 110.2). The 17
// barriers cost about 1 µs each (bench_grid_barrier.py: 17.0-19.1 µs for 17 at G = 16-128), so each stage's own chain of
// loads, block barriers and stores takes ~5 µs, twice a cuBLAS GEMM's 2.7; where, the stamps (-DDF_STAMPS) are for. One
// suspect found after the runs: with every helper inlined into all 17 stages the kernel was 308 KB of SASS, so each stage ran
// code cold in the instruction caches. v3 calls the helpers (DF_FN): 96 KB, the same helpers for every stage; and it cuts
// three steps from a stage's chain: the K = 256 row norms in registers (a warp holds its two rows whole: no shared-memory
// pass, two block barriers fewer), the 64-column GEMMs without split-K (a warp an 8-column tile over all of K: no partial
// sums), the residual's stream read before the GEMM. Not run (bench_draft_fused.py --builds called,inlined times v3 with
// its helpers called and inlined).
// Limits: T = 16 block rows, R <= 16 context rows, head_dim 64, num_heads == num_key_value_heads, K of every GEMM % 32 == 0 and
// <= 1024, H % 64 == 0, I % 16 == 0, V % 64 == 0; cache rows >= S are not written (the torch path drops them too).
// The grid barrier is a counter in `bar` (zero between launches; the last block to finish puts it back to 0): every block
// must be resident at once, so G <= the SMs (one block an SM by its registers). Session 39 (not run): a block arrives by a
// release add instead of __threadfence() and an add (bench_grid_barrier.py --builds release,fence times both).
#include "draft_attn.cu"            // norm_rope_row, rope_cs, rope_inv_freq, mma16816, ldsm_x2_trans
#include "verify_attn_common.cuh"   // cp.async

#define DF_THREADS 256
#define DF_WARPS 8
#define DF_T 16
#define DF_HD 64
#define DF_PAD 32            // bf16 a shared X or W row is padded by (64 B: a quarter-warp's 16-B loads of 2 rows x 4 k chunks hit distinct banks)
#define DF_CHUNK 128         // keys an attention unit takes: 16 a warp
#define DF_TL 68             // floats a row of the reduced tile [16][64 + 4]
#define DF_VL 72             // bf16 a row of a warp's V tile and of Q [16][64 + 8]
#define DF_KMAX 1024         // the widest GEMM input (load_rows holds 8 chunks a thread)

// The stages' helpers (the loads, the GEMM, the epilogues, the attention) are called, not inlined: inlined into each of the
// 17 stages the kernel's code was 308 KB (v2), a stage's code cold in the instruction caches every time; called, 96 KB,
// most of it shared by the stages. -DDF_INLINE inlines them, as v2 did, to compare.
#ifdef DF_INLINE
#define DF_FN __device__ __forceinline__
#else
#define DF_FN __device__ __noinline__
#endif

// The pointer table P (int64 on the device): the drafter's weights, its cache and the kernel's workspace (what stays the same
// from draft to draft), then 8 a layer. A draft's own tensors (features, n_new, root token, logits) are arguments.
// P_BAR: int32 [2 + NH] zeros: the grid barrier's two words, then the attention merge's ticket of each head.
enum { P_FC, P_HNORM, P_EMBED, P_HEAD, P_NORM, P_K, P_V, P_LEN, P_WS, P_BAR, P_PART, P_LAYER0 = 16 };
enum { L_WKVQ, L_QN, L_KN, L_WO, L_LN1, L_LN2, L_WGU, L_WD, L_STRIDE };

__device__ __forceinline__ float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint4 ldcg16(const bf16 *p) { return __ldcg(reinterpret_cast<const uint4 *>(p)); }
__device__ __forceinline__ float ldcg1(const bf16 *p) { return __bfloat162float(__ushort_as_bfloat16(__ldcg(reinterpret_cast<const unsigned short *>(p)))); }
// bf16 elements of the X region of shared memory: 16 rows of ldx, or attention's Q and 8 warps' V tiles
__device__ __forceinline__ int df_xs_elems(int ldx) { return max(DF_T * ldx, (DF_WARPS + 1) * DF_T * DF_VL); }

__device__ __forceinline__ unsigned long long df_now() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// With -DDF_STAMPS, the kernel's `stamps` (ns, %globaltimer; zeros before the launch), 5 slots an index k: 5k the last block's
// arrival at barrier k (k = the stage count: the end), 5k + 1 block 0's leave of it (k = 0: block 0's start), and for stage k
// (the one after barrier k) the most any block took from its own start of it to its X rows ready (5k + 2), its GEMM done
// (5k + 3) and its arrival at the next barrier (5k + 4). Without -DDF_STAMPS the stamps are nothing.
#ifdef DF_STAMPS
__device__ unsigned long long *df_stamps;
__shared__ unsigned long long df_t0;   // this block's start of its current stage
__shared__ int df_stage;
#define DF_ARRIVE(k) do { const unsigned long long t_ = df_now(); atomicMax(df_stamps + 5 * (k), t_); atomicMax(df_stamps + 5 * df_stage + 4, t_ - df_t0); } while (0)
#define DF_LEAVE(k) do { const unsigned long long t_ = df_now(); if (blockIdx.x == 0) df_stamps[5 * (k) + 1] = t_; df_t0 = t_; df_stage = (k); } while (0)
#define DF_MARK(p) do { if (threadIdx.x == 0) atomicMax(df_stamps + 5 * df_stage + 1 + (p), df_now() - df_t0); } while (0)
#else
#define DF_ARRIVE(k) do {} while (0)
#define DF_LEAVE(k) do {} while (0)
#define DF_MARK(p) do {} while (0)
#endif

// All blocks wait here until every block has arrived at barrier number `k` (1, 2, ...): one counter, never reset mid-launch.
// Thread 0 arrives by a release add at gpu scope: after the block barrier, it orders the whole block's writes before the
// count (PTX releases are cumulative), a lighter fence than __threadfence()'s sequentially consistent one (v1-v3: fence,
// then a relaxed add; -DDF_BAR_FENCE builds that, to compare); the acquire load on the way out orders the reads after it.
__device__ __forceinline__ void grid_sync(unsigned *bar, unsigned k) {
    __syncthreads();
    if (threadIdx.x == 0) {
        DF_ARRIVE(k);
#ifdef DF_BAR_FENCE
        __threadfence();
        atomicAdd(bar, 1u);
#else
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(bar), "r"(1u) : "memory");
#endif
        const unsigned target = k * gridDim.x;
        unsigned v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar) : "memory"); } while (v < target);
        DF_LEAVE(k);
    }
    __syncthreads();
}

// After a block's last barrier: the last block to get here puts the barrier's words back to 0 for the next launch.
__device__ __forceinline__ void grid_done(unsigned *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(bar + 1, 1u) == gridDim.x - 1) { bar[0] = 0; bar[1] = 0; __threadfence(); }
    }
}

// nsync barriers and nothing else: what a barrier costs (benchmarks/bench_grid_barrier.py)
extern "C" __global__ void __launch_bounds__(DF_THREADS) draft_fused_barriers(unsigned *bar, int nsync) {
    for (int k = 1; k <= nsync; ++k) grid_sync(bar, k);
    grid_done(bar);
}

// One stage: the block's units u = blockIdx.x + i G; the first unit's weights are fetched (cp.async) before the barrier that
// waits for the stage before, so their loads overlap the wait; a later unit fetches its own.
template <class F, class B>
__device__ __forceinline__ void stage(int nunits, unsigned *bar, unsigned &nb, F fetch, B body) {
    if ((int)blockIdx.x < nunits) fetch((int)blockIdx.x);
    grid_sync(bar, ++nb);
    for (int u = blockIdx.x; u < nunits; u += gridDim.x) { if (u != (int)blockIdx.x) fetch(u); body(u); }
}

// A unit's W rows into wsm [NC][K + DF_PAD] (one cp.async group): rows [0, NC / 2) from w0, [NC / 2, NC) from w1, K bf16 each.
DF_FN void w_fetch(bf16 *wsm, const bf16 *w0, const bf16 *w1, int NC, int K) {
    const int cpr = K / 8, ldw = K + DF_PAD, half = NC / 2;
    for (int c = threadIdx.x; c < NC * cpr; c += DF_THREADS) {
        const int row = c / cpr, k = c % cpr * 8;
        cp_async16(smem_u32(wsm + row * ldw + k), (row < half ? w0 + (size_t)row * K : w1 + (size_t)(row - half) * K) + k, 16);
    }
    cp_async_commit();
}

// X rows into shared memory: row r (< nrows) from `first` (r == 0, when given) or src + r * lds, K <= DF_KMAX columns; rows
// nrows..15 zero. g != nullptr: each row RMS-normed as model.RMSNorm rounds it, bf16(g * bf16(x * rsqrt(mean(x^2) + eps))).
DF_FN void load_rows(bf16 *xs, int ldx, const bf16 *first, const bf16 *src, size_t lds, int K, int nrows,
                          const bf16 *__restrict__ g, float eps, float *rs) {
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, cpr = K / 8, n = DF_T * cpr;
    uint4 v[DF_KMAX * DF_T / 8 / DF_THREADS];
    #pragma unroll
    for (int i = 0; i < DF_KMAX * DF_T / 8 / DF_THREADS; ++i) {   // every load in flight, then the stores
        const int c = tid + i * DF_THREADS, r = c / cpr;
        v[i] = c < n && r < nrows ? ldcg16((r == 0 && first ? first : src + r * lds) + c % cpr * 8) : make_uint4(0, 0, 0, 0);
    }
    if (g && cpr == 32) {   // K = 256: warp w holds rows w and w + 8 whole (chunk `lane` of each), so it norms them in registers
        const uint4 gv = __ldg(reinterpret_cast<const uint4 *>(g + lane * 8));   // in flight with the rows' loads
        const __nv_bfloat162 *gg = reinterpret_cast<const __nv_bfloat162 *>(&gv);
        #pragma unroll
        for (int i = 0; i < 2; ++i) {
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&v[i]);
            float s = 0.f;
            #pragma unroll
            for (int j = 0; j < 4; ++j) { const float2 f = __bfloat1622float2(h[j]); s += f.x * f.x + f.y * f.y; }
            #pragma unroll
            for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            const float r = rsqrtf(s / K + eps);
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float2 f = __bfloat1622float2(h[j]), w = __bfloat1622float2(gg[j]);
                h[j] = __floats2bfloat162_rn(w.x * bf16r(f.x * r), w.y * bf16r(f.y * r));
            }
            *reinterpret_cast<uint4 *>(xs + (warp + 8 * i) * ldx + lane * 8) = v[i];
        }
        __syncthreads();
        return;
    }
    #pragma unroll
    for (int i = 0; i < DF_KMAX * DF_T / 8 / DF_THREADS; ++i) {
        const int c = tid + i * DF_THREADS;
        if (c < n) *reinterpret_cast<uint4 *>(xs + c / cpr * ldx + c % cpr * 8) = v[i];
    }
    __syncthreads();
    if (!g) return;
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

// Y[16][NJ * 8] = X W^T over K into tile [16][DF_TL] (fp32), W the unit's rows in wsm (w_fetch; waited for here).
template <int NJ>
DF_FN void unit_gemm(const bf16 *xs, int ldx, int K, const bf16 *wsm, float *red, float *tile) {
    constexpr int NC = NJ * 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t = lane & 3, ldw = K + DF_PAD;
    cp_async_wait_all();
    __syncthreads();
    if constexpr (NJ == DF_WARPS) {   // a warp an 8-column tile over all of K: no partials to sum
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        const bf16 *wr = wsm + (warp * 8 + gr) * ldw;
        for (int k = 8 * t; k < K; k += 32) {
            const uint4 lo = *reinterpret_cast<const uint4 *>(xs + gr * ldx + k), hi = *reinterpret_cast<const uint4 *>(xs + (gr + 8) * ldx + k);
            const uint4 b = *reinterpret_cast<const uint4 *>(wr + k);
            mma16816(c, lo.x, hi.x, lo.y, hi.y, b.x, b.y);
            mma16816(c, lo.z, hi.z, lo.w, hi.w, b.z, b.w);
        }
        *reinterpret_cast<float2 *>(tile + gr * DF_TL + warp * 8 + 2 * t) = make_float2(c[0], c[1]);
        *reinterpret_cast<float2 *>(tile + (gr + 8) * DF_TL + warp * 8 + 2 * t) = make_float2(c[2], c[3]);
        __syncthreads();
    } else {   // split K: warp w takes the 32-wide k steps w, w + 8, ...; the partials summed in shared memory
        float c[NJ][4];
        #pragma unroll
        for (int j = 0; j < NJ; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
        for (int ks = warp; ks < K / 32; ks += DF_WARPS) {
            const int k = ks * 32 + 8 * t;
            const uint4 lo = *reinterpret_cast<const uint4 *>(xs + gr * ldx + k), hi = *reinterpret_cast<const uint4 *>(xs + (gr + 8) * ldx + k);
            #pragma unroll
            for (int j = 0; j < NJ; ++j) {   // the lane's k 0-3 feed slots 2t, 2t + 1, 8 + 2t, 9 + 2t of one mma, its k 4-7 the next
                const uint4 b = *reinterpret_cast<const uint4 *>(wsm + (j * 8 + gr) * ldw + k);
                mma16816(c[j], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
                mma16816(c[j], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
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
}

// A head's 64 columns of the tile (rows < nrows) to dst rows (stride ld): rounded to bf16 as the projection's output, then with
// w != nullptr RMS-normed by w and rotated (rotate-half RoPE, base theta) at position pos0 + r, in fp32 as norm_rope_row does.
DF_FN void head_out(float *tile, int nrows, const bf16 *w, float eps, float theta, int pos0, bf16 *dst, size_t ld,
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

// Attention of the block's 16 query rows of head h over keys [key0, key0 + DF_CHUNK) of [0, Lk): warp w takes keys key0 + 16 w
// .. + 15 (scores and P V on tensor cores, P rounded to bf16 as the reference's PV product), the warps merge in shared memory
// and the block writes its partial: max (log2 domain) and sum [16], O [16][64] unnormalised, fp32. The last of the head's nch
// blocks to finish (its ticket) merges them into out [16][ld] bf16 (the head's 64 columns) and puts the ticket back to 0.
DF_FN void attn_unit(const bf16 *qbuf, int NH, const bf16 *kc, const bf16 *vc, int h, int chunk, int nch, int Lk,
                          float qscale, bf16 *smem_bf, float *red, float *parts, int *ticket, bf16 *out, int *flag) {
    constexpr int PS = 2 * DF_T + DF_T * DF_HD;   // floats a partial
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gr = lane >> 2, t = lane & 3;
    bf16 *qs = smem_bf, *vt = smem_bf + DF_T * DF_VL + warp * DF_T * DF_VL;
    const int k0 = chunk * DF_CHUNK + warp * 16;
    // the warp's K fragments and V rows (zeros past Lk: a scratch row's NaN must not meet P = 0), Q into shared memory
    uint4 kb[2][2], vr[4];
    #pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
        const int key = k0 + nt * 8 + gr;
        #pragma unroll
        for (int s = 0; s < 2; ++s) kb[nt][s] = key < Lk ? ldcg16(kc + ((size_t)key * NH + h) * DF_HD + s * 32 + 8 * t) : make_uint4(0, 0, 0, 0);
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = lane + 32 * i, key = k0 + e / 8;
        vr[i] = key < Lk ? ldcg16(vc + ((size_t)key * NH + h) * DF_HD + e % 8 * 8) : make_uint4(0, 0, 0, 0);
    }
    if (tid < DF_T * 8) *reinterpret_cast<uint4 *>(qs + tid / 8 * DF_VL + tid % 8 * 8) = ldcg16(qbuf + (size_t)tid / 8 * NH * DF_HD + h * DF_HD + tid % 8 * 8);
    #pragma unroll
    for (int i = 0; i < 4; ++i) { const int e = lane + 32 * i; *reinterpret_cast<uint4 *>(vt + e / 8 * DF_VL + e % 8 * 8) = vr[i]; }
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
    float *wo = red + warp * DF_T * DF_HD, *wm = red + DF_WARPS * DF_T * DF_HD + warp * 2 * DF_T, *wl = wm + DF_T;
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        float o[4] = {0.f, 0.f, 0.f, 0.f};
        uint32_t b0, b1;
        ldsm_x2_trans(b0, b1, vt + (lane & 15) * DF_VL + j * 8);
        mma16816(o, a0, a1, a2, a3, b0, b1);
        *reinterpret_cast<float2 *>(wo + gr * DF_HD + j * 8 + 2 * t) = make_float2(o[0], o[1]);
        *reinterpret_cast<float2 *>(wo + (gr + 8) * DF_HD + j * 8 + 2 * t) = make_float2(o[2], o[3]);
    }
    if (t == 0) { wm[gr] = m[0]; wm[gr + 8] = m[1]; wl[gr] = l[0]; wl[gr + 8] = l[1]; }
    __syncthreads();
    const float *wm0 = red + DF_WARPS * DF_T * DF_HD;
    float *part = parts + (size_t)(h * nch + chunk) * PS;
    for (int e = tid; e < DF_T * DF_HD; e += DF_THREADS) {   // the warps' (m, l, O) merged: the block's partial
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
    __threadfence();
    __syncthreads();
    DF_MARK(1);
    if (tid == 0) { const bool last = atomicAdd(ticket, 1) == nch - 1; if (last) *ticket = 0; *flag = last; }
    __syncthreads();
    if (*flag) {   // the head's nch partials into out: thread (row tid / 16, columns 4 (tid % 16) ..)
        __threadfence();
        const int r = tid / 16, d = tid % 16 * 4;
        const float *p0 = parts + (size_t)h * nch * PS;
        float M = -INFINITY, L = 0.f;
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        #pragma unroll 4
        for (int c = 0; c < nch; ++c) {
            const float mc = __ldcg(p0 + c * PS + r), lc = __ldcg(p0 + c * PS + DF_T + r);
            const float4 oc = __ldcg(reinterpret_cast<const float4 *>(p0 + c * PS + 2 * DF_T + r * DF_HD + d));
            if (mc == -INFINITY) continue;
            const float Mn = fmaxf(M, mc), a = M == -INFINITY ? 0.f : exp2f(M - Mn), f = exp2f(mc - Mn);
            L = L * a + f * lc;
            s.x = s.x * a + f * oc.x; s.y = s.y * a + f * oc.y; s.z = s.z * a + f * oc.z; s.w = s.w * a + f * oc.w;
            M = Mn;
        }
        __nv_bfloat162 *o = reinterpret_cast<__nv_bfloat162 *>(out + r * NH * DF_HD + h * DF_HD + d);
        o[0] = __floats2bfloat162_rn(s.x / L, s.y / L); o[1] = __floats2bfloat162_rn(s.z / L, s.w / L);
    }
    __syncthreads();
    DF_MARK(2);
}

extern "C" __global__ void __launch_bounds__(DF_THREADS, 1) draft_fused(
    const unsigned long long *__restrict__ P, const bf16 *__restrict__ feat, const int *__restrict__ n_new,
    const int *__restrict__ root_token, float *__restrict__ out, int R, int KF, int H, int I, int V, int NH, int NL, int S,
    int mask_id, float eps, float theta, int wsm_elems, unsigned long long *stamps)   // stamps: with -DDF_STAMPS (else unused)
{
    extern __shared__ __align__(16) float df_smem[];
    const int ldx = max(max(KF, I), max(H, NH * DF_HD)) + DF_PAD;
    bf16 *xs = reinterpret_cast<bf16 *>(df_smem);                           // [16][ldx] (df_xs_elems)
    bf16 *wsm = xs + df_xs_elems(ldx);                                      // a unit's W rows [NC][K + DF_PAD] (wsm_elems)
    float *red = reinterpret_cast<float *>(wsm + wsm_elems);                // [8][16][64] + the attention merge's [8][2][16]
    float *tile = red + DF_WARPS * DF_T * DF_HD + DF_WARPS * 2 * DF_T;      // [16][DF_TL]
    float2 *cs = reinterpret_cast<float2 *>(tile + DF_T * DF_TL);           // [8][32]
    float *rs = reinterpret_cast<float *>(cs + DF_WARPS * 32);              // [16]
    int *flag = reinterpret_cast<int *>(rs + DF_T);
    const int G = gridDim.x, b = blockIdx.x, tid = threadIdx.x;
    const int L0 = *reinterpret_cast<const int *>(P[P_LEN]), n = *n_new, L1 = L0 + n;
    const long long root = *root_token;   // int32 on the device, as `Accepted.bonus`
    bf16 *ws = reinterpret_cast<bf16 *>(P[P_WS]);
    bf16 *xc = ws, *hbuf = xc + DF_T * H, *qbuf = hbuf + DF_T * H, *abuf = qbuf + DF_T * NH * DF_HD, *act = abuf + DF_T * NH * DF_HD;
    float *parts = reinterpret_cast<float *>(P[P_PART]);
    unsigned *bar = reinterpret_cast<unsigned *>(P[P_BAR]);
    int *tickets = reinterpret_cast<int *>(bar + 2);
    const bf16 *embed = reinterpret_cast<const bf16 *>(P[P_EMBED]);
    bf16 *kc = reinterpret_cast<bf16 *>(P[P_K]), *vc = reinterpret_cast<bf16 *>(P[P_V]);
    const size_t lstride = (size_t)S * NH * DF_HD;
    const int Lk = min(L1 + DF_T, S), nch = (Lk + DF_CHUNK - 1) / DF_CHUNK;
    const float qscale = rsqrtf((float)DF_HD) * 1.4426950408889634f;
    unsigned nb = 0;
#ifdef DF_STAMPS
    if (tid == 0) { df_stamps = stamps; DF_LEAVE(0); }   // every block writes the same pointer before its own first stamp
#endif
    #define LPTR(l, f) reinterpret_cast<const bf16 *>(P[P_LAYER0 + (l) * L_STRIDE + (f)])
    auto head_w = [&](int l, int hu) { return LPTR(l, L_WKVQ) + (size_t)hu * DF_HD * H; };   // hu: k heads, v heads, q heads
    auto fetch64 = [&](const bf16 *w, int K) { w_fetch(wsm, w, w + (size_t)32 * K, 64, K); };
    // the block's k, v or q of head hu % NH (kind hu / NH: k, v, q) of layer l, X (normed rows) in xs
    auto qkv_body = [&](int l, int hu) {
        unit_gemm<8>(xs, ldx, H, wsm, red, tile);
        DF_MARK(2);
        const int kind = hu / NH, h = hu % NH;
        if (kind == 2) { head_out(tile, DF_T, LPTR(l, L_QN), eps, theta, L1, qbuf + h * DF_HD, (size_t)NH * DF_HD, cs); return; }
        bf16 *dst = (kind ? vc : kc) + l * lstride + ((size_t)L1 * NH + h) * DF_HD;
        head_out(tile, min(DF_T, S - L1), kind ? nullptr : LPTR(l, L_KN), eps, theta, L1, dst, (size_t)NH * DF_HD, cs);
    };
    // h[:, 16 u ..] += bf16(the tile): thread tid's element (row tid / 16, column 16 u + tid % 16), read (h0) before the GEMM
    auto residual_in = [&](int u) { return ldcg1(hbuf + tid / 16 * H + u * 16 + tid % 16); };
    auto residual = [&](int u, float h0) {
        hbuf[tid / 16 * H + u * 16 + tid % 16] = __float2bfloat16_rn(h0 + bf16r(tile[tid / 16 * DF_TL + tid % 16]));
    };

    // A: fc of the context rows (units of 16 columns) | layer 0's k, v, q (a unit per head); nothing to wait for
    for (int u = b; u < H / 16 + 3 * NH; u += G) {
        if (u < H / 16) {
            w_fetch(wsm, reinterpret_cast<const bf16 *>(P[P_FC]) + (size_t)u * 16 * KF,
                    reinterpret_cast<const bf16 *>(P[P_FC]) + (size_t)(u * 16 + 8) * KF, 16, KF);
            load_rows(xs, ldx, nullptr, feat, KF, KF, R, nullptr, eps, rs);
            DF_MARK(1);
            unit_gemm<2>(xs, ldx, KF, wsm, red, tile);
            DF_MARK(2);
            for (int e = tid; e < R * 16; e += DF_THREADS) xc[(e / 16) * H + u * 16 + e % 16] = __float2bfloat16_rn(tile[e / 16 * DF_TL + e % 16]);
        } else {
            const int hu = u - H / 16;
            fetch64(head_w(0, hu), H);
            load_rows(xs, ldx, embed + root * H, embed + (size_t)mask_id * H, 0, H, DF_T, LPTR(0, L_LN1), eps, rs);
            DF_MARK(1);
            if (hu == 0)   // the residual stream starts as the block's embeddings
                for (int c = tid; c < DF_T * H / 8; c += DF_THREADS) {
                    const int r = c / (H / 8), k = c % (H / 8) * 8;
                    *reinterpret_cast<uint4 *>(hbuf + r * H + k) = __ldg(reinterpret_cast<const uint4 *>((r ? embed + (size_t)mask_id * H : embed + root * H) + k));
                }
            qkv_body(0, hu);
        }
    }
    // B: every layer's context keys (normed, rotated at L0 + r) and values into the cache rows [L0, L0 + n)
    stage(NL * 2 * NH, bar, nb, [&](int u) { fetch64(head_w(u / (2 * NH), u % (2 * NH)), H); }, [&](int u) {
        if (b == 0 && u == 0 && tid == 0) *reinterpret_cast<int *>(P[P_LEN]) = L1;   // every block read L0 before the barrier
        const int l = u / (2 * NH), kind = u % (2 * NH) / NH, h = u % NH;
        load_rows(xs, ldx, nullptr, xc, H, H, R, reinterpret_cast<const bf16 *>(P[P_HNORM]), eps, rs);
        DF_MARK(1);
        unit_gemm<8>(xs, ldx, H, wsm, red, tile);
        DF_MARK(2);
        bf16 *dst = (kind ? vc : kc) + l * lstride + ((size_t)L0 * NH + h) * DF_HD;
        head_out(tile, min(n, S - L0), kind ? nullptr : LPTR(l, L_KN), eps, theta, L0, dst, (size_t)NH * DF_HD, cs);
    });
    for (int l = 0; l < NL; ++l) {
        if (l > 0)   // Q: the block's k, v, q of layer l
            stage(3 * NH, bar, nb, [&](int u) { fetch64(head_w(l, u), H); }, [&](int u) {
                load_rows(xs, ldx, nullptr, hbuf, H, H, DF_T, LPTR(l, L_LN1), eps, rs);
                DF_MARK(1);
                qkv_body(l, u);
            });
        // C: attention, a unit per (head, 128 keys); each head's last unit merges the head's partials into abuf
        stage(NH * nch, bar, nb, [&](int u) {}, [&](int u) {
            attn_unit(qbuf, NH, kc + l * lstride, vc + l * lstride, u / nch, u % nch, nch, Lk, qscale, xs, red, parts,
                      tickets + u / nch, abuf, flag);
        });
        // D: o_proj, residual
        stage(H / 16, bar, nb, [&](int u) { const bf16 *w = LPTR(l, L_WO) + (size_t)u * 16 * NH * DF_HD; w_fetch(wsm, w, w + 8 * NH * DF_HD, 16, NH * DF_HD); }, [&](int u) {
            const float h0 = residual_in(u);
            load_rows(xs, ldx, nullptr, abuf, NH * DF_HD, NH * DF_HD, DF_T, nullptr, eps, rs);
            DF_MARK(1);
            unit_gemm<2>(xs, ldx, NH * DF_HD, wsm, red, tile);
            DF_MARK(2);
            residual(u, h0);
        });
        // E: post-attention norm, gate | up, SiLU(gate) x up
        stage(I / 16, bar, nb, [&](int u) { const bf16 *w = LPTR(l, L_WGU) + (size_t)u * 16 * H; w_fetch(wsm, w, w + (size_t)I * H, 32, H); }, [&](int u) {
            load_rows(xs, ldx, nullptr, hbuf, H, H, DF_T, LPTR(l, L_LN2), eps, rs);
            DF_MARK(1);
            unit_gemm<4>(xs, ldx, H, wsm, red, tile);
            DF_MARK(2);
            for (int e = tid; e < DF_T * 16; e += DF_THREADS) {
                const int r = e / 16, c = e % 16;
                const float g = bf16r(tile[r * DF_TL + c]), up = bf16r(tile[r * DF_TL + 16 + c]);
                act[r * I + u * 16 + c] = __float2bfloat16_rn(bf16r(g / (1.f + __expf(-g))) * up);
            }
        });
        // F: down, residual
        stage(H / 16, bar, nb, [&](int u) { const bf16 *w = LPTR(l, L_WD) + (size_t)u * 16 * I; w_fetch(wsm, w, w + 8 * I, 16, I); }, [&](int u) {
            const float h0 = residual_in(u);
            load_rows(xs, ldx, nullptr, act, I, I, DF_T, nullptr, eps, rs);
            DF_MARK(1);
            unit_gemm<2>(xs, ldx, I, wsm, red, tile);
            DF_MARK(2);
            residual(u, h0);
        });
    }
    // H: final norm of rows 1 .. 15, lm_head, fp32 logits [15][V]
    stage(V / 64, bar, nb, [&](int u) { fetch64(reinterpret_cast<const bf16 *>(P[P_HEAD]) + (size_t)u * 64 * H, H); }, [&](int u) {
        load_rows(xs, ldx, nullptr, hbuf + H, H, H, DF_T - 1, reinterpret_cast<const bf16 *>(P[P_NORM]), eps, rs);
        DF_MARK(1);
        unit_gemm<8>(xs, ldx, H, wsm, red, tile);
        DF_MARK(2);
        for (int e = tid; e < (DF_T - 1) * 64; e += DF_THREADS) out[(size_t)(e / 64) * V + u * 64 + e % 64] = bf16r(tile[e / 64 * DF_TL + e % 64]);
        __syncthreads();
    });
    #undef LPTR
    __syncthreads();
    if (tid == 0) DF_ARRIVE(nb + 1);
    grid_done(bar);
}
