// moe_w4a16_pdl.cu: the shipped T <= 8 launches (v13's loop) for programmatic dependent launch (sm_90+), a try for issue 20
// (benchmarks/try_moe_pdl.py launches them through cuLaunchKernelEx with the programmatic-serialization attribute, which
// PyCUDA does not expose). Each kernel lets its dependent launch only once it is past its own griddepcontrol.wait, so a
// dependent never starts before the grouping launch two back is complete and visible:
//   gate/up: wait (for the grouping), launch_dependents, then v13's gate/up;
//   down:    v13's down with PDL: a block requests its first weight chunk before waiting for gate/up (down_v11<..., true>),
//            then launch_dependents;
//   combine: wait, then the combine.
// Under a plain launch every wait returns at once: the same kernels, the same bits. Data the grid before writes (down's act,
// the combine's ybuf) is read after the wait and with coherent loads (ldcg), not through the read-only path: that grid may
// still be writing it while this one runs its prologue, and ld.global.nc promises the data does not change during the
// kernel's life. Session 15's first version read act with __ldg: at T = 8, 23-26 of 100 runs differed from v13, with PDL on
// the down launch alone as well (benchmarks/moe_w4a16.md, "Session 15"); this version has not run on a GPU yet.
#include "moe_w4a16.cu"

extern "C" __global__ void __launch_bounds__(128, 4) moe_gate_up_v13_pdl(GU_ARGS) {
    pdl_wait();
    pdl_launch_dependents();   // the grouping's output is read through pointers taken after the wait (after_here)
    gate_up_v11<true, true, false>(x, H, I, k, after_here(sorted_pair), after_here(offsets), after_here(hit), after_here(n_hit),
                                   gate_packed, gate_scale, up_packed, up_scale, act);
}
extern "C" __global__ void __launch_bounds__(128, 4) moe_down_v13_pdl(DN_ARGS) { down_v11<true, true, false, true>(DN_PASS); }
extern "C" __global__ void __launch_bounds__(256)
moe_combine_pdl(const float *__restrict__ ybuf, const int *__restrict__ pos, int T, int k, int H, float rsf, bf16 *__restrict__ out) {
    pdl_wait();
    combine_tokens<false>(after_here(ybuf), after_here(pos), T, k, H, rsf, out);
}
