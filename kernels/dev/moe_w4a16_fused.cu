// moe_w4a16_fused.cu: issue 20, T <= 8: gate/up and down as one persistent launch (v21), a try against the shipped four
// launches (v13's loop, moe_w4a16.cu). Session 15 measured that each streaming launch reads at what a 25-40 µs read gets
// on the H200 (a ramp, and a tail of 10-18% from blocks with the same work): 132 MB + 66 MB in two launches took 64 µs
// where one 198 MB read takes 56-60. Here both stream in one launch:
//   * the work is a list of items claimed at run time (one global counter): first every gate/up item (GR row tiles of
//     one hit expert), expert-major, then every down item (DR row tiles); a block claims its next item while it
//     streams the current one, so a block that finishes early takes more, and the launch ends within one item;
//   * a down item of expert y may start only when all of y's gate/up tiles are written: a block that finishes a gate/up
//     item adds its tiles to done[y] (after the run's barrier: thread 0 fences, then the atomic, so the whole block's act
//     stores are visible first); a down item requests its first weight chunk, then each thread waits for done[y] with
//     an acquire load before it reads act, and reads act with ld.global.cg (it is written during this launch, so not
//     through the read-only path);
//   * no deadlock without co-residency: items are claimed in order and every gate/up item precedes every down item, so
//     the gate/up items a waiting block needs were claimed by blocks that are running them, and those never wait.
// Each tile is computed and reduced as v13 does, so the output is v13's bit for bit. moe_group_fused also zeroes the
// counters (sync[0] = claims, sync[1 + y] = done[y]) for the launch after it. Not shipped; runs from a checkout.
#include "moe_w4a16.cu"

extern "C" __global__ void __launch_bounds__(MAXE)
moe_group_fused(const int *__restrict__ topk_idx, int P, int E, int *__restrict__ counts, int *__restrict__ offsets,
                int *__restrict__ hit, int *__restrict__ n_hit, int *__restrict__ sorted_pair, int *__restrict__ pos, int *__restrict__ sync) {
    group_pairs(topk_idx, P, E, counts, offsets, hit, n_hit, sorted_pair, pos);
    for (int i = threadIdx.x; i <= E; i += MAXE) sync[i] = 0;
}

__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// one gate/up item and one down item, inlined into the loop (NI false) or as calls (NI true: each gets its own register
// allocation, and only the loop's few values live across the call)
template <bool NI> struct Items;
#define GU_ITEM_BODY { gate_up_item<true, true>(GU_PASS, H / 32, y, r0, R, red); }
#define DN_ITEM_BODY { down_item<true, true, false>(DN_PASS, I / 32, y, r0, R, red, [&]() {   /* first weight chunk requested */ \
        while (ld_acquire(done) < need) __nanosleep(100);                                                                       \
        return act; }); }
template <> struct Items<false> {
    static __device__ __forceinline__ void gu(GU_ARGS, int y, int r0, int R, float *red) GU_ITEM_BODY
    static __device__ __forceinline__ void dn(DN_ARGS, int y, int r0, int R, float *red, const int *done, int need) DN_ITEM_BODY
};
template <> struct Items<true> {
    static __device__ __noinline__ void gu(GU_ARGS, int y, int r0, int R, float *red) GU_ITEM_BODY
    static __device__ __noinline__ void dn(DN_ARGS, int y, int r0, int R, float *red, const int *done, int need) DN_ITEM_BODY
};

#define FUSED_ARGS const bf16 *__restrict__ x, int H, int I, int k, const int *__restrict__ sorted_pair, const float *__restrict__ topk_w, \
    const int *__restrict__ offsets, const int *__restrict__ hit, const int *__restrict__ n_hit, const uint4 *__restrict__ gate_packed, \
    const bf16 *__restrict__ gate_scale, const uint4 *__restrict__ up_packed, const bf16 *__restrict__ up_scale, \
    const uint4 *__restrict__ down_packed, const bf16 *__restrict__ down_scale, bf16 *act, float *__restrict__ ybuf, int *sync, int GR, int DR, \
    unsigned long long *st
#define FUSED_PASS x, H, I, k, sorted_pair, topk_w, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, down_packed, \
    down_scale, act, ybuf, sync, GR, DR, st

// ST: stamps into st, per block its start and end (%globaltimer, ns) and the gate/up and down tiles it did.
// mode bit 0: gate/up items only (no down: to time the gate/up part against v13's gate/up launch); bit 1: static shares
// instead of claims (block b takes v11_items' b-th share of the gate/up tiles, then of the down tiles, as v13's two launches do);
// bit 2: claims without the prefetch (thread 0 claims after its item); bit 3 with bit 1: static in the claims' order (block b
// takes items b, b + grid, ...: the order the claims give, without the atomics); bit 4: claims go round the experts (item c of
// a phase is tile c / nh of hit expert c % nh); bit 5: claims take the even items of a phase first, then the odd ones;
// bits 6 and 7 (with bit 0 only: nothing waits): no fence before the done count (6), no done count at all (7); bits 8-9 with
// bit 1: block b takes v11_items' share perm(b): (5 b) mod grid (8), (131 b) mod grid (9), both: grid - 1 - b (reversed)
__device__ __forceinline__ int share_perm(int b, int G, int mode) {
    const int m = (mode >> 8) & 3;
    return m == 1 ? (int)((5ll * b) % G) : m == 2 ? (int)((131ll * b) % G) : m == 3 ? G - 1 - b : b;
}
__device__ __forceinline__ void item_of(int c, int n, int nh, int u, int mode, int &y, int &j) {
    if (mode & 32) { const int half = (n + 1) >> 1; c = c < half ? 2 * c : 2 * (c - half) + 1; }
    if (mode & 16) { y = c % nh; j = c / nh; } else { y = c / u; j = c - y * u; }
}
template <bool NI, bool ST> __device__ __forceinline__ void fused_v21(FUSED_ARGS, int mode) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    __shared__ int s_next;
    const unsigned long long t0 = ST ? gtime() : 0ull;
    const int tid = threadIdx.x, nh = n_hit[0], TG = (I + 15) >> 4, TD = (H + 31) >> 5;
    int *ctr = sync, *done = sync + 1;
    int n_gu = 0, n_dn = 0;
    auto gu = [&](int y, int r0, int R) {
        Items<NI>::gu(x, H, I, k, sorted_pair, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, act, y, r0, R, red);
        // the item's run ended with a barrier: the block's act stores come before thread 0's fence and count
        if (tid == 0 && !(mode & 128)) { if (!(mode & 64)) __threadfence(); atomicAdd(done + y, R); }
        if (ST) n_gu += R;
    };
    auto dn = [&](int y, int r0, int R) {
        Items<NI>::dn(act, I, H, sorted_pair, topk_w, offsets, hit, n_hit, down_packed, down_scale, ybuf, y, r0, R, red, done + y, TG);
        if (ST) n_dn += R;
    };
    if ((mode & 10) == 10) {
        const int ug = (TG + GR - 1) / GR, ud = (TD + DR - 1) / DR, NG = nh * ug, NTOT = (mode & 1) ? NG : NG + nh * ud;
        for (int cur = blockIdx.x; cur < NTOT; cur += gridDim.x) {
            if (cur < NG) { const int y = cur / ug, r0 = (cur - y * ug) * GR; gu(y, r0, min(GR, TG - r0)); }
            else { const int c = cur - NG, y = c / ud, r0 = (c - y * ud) * DR; dn(y, r0, min(DR, TD - r0)); }
        }
    } else if (mode & 2) {
        const int sb = share_perm(blockIdx.x, gridDim.x, mode);
        v11_items(nh, TG, gu, sb);
        if (!(mode & 1)) v11_items(nh, TD, dn, sb);
    } else {
        const int ug = (TG + GR - 1) / GR, ud = (TD + DR - 1) / DR, NG = nh * ug, NTOT = (mode & 1) ? NG : NG + nh * ud;
        if (tid == 0) s_next = atomicAdd(ctr, 1);
        __syncthreads();
        int cur = s_next;
        while (cur < NTOT) {
            int nxt = 0;
            if (tid == 0 && !(mode & 4)) nxt = atomicAdd(ctr, 1);   // the next claim, in flight while this item streams
            int y, j;
            if (cur < NG) { item_of(cur, NG, nh, ug, mode, y, j); gu(y, j * GR, min(GR, TG - j * GR)); }
            else { item_of(cur - NG, NTOT - NG, nh, ud, mode, y, j); dn(y, j * DR, min(DR, TD - j * DR)); }
            if (tid == 0) s_next = (mode & 4) ? atomicAdd(ctr, 1) : nxt;
            __syncthreads();
            cur = s_next;
        }
    }
    if (ST && tid == 0) {
        unsigned long long *p = st + 4 * blockIdx.x;
        p[0] = t0; p[1] = gtime(); p[2] = (unsigned long long)n_gu | ((unsigned long long)smid() << 32); p[3] = (unsigned long long)n_dn;
    }
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v21(FUSED_ARGS, int mode) { fused_v21<false, false>(FUSED_PASS, mode); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v21n(FUSED_ARGS, int mode) { fused_v21<true, false>(FUSED_PASS, mode); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v21_stamps(FUSED_ARGS, int mode) { fused_v21<false, true>(FUSED_PASS, mode); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v21n_stamps(FUSED_ARGS, int mode) { fused_v21<true, true>(FUSED_PASS, mode); }
// three blocks an SM (170 registers: no spills) with the grid sized to match
extern "C" __global__ void __launch_bounds__(128, 3) moe_fused_v21_lb3(FUSED_ARGS, int mode) { fused_v21<false, false>(FUSED_PASS, mode); }

// v22: v21's claims alone in their kernel. v21's mode bits put several copies of each item into one function, and ptxas
// spilled inside the streaming loop of the claim and wave paths but not of the static one (ncu at T = 1: 828 k local-memory
// requests in mode 139, none in mode 3), which is what made those modes slow. Here the loop keeps only cur (and thread 0's
// next claim) across an item; everything else is recomputed from the arguments. GU_ONLY: gate/up items only (timing).
// the claim loop of v22 and v23: items are claimed in order from sync[0], every gate/up item (ug per hit expert) before every
// down item (ud per hit expert); thread 0 claims the next item while item(cur, L) streams the current one
struct Claims { int TG, TD, ug, ud, NG; };
template <bool GU_ONLY, class Item>
__device__ __forceinline__ void claim_loop(const int *n_hit, int H, int I, int GR, int DR, int *sync, Item item) {
    __shared__ int s_next;
    const int tid = threadIdx.x;
    if (tid == 0) s_next = atomicAdd(sync, 1);
    __syncthreads();
    int cur = s_next;
    while (true) {
        const int nh = n_hit[0], TG = (I + 15) >> 4, TD = (H + 31) >> 5, ug = (TG + GR - 1) / GR, ud = (TD + DR - 1) / DR;
        const Claims L{TG, TD, ug, ud, nh * ug};
        if (cur >= (GU_ONLY ? L.NG : L.NG + nh * ud)) break;
        int nxt = 0;
        if (tid == 0) nxt = atomicAdd(sync, 1);   // the next claim, in flight while this item streams
        item(cur, L);
        if (tid == 0) s_next = nxt;
        __syncthreads();
        cur = s_next;
    }
}
template <bool GU_ONLY> __device__ __forceinline__ void fused_v22(FUSED_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    claim_loop<GU_ONLY>(n_hit, H, I, GR, DR, sync, [&](int cur, const Claims &L) {
        if (cur < L.NG) {
            const int y = cur / L.ug, r0 = (cur - y * L.ug) * GR, R = min(GR, L.TG - r0);
            gate_up_item<true, true>(x, H, I, k, sorted_pair, offsets, hit, n_hit, gate_packed, gate_scale, up_packed, up_scale, act,
                                     H / 32, y, r0, R, red);
            if (threadIdx.x == 0) { __threadfence(); atomicAdd(sync + 1 + y, R); }   // after the item's closing barrier
        } else {
            const int c = cur - L.NG, y = c / L.ud, r0 = (c - y * L.ud) * DR;
            down_item<true, true, false>(act, I, H, sorted_pair, topk_w, offsets, hit, n_hit, down_packed, down_scale, ybuf, I / 32,
                                         y, r0, min(DR, L.TD - r0), red, [&]() {
                const int *d = sync + 1 + y;
                while (ld_acquire(d) < L.TG) __nanosleep(100);
                return static_cast<const bf16 *>(act);
            });
        }
    });
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v22(FUSED_ARGS, int mode) { fused_v22<false>(FUSED_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v22_gu(FUSED_ARGS, int mode) { fused_v22<true>(FUSED_PASS); }

// v23: v22 with ONE streaming loop for both kinds of item. v22 inlines gate/up's and down's v11_run side by side, and the two
// loops do not fit one 128-register budget (264 bytes of spills; v13's down alone uses 127 registers). Here a single
// v11_run<.., RS = 0, ..> streams both: the kind only changes its arguments (matrices, widths, the row steps 16/0 or 32/16),
// the x row (x through sorted_pair, or act) and the epilogue; x is read with ld.global.cg for both. A down item waits for its
// expert before the run (inside the run's x callback, ptxas spilled 8 bytes). No spills. The epilogues are the shipped
// store_act / store_ybuf (the same bits as v13).
// Written after session 16's last GPU call: not yet run.
template <bool GU_ONLY> __device__ __forceinline__ void fused_v23(FUSED_ARGS) {
    __shared__ float red[2 * 4 * 2 * 4 * 32];
    const int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
    claim_loop<GU_ONLY>(n_hit, H, I, GR, DR, sync, [&](int cur, const Claims &L) {
        const bool dn = cur >= L.NG;
        const int c = dn ? cur - L.NG : cur, u = dn ? L.ud : L.ug, y = c / u, r0 = (c - y * u) * (dn ? DR : GR);
        const int R = min(dn ? DR : GR, (dn ? L.TD : L.TG) - r0), e = hit[y], N = dn ? H : I, G = (dn ? I : H) / 32, n0 = r0 * (dn ? 32 : 16);
        const size_t base = (size_t)e * N * G;
        const uint4 *const W[2] = {(dn ? down_packed : gate_packed) + base, (dn ? down_packed : up_packed) + base};
        const unsigned short *const S[2] = {reinterpret_cast<const unsigned short *>(dn ? down_scale : gate_scale) + base,
                                            reinterpret_cast<const unsigned short *>(dn ? down_scale : up_scale) + base};
        if (dn) while (ld_acquire(sync + 1 + y) < L.TG) __nanosleep(100);   // expert y's act is complete
        v11_run<2, 4, 0, 0, true, true, false>(W, S, n0, N, G, R, offsets + e, red,
            [&](int s0, int mt) -> const uint4 * {
                if (g >= mt) return nullptr;
                if (!dn) return reinterpret_cast<const uint4 *>(x + (size_t)(sorted_pair[s0 + g] / k) * H);
                return reinterpret_cast<const uint4 *>(act + (size_t)(s0 + g) * I);
            },
            [&](int r, int t0, int mt, const float (&s)[2][4]) {   // the shipped epilogues: the same bits as v13
                if (dn) store_ybuf(ybuf, H, sorted_pair, topk_w, offsets[e] + t0, n0 + 32 * r, g, t, mt, s);
                else store_act(act, I, offsets[e] + t0, n0 + 16 * r, g, t, mt, s);
            }, dn ? 32 : 16, dn ? 16 : 0);
        if (threadIdx.x == 0 && cur < L.NG) {   // after the run's closing barrier the block's act is stored: count the item's
            const int y2 = cur / L.ug, r2 = (cur - y2 * L.ug) * GR;   // tiles (from cur again: fewer values live across the run)
            __threadfence(); atomicAdd(sync + 1 + y2, min(GR, L.TG - r2));
        }
    });
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v23(FUSED_ARGS, int mode) { fused_v23<false>(FUSED_PASS); }
extern "C" __global__ void __launch_bounds__(128, 4) moe_fused_v23_gu(FUSED_ARGS, int mode) { fused_v23<true>(FUSED_PASS); }
