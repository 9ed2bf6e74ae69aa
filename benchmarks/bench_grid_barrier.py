import torch, statistics
from ddtree_nb.runtime import load_kernel, engine_stream
src = r'''
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
k = load_kernel(src, 'bar_only', 'Pi')
bar = torch.zeros(2, dtype=torch.int32, device='cuda')
es = engine_stream()
for G in (16, 64, 128):
    for ns in (0, 17):
        with es:
            k(bar, ns, grid=(G,), block=(256,)); torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch):
                for _ in range(20): k(bar, ns, grid=(G,), block=(256,))
            ts = []
            for _ in range(20):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(es.torch); g.replay(); b.record(es.torch); b.synchronize(); ts.append(1e3 * a.elapsed_time(b) / 20)
        print(f"G={G} barriers={ns}: {statistics.median(ts):.2f} us a launch", flush=True)
