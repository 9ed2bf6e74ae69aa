"""Where a W4A16 MoE launch spends an SM's time at small T (issue 20: T = 1 at 60-63% of 4.27 TB/s; `ncu` showed the SMs
active only 89% of gate/up's time and 79% of down's). Runs the shipped T <= 8 launches (v13's loop) from
kernels/dev/moe_w4a16_stamps.cu, which records each block's start and end (%globaltimer) and its SM, inside one CUDA graph
with an L2 flush (a 256 MB read) ahead, as bench_moe.py times them; checks the output equals the shipped kernels' bit for bit.

    python benchmarks/stamp_moe.py --tokens 1 [--reps 20] [--out DIR]

Prints, per launch: the span (first block start -> last block end), the launch ramp (spread of the block starts), the
tail (last end - median end), the SMs' busy share (each SM from its first start to its last end, over the span), block
time by the number of row tiles it took, and the gap between gate/up's last end and down's first start.
"""
import argparse, json, os, statistics, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, rand_packed, routing, save_json
from ddtree_nb.moe import MoEWorkspace, moe_w4a16, moe_group_launch, _SIG_GU, _SIG_DOWN, _SIG_COMB, _combine_grid, BLOCKS_PER_SM
from ddtree_nb.runtime import load_kernel, device_limits, engine_stream

SRC = 'dev/moe_w4a16_stamps.cu'


def launches(x, idx, w, ex, ws, out, st_gu, st_dn, grid):
    "The four launches of moe_cuda_launch at T <= 8, with the stamped gate/up and down."
    E, k, d = ex.n_experts, idx.shape[1], x.device.index
    moe_group_launch(x, idx, w, E, ws)
    load_kernel(SRC, 'moe_gate_up_v13_stamps', _SIG_GU + 'P', device=d)(x, H, I, k, ws.sorted_pair, ws.offsets, ws.hit, ws.n_hit,
        ex.gate_packed, ex.gate_scale, ex.up_packed, ex.up_scale, ws.act, st_gu, grid=(grid, 1), block=128)
    load_kernel(SRC, 'moe_down_v13_stamps', _SIG_DOWN + 'P', device=d)(ws.act, I, H, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit,
        ex.down_packed, ex.down_scale, ws.ybuf, st_dn, grid=(grid, 1), block=128)
    load_kernel('moe_w4a16.cu', 'moe_combine', _SIG_COMB, device=d)(ws.ybuf, ws.pos, idx.shape[0], k, H, 2.827, out,
        grid=_combine_grid(idx.shape[0], H), block=256)


def summary(st: torch.Tensor, n_sm: int) -> dict:
    "Per-launch timeline numbers from the [grid, 4] stamps (ns)."
    t0, t1, sm, items = (st[:, i].double() for i in range(4))
    base = t0.min()
    s, e = (t0 - base) / 1e3, (t1 - base) / 1e3   # µs from the first block start
    span = e.max().item()
    busy = 0.0
    for i in range(n_sm):
        m = sm == i
        if m.any(): busy += (e[m].max() - s[m].min()).item()
    by_items = {int(n): round(statistics.median((e - s)[items == n].tolist()), 2) for n in items.unique().tolist()}
    return dict(span_us=round(span, 2), ramp_us=round(s.max().item(), 2), median_end_us=round(e.median().item(), 2),
                tail_us=round(span - e.median().item(), 2), sm_busy=round(busy / (n_sm * span), 3),
                block_us_by_tiles=by_items, blocks_by_tiles={int(n): int((items == n).sum()) for n in items.unique().tolist()},
                first_end_us=round(e.min().item(), 2), base_ns=base.item())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tokens', type=int, default=1)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, E, k = torch.device('cuda'), 384, 8
    n_sm = device_limits(dev.index or 0)['sms']
    grid = BLOCKS_PER_SM * n_sm
    ex = rand_packed(E, dev)
    x = torch.randn(a.tokens, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
    idx, w = routing(a.tokens, E, k, 'spread', dev, seed=1)
    ws, out = MoEWorkspace(a.tokens, k, E, H, I, dev), torch.empty_like(x)
    st_gu, st_dn = (torch.zeros(grid, 4, dtype=torch.int64, device=dev) for _ in range(2))
    ref = moe_w4a16(x, idx, w, ex, 2.827, backend='cuda', version=13)
    es = engine_stream(dev.index or 0)
    buf = torch.zeros(64 * 2**20, device=dev)
    with es:
        launches(x, idx, w, ex, ws, out, st_gu, st_dn, grid)
        torch.cuda.synchronize()
        same = torch.equal(out, ref)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=es.torch):
            buf.sum()
            launches(x, idx, w, ex, ws, out, st_gu, st_dn, grid)
        runs = []
        for _ in range(a.reps):
            g.replay(); torch.cuda.synchronize()
            gu, dn = summary(st_gu.cpu(), n_sm), summary(st_dn.cpu(), n_sm)
            gap = (dn['base_ns'] - gu['base_ns']) / 1e3 - gu['span_us']
            runs.append(dict(gate_up=gu, down=dn, gap_us=round(gap, 2)))
        raw = dict(gate_up=st_gu.cpu().tolist(), down=st_dn.cpu().tolist())   # the last replay's stamps: start, end (ns), SM, row tiles
    keys = ('span_us', 'ramp_us', 'tail_us', 'sm_busy', 'first_end_us', 'median_end_us')
    med = {kn: {key: round(statistics.median(r[kn][key] for r in runs), 3) for key in keys} for kn in ('gate_up', 'down')}
    res = dict(tokens=a.tokens, grid=grid, same_bits_as_shipped=same, median=med, gap_us=statistics.median(r['gap_us'] for r in runs),
               last=runs[-1], gpu=torch.cuda.get_device_name())
    print(json.dumps(res, indent=1))
    for kn in ('gate_up', 'down'):   # block time against its SM's load (row tiles of the SM's blocks): contention or not
        st = torch.tensor(raw[kn], dtype=torch.float64)
        d, sm, it = (st[:, 1] - st[:, 0]) / 1e3, st[:, 2].long(), st[:, 3]
        load = torch.zeros(n_sm, dtype=torch.float64).index_add_(0, sm, it)[sm]
        for n in it.unique().tolist():
            for L in load[it == n].unique().tolist():
                m = (it == n) & (load == L)
                print(f"{kn}: blocks of {int(n)} tiles on SMs holding {int(L)} tiles: {int(m.sum())} blocks, "
                      f"{d[m].median():.2f} µs median, {d[m].min():.2f}-{d[m].max():.2f}")
    save_json(dict(res, runs=runs, raw=raw), a.out, f'stamp_moe_t{a.tokens}.json')


if __name__ == '__main__': main()
