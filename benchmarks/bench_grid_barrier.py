"""What a grid barrier costs: a launch of nothing but barriers, kernels/dev/draft_fused.cu's `grid_sync` (its `draft_fused_barriers`).

Not a test. Each launch passes N barriers (one counter, thread 0 of each block adds 1 and spins on an acquire load until all
blocks have arrived; the last block to finish puts the counter back to 0, `grid_done`), 20 launches back to back in one CUDA graph, CUDA
events around the replay, median of --reps replays. N = 0 is the launch alone; (N = 17) - (N = 0) over 17 is a barrier.
--builds: release (the arrival a release add, the default build) and fence (-DDF_BAR_FENCE: __threadfence() then a relaxed add,
as v1-v3 arrived).

    python benchmarks/bench_grid_barrier.py [--grids 16,64,128] [--barriers 0,17] [--builds release,fence] [--reps 20] [--out OUT.txt]
"""
import argparse, sys, time
import torch
from ddtree_nb.runtime import load_kernel, engine_stream
from bench_few_row_gemm import timed     # µs a call: 20 back to back in a graph, median of reps replays


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--grids', default='16,64,128'); ap.add_argument('--barriers', default='0,17')
    ap.add_argument('--builds', default='release'); ap.add_argument('--reps', type=int, default=20); ap.add_argument('--out')
    a = ap.parse_args(argv)
    bar = torch.zeros(2, dtype=torch.int32, device='cuda')
    es, lines = engine_stream(), [f"# grid barriers ({time.strftime('%Y-%m-%d')}, {torch.cuda.get_device_name()}), 256 threads a block",
                                  f"# command: python benchmarks/bench_grid_barrier.py {' '.join(argv or sys.argv[1:])}"]
    for build in a.builds.split(','):
        k = load_kernel('dev/draft_fused.cu', 'draft_fused_barriers', 'Pi', options={'release': (), 'fence': ('-DDF_BAR_FENCE',)}[build])
        for G in [int(x) for x in a.grids.split(',')]:
            for ns in [int(x) for x in a.barriers.split(',')]:
                launch = lambda: k(bar, ns, grid=(G,), block=(256,))
                us = timed(launch, es, a.reps)
                lines.append(f"{build} G={G} barriers={ns}: {us:.2f} us a launch"); print(lines[-1], flush=True)
    if a.out: open(a.out, 'w').write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
