// moe_w4a16_v15.cu: a DRAFT, compiled (CI's check_kernels) but not yet run on a GPU and not in ddtree_nb.moe.MOE_VERSIONS.
// v15 = v14 with two groups of 8 tokens per pass (kernels/moe_w4a16.cu, v11_run with NX = 2): each chunk's weights are
// dequantised once for 16 tokens (vx_compute), so an expert with m tokens takes ceil(m / 16) passes instead of ceil(m / 8).
// Aimed at T >= 256 and tree verification (benchmarks/moe_w4a16.md, "Plan", update of session 13). A stage holds x for
// both groups, hence 3 blocks per SM (launch bounds 128, 3): the persistent grid must be 3 x the SM count.
// To try it: add 15 to MOE_VERSIONS (with its 3 blocks per SM) and MOE_SOURCES ('dev/moe_w4a16_v15.cu') in nbs/03a, then
// MOE_VERSIONS="14 15" bash benchmarks/gpu_next.sh moe "$OUT".
#include "moe_w4a16.cu"

extern "C" __global__ void __launch_bounds__(128, 3) moe_gate_up_v15(GU_ARGS) { gate_up_v11<true, true, true, 2>(GU_PASS); }
extern "C" __global__ void __launch_bounds__(128, 3) moe_down_v15(DN_ARGS) { down_v11<true, true, true, 2>(DN_PASS); }
