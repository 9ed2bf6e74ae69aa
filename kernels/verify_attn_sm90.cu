// verify_attn_sm90.cu: the Hopper (sm_90a) version of the tree-masked absorbed-MLA verify attention (issue 19).
//
// Same contract as kernels/verify_attn.cu (read its header): queries q_latent [T, H, 512] and q_pe [T, H, 64] (bf16),
// flattened to M = T*H rows r = t*H + h (or h*T + t with head_major; q_latent rows at q_ld a token where q_ld != 0); cache layer kv [S, 576] (c_kv = keys AND values | k_pe = keys only);
// key s < P seen by every row, key P + j seen by row r iff bit j of vis[t, :]; out [M, 512] bf16, lse [M] fp32.
// Same edge cases: a row that sees nothing gets out 0 / lse -inf; a non-finite c_kv value poisons exactly the rows
// that see its key (masked keys' V chunks are zeroed in shared memory and the key marked, as in v2). Same split-KV
// partial layout (ws_o [splits, M, 512] bf16, ws_lse [splits, M]), merged by verify_attn_combine of verify_attn.cu.
// The prefix length may live on the device (p_dev), so the launch is graph-capturable.
//
// Design (first sm_90a step):
// - Block = 2 warpgroups (256 threads), BM = 64 query rows (the wgmma M: heads x tree nodes) x BN = 64 keys per tile,
//   one block per SM (230 KB of shared memory).
// - QK^T: warpgroup w computes S[64 x 32] for keys 32w..32w+31 of the tile with 36 wgmma.m64n32k16 (576 deep),
//   A = Q and B = the key tile, both K-major in shared memory with the 128-byte swizzle.
// - Online softmax: the two warpgroups exchange their row maxima through shared memory (one barrier), so both hold
//   the same running max; each writes its half of P (bf16) to shared memory as a K-major, 128-byte-swizzled
//   64 x 64 tile (generic stores, then fence.proxy.async so the tensor cores see them).
// - PV: warpgroup w owns output columns 256w..256w+255 (64 x 256 fp32 accumulators = 128 registers a thread) and
//   runs O += P . V[:, 256w:256w+256] with B = the same c_kv tile read MN-major (imm-trans-b = 1), so K and V are
//   one copy in shared memory. PVN = 256 issues 4 wgmma.m64n256k16 per tile; PVN = 64 issues 16 wgmma.m64n64k16,
//   each inside one 64-column swizzle atom, so it does not depend on the leading-byte-offset field (LBO = SBO =
//   1024 there): a cross-check for the descriptor layout of the MN-major operand.
// - Loads: cp.async (16 B a thread) into a 2-stage ring, tile i+1 in flight while tile i is computed, and tiles i+1
//   and i+2 in flight while the loop waits for tile i+1 (a stage is refilled right after its PV). Chosen over
//   TMA for this first step because (a) the tensor map (cuTensorMapEncodeTiled) would have to be encoded per cache
//   pointer on the host through the driver API, which the PyCUDA launcher does not expose, and passed as a 64-byte
//   aligned __grid_constant__ parameter through PyCUDA's packed argument buffer, none of which can be tried without
//   a GPU here; (b) cp.async's src-size 0 zero-fills the rows past P + T, which the masking relies on. The
//   shared-memory layout is exactly what TMA's SWIZZLE_128B writes for a {64 columns, 64 rows} box, so a TMA
//   producer can replace load_k without touching the MMA side.
//
// Shared memory layout of a [64 rows x 576] bf16 tile (Q, and each K/V stage): 9 column blocks of 64 columns
// (128 B), block b at b * 8192; in a block, row r at r * 128, its 16-byte chunk c at ((c ^ (r & 7)) << 4). With
// 1024-byte aligned blocks this is the hardware's 128-byte swizzle (address bits 4..6 ^= bits 7..9): the wgmma
// canonical K-major SW128 layout (8-row groups 1024 B apart = SBO) and, read the other way, the MN-major SW128
// layout (8 keys x 64 columns atoms; next 8 keys at SBO = 1024; next 64 columns at LBO = 8192). A k16 step
// inside a K-major atom advances the descriptor's start address by 32 B.
#include "verify_attn_common.cuh"  // bf16, dims, prefix clamp, tree mask, split ranges, tile loads, the edge-case rules
#include "pdl.cuh"                 // pdl_launch_dependents: the split kernels let a PDL combine launch at their start
#include <cooperative_groups.h>    // the cluster kernels: rank, barrier, distributed shared memory
namespace cg = cooperative_groups;

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "verify_attn_sm90.cu uses wgmma: build it for sm_90a only (the runtime does; verify_attn.cu serves other GPUs)"
#endif

namespace {
constexpr int BM = 64, BN = 64;                      // query rows, keys per tile
constexpr int CBLK = 64 * 128;                       // one 64-column block of a 64-row tile (bytes)
constexpr int TILE = 9 * CBLK;                       // 73,728 B: a [64 x 576] bf16 tile
constexpr int Q_OFF = 0, K_OFF = TILE, P_OFF = K_OFF + 2 * TILE;           // Q | 2 K/V stages | P [64 x 64] bf16
constexpr int RMAX_OFF = P_OFF + BM * BN * 2, RSUM_OFF = RMAX_OFF + 2 * BM * 4, MFIN_OFF = RSUM_OFF + 2 * BM * 4;
constexpr int BAD_OFF = MFIN_OFF + BM * 4, SMEM_USED = BAD_OFF + 8;
constexpr int SMEM = SMEM_USED + 1024;               // 231,688 B with the slack that aligns the base to 1024 B
static_assert(SMEM <= 232448, "over the 227 KB a block may opt in to on sm_90");
constexpr int OST = DC + 8;                          // the cluster merge's fp32 O rows: 520 floats (+ 32 B: 2-way banks)
constexpr int MST_OFF = BM * OST * 4;                // then the merged row max and sum (2 x 64 floats)
static_assert(MST_OFF + 2 * BM * 4 <= P_OFF, "the merge's staging must fit over Q and the K/V stages");
}

// byte offset of (row, 16-byte chunk) in a 64-row tile: column block, row, swizzled chunk
__device__ __forceinline__ uint32_t toff(int row, int ch) {
    return (uint32_t)((ch >> 3) * CBLK + row * 128 + (((ch & 7) ^ (row & 7)) << 4));
}

// The tile loads of this kernel (64 rows x 576, 256 threads, the toff layout): thread t copies chunk c = t & 7 of each of
// the 9 column blocks of rows r0 = t >> 3 and r0 + 32. Both rows have the same swizzle (c ^ (r0 & 7)), so the 18 copies
// are a shared and two global base addresses plus constant offsets. The generic loops of verify_attn_common.cuh divide by
// 72 and swizzle per copy: ~20 instructions each, ~360 a thread per tile, in a kernel that ncu found bound by its
// instruction issue at 2 warps a scheduler (verify_attn.md, "Session 23"). Same chunks to the same places, the same
// zero-fill past M (queries) or n_keys (keys), from row 0 as the source of the 0-byte copies.
template <class Src>   // src(row, b): the global address of column block b (64 bf16) of tile row `row`
__device__ __forceinline__ void load_tile64(uint32_t dst, int row0, int rows, int tid, Src src) {
    const int c = tid & 7, r0 = tid >> 3;
    const uint32_t d0 = dst + toff(r0, c);   // row r0 + 32 is 4096 B further, same swizzle
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row0 + r0 + 32 * h;
        const bool ok = r < rows;
#pragma unroll
        for (int b = 0; b < 9; ++b) cp_async16(d0 + h * 4096 + b * CBLK, src(ok ? r : 0, b) + c * 8, ok ? 16 : 0);
    }
}
__device__ __forceinline__ void load_kv_tile64(uint32_t dst, const bf16 *__restrict__ kv, int kb, int n_keys, int tid) {
    load_tile64(dst, kb, n_keys, tid, [&](int r, int b) { return kv + (size_t)r * DQK + b * 64; });
}
__device__ __forceinline__ void load_q_tile64(uint32_t dst, const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe,
                                              int m0, int M, int H, int q_ld, int tid) {
    load_tile64(dst, m0, M, tid, [&](int r, int b) { return b < 8 ? q_lat + q_lat_row(r, H, q_ld) + b * 64 : q_pe + (size_t)r * DR; });
}

// generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy (wgmma reads)
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// wgmma shared-memory matrix descriptor: start address, leading / stride byte offsets (>> 4), 128-byte swizzle (1 << 62)
__device__ __forceinline__ uint64_t gdesc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
// a descriptor of addr + off from addr's: the start-address field is addr >> 4 in bits 0..13, and every address of this
// kernel's shared memory is below 2^18 (227 KB), so adding off >> 4 (off a multiple of 16) never carries out of the field
__device__ __forceinline__ uint64_t dadd(uint64_t d, uint32_t off) { return d + (off >> 4); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// pins accumulator registers at this point, so the compiler moves no read or write of them across a wgmma fence/wait
template <int N> __device__ __forceinline__ void reg_fence(float *d) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x 32] += A[64 x 16] (smem, K-major) * B (smem, K-major), bf16 in, fp32 accumulate
__device__ __forceinline__ void wgmma_m64n32k16(float *d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(1));
}

// D[64 x 64] += A[64 x 16] (smem, K-major) * B (smem, MN-major), bf16 in, fp32 accumulate
__device__ __forceinline__ void wgmma_m64n64k16_tb(float *d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(1));
}

// D[64 x 256] += A[64 x 16] (smem, K-major) * B (smem, MN-major), bf16 in, fp32 accumulate
__device__ __forceinline__ void wgmma_m64n256k16_tb(float *d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(1));
}


// VERIFY_STAMPS (benchmarks/stamp_verify.py only; the shipped build has none of it): thread 0 of each block records its
// timeline, %globaltimer ns, in stamps[block * 8 + i]: 0 start, 1 Q and the first tile landed, 2 key loop done, 3 end
// (after the merge and the writes), 4 the SM, 5 the block's key tiles; in the cluster kernels 6 and 7 the merge's first
// and second cluster barriers.
#ifdef VERIFY_STAMPS
#define VSTAMP(i) do { if (tid == 0) { unsigned long long t_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)); \
                                        stamps[(blockIdx.y * gridDim.x + blockIdx.x) * 8 + (i)] = t_; } } while (0)
#define VSTAMPS_PARAM , unsigned long long *__restrict__ stamps
#define VSTAMPS_ARG , stamps
#else
#define VSTAMP(i) do { } while (0)
#define VSTAMPS_PARAM
#define VSTAMPS_ARG
#endif

// The cluster merge (CS > 1 blocks of a cluster hold the same 64 rows over consecutive key ranges). Each block reads every
// block's row max and sum through distributed shared memory, rescales its O by exp2(m_b - m) / L into its own shared
// memory (fp32, over Q and the K/V stages, which the key loop is done with), and block r then sums columns
// [r * 512 / CS, (r + 1) * 512 / CS) of all CS staged O's in rank order. The result goes to `out` when the cluster is its
// row tile's only one (parts == 1), else to partial `part` of the workspace: CS times fewer partials for the combine.
// Same edge-case rules as the direct write: a row that sees nothing gets 0 / -inf, a NaN sum stays NaN.
template <int CS>
__device__ __forceinline__ void cluster_merge(unsigned char *smem, const float (&o)[128], int wg, int lr0, int t4, int tid, int m0,
                                              int M, int parts, int part, bf16 *__restrict__ out, float *__restrict__ lse,
                                              bf16 *__restrict__ ws_o, float *__restrict__ ws_lse VSTAMPS_PARAM) {
    cg::cluster_group cl = cg::this_cluster();
    float *sRsum = reinterpret_cast<float *>(smem + RSUM_OFF), *sMfin = reinterpret_cast<float *>(smem + MFIN_OFF);
    float *sO = reinterpret_cast<float *>(smem), *sMst = reinterpret_cast<float *>(smem + MST_OFF);
    cl.sync();  // every block's row stats published (publish_row_stats) and its key loop done
    VSTAMP(6);
    float f[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int row = lr0 + 8 * e;
        float m[CS], l[CS], mx = -INFINITY;
#pragma unroll
        for (int c = 0; c < CS; ++c) {
            const float *rs = cl.map_shared_rank(sRsum, c);
            m[c] = *cl.map_shared_rank(sMfin + row, c);
            l[c] = rs[row] + rs[BM + row];
            mx = fmaxf(mx, m[c]);
        }
        const float mu = mx == -INFINITY ? 0.f : mx;  // as softmax_step: nothing seen anywhere gives weights 0, not NaN
        float L = 0.f;
#pragma unroll
        for (int c = 0; c < CS; ++c) L += l[c] * exp2f(m[c] - mu);
        f[e] = (L == 0.f ? 0.f : 1.f / L) * exp2f(sMfin[row] - mu);
        if (wg == 0 && t4 == 0) { sMst[row] = mx; sMst[BM + row] = L; }
    }
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int j = 0; j < 32; ++j)
            *reinterpret_cast<float2 *>(sO + (lr0 + 8 * e) * OST + 256 * wg + 8 * j + 2 * t4) =
                make_float2(o[4 * j + 2 * e] * f[e], o[4 * j + 2 * e + 1] * f[e]);
    cl.sync();  // every block's scaled O staged
    VSTAMP(7);
    constexpr int CW = DC / CS, U = CW / 4;  // this block's columns; float4 units a row
    const int rank = (int)cl.block_rank(), nr = min(BM, M - m0);
    bf16 *dst = row_dst(out, ws_o, parts, part, M);
    for (int u = tid; u < nr * U; u += 256) {
        const int row = u / U, col = rank * CW + 4 * (u - row * U);
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int c = 0; c < CS; ++c) {
            const float4 v = *reinterpret_cast<const float4 *>(cl.map_shared_rank(sO + row * OST + col, c));
            a.x += v.x; a.y += v.y; a.z += v.z; a.w += v.w;
        }
        const bf162 h0 = __floats2bfloat162_rn(a.x, a.y), h1 = __floats2bfloat162_rn(a.z, a.w);
        *reinterpret_cast<uint2 *>(dst + (size_t)(m0 + row) * DC + col) =
            make_uint2(*reinterpret_cast<const uint32_t *>(&h0), *reinterpret_cast<const uint32_t *>(&h1));
    }
    if (rank == 0 && tid < nr) {
        const float ls = row_lse(sMst[tid], sMst[BM + tid]);
        if (parts == 1) lse[m0 + tid] = ls;
        else ws_lse[(size_t)part * M + m0 + tid] = ls;
    }
    cl.sync();  // no block leaves while another still reads its shared memory
}

template <int PVN, int CS>
__device__ __forceinline__ void verify_sm90(const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe,
                                            const bf16 *__restrict__ kv, const uint32_t *__restrict__ vis, int W,
                                            int T, int H, int P, const int *__restrict__ p_dev, int S, float scale,
                                            bf16 *__restrict__ out, float *__restrict__ lse, bf16 *__restrict__ ws_o,
                                            float *__restrict__ ws_lse, int splits, int head_major, int q_ld VSTAMPS_PARAM) {
    static_assert(PVN == 64 || PVN == 256, "PV wgmma width");
    extern __shared__ __align__(16) unsigned char smem_raw[];  // only 16 B promised: the base is aligned by hand below
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;
    unsigned char *smem = smem_raw + (base - raw);
    // wg through a shuffle: the compiler then knows it is the same in a warp and can keep the descriptors built from it
    // in uniform registers, as wgmma wants them
    const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), wq = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
              t4 = lane & 3;
    const int M = T * H, m0 = blockIdx.x * BM, split = blockIdx.y;
    VSTAMP(0);
    if (p_dev) P = clamp_prefix(*p_dev, T, S);
    const int n_keys = P + T;
    int tile0, tile1;
    split_tiles((n_keys + BN - 1) / BN, splits, split, tile0, tile1);
    const uint32_t sQ = base + Q_OFF, sK0 = base + K_OFF, sP = base + P_OFF;
    float *sRmax = reinterpret_cast<float *>(smem + RMAX_OFF), *sRsum = reinterpret_cast<float *>(smem + RSUM_OFF);
    float *sMfin = reinterpret_cast<float *>(smem + MFIN_OFF);
    uint32_t *sBad = reinterpret_cast<uint32_t *>(smem + BAD_OFF);  // bit i: key row i of the tile had a non-finite V chunk
    if (tid < 2) sBad[tid] = 0u;  // ordered before the first scrub by the first barrier of the key loop

    load_q_tile64(sQ, q_lat, q_pe, m0, M, H, q_ld, tid);  // rows past M zero-filled, 128-byte swizzled
    auto load_k = [&](int tile, int buf) { load_kv_tile64(sK0 + buf * TILE, kv, tile * BN, n_keys, tid); };
    // Both stages are loaded before the loop, and a stage is refilled as soon as its tile's PV is done, before the wait
    // for the next tile: two tiles in flight while a tile waits. Group g (one commit each, empty ones too) holds tile
    // tile0 + g (g = 0 with Q), so the wait at iteration i leaves only group i + 1 pending.
    if (tile0 < tile1) load_k(tile0, 0);
    cp_async_commit();
    if (tile0 + 1 < tile1) load_k(tile0 + 1, 1);
    cp_async_commit();

    const int lr0 = wq * 16 + g;  // this thread's accumulator rows: lr0 and lr0 + 8 (wgmma D fragment)
    int tq[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) { const int gr = m0 + lr0 + 8 * e; tq[e] = gr >= M ? -1 : head_major ? gr % T : gr / H; }
    float o[128];  // O[64 x 256]: n8 block j = i / 4, element (row lr0 + 8 * ((i >> 1) & 1), col 256 wg + 8 j + 2 t4 + (i & 1))
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    float mr[2] = {-INFINITY, -INFINITY}, lr[2] = {0.f, 0.f};
    const float sl2 = scale * LOG2E;
    const uint64_t dq = gdesc(sQ, 16, 1024), dp = gdesc(sP, 16, 1024);   // Q and P stay put; K/V's stage moves each tile

    for (int it = tile0; it < tile1; ++it) {
        const int buf = (it - tile0) & 1;
        cp_async_wait_group<1>();  // tile `it` (and Q) landed; tile it + 1 may still be in flight
        fence_async_smem();
        __syncthreads();  // tile `it` (and Q) visible to the tensor cores
        if (it == tile0) VSTAMP(1);
        const uint32_t sK = sK0 + buf * TILE;
        const bool need_mask = (it + 1) * BN > P;  // tile reaches the tree part or the tail

        // Masked keys only live in the tree part [P, n_keys): scrub its rows as v2 does (verify_attn_common.cuh),
        // then make the zeroed chunks visible to the tensor cores. Only tiles that reach the tree part pay.
        if (need_mask) {
            scrub_tree_rows(smem + K_OFF + buf * TILE, max(P - it * BN, 0), min(n_keys - it * BN, BN), tid, 256, sBad, toff);
            fence_async_smem();
            __syncthreads();
        }

        // S = Q K^T: this warpgroup's 32 keys, 36 k16 steps over the 576-deep rows
        float s[16];
#pragma unroll
        for (int i = 0; i < 16; ++i) s[i] = 0.f;
        reg_fence<16>(s);
        wgmma_fence();
        const uint64_t dk = gdesc(sK + wg * 32 * 128, 16, 1024);
#pragma unroll
        for (int cb = 0; cb < 9; ++cb)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                wgmma_m64n32k16(s, dadd(dq, cb * CBLK + kk * 32), dadd(dk, cb * CBLK + kk * 32));
        wgmma_commit();
        wgmma_wait0();
        reg_fence<16>(s);

        // scale to log2 units, mask, row max (quad, then the two warpgroups through shared memory)
        const int kb = it * BN + wg * 32 + 2 * t4;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const int row = (i >> 1) & 1;
            float v = s[i] * sl2;
            if (need_mask) {
                const int key = kb + 8 * (i >> 2) + (i & 1);
                v = mask_score(v, key, key - it * BN, P, n_keys, tq[row], vis, W, sBad);
            }
            s[i] = v;
            mx[row] = fmaxf(mx[row], v);
        }
        publish_row_max(sRmax, wg, BM, lr0, mx, t4 == 0);
        if (need_mask && tid < 2) sBad[tid] = 0u;  // last read above; the next scrub comes after the next loop barrier

        // online softmax: both warpgroups compute the same running max; P = exp2(s - m) as bf16 into shared memory
        float al[2], mu[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) mu[e] = softmax_step(mr[e], lr[e], fmaxf(sRmax[lr0 + 8 * e], sRmax[BM + lr0 + 8 * e]), al[e]);
        unsigned char *pt = smem + P_OFF;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const float p0 = exp2f(s[4 * j] - mu[0]), p1 = exp2f(s[4 * j + 1] - mu[0]);
            const float p2 = exp2f(s[4 * j + 2] - mu[1]), p3 = exp2f(s[4 * j + 3] - mu[1]);
            lr[0] += p0 + p1;
            lr[1] += p2 + p3;
            // key 32 wg + 8 j + 2 t4 -> chunk 4 wg + j of the 128-byte row; rows lr0 and lr0 + 8 share (row & 7)
            const uint32_t off = (uint32_t)((((4 * wg + j) ^ (lr0 & 7)) << 4) + 4 * t4);
            *reinterpret_cast<bf162 *>(pt + lr0 * 128 + off) = __floats2bfloat162_rn(p0, p1);
            *reinterpret_cast<bf162 *>(pt + (lr0 + 8) * 128 + off) = __floats2bfloat162_rn(p2, p3);
        }
#pragma unroll
        for (int i = 0; i < 128; ++i) o[i] *= al[(i >> 1) & 1];
        fence_async_smem();
        __syncthreads();  // all of P written (both halves) before either warpgroup's PV reads it

        // O += P V: this warpgroup's 256 columns, 4 k16 steps over the tile's 64 keys
        reg_fence<128>(o);
        wgmma_fence();
        const uint64_t dv = gdesc(sK + 4 * wg * CBLK, PVN == 256 ? CBLK : 1024, 1024);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            const uint64_t da = dadd(dp, ks * 32);
            if constexpr (PVN == 256) {
                wgmma_m64n256k16_tb(o, da, dadd(dv, ks * 2048));
            } else {
#pragma unroll
                for (int nb = 0; nb < 4; ++nb) wgmma_m64n64k16_tb(o + 32 * nb, da, dadd(dv, nb * CBLK + ks * 2048));
            }
        }
        wgmma_commit();
        wgmma_wait0();
        reg_fence<128>(o);
        __syncthreads();  // both warpgroups' PV of tile `it` have read this stage: refill it with tile it + 2
        if (it + 2 < tile1) load_k(it + 2, buf);
        cp_async_commit();
    }
    cp_async_wait_all();
    VSTAMP(2);
#ifdef VERIFY_STAMPS
    if (tid == 0) { unsigned sm_; asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));
                    stamps[(blockIdx.y * gridDim.x + blockIdx.x) * 8 + 4] = sm_; stamps[(blockIdx.y * gridDim.x + blockIdx.x) * 8 + 5] = tile1 - tile0; }
#endif

    // epilogue: total row sums, normalise, write bf16 (direct) or a bf16 partial + lse per split (per cluster: cluster_merge)
    publish_row_stats(sRsum, sMfin, wg, BM, lr0, lr, mr, t4 == 0);
    if constexpr (CS > 1) {
        cluster_merge<CS>(smem, o, wg, lr0, t4, tid, m0, M, splits / CS, split / CS, out, lse, ws_o, ws_lse VSTAMPS_ARG);
        VSTAMP(3);
        return;
    }
    // O normalised to bf16 and staged in shared memory (over Q and the K/V stages, which the key loop is done with; rows
    // 1,040 B apart, so a warp's 8-row store hits 32 distinct banks), then written out in 16-byte chunks, a warp covering
    // 512 contiguous bytes of a row. Stored straight from the accumulators (8 rows x 16 B a warp instruction, 4,096 L1
    // wavefronts for a block's 64 KB) these writes took 4-7 µs of a T = 1 call (stamp_verify.py, session 25).
    const bool direct = splits == 1;
    bf16 *dst = row_dst(out, ws_o, splits, split, M);
    constexpr int ES = DC + 8;   // staged row stride (bf16)
    bf16 *sE = reinterpret_cast<bf16 *>(smem);
#pragma unroll
    for (int h2 = 0; h2 < 2; ++h2) {
        const int lrow = lr0 + 8 * h2;
        const float L = sRsum[lrow] + sRsum[BM + lrow];
        const float inv = L == 0.f ? 0.f : 1.f / L;  // nothing visible: 0 (o is 0 too); NaN stays NaN
#pragma unroll
        for (int j = 0; j < 32; ++j)
            *reinterpret_cast<bf162 *>(sE + lrow * ES + 256 * wg + 8 * j + 2 * t4) =
                __floats2bfloat162_rn(o[4 * j + 2 * h2] * inv, o[4 * j + 2 * h2 + 1] * inv);
    }
    __syncthreads();
    const int nr = min(BM, M - m0);
    for (int q = tid; q < nr * (DC / 8); q += 256) {
        const int row = q >> 6, ch = q & 63;
        *reinterpret_cast<uint4 *>(dst + (size_t)(m0 + row) * DC + 8 * ch) = *reinterpret_cast<const uint4 *>(sE + row * ES + 8 * ch);
    }
    if (tid < BM && m0 + tid < M) {
        const float L = sRsum[tid] + sRsum[BM + tid];
        const float ls = row_lse(sMfin[tid], L);
        if (direct) lse[m0 + tid] = ls;
        else ws_lse[(size_t)split * M + m0 + tid] = ls;
    }
    VSTAMP(3);
}

// Same arguments as verify_attn_v2_*; grid (ceil(M / 64), splits), block 256, dynamic shared memory SMEM. The cluster
// kernels take clusters of CS blocks along the splits (splits a multiple of CS) and write splits / CS partials.
#define VERIFY_SM90_PARAMS                                                                                      \
    const bf16 *__restrict__ q_lat, const bf16 *__restrict__ q_pe, const bf16 *__restrict__ kv,                 \
        const uint32_t *__restrict__ vis, int W, int T, int H, int P, const int *__restrict__ p_dev, int S,     \
        float scale, bf16 *__restrict__ out, float *__restrict__ lse, bf16 *__restrict__ ws_o,                  \
        float *__restrict__ ws_lse, int splits, int head_major, int q_ld VSTAMPS_PARAM
// pdl_launch_dependents first, as verify_attn.cu's split kernels: a PDL combine may wait on idle SMs
#define VERIFY_SM90_BODY(PVN, CS)                                                                               \
    {                                                                                                           \
        pdl_launch_dependents();                                                                                \
        verify_sm90<PVN, CS>(q_lat, q_pe, kv, vis, W, T, H, P, p_dev, S, scale, out, lse, ws_o, ws_lse, splits, head_major, q_ld \
                             VSTAMPS_ARG);                                                                      \
    }
#define VERIFY_SM90(NAME, PVN) \
    extern "C" __global__ void __launch_bounds__(256, 1) NAME(VERIFY_SM90_PARAMS) VERIFY_SM90_BODY(PVN, 1)
#define VERIFY_SM90_CLUSTER(NAME, CS) \
    extern "C" __global__ void __cluster_dims__(1, CS, 1) __launch_bounds__(256, 1) NAME(VERIFY_SM90_PARAMS) VERIFY_SM90_BODY(256, CS)

VERIFY_SM90(verify_attn_sm90_n256, 256)  // PV as 4 x wgmma.m64n256k16 (uses the MN-major LBO)
VERIFY_SM90(verify_attn_sm90_n64, 64)    // PV as 16 x wgmma.m64n64k16 (one swizzle atom each: LBO-independent)
VERIFY_SM90_CLUSTER(verify_attn_sm90_c2, 2)  // n256, partials merged over clusters of 2, 4, 8 blocks
VERIFY_SM90_CLUSTER(verify_attn_sm90_c4, 4)
VERIFY_SM90_CLUSTER(verify_attn_sm90_c8, 8)
