// moe_w4a16_pdl.cu: the shipped T <= 8 launches (v13's loop) for programmatic dependent launch (sm_90+), a try for issue 20
// (benchmarks/try_moe_pdl.py launches them through cuLaunchKernelEx with the programmatic-serialization attribute, which
// PyCUDA does not expose). Each kernel lets its dependent launch only once it is past its own griddepcontrol.wait, so a
// dependent never starts before the grouping launch two back is complete and visible:
//   gate/up: wait (for the grouping), launch_dependents, then v13's gate/up;
//   down:    v13's down with PDL: a block requests its first weight chunk before waiting for gate/up (down_v11<..., true>),
//            then launch_dependents;
//   combine: wait, then the combine.
// Under a plain launch every wait returns at once: the same kernels, the same bits. Data the grid before writes is read
// through pointers taken after the wait (after_here): the x chunks are ld.global.nc loads, which the compiler may hoist above
// the wait (their data is promised constant for the kernel's life). Without that, outputs at T = 8 differed from v13 in 16-40%
// of runs (session 15: the combine read ybuf rows of the previous run, whose slot order the grouping's atomics change).
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
    combine_tokens(after_here(ybuf), after_here(pos), T, k, H, rsf, out);
}
