"""v2 against the sm_90a kernel (the default on an H100/H200 since session 14) at the verify shapes the engine runs: the demo
pair (H = 4, P = 1000) and a Kimi layer (H = 64, P = 4096), T = 1 (an AR step) and trees of 16, 64, 256 nodes (+ root).
Each variant is checked against fp64 first (`bench_verify.bench_shape`); CUDA-graph replay over cache copies that do not fit L2.

    python benchmarks/bench_verify_default.py --out DIR      # writes DIR/bench_verify_default.json, prints a markdown table
    python benchmarks/bench_verify_default.py --pdl --out DIR   # each kernel with its split combine plain (pdl=False) and as a
                                                               # programmatic dependent (pdl=True), T = 1 at P = 32k and 128k
                                                               # too, and which of the two `pdl_pays` (the default) picks
    python benchmarks/bench_verify_default.py --cluster --out DIR   # the sm_90a kernel with its plain split plan (cluster=1) against
                                                               # the default plan (`default_cluster`: the cluster merge), at the
                                                               # engine's shapes and issue 19's (bench_verify.SHAPES)
"""
import argparse, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
import bench_verify as bv
from ddtree_nb.bench import git_commit

SHAPES = [(T, H, P, 'chain' if T == 1 else 'tree') for H, P in ((4, 1000), (64, 4096)) for T in (1, 17, 65, 257)]

if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--out', default='.'); ap.add_argument('--pdl', action='store_true')
    ap.add_argument('--cluster', action='store_true'); a = ap.parse_args()
    if a.cluster:
        impls = {'sm90_c1': dict(impl='sm90', cluster=1), 'sm90': dict(impl='sm90')}
        rows = [bv.bench_shape(T, H, P, k, impls, with_torch=False) for T, H, P, k in SHAPES + bv.SHAPES]
        print('| T | H | P | sm90, plain splits µs | plan | sm90, default µs | plan | plain / default |\n|---|---|---|---|---|---|---|---|')
        for r in rows:
            c1, d = r['impls']['sm90_c1'], r['impls']['sm90']
            plans = [f"x{x['plan']['splits']} c{x['plan']['cluster']}" for x in (c1, d)]
            if c1.get('ok') and d.get('ok'):
                print(f"| {r['T']} | {r['H']} | {r['P']} | {c1['us']:.1f} | {plans[0]} | {d['us']:.1f} ({d['pct_bw']:.0f}% bw, {d['pct_flop']:.0f}% flop) | {plans[1]} | {c1['us'] / d['us']:.2f}x |")
            else: print(f"| {r['T']} | {r['H']} | {r['P']} | {'ok' if c1.get('ok') else 'WRONG'} | {plans[0]} | {'ok' if d.get('ok') else 'WRONG'} | {plans[1]} | |")
        json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows), open(os.path.join(a.out, 'bench_verify_cluster.json'), 'w'), indent=1, default=str)
        sys.exit(0)
    impls = {'v2': dict(impl='v2'), 'sm90': dict(impl='sm90')}
    if a.pdl:
        impls = {k: dict(v, pdl=False) for k, v in impls.items()}
        impls.update({f'{k}_pdl': dict(v, pdl=True) for k, v in impls.items()})
    shapes = SHAPES + ([(1, 64, P, 'chain') for P in (32768, 131072)] if a.pdl else [])
    rows = [bv.bench_shape(T, H, P, k, impls, with_torch=False) for T, H, P, k in shapes]
    print('| T | H | P | v2 µs | sm90 µs | v2 / sm90 |\n|---|---|---|---|---|---|')
    for r in rows:
        v, s = r['impls']['v2'], r['impls']['sm90']
        if v.get('ok') and s.get('ok'): print(f"| {r['T']} | {r['H']} | {r['P']} | {v['us']:.1f} | {s['us']:.1f} | {v['us'] / s['us']:.2f}x |")
        else: print(f"| {r['T']} | {r['H']} | {r['P']} | {'ok' if v.get('ok') else 'WRONG'} | {'ok' if s.get('ok') else 'WRONG'} | |")
    if a.pdl:
        from ddtree_nb.verify import verify_plan
        print('\n| T | H | P | v2 µs | v2, pdl combine µs | sm90 µs | sm90, pdl combine µs | sm90 grid | pdl_pays |\n|---|---|---|---|---|---|---|---|---|')
        for r in rows:
            us = [f"{r['impls'][k]['us']:.1f}" if r['impls'][k].get('ok') else 'WRONG' for k in ('v2', 'v2_pdl', 'sm90', 'sm90_pdl')]
            plan = verify_plan(r['T'], r['H'], r['P'], impl='sm90')
            r['sm90_grid'], r['pdl_pays'] = plan['grid'], plan['pdl']
            print(f"| {r['T']} | {r['H']} | {r['P']} | " + ' | '.join(us) + f" | {plan['grid']} | {plan['pdl']} |")
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows),
              open(os.path.join(a.out, 'bench_verify_pdl.json' if a.pdl else 'bench_verify_default.json'), 'w'), indent=1, default=str)
