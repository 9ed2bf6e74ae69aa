"""Issue 20: what one MoE layer costs inside a longer CUDA graph, as in the engine's captured step, against the standalone
graph bench_moe.py / try_moe_pdl.py time. A standalone replay also pays the graph's launch and its first kernel's start,
which inside a step are paid once per step, not per layer. Here: graphs of L = 1, 2 and 4 MoE layers back to back, each
layer with its own random INT4 experts (384 at Kimi widths, 9.5 GB a layer, so no layer finds another's weights in L2),
the same routing, bench_moe.py's L2 flush ahead of each rep. Per layer in a step = (t(4) - t(1)) / 3; also a graph of one
tiny kernel (the replay's own cost). Plain and PDL launches (moe_cuda_launch(..., pdl=)) of v13 and of v24 (no grouping
launch: keys `plain_v24_*`, `pdl_v24_*`), µs and % of 4.27 TB/s. `--parts`
also times, per layer, the PDL chain without its grouping launch (the grouping done once, before the graph: every layer has
the same routing) and without its combine: what each of the two small launches costs in the chain.

    python benchmarks/moe_in_graph.py [--tokens 1 2 4 8] [--versions 13 24] [--reps 20] [--parts] [--out DIR]
"""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, pct_of_ceiling, rand_packed, routing, make_flush, graph_time, save_json
from ddtree_nb.moe import MoEWorkspace, moe_cuda_launch, moe_group_launch, PDL_KERNELS, BLOCKS_PER_SM, _kernel, _combine_grid, _SIG_GU, _SIG_DOWN, _SIG_COMB
from ddtree_nb.runtime import device_limits
from ddtree_nb.runtime import engine_stream


def pdl_parts(x, idx, w, ex, out, ws, group=True, combine=True):
    "v13's PDL chain (moe_cuda_launch at T <= 8 on sm_90+), with the grouping or the combine launch left out."
    (T, k), d = idx.shape, x.device.index
    fu, fd, fc = PDL_KERNELS[13]
    grid = (BLOCKS_PER_SM * device_limits(d)['sms'], 1)
    if group: moe_group_launch(x, idx, w, ex.n_experts, ws)
    _kernel(fu, _SIG_GU, d)(x, H, I, k, ws.sorted_pair, ws.offsets, ws.hit, ws.n_hit, ex.gate_packed, ex.gate_scale, ex.up_packed,
                            ex.up_scale, ws.act, grid=grid, block=128, pdl=True)
    _kernel(fd, _SIG_DOWN, d)(ws.act, I, H, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit, ex.down_packed, ex.down_scale, ws.ybuf,
                              grid=grid, block=128, pdl=True)
    if combine: _kernel(fc, _SIG_COMB, d)(ws.ybuf, ws.pos, T, k, H, 2.827, out, grid=_combine_grid(T, H), block=256, pdl=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--layers', type=int, nargs='+', default=[1, 2, 4])
    ap.add_argument('--versions', type=int, nargs='+', default=[13, 24], help='13: the grouping launch + v13; 24: no grouping launch (T <= 8)')
    ap.add_argument('--parts', action='store_true', help='also the PDL chain without its grouping, and without its combine')
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, k, E = torch.device('cuda'), 8, 384
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    exs = [rand_packed(E, dev, seed=s) for s in range(max(a.layers))]
    tiny = torch.zeros(1, device=dev)
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'),
               empty_graph_us=round(graph_time(lambda: tiny.add_(1), a.reps, flush, es), 1), bench=[])
    print('a graph of one tiny kernel:', res['empty_graph_us'], 'µs', flush=True)
    for T in a.tokens:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(T, E, k, 'spread', dev, seed=1)
        ws, out = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x)
        mb = idx.unique().numel() * exs[0].bytes_per_expert / 1e6
        row = dict(T=T, MB_per_layer=round(mb, 1))
        for v, pdl in [(v, pdl) for v in a.versions for pdl in (False, True)]:
            name = ('pdl' if pdl else 'plain') + ('' if v == 13 else f'_v{v}')
            for L in a.layers:
                t = graph_time(lambda: [moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, v, pdl=pdl) for ex in exs[:L]], a.reps, flush, es)
                row[f'{name}_L{L}_us'] = round(t, 1)
            per = (row[f'{name}_L{max(a.layers)}_us'] - row[f'{name}_L{min(a.layers)}_us']) / (max(a.layers) - min(a.layers))
            row[f'{name}_per_layer_us'] = round(per, 1)
            row[f'{name}_per_layer_pct'] = pct_of_ceiling(mb, per)
            row[f'{name}_alone_pct'] = pct_of_ceiling(mb, row[f'{name}_L1_us'])
        if a.parts:
            with es: moe_group_launch(x, idx, w, E, ws)   # for the chains without it: the same routing in every layer
            for name, kw in (('no_group', dict(group=False)), ('no_combine', dict(combine=False))):
                ts = [graph_time(lambda: [pdl_parts(x, idx, w, ex, out, ws, **kw) for ex in exs[:L]], a.reps, flush, es) for L in (1, max(a.layers))]
                row[f'pdl_{name}_per_layer_us'] = round((ts[1] - ts[0]) / (max(a.layers) - 1), 1)
        res['bench'].append(row)
        print(row, flush=True)
    save_json(res, a.out, 'moe_in_graph.json')


if __name__ == '__main__': main()
