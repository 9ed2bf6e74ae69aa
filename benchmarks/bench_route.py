"""The MoE routing launches at Kimi widths, one against another (GPU only; issues 17 and 20).

python benchmarks/bench_route.py [--tokens 1 4 16 64] [--reps 20] [--json out.json] [--commit C]

One MoE layer's routing: router logits x . W^T (fp32, W [384, 7168]), the top-8 of sigmoid + bias, the weights, the
grouping of the (token, expert) pairs. Three paths, each replayed as one CUDA graph of 16 layers' worth of calls, every
call with its own router weight (16 x 11 MB, so the weights come from HBM, not L2), median of --reps replays, per call:
  torch      F.linear (cuBLAS) + Router.select (sigmoid, add, top-k, gather, normalise) + moe_group
  route      F.linear (cuBLAS) + moe_route_group_e384 (top-k and grouping in one launch; session 11)
  router     moe_router_group_e384 (the GEMV, the top-k and the grouping in one launch; the last block routes)
  gemv       F.linear alone, and moe_router_group's bytes (11 MB) against 4.27 TB/s
Checks first: every path's picks against Router.select of its own logits (`reliability.check_router_picks`: equal but for
candidates within 1e-5), router's logits against F.linear's (<= 1e-5 relative to the largest), the grouping's invariants.
"""
import argparse, json, statistics, datetime, sys
import torch
from ddtree_nb.model import Router, config_from_dict, kimi_config
from ddtree_nb.moe import MoEWorkspace, check_grouping, moe_group_launch
from ddtree_nb.reliability import check_router_picks
from ddtree_nb.runtime import engine_stream

BW = 4.27e12

def graph_us(calls, reps):
    "Median µs per call of `calls` (thunks) captured as one CUDA graph on the engine stream."
    es = engine_stream()
    with es:
        for c in calls: c()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=es.torch):
            for c in calls: c()
        g.replay(); torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); g.replay(); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b) * 1e3 / len(calls))
    return statistics.median(ts)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 4, 16, 64])
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--layers', type=int, default=16, help='router weights rotated through (16 x 11 MB > the 50 MB L2)')
    ap.add_argument('--json', default=None)
    ap.add_argument('--commit', default=None)
    a = ap.parse_args()
    if not torch.cuda.is_available(): sys.exit("bench_route: needs a CUDA GPU")
    dev = torch.device('cuda')
    c = config_from_dict(kimi_config(num_hidden_layers=2))
    E, H, k = c.n_routed_experts, c.hidden_size, c.num_experts_per_tok
    gk = torch.Generator(device=dev).manual_seed(0)
    routers = []
    for _ in range(a.layers):
        r = Router(c).to(dev).requires_grad_(False); r.weight.data.normal_(0, 0.02, generator=gk); r.e_score_correction_bias.normal_(0, 0.01, generator=gk)
        routers.append(r)
    norm, rsf = int(c.norm_topk_prob), float(c.routed_scaling_factor)
    rows = []
    res = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(), commit=a.commit, cmd=' '.join(sys.argv), rows=rows)
    print(f"| T | torch µs | route µs | router µs | gemv µs | router GB/s-equiv (% of 4.27 TB/s for the weights) | checks |\n|---|---|---|---|---|---|---|")
    for T in a.tokens:
        x = torch.randn(T, H, generator=gk, device=dev).to(torch.bfloat16)
        ws = MoEWorkspace(T, k, E, H, 64, dev)
        idx, w = ws.topk_idx[:T * k].view(T, k), ws.topk_w[:T * k].view(T, k)
        lg_buf, lg_r = torch.empty(T, E, device=dev), torch.empty(T, E, device=dev)   # cuBLAS's logits; moe_router_group's (any T here)
        def torch_path(r):
            ww, ii = r.select(r.logits(x)); idx.copy_(ii); w.copy_(ww)
            moe_group_launch(x, idx, w, E, ws)
        def route_path(r):
            torch.matmul(x.float(), r.weight.t(), out=lg_buf)
            moe_group_launch(x, idx, w, E, ws, route=(lg_buf, r.e_score_correction_bias, norm, rsf, None))
        def router_path(r):
            moe_group_launch(x, idx, w, E, ws, route=(lg_r, r.e_score_correction_bias, norm, rsf, r.weight))
        checks = {}
        with engine_stream():
            for name, f in (('torch', torch_path), ('route', route_path), ('router', router_path)):
                r = routers[0]; lg_r.fill_(float('nan')); idx.fill_(-7)
                f(r); torch.cuda.synchronize()
                lg = r.logits(x)
                try: check_router_picks(r, idx, w, lg); check_grouping(ws.grouping(), idx, E); ok = True
                except AssertionError: ok = False
                if name == 'router': ok = ok and float((lg_r - lg).abs().max()) <= 1e-5 * (1 + float(lg.abs().max()))
                checks[name] = ok
        t = {name: graph_us([lambda r=r, f=f: f(r) for r in routers], a.reps) if checks.get(name, True) else None
             for name, f in (('torch', torch_path), ('route', route_path), ('router', router_path),
                             ('gemv', lambda r: torch.matmul(x.float(), r.weight.t(), out=lg_buf)))}
        wbytes = E * H * 4
        pct = 100 * wbytes / (t['router'] * 1e-6) / BW if t['router'] else float('nan')
        rows.append(dict(T=T, us=t, checks=checks, router_pct_bw=pct))
        f1 = lambda v: f"{v:.1f}" if v else "WRONG"
        print(f"| {T} | {f1(t['torch'])} | {f1(t['route'])} | {f1(t['router'])} | {f1(t['gemv'])} | {pct:.0f}% | {checks} |", flush=True)
    if a.json:
        with open(a.json, 'w') as f: json.dump(res, f, indent=1)

if __name__ == '__main__':
    with torch.no_grad(): main()
