"""Issue 20, T <= 8: v13's PDL chain without its combine launch (kernels/dev/moe_w4a16_ticket.cu), against the shipped PDL
and plain launches, in one run:
  early: down lets the combine launch right after its own wait (griddepcontrol.launch_dependents), not at its end;
  tc:    down combines each 32-row tile itself once a ticket counts all its pairs (three launches: grouping, gate/up, down).
First the checks (each variant's output equals plain v13's bit for bit, at Kimi widths with spread routing at T = 1, 2, 4, 8
and all pairs on one expert at T = 1, `--stress` eager and graph-replayed runs each), then CUDA-graph timings with
bench_moe.py's L2 flush ahead of each rep: one layer alone, and per layer inside a graph of 4 layers with their own experts
((t(4) - t(1)) / 3, as in moe_in_graph.py). µs, and % of 4.27 TB/s for the hit experts' bytes.

    python benchmarks/try_moe_ticket.py [--reps 20] [--tokens 1 2 4 8] [--stress 10] [--out DIR]
"""
import argparse, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, CEIL, rand_packed, routing, make_flush, graph_time
from ddtree_nb.moe import (MoEWorkspace, moe_cuda_launch, moe_group_launch, PDL_KERNELS, BLOCKS_PER_SM, _kernel, _combine_grid,
                           _SIG_GU, _SIG_DOWN, _SIG_COMB)
from ddtree_nb.runtime import engine_stream, device_limits

SRC = 'dev/moe_w4a16_ticket.cu'
_SIG_TC = _SIG_DOWN + 'PiiifPP'


def launch(kind, x, idx, w, ex, out, ws, ticket):
    "One MoE layer: 'plain' / 'pdl' (moe_cuda_launch), or the PDL chain with the down launch of `kind` ('early', 'tc')."
    if kind in ('plain', 'pdl'): return moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, 13, pdl=kind == 'pdl')
    (T, k), d, E = idx.shape, x.device.index, ex.n_experts
    grid, fu, _, fc = (BLOCKS_PER_SM * device_limits(d)['sms'], 1), *PDL_KERNELS[13]
    moe_group_launch(x, idx, w, E, ws)
    _kernel(fu, _SIG_GU, d)(x, H, I, k, ws.sorted_pair, ws.offsets, ws.hit, ws.n_hit, ex.gate_packed, ex.gate_scale, ex.up_packed,
                            ex.up_scale, ws.act, grid=grid, block=128, pdl=True)
    dn = (ws.act, I, H, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit, ex.down_packed, ex.down_scale, ws.ybuf)
    if kind == 'early':
        _kernel('moe_down_v13_pdl_early', _SIG_DOWN, d, SRC)(*dn, grid=grid, block=128, pdl=True)
        _kernel(fc, _SIG_COMB, d)(ws.ybuf, ws.pos, T, k, H, 2.827, out, grid=_combine_grid(T, H), block=256, pdl=True)
    else: _kernel('moe_down_v13_pdl_tc', _SIG_TC, d, SRC)(*dn, ws.pos, T, k, E, 2.827, out, ticket, grid=grid, block=128, pdl=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--stress', type=int, default=10)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, k, E, L = torch.device('cuda'), 8, 384, 4
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    from ddtree_nb import moe
    moe._KERNEL_LIMITS.setdefault(SRC, moe._KERNEL_LIMITS['moe_w4a16.cu'])
    exs = [rand_packed(E, dev, seed=s) for s in range(L)]
    ticket = torch.zeros((H + 31) // 32, dtype=torch.int32, device=dev)
    kinds = ('early', 'tc')
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), checks=[], bench=[])
    for T, how in [(1, 'spread'), (1, 'one')] + [(T, 'spread') for T in a.tokens if T > 1]:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(T)).bfloat16()
        idx, w = routing(T, E, k, how, dev, seed=T)
        ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
        with es: launch('plain', x, idx, w, exs[0], ref, ws, ticket)
        for kind in kinds:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch): launch(kind, x, idx, w, exs[0], out, ws, ticket)
            bad = [0, 0]
            for i in range(a.stress):
                for j, go in enumerate((lambda: launch(kind, x, idx, w, exs[0], out, ws, ticket), g.replay)):
                    with es: out.fill_(float('nan')); ws.ybuf.fill_(float('nan')); go()   # the poison on the launches' stream
                    torch.cuda.synchronize(); bad[j] += not torch.equal(out, ref)
            res['checks'].append(dict(T=T, how=how, variant=kind, runs=a.stress, eager_differ=bad[0], graph_differ=bad[1],
                                      tickets_zero=bool((ticket == 0).all())))
            print(f"check T={T} {how} {kind}: {bad[0]} eager and {bad[1]} graph runs of {a.stress} differ from plain v13; tickets back to 0: {res['checks'][-1]['tickets_zero']}", flush=True)
    if any(c['eager_differ'] or c['graph_differ'] or not c['tickets_zero'] for c in res['checks']): print('a variant differs: not timed')
    else:
        for T in a.tokens:
            x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
            idx, w = routing(T, E, k, 'spread', dev, seed=1)
            ws, out = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x)
            mb = idx.unique().numel() * exs[0].bytes_per_expert / 1e6
            row = dict(T=T, MB=round(mb, 1))
            for rnd in range(2):   # alternated twice: a drift of the GPU shows as a difference between rounds
                for kind in ('plain', 'pdl') + kinds:
                    t1 = graph_time(lambda: launch(kind, x, idx, w, exs[0], out, ws, ticket), a.reps, flush, es)
                    tL = graph_time(lambda: [launch(kind, x, idx, w, ex, out, ws, ticket) for ex in exs], a.reps, flush, es)
                    row.setdefault(f'{kind}_alone_us', []).append(round(t1, 1))
                    row.setdefault(f'{kind}_per_layer_us', []).append(round((tL - t1) / (L - 1), 1))
            row['pct'] = {key[:-3]: round(100 * mb * 1e6 / (min(t) * 1e-6) / CEIL, 1) for key, t in row.items() if key.endswith('_us')}
            res['bench'].append(row)
            print(row, flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(res, open(os.path.join(a.out, 'try_moe_ticket.json'), 'w'), indent=1)


if __name__ == '__main__': main()
