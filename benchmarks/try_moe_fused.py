"""Issue 20, T <= 8: gate/up and down as one persistent launch with items claimed at run time (kernels/dev/moe_w4a16_fused.cu,
v21) against the shipped four launches (v13's), in one run on one GPU. The launches: moe_group_fused (the grouping, and the
fused kernel's counters zeroed), moe_fused_v21 (or v21n: its items as calls), moe_combine.

First the checks: the output must equal v13's bit for bit (the same tiles, the same reduction order) at Kimi widths (T = 1,
2, 4, 8; spread routing, and all pairs on one expert at T = 1) and at small widths (96 -> 160 -> 96, E = 8), eager and in a
CUDA graph; `--stress N` repeats each Kimi-width check N times (a readiness bug shows as an intermittent difference). Then
all as CUDA graphs with bench_moe.py's L2 flush (a 256 MB read) ahead of each rep: median µs, % of 4.27 TB/s for the hit
experts' bytes. `--stamps DIR` also records, per block, its start, end and the tiles it took (moe_fused_v21_stamps).

    python benchmarks/try_moe_fused.py [--reps 20] [--tokens 1 2 4 8] [--items 1,2 2,2] [--stress 20] [--out DIR]
"""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, pct_of_ceiling, rand_packed, routing, make_flush, graph_time, save_json
from ddtree_nb.moe import MoEWorkspace, moe_w4a16, moe_cuda_launch, _SIG_GROUP, _SIG_GU, _SIG_COMB, _combine_grid, BLOCKS_PER_SM, MAX_EXPERTS
from ddtree_nb.runtime import load_kernel, device_limits, engine_stream

SRC = 'dev/moe_w4a16_fused.cu'
_SIG_FUSED = 'Piii' + 'P' * 14 + 'iiPi'


def launches_v21(x, idx, w, ex, ws, sync, out, n_sm, gr=1, dr=2, name='moe_fused_v21', st=None, mode=0):
    "The three launches: grouping (+ counters zeroed), gate/up and down fused with gr / dr row tiles per item, the combine. mode: see fused_v21."
    (T, k), E, d = idx.shape, ex.n_experts, x.device.index
    load_kernel(SRC, 'moe_group_fused', _SIG_GROUP + 'P', device=d)(idx, T * k, E, ws.counts, ws.offsets, ws.hit, ws.n_hit,
        ws.sorted_pair, ws.pos, sync, grid=1, block=MAX_EXPERTS)
    load_kernel(SRC, name, _SIG_FUSED, device=d)(x, ex.hidden, ex.inter, k, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit,
        ex.gate_packed, ex.gate_scale, ex.up_packed, ex.up_scale, ex.down_packed, ex.down_scale, ws.act, ws.ybuf, sync, gr, dr,
        0 if st is None else st, mode, grid=((3 if name.endswith('lb3') else BLOCKS_PER_SM) * n_sm, 1), block=128)
    load_kernel('moe_w4a16.cu', 'moe_combine', _SIG_COMB, device=d)(ws.ybuf, ws.pos, T, k, ex.hidden, 2.827, out,
        grid=_combine_grid(T, ex.hidden), block=256)


def gate_up_v13(x, idx, w, ex, ws, n_sm):
    "The shipped grouping and gate/up launches alone (to compare with the fused kernel's gate/up items, mode 1)."
    (T, k), d = idx.shape, x.device.index
    load_kernel('moe_w4a16.cu', 'moe_group', _SIG_GROUP, device=d)(idx, T * k, ex.n_experts, ws.counts, ws.offsets, ws.hit, ws.n_hit,
        ws.sorted_pair, ws.pos, grid=1, block=MAX_EXPERTS)
    load_kernel('moe_w4a16.cu', 'moe_gate_up_v13', _SIG_GU, device=d)(x, ex.hidden, ex.inter, k, ws.sorted_pair, ws.offsets, ws.hit,
        ws.n_hit, ex.gate_packed, ex.gate_scale, ex.up_packed, ex.up_scale, ws.act, grid=(BLOCKS_PER_SM * n_sm, 1), block=128)


def check_one(x, idx, w, ex, ref, es, n_sm, variant, reps=1):
    "How many of `reps` eager runs and `reps` graph replays of `variant` (name, gr, dr) differ from `ref`."
    E, (T, k) = ex.n_experts, idx.shape
    ws, sync, out = MoEWorkspace(T, k, E, ex.hidden, ex.inter, x.device), torch.zeros(E + 1, dtype=torch.int32, device=x.device), torch.empty_like(x)
    name, gr, dr, mode = variant
    run = lambda: launches_v21(x, idx, w, ex, ws, sync, out, n_sm, gr, dr, name, mode=mode)
    bad_e = bad_g = 0
    for _ in range(reps):
        with es: out.fill_(float('nan')); ws.act.fill_(float('nan')); run()   # poison on the launches' stream
        torch.cuda.synchronize(); bad_e += not torch.equal(out, ref)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=es.torch): run()
    for _ in range(reps):
        with es: out.fill_(float('nan')); ws.act.fill_(float('nan')); g.replay()
        torch.cuda.synchronize(); bad_g += not torch.equal(out, ref)
    return bad_e, bad_g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--items', nargs='+', default=['1,2', '1,1', '2,2'], help='gate/up,down row tiles per claimed item')
    ap.add_argument('--stress', type=int, default=1)
    ap.add_argument('--modes', type=int, nargs='+', default=None, help='time only moe_fused_v21 (items from --items[0]) in these modes, and v13')
    ap.add_argument('--names', nargs='+', default=None, help='time these fused kernels (mode 0) with every --items; names ending in _gu do gate/up only (not checked)')
    ap.add_argument('--once', type=int, nargs='+', default=None,
                    help='only launch the fused kernel once in each of these modes at T = 1 after a warm-up (for ncu -k moe_fused_v21)')
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, k = torch.device('cuda'), 8
    n_sm = device_limits(dev.index or 0)['sms']
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    items = [tuple(map(int, s.split(','))) for s in a.items]
    variants = ([('moe_fused_v21', *it, 0) for it in items] + [('moe_fused_v21n', *items[0], 0), ('moe_fused_v21', 1, 1, 2),
                ('moe_fused_v21_lb3', *items[0], 0)])
    if a.modes: variants = [('moe_fused_v21', *items[0], m) for m in a.modes if not m & 1]
    if a.names: variants = [(n, *it, 0) for n in a.names if not n.endswith('_gu') for it in items]
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), checks=[], bench=[], stamps=[])
    if a.once:   # e.g. ncu --clock-control none -k moe_fused_v21 --launch-skip 2 ... python benchmarks/try_moe_fused.py --once 3 139
        ex = rand_packed(384, dev)
        x = torch.randn(1, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(1, 384, k, 'spread', dev, seed=1)
        ws, out, sync = MoEWorkspace(1, k, 384, H, I, dev), torch.empty_like(x), torch.zeros(385, dtype=torch.int32, device=dev)
        for m in a.once[:1] * 2 + a.once:   # two warm-up launches, then one per mode
            with es: flush(); launches_v21(x, idx, w, ex, ws, sync, out, n_sm, *items[0], mode=m)
            torch.cuda.synchronize()
        return
    for hidden, inter, E in ((96, 160, 8), (H, I, 384)):
        ex = rand_packed(E, dev, seed=E, hidden=hidden, inter=inter)
        for T in (1, 2, 4, 8):
            for how in ('spread', 'one') if T == 1 else ('spread',):
                x = torch.randn(T, hidden, device=dev, generator=torch.Generator(device=dev).manual_seed(T)).bfloat16()
                idx, w = routing(T, E, min(k, E), how, dev, seed=T)
                ref = moe_w4a16(x, idx, w, ex, 2.827, backend='cuda', version=13)
                for v in variants:
                    be, bg = check_one(x, idx, w, ex, ref, es, n_sm, v, a.stress if E == 384 else 1)
                    res['checks'].append(dict(hidden=hidden, inter=inter, E=E, T=T, how=how, variant=v, eager_differ=be, graph_differ=bg,
                                              runs=a.stress if E == 384 else 1))
                    print(f"check {hidden}x{inter} E={E} T={T} {how} {v}: {be} eager and {bg} graph runs differ from v13", flush=True)
    if any(c['eager_differ'] or c['graph_differ'] for c in res['checks']): print("v21 differs from v13: not timed")
    else:
        ex = rand_packed(384, dev)
        for T in a.tokens:
            x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
            idx, w = routing(T, 384, k, 'spread', dev, seed=1)
            ws, out = MoEWorkspace(T, k, 384, H, I, dev), torch.empty_like(x)
            sync = torch.zeros(385, dtype=torch.int32, device=dev)
            hit = idx.unique().numel(); mb = hit * ex.bytes_per_expert / 1e6
            pct = lambda t: pct_of_ceiling(mb, t)
            row = dict(T=T, hit=hit, MB=round(mb, 1))
            for rnd in range(2):   # the variants alternate twice: a drift of the GPU shows as a difference between rounds
                t13 = graph_time(lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, 13, pdl=False), a.reps, flush, es)
                row.setdefault('v13_us', []).append(round(t13, 1))
                timed = [(n, *it, 0) for n in a.names for it in items] if a.names else \
                        [('moe_fused_v21', *items[0], m) for m in a.modes] if a.modes else \
                        variants + [(n, g, d, m | 1) for n, g, d, m in variants[:1] + variants[-2:-1]]
                for name, gr, dr, mode in timed:
                    t = graph_time(lambda: launches_v21(x, idx, w, ex, ws, sync, out, n_sm, gr, dr, name, mode=mode), a.reps, flush, es)
                    row.setdefault(f'{name}_{gr},{dr}_m{mode}_us', []).append(round(t, 1))
                t = graph_time(lambda: gate_up_v13(x, idx, w, ex, ws, n_sm), a.reps, flush, es)   # the gate/up part alone
                row.setdefault('v13_group_gate_up_us', []).append(round(t, 1))
            row['pct'] = {key[:-3]: pct(min(v)) for key, v in row.items() if key.endswith('_us')}
            res['bench'].append(row)
            print(row, flush=True)
            if T == 1:   # where the fused launch's blocks spend their time
                st = torch.zeros(BLOCKS_PER_SM * n_sm, 4, dtype=torch.int64, device=dev)
                for gr, dr, mode in ([] if a.names else [(*items[0], m) for m in a.modes] if a.modes else [(g, d, 0) for g, d in items] + [(1, 1, 2)]):
                    with es:
                        flush(); launches_v21(x, idx, w, ex, ws, sync, out, n_sm, gr, dr, 'moe_fused_v21_stamps', st, mode)
                    torch.cuda.synchronize()
                    torch.save(st.cpu(), os.path.join(a.out or '.', f'stamps_m{mode}.pt'))
                    sm = st[:, 2] >> 32; st[:, 2] &= 0xffffffff
                    s = st.double(); t0 = s[:, 0].min()
                    beg, end = (s[:, 0] - t0) / 1e3, (s[:, 1] - t0) / 1e3
                    d = dict(items=[gr, dr], mode=mode, sms=int(sm.unique().numel()), span_us=round(end.max().item(), 2), median_end_us=round(end.median().item(), 2),
                             first_end_us=round(end.min().item(), 2), ramp_us=round(beg.max().item(), 2),
                             gu_tiles=sorted(set(s[:, 2].long().tolist())), dn_tiles=sorted(set(s[:, 3].long().tolist())))
                    res['stamps'].append(d); print('stamps', d, flush=True)
    save_json(res, a.out, 'try_moe_fused.json')


if __name__ == '__main__': main()
