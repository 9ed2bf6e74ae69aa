"""The split combine's block shape swept: `verify.combine_shape(parts)` picks (lanes, groups) per block, 8 x 32 from 16
partials on and 64 x <= 4 below. Before the cluster default, the demo pair's T = 65 (260 rows, 17 partials) took 2,080
blocks of 256 threads for 4.5 MB of partials, and the combine 7.7 µs a layer in the compiled forward
(`s22_h100/bench_compile_s22a.log`); the default plan there is now c2 x18, 9 partials, which this script times.
Each call is the whole `mla_tree_attention` (split kernel + combine) at its default plan, with `combine_shape` replaced
by each candidate, checked against fp64 before it is timed (`bench_verify.bench_shape`: CUDA-graph replays over cache
copies that live in HBM).

    python benchmarks/sweep_combine.py --out DIR

Writes DIR/sweep_combine.json (per shape: the plan, then µs per (lanes, groups)) and prints a line per run.
"""
import argparse, json, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).parent))
from bench_verify import bench_shape
import ddtree_nb.verify as V

SHAPES = [(1, 4, 1000, 'chain'), (17, 4, 1000, 'tree'), (65, 4, 1000, 'tree'), (1, 64, 4096, 'chain'), (17, 64, 4096, 'tree'),
          (1, 64, 32768, 'chain')]
CANDIDATES = [(8, 32), (16, 16), (32, 8), (64, 4), (64, 2), (32, 4), (16, 8)]   # lanes x groups <= 256 (the kernel's bound)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0]); ap.add_argument('--out', default='.')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                command='python benchmarks/sweep_combine.py ' + ' '.join(argv if argv is not None else sys.argv[1:]))
    rows, shipped = [], V.combine_shape
    for T, H, P, kind in SHAPES:
        plan = V.verify_plan(T, H, P, impl='sm90')
        row = dict(T=T, H=H, P=P, plan={k: plan[k] for k in ('splits', 'cluster', 'parts')}, default=shipped(plan['parts']), us={})
        print(f"T = {T}, H = {H}, P = {P}: {plan['parts']} partials, default {row['default']}", flush=True)
        if plan['parts'] > 1:
            for L, G in CANDIDATES:
                V.combine_shape = lambda s, L=L, G=G: (L, G)
                try: r = bench_shape(T, H, P, kind, {f'{L}x{G}': dict(impl='sm90')}, with_torch=False)['impls'][f'{L}x{G}']
                finally: V.combine_shape = shipped
                row['us'][f'{L}x{G}'] = r.get('us') if r.get('ok') else 'WRONG'
        rows.append(row)
        (out / 'sweep_combine.json').write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))

if __name__ == '__main__': main()
