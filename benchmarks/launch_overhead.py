"""Host time of one kernel launch through runtime.Kernel: the plain PyCUDA launch against the programmatic-dependent one
(`pdl=True`, ctypes cuLaunchKernelEx), and one eager MoE layer call at T = 1 (Kimi widths, four launches) with PDL on and
off. The eager decode path is bound by host time, so a slow launch shows there (the graph replays do not see it).

    python benchmarks/launch_overhead.py [--n 2000] [--out DIR]
"""
import argparse, os, statistics, sys, time
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, rand_packed, routing, save_json
from ddtree_nb.moe import MoEWorkspace, moe_cuda_launch
from ddtree_nb.runtime import load_kernel, engine_stream


def host_us(fn, n, rounds=5):
    "Median over `rounds` of the host µs per call of `fn` over `n` calls (the GPU keeps up or queues; only the host is timed)."
    ts = []
    for _ in range(rounds):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(n): fn()
        ts.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=2000)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, es = torch.device('cuda'), engine_stream()
    k = load_kernel('smoke.cu', 'axpy', 'PPfi')
    y, x = torch.zeros(4096, device=dev), torch.randn(4096, device=dev)
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), n=a.n)
    with es:
        for pdl in (False, True):
            res[f'axpy_pdl{int(pdl)}_us'] = round(host_us(lambda: k(y, x, 1.0, 4096, grid=16, block=256, pdl=pdl), a.n), 2)
        ex = rand_packed(384, dev)
        xt = torch.randn(1, H, device=dev).bfloat16()
        idx, w = routing(1, 384, 8, 'spread', dev, seed=1)
        ws, out = MoEWorkspace(1, 8, 384, H, I, dev), torch.empty_like(xt)
        for pdl in (False, True):
            res[f'moe_t1_pdl{int(pdl)}_us'] = round(host_us(lambda: moe_cuda_launch(xt, idx, w, ex, 2.827, out, ws, 13, pdl=pdl), a.n // 10), 2)
    print(res, flush=True)
    save_json(res, a.out, 'launch_overhead.json')


if __name__ == '__main__': main()
