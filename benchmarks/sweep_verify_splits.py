"""The verify kernel at T = 1 (an AR step) against its key-range split count (GPU only; issues 17 and 19).

python benchmarks/sweep_verify_splits.py [--prefixes 4096 32768] [--splits 9 17 33 65 129] [--heads 64] [--json out.json]

`choose_splits` picks the split count from a cost in tiles (one 64-key tile per split at P = 4096: 65 splits, each
writing a [64 x 512] partial the combine reads back). This times v2 and the sm_90a kernel (`impl='sm90'`) at each forced
split count with `bench_verify.bench_shape` (checked against fp64 first, CUDA-graph replay over cache copies that do not
fit L2), beside the count `choose_splits` picks, so the cost model can be checked against the clock.
"""
import argparse, json, sys
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).parent))
from bench_verify import bench_shape
from ddtree_nb.verify import verify_plan, sm90_fits
from ddtree_nb.runtime import device_arch, device_limits

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--prefixes', type=int, nargs='+', default=[4096, 32768])
    ap.add_argument('--splits', type=int, nargs='+', default=[9, 17, 33, 65, 129])
    ap.add_argument('--heads', type=int, default=64)
    ap.add_argument('--json', default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available(): sys.exit("sweep_verify_splits: needs a CUDA GPU")
    impls = ['v2'] + (['sm90'] if sm90_fits(device_arch(0), device_limits(0)['smem_block']) else [])
    res = []
    for P in a.prefixes:
        kw = {f'{i}_auto': dict(impl=i) for i in impls}
        kw.update({f'{i}_s{s}': dict(impl=i, splits=s) for i in impls for s in a.splits if s <= (P + 1 + 63) // 64})
        print(f"T=1 H={a.heads} P={P}: choose_splits -> {verify_plan(1, a.heads, P)['splits']}", flush=True)
        res.append(bench_shape(1, a.heads, P, 'chain', kw, with_torch=False))
    if a.json:
        with open(a.json, 'w') as f: json.dump(res, f, indent=1)

if __name__ == '__main__': main()
