// moe_w4a16_stamps.cu: a diagnostic copy of the shipped T <= 8 gate/up and down launches (v13's loop, moe_w4a16.cu) that
// records each block's start and end (%globaltimer, ns) and its SM, for benchmarks/stamp_moe.py: where an SM's time
// goes in a launch (the launch ramp, the tail, the spread of the blocks' ends). Not shipped; runs from a checkout.
#include "moe_w4a16.cu"
// st[4 b ..]: start, end, SM, work items (row tiles) of block b
__device__ __forceinline__ void stamp(unsigned long long *st, unsigned long long t0, int nh, int tiles) {
    __syncthreads();
    if (threadIdx.x == 0) {
        int a, b;
        v11_share((long long)nh * tiles, a, b);   // the share v11_items walks
        unsigned long long *p = st + 4 * blockIdx.x;
        p[0] = t0; p[1] = gtime(); p[2] = smid(); p[3] = (unsigned long long)(b - a);
    }
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v13_stamps(GU_ARGS, unsigned long long *st) {
    const unsigned long long t0 = gtime();
    gate_up_v11<true, true, false>(GU_PASS);
    stamp(st, t0, n_hit[0], (I + 15) >> 4);
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_stamps(DN_ARGS, unsigned long long *st) {
    const unsigned long long t0 = gtime();
    down_v11<true, true, false>(DN_PASS);
    stamp(st, t0, n_hit[0], (H + 31) >> 5);
}
