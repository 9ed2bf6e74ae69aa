"""Issue 20, T <= 8: the W4A16 MoE with its down launch through bulk copies (kernels/dev/moe_w4a16_bulk.cu, `moe_down_v20`)
against the shipped T <= 8 launches (v13's), in one run on one GPU. First the check: the output must equal v13's bit for bit
(the same math and reduction order) at Kimi widths (T = 1, 2, 4, 8; spread routing and all pairs on one expert) and at small
widths (96 -> 160 -> 96, E = 8). Then both as CUDA graphs with bench_moe.py's L2 flush (a 256 MB read) ahead of each rep:
median µs, % of 4.27 TB/s for the hit experts' bytes.

    python benchmarks/try_moe_bulk.py [--reps 20] [--tokens 1 2 4 8] [--out DIR]
"""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, pct_of_ceiling, rand_packed, routing, make_flush, graph_time, save_json
from ddtree_nb.moe import (MoEWorkspace, moe_w4a16, moe_cuda_launch, moe_group_launch, _SIG_GU, _SIG_DOWN, _SIG_COMB, _combine_grid,
                           BLOCKS_PER_SM)
from ddtree_nb.runtime import load_kernel, device_limits, engine_stream

SRC, BULK_BLOCKS_PER_SM = 'dev/moe_w4a16_bulk.cu', 2


def bulk_smem(inter: int) -> int:
    "Dynamic shared memory of moe_down_v20: 2 stages of 32 rows (packed words + scales), the reduction slots, 2 mbarriers."
    G = inter // 32
    return 2 * (32 * G * 16 + 32 * G * 2) + 2 * 4 * 2 * 4 * 32 * 4 + 16


def launches_v20(x, idx, w, ex, ws, out, n_sm):
    "moe_cuda_launch's four launches at T <= 8 with down as moe_down_v20."
    E, k, d, Hd, In = ex.n_experts, idx.shape[1], x.device.index, ex.hidden, ex.inter
    moe_group_launch(x, idx, w, E, ws)
    load_kernel('moe_w4a16.cu', 'moe_gate_up_v13', _SIG_GU, device=d)(x, Hd, In, k, ws.sorted_pair, ws.offsets, ws.hit, ws.n_hit,
        ex.gate_packed, ex.gate_scale, ex.up_packed, ex.up_scale, ws.act, grid=(BLOCKS_PER_SM * n_sm, 1), block=128)
    kd = load_kernel(SRC, 'moe_down_v20', _SIG_DOWN, device=d)
    smem = bulk_smem(In)
    if kd.max_dynamic_shared < smem: kd.set_max_dynamic_shared(smem)
    kd(ws.act, In, Hd, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit, ex.down_packed, ex.down_scale, ws.ybuf,
       grid=(BULK_BLOCKS_PER_SM * n_sm, 1), block=128, shared=smem)
    load_kernel('moe_w4a16.cu', 'moe_combine', _SIG_COMB, device=d)(ws.ybuf, ws.pos, idx.shape[0], k, Hd, 2.827, out,
        grid=_combine_grid(idx.shape[0], Hd), block=256)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--out', default=None)
    a = ap.parse_args()
    dev, k = torch.device('cuda'), 8
    n_sm = device_limits(dev.index or 0)['sms']
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), checks=[], bench=[])
    for hidden, inter, E in ((96, 160, 8), (H, I, 384)):   # bit-identity against the shipped launches
        ex = rand_packed(E, dev, seed=E, hidden=hidden, inter=inter)
        for T in (1, 2, 4, 8):
            for how in ('spread', 'one') if T == 1 else ('spread',):   # v20 takes <= 8 pairs an expert ('one' at T = 1: 8)
                x = torch.randn(T, hidden, device=dev, generator=torch.Generator(device=dev).manual_seed(T)).bfloat16()
                idx, w = routing(T, E, min(k, E), how, dev, seed=T)
                ref = moe_w4a16(x, idx, w, ex, 2.827, backend='cuda', version=13)
                ws, out = MoEWorkspace(T, idx.shape[1], E, hidden, inter, dev), torch.full_like(x, float('nan'))
                torch.cuda.synchronize()   # the poison (default stream) before the launches (engine stream)
                with es: launches_v20(x, idx, w, ex, ws, out, n_sm)
                torch.cuda.synchronize()
                ok = torch.equal(out, ref)
                res['checks'].append(dict(hidden=hidden, inter=inter, E=E, T=T, how=how, same_bits=ok))
                print(f"check {hidden}x{inter} E={E} T={T} {how}: {'same bits as v13' if ok else 'DIFFERENT'}", flush=True)
    if not all(c['same_bits'] for c in res['checks']): print("v20 differs from v13: not timed"); return
    ex = rand_packed(384, dev)
    for T in a.tokens:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(T, 384, k, 'spread', dev, seed=1)
        ws, out = MoEWorkspace(T, k, 384, H, I, dev), torch.empty_like(x)
        hit = idx.unique().numel()
        mb = hit * ex.bytes_per_expert / 1e6
        t13 = graph_time(lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, 13, pdl=False), a.reps, flush, es)
        t20 = graph_time(lambda: launches_v20(x, idx, w, ex, ws, out, n_sm), a.reps, flush, es)
        row = dict(T=T, hit=hit, MB=round(mb, 1), v13_us=round(t13, 1), v20_us=round(t20, 1),
                   v13_pct=pct_of_ceiling(mb, t13), v20_pct=pct_of_ceiling(mb, t20))
        res['bench'].append(row)
        print(row, flush=True)
    save_json(res, a.out, 'try_moe_bulk.json')


if __name__ == '__main__': main()
