"""v2 against the sm_90a kernel (the default on an H100/H200 since session 14) at the verify shapes the engine runs: the demo
pair (H = 4, P = 1000) and a Kimi layer (H = 64, P = 4096), T = 1 (an AR step) and trees of 16, 64, 256 nodes (+ root).
Each variant is checked against fp64 first (`bench_verify.bench_shape`); CUDA-graph replay over cache copies that do not fit L2.
`sm90_v1` is the sm_90a kernel's first schedule (session 14), timed beside the shipped one; its outputs must equal the
shipped kernel's bit for bit (the same sums in the same order), which the run checks and prints.

    python benchmarks/bench_verify_default.py --out DIR      # writes DIR/bench_verify_default.json, prints a markdown table
"""
import argparse, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
import bench_verify as bv
from ddtree_nb.bench import git_commit

def same_bits(T, H, P, kind) -> bool:
    "The shipped sm_90a kernel and its first schedule give the same out and lse bits on this shape's inputs (splits as planned)."
    kvs, ql, qp, vis = bv.make_inputs(T, H, P, kind, 0)
    bits, scale, res = bv.vis_to_bits(vis), bv.DQK ** -0.5 * 2.0, []
    for name in (None, bv.SM90_V1):
        with bv.sm90_kernel(name): res.append(bv.mla_tree_attention(ql, qp, kvs[0], P, bits, scale, impl='sm90', pv_n=256))
    return torch.equal(res[0][0], res[1][0]) and torch.equal(res[0][1], res[1][1])

SHAPES = [(T, H, P, 'chain' if T == 1 else 'tree') for H, P in ((4, 1000), (64, 4096)) for T in (1, 17, 65, 257)]

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default='.'); a = ap.parse_args()
    impls = {'v2': dict(impl='v2'), 'sm90_v1': dict(impl='sm90', pv_n=256, kernel=bv.SM90_V1), 'sm90': dict(impl='sm90')}
    same = {(T, H, P): same_bits(T, H, P, k) for T, H, P, k in SHAPES}
    rows = [bv.bench_shape(T, H, P, k, impls, with_torch=False) for T, H, P, k in SHAPES]
    print('| T | H | P | v2 µs | sm90_v1 µs | sm90 µs | v2 / sm90 | sm90_v1 / sm90 | sm90 == sm90_v1 bits |\n|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        x = [r['impls'][n] for n in impls]
        us = [f"{i['us']:.1f}" if i.get('ok') else 'WRONG' for i in x]
        ratio = lambda a, b: f"{a['us'] / b['us']:.2f}x" if a.get('ok') and b.get('ok') else ''
        print(f"| {r['T']} | {r['H']} | {r['P']} | {' | '.join(us)} | {ratio(x[0], x[2])} | {ratio(x[1], x[2])} | {same[r['T'], r['H'], r['P']]} |")
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows, same_bits={str(k): v for k, v in same.items()}), open(os.path.join(a.out, 'bench_verify_default.json'), 'w'), indent=1, default=str)
