"""The verify kernel's key-range splits swept at the demo pair's shapes (H = 4, a prefix of about 1000 rows): what
`choose_splits` picks against every split count, per kernel, each checked against fp64 before it is timed.

At these shapes the kernels spend 7-14 µs a call for one 64-key tile a block (`bench_compile.md`, "Session 21"). The
pick's cost model counts waves and tiles, not a block's fixed cost or the partials it writes (4.5 MB at T = 65 and 17
splits, against 1.5 MB of inputs).

    python benchmarks/sweep_splits.py --out DIR [--P 1000] [--T 1,17,65] [--H 4] [--impls sm90,v2]

Writes DIR/sweep_splits.json (per shape: each kernel and split count's µs and error, and `pick`: the default plan,
splits and cluster) and prints a line per run, then the picks.
Timings are bench_verify's: one CUDA graph of many launches, rotating over cache copies that live in HBM.
"""
import argparse, json, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).parent))
from bench_verify import bench_shape
from ddtree_nb.verify import verify_plan

def plan_name(plan: dict) -> str:
    "A plan as the run names above spell it: 'x17', or 'c2 x18' for clusters of 2."
    return (f"c{plan['cluster']} " if plan['cluster'] > 1 else '') + f"x{plan['splits']}"

def sweep(T: int, H: int, P: int, impls=('sm90', 'v2'), clusters=(2, 4, 8)) -> dict:
    "One shape: each kernel at split counts 1, 2, 4, ... and one key tile a split (where `choose_splits` lands here), and the sm_90a kernel's cluster merge at each cluster size and split count it divides; `pick` says which plan the default takes."
    kind = 'chain' if T == 1 else 'tree'
    n_tiles = -(-(P + T) // 64)
    counts = sorted({1, n_tiles} | {s for s in (2, 4, 8, 16, 32, 64, 128) if s < n_tiles})
    runs = {f'{impl} x{s}': dict(impl=impl, splits=s) for impl in impls for s in counts}
    if 'sm90' in impls:
        runs.update({f'sm90 c{c} x{s}': dict(impl='sm90', cluster=c, splits=s) for c in clusters for s in counts + [2 * n_tiles] if s % c == 0 and s <= min(2 * n_tiles, 256)})
    res = bench_shape(T, H, P, kind, runs, with_torch=False)
    res['pick'] = {impl: plan_name(verify_plan(T, H, P, impl=impl)) for impl in impls}
    return res

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default='.'); ap.add_argument('--P', type=int, default=1000); ap.add_argument('--H', type=int, default=4)
    ap.add_argument('--T', default='1,17,65', help='tree sizes, comma-separated')
    ap.add_argument('--impls', default='sm90,v2', help='kernels, comma-separated')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                command='python benchmarks/sweep_splits.py ' + ' '.join(argv if argv is not None else sys.argv[1:]))
    rows = []
    for T in (int(t) for t in a.T.split(',')):
        print(f"T = {T}, H = {a.H}, P = {a.P}", flush=True)
        rows.append(sweep(T, a.H, a.P, tuple(a.impls.split(','))))
        print('  pick: ' + ', '.join(f"{k} {v}" for k, v in rows[-1]['pick'].items()), flush=True)
        (out / 'sweep_splits.json').write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))

if __name__ == '__main__': main()
