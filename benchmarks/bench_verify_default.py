"""v2 against the sm_90a kernel (the default on an H100/H200 since session 14) at the verify shapes the engine runs: the demo
pair (H = 4, P = 1000) and a Kimi layer (H = 64, P = 4096), T = 1 (an AR step) and trees of 16, 64, 256 nodes (+ root).
Each variant is checked against fp64 first (`bench_verify.bench_shape`); CUDA-graph replay over cache copies that do not fit L2.
`sm90_c2` is a variant of the sm_90a kernel (`bench_verify.SM90_TRY`) timed beside the shipped one.
"""
import argparse, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
import bench_verify as bv
from ddtree_nb.bench import git_commit

SHAPES = [(T, H, P, 'chain' if T == 1 else 'tree') for H, P in ((4, 1000), (64, 4096)) for T in (1, 17, 65, 257)]

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default='.'); a = ap.parse_args()
    impls = {'v2': dict(impl='v2'), 'sm90': dict(impl='sm90'), 'sm90_c2': dict(impl='sm90', pv_n=256, kernel=bv.SM90_TRY)}
    rows = [bv.bench_shape(T, H, P, k, impls, with_torch=False) for T, H, P, k in SHAPES]
    print('| T | H | P | v2 µs | sm90 µs | sm90_c2 µs | v2 / sm90 | sm90 / sm90_c2 |\n|---|---|---|---|---|---|---|---|')
    for r in rows:
        x = [r['impls'][n] for n in impls]
        us = [f"{i['us']:.1f}" if i.get('ok') else 'WRONG' for i in x]
        ratio = lambda a, b: f"{a['us'] / b['us']:.2f}x" if a.get('ok') and b.get('ok') else ''
        print(f"| {r['T']} | {r['H']} | {r['P']} | {' | '.join(us)} | {ratio(x[0], x[1])} | {ratio(x[1], x[2])} |")
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows), open(os.path.join(a.out, 'bench_verify_default.json'), 'w'), indent=1, default=str)
