"""What a grid barrier costs: a launch of nothing but barriers, as kernels/dev/draft_fused.cu's `grid_sync` does them.

Not a test. Each launch passes N barriers (one counter, thread 0 of each block adds 1 and spins on an acquire load until all
blocks have arrived; the last block to finish puts the counter back to 0), 20 launches back to back in one CUDA graph, CUDA
events around the replay, median of --reps replays. N = 0 is the launch alone; (N = 17) - (N = 0) over 17 is a barrier.

    python benchmarks/bench_grid_barrier.py [--grids 16,64,128] [--barriers 0,17] [--reps 20] [--out OUT.txt]
"""
import argparse, time
import torch
from ddtree_nb.runtime import load_kernel, engine_stream
from bench_few_row_gemm import timed     # µs a call: 20 back to back in a graph, median of reps replays

SRC = r'''
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
extern "C" __global__ void bar_only(unsigned *bar, int nsync) {
    for (int k = 1; k <= nsync; ++k) grid_sync(bar, k);
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence(); if (atomicAdd(bar + 1, 1u) == gridDim.x - 1) { bar[0] = 0; bar[1] = 0; __threadfence(); } }
}
'''

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--grids', default='16,64,128'); ap.add_argument('--barriers', default='0,17')
    ap.add_argument('--reps', type=int, default=20); ap.add_argument('--out')
    a = ap.parse_args(argv)
    k = load_kernel(SRC, 'bar_only', 'Pi')
    bar = torch.zeros(2, dtype=torch.int32, device='cuda')
    es, lines = engine_stream(), [f"# grid barriers ({time.strftime('%Y-%m-%d')}, {torch.cuda.get_device_name()}), 256 threads a block"]
    for G in [int(x) for x in a.grids.split(',')]:
        for ns in [int(x) for x in a.barriers.split(',')]:
            launch = lambda: k(bar, ns, grid=(G,), block=(256,))
            us = timed(launch, es, a.reps)
            lines.append(f"G={G} barriers={ns}: {us:.2f} us a launch"); print(lines[-1], flush=True)
    if a.out: open(a.out, 'w').write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
