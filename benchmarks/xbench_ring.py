# device-only experiment wrapper: registers the ring-depth variants x2/x3 as versions 92/93 and x6 (v18 at 6 blocks an SM) as 96, then runs bench_moe.py
import sys, runpy, ddtree_nb.moe as m
for v, S in ((92, 2), (93, 3)):
    m.MOE_VERSIONS[v] = ((f'moe_gate_up_x{S}', 128, None), (f'moe_down_x{S}', 128, None))
    m.MOE_SOURCES[v] = 'moe_w4a16.cu'; m.MOE_SHARED[v] = S * m.RING_STAGE_BYTES; m.TWO_LAUNCH_VERSION[v] = 14
m.MOE_VERSIONS[96] = (('moe_gate_up_x6', 128, None), ('moe_down_x6', 128, None)); m.MOE_SOURCES[96] = 'moe_w4a16.cu'; m.PERSISTENT_BLOCKS[96] = 6
sys.argv = ['benchmarks/bench_moe.py'] + sys.argv[1:]
runpy.run_path('benchmarks/bench_moe.py', run_name='__main__')
