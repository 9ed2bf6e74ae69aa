"""Issue 20, T <= 8: the MoE's four launches with programmatic dependent launch (PDL: moe_cuda_launch(..., pdl=True), the
_pdl kernels of kernels/moe_w4a16.cu through runtime's cuLaunchKernelEx path) against the plain ones (v13's), in one run.
gate/up, down and the combine may each start while the launch before drains: down's blocks request their first weights
during gate/up's tail. First the check (the output must equal v13's bit for bit, plain and PDL launches, eager and in a CUDA
graph), then both as CUDA graphs with bench_moe.py's L2 flush (a 256 MB read) ahead of each rep: median µs, % of 4.27 TB/s.

    python benchmarks/try_moe_pdl.py [--reps 20] [--tokens 1 2 4 8] [--out DIR]
    python benchmarks/try_moe_pdl.py --stress 100 [--vary] --tokens 1 4 8     # only the checks, N runs each
    --version 24: the PDL chain is v24's (no grouping launch), still against v13's plain launches
"""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, pct_of_ceiling, rand_packed, routing, make_flush, graph_time, save_json
from ddtree_nb.moe import MoEWorkspace, moe_cuda_launch
from ddtree_nb.runtime import engine_stream


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--out', default=None)
    ap.add_argument('--stress', type=int, default=0, help='only the checks, this many eager and graph-replayed PDL runs per T')
    ap.add_argument('--version', type=int, default=13, choices=(13, 24), help='the PDL chain: v13 (after the grouping launch) or v24 (no grouping launch)')
    ap.add_argument('--vary', action='store_true', help='with --stress: a new routing every run (v13 recomputed each time, plain launches)')
    a = ap.parse_args()
    dev, k, E = torch.device('cuda'), 8, 384
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    ex = rand_packed(E, dev)
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), pdl_version=a.version, checks=[], bench=[])
    if a.stress:
        for T in a.tokens:
            x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
            idx, w = routing(T, E, k, 'spread', dev, seed=1)
            ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
            plain = lambda o: moe_cuda_launch(x, idx, w, ex, 2.827, o, ws, 13, pdl=False)
            with es: plain(ref)
            torch.cuda.synchronize()
            refs = []
            for _ in range(4):   # is v13 itself the same every time?
                r2 = torch.empty_like(x)
                with es: plain(r2)
                torch.cuda.synchronize(); refs.append(torch.equal(r2, ref))
            def differ(label, launch, seed0):
                "How many of --stress runs of `launch` differ from ref (with --vary: new picks and weights, and v13's answer, first)."
                bad = 0
                for i in range(a.stress):
                    if a.vary:   # new picks and weights in the same buffers, then v13's answer for them
                        i2, w2 = routing(T, E, k, 'spread', dev, seed=seed0 + i)
                        idx.copy_(i2); w.copy_(w2)
                        with es: plain(ref)
                        torch.cuda.synchronize()
                    with es:   # the poison on the launches' stream: the output, act, ybuf and the grouping (v24's down writes it)
                        for t in (out, ws.act, ws.ybuf): t.fill_(float('nan'))
                        for t in ws.grouping_arrays(): t.fill_(-7)
                        launch()
                    torch.cuda.synchronize()
                    if not torch.equal(out, ref):
                        bad += 1
                        d = (out.float() - ref.float()).abs()
                        if bad <= 3: print(f"  {label} T={T} run {i}: {int(d.isnan().sum())} NaN, {int((d > 0).sum())} differ, max {d.nan_to_num().max().item():.3e}", flush=True)
                return bad
            bad_e = differ('eager', lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, a.version, pdl=True), 100)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch): moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, a.version, pdl=True)
            bad_g = differ('graph', g.replay, 1000)
            print(f"stress T={T}: v13 repeatable {refs}; v{a.version} PDL eager {bad_e}/{a.stress} differ, graph {bad_g}/{a.stress} differ", flush=True)
        return
    for T in a.tokens:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(T, E, k, 'spread', dev, seed=1)
        ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
        with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13, pdl=False)
        for pdl in (False, True):
            with es:   # the poison on the launches' stream, or nothing orders it before them
                out.fill_(float('nan'))
                moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, a.version if pdl else 13, pdl=pdl)
            torch.cuda.synchronize()
            res['checks'].append(dict(T=T, pdl=pdl, graph=False, same_bits=torch.equal(out, ref)))
        t13 = graph_time(lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, 13, pdl=False), a.reps, flush, es)
        with es: out.fill_(float('nan'))
        tp = graph_time(lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, a.version, pdl=True), a.reps, flush, es)
        torch.cuda.synchronize()
        res['checks'].append(dict(T=T, pdl=True, graph=True, same_bits=torch.equal(out, ref)))
        hit = idx.unique().numel(); mb = hit * ex.bytes_per_expert / 1e6
        row = dict(T=T, hit=hit, MB=round(mb, 1), v13_us=round(t13, 1), pdl_us=round(tp, 1),
                   v13_pct=pct_of_ceiling(mb, t13), pdl_pct=pct_of_ceiling(mb, tp))
        res['bench'].append(row)
        print([c for c in res['checks'] if c['T'] == T], row, flush=True)
    save_json(res, a.out, 'try_moe_pdl.json')


if __name__ == '__main__': main()
