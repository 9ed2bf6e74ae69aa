"""Issue 20, T <= 8: v13's PDL launches with down's blocks requesting their first row tiles into L2 before they wait for
gate/up (kernels/dev/moe_w4a16_l2pf.cu, moe_down_v13_pdl_pf{1,2,4,64}: up to that many 32-row tiles of the block's first
run, one cp.async.bulk.prefetch.L2 for the packed words and one for the scales), against the shipped PDL and plain launches,
in one run. First the checks (each variant's output equals plain v13's bit for bit, `--stress` eager and graph-replayed runs
at each T), then all as CUDA graphs with bench_moe.py's L2 flush ahead of each rep, alternated twice: median µs, % of 4.27 TB/s.

    python benchmarks/try_moe_l2pf.py [--reps 20] [--tokens 1 2 4 8] [--pf 1 2 4 64] [--stress 10] [--out DIR]
"""
import argparse, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, CEIL, rand_packed, routing, make_flush, graph_time
from ddtree_nb import moe
from ddtree_nb.moe import MoEWorkspace, moe_cuda_launch
from ddtree_nb.runtime import engine_stream

SRC = 'dev/moe_w4a16_l2pf.cu'


def register(pf):
    "moe_cuda_launch's version number for v13 with moe_down_v13_pdl_pf<pf> as its PDL down launch."
    v = 1000 + pf
    moe.MOE_VERSIONS[v], moe.MOE_SOURCES[v] = moe.MOE_VERSIONS[13], SRC
    moe.PDL_KERNELS[v] = ('moe_gate_up_v13_pdl', f'moe_down_v13_pdl_pf{pf}', 'moe_combine_pdl')
    moe._KERNEL_LIMITS.setdefault(SRC, moe._KERNEL_LIMITS['moe_w4a16.cu'])
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--pf', type=int, nargs='+', default=[1, 2, 4, 64])
    ap.add_argument('--stress', type=int, default=10)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, k, E = torch.device('cuda'), 8, 384
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    ex = rand_packed(E, dev)
    vers = {f'pf{pf}': register(pf) for pf in a.pf}
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), checks=[], bench=[])
    for T in a.tokens:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(T, E, k, 'spread', dev, seed=1)
        ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
        run = lambda v, pdl=True: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, v, pdl=pdl)
        with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13, pdl=False)
        for name, v in vers.items():
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch): run(v)
            bad = [0, 0]
            for i in range(a.stress):
                for j, go in enumerate((lambda: run(v), g.replay)):
                    with es: out.fill_(float('nan')); ws.act.fill_(float('nan')); go()   # the poison on the launches' stream
                    torch.cuda.synchronize(); bad[j] += not torch.equal(out, ref)
            res['checks'].append(dict(T=T, variant=name, runs=a.stress, eager_differ=bad[0], graph_differ=bad[1]))
            print(f"check T={T} {name}: {bad[0]} eager and {bad[1]} graph runs of {a.stress} differ from plain v13", flush=True)
        if any(c['eager_differ'] or c['graph_differ'] for c in res['checks'] if c['T'] == T): continue
        hit = idx.unique().numel(); mb = hit * ex.bytes_per_expert / 1e6
        row = dict(T=T, hit=hit, MB=round(mb, 1))
        for rnd in range(2):   # alternated twice: a drift of the GPU shows as a difference between rounds
            for name, v, pdl in [('plain', 13, False), ('pdl', 13, True)] + [(n, v, True) for n, v in vers.items()]:
                row.setdefault(f'{name}_us', []).append(round(graph_time(lambda: run(v, pdl), a.reps, flush, es), 1))
        row['pct'] = {key[:-3]: round(100 * mb * 1e6 / (min(t) * 1e-6) / CEIL, 1) for key, t in row.items() if key.endswith('_us')}
        res['bench'].append(row)
        print(row, flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(res, open(os.path.join(a.out, 'try_moe_l2pf.json'), 'w'), indent=1)


if __name__ == '__main__': main()
