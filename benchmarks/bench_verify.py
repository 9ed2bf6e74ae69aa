"""Benchmark the tree-masked MLA verify attention kernel (nbs/03_verify) against the best torch path.

Validates every shape against the fp64 reference first, then times with CUDA events around a CUDA graph of
many launches (no Python launch overhead in the numbers), rotating over enough cache copies (>= 256 MB) that
each launch reads its cache from HBM, not L2 (as in a real forward, where every layer has its own cache).

    python benchmarks/bench_verify.py --out DIR [--quick]
"""
import argparse, json, math, statistics, subprocess, sys, time
from pathlib import Path
import torch
from ddtree_nb.verify import (DC, DQK, H200_BW, H200_BF16, mla_tree_attention, vis_to_bits, verify_cost, verify_plan,
                              verify_workspace, verify_error, verify_selftest_case, tree_parents, VERIFY_CASES)
from ddtree_nb.reference import ancestor_mask, mla_tree_attention_ref
from ddtree_nb.runtime import engine_stream

def torch_path(ql, qp, kv, P, vis, scale):
    "GEMM-softmax-GEMM: scores over [c_kv | k_pe] as one GEMM, masked fp32 softmax, then P . c_kv."
    T, H, _ = ql.shape
    n = P + T
    q = torch.cat([ql, qp], -1).view(T * H, DQK)
    s = torch.matmul(q, kv[:n].t()).float().mul_(scale).view(T, H, n)
    s[:, :, P:].masked_fill_(~vis[:, None, :], float('-inf'))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).to(torch.bfloat16)
    return torch.matmul(p.view(T * H, n), kv[:n, :DC]).view(T, H, DC), lse

def gpu_time_us(calls, reps=7):
    "Median µs per call of `calls` (a list of thunks) replayed as one CUDA graph on the engine stream."
    es = engine_stream()
    with es:
        for c in calls[:2]: c()
        torch.cuda.synchronize()
        mode = 'graph'
        try:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch):
                for c in calls: c()
            run = g.replay
        except Exception as e:  # fall back to eager launches (then CPU launch cost may show for tiny shapes)
            print(f"  graph capture failed ({type(e).__name__}: {e}); timing eager launches", flush=True)
            torch.cuda.synchronize()
            mode = 'eager'
            def run():
                for c in calls: c()
        run(); torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); run(); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b) * 1e3 / len(calls))
    return statistics.median(ts), mode

def make_inputs(T, H, P, kind, seed):
    "Random bf16 inputs for one shape: enough cache copies to rotate through (~256 MB, so timings read HBM, not L2)."
    g = torch.Generator().manual_seed(seed)
    gc = torch.Generator(device='cuda').manual_seed(seed)
    n = P + T
    nbuf = max(2, min(64, math.ceil(256e6 / (n * DQK * 2))))
    kvs = [torch.randn(n, DQK, generator=gc, device='cuda').to(torch.bfloat16) for _ in range(nbuf)]
    ql = torch.randn(T, H, DC, generator=gc, device='cuda').to(torch.bfloat16)
    qp = torch.randn(T, H, 64, generator=gc, device='cuda').to(torch.bfloat16)
    vis = ancestor_mask(tree_parents(kind, T, g)).cuda()
    return kvs, ql, qp, vis

def bench_shape(T, H, P, kind, seed=0, v1=False, calls_min=20):
    kvs, ql, qp, vis = make_inputs(T, H, P, kind, seed)
    nbuf = len(kvs)
    bits = vis_to_bits(vis)
    scale = DQK ** -0.5 * 2.0
    plan = verify_plan(T, H, P)
    ws = verify_workspace(T, H, plan['splits'], 'cuda') if plan['splits'] > 1 else None
    out = torch.empty(T, H, DC, dtype=torch.bfloat16, device='cuda')
    lse = torch.empty(T, H, dtype=torch.float32, device='cuda')
    # validate (kernel and torch path) against fp64 before timing
    out.fill_(float('nan')); lse.fill_(float('nan'))
    mla_tree_attention(ql, qp, kvs[0], P, bits, scale, out=out, lse=lse, workspace=ws)
    ro, rl = mla_tree_attention_ref(ql.double(), qp.double(), kvs[0][:, :DC].double(), kvs[0][:, DC:].double(), P, vis, scale)
    err = verify_error(out, lse, ro, rl)
    to, tl = torch_path(ql, qp, kvs[0], P, vis, scale)
    terr = verify_error(to, tl, ro, rl)
    del ro, rl, to, tl
    torch.cuda.empty_cache()
    ncalls = max(calls_min, nbuf)
    seq = [kvs[i % nbuf] for i in range(ncalls)]
    us, mode = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, workspace=ws) for kv in seq])
    ut, _ = gpu_time_us([lambda kv=kv: torch_path(ql, qp, kv, P, vis, scale) for kv in seq])
    u1 = None
    if v1: u1, _ = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, version=1) for kv in seq[:nbuf]], reps=3)
    c = verify_cost(T, H, P)
    r = dict(T=T, H=H, P=P, kind=kind, plan={k: plan[k] for k in ('kernel', 'splits', 'grid', 'smem')}, rel_err=err[0], lse_err=err[1],
             torch_rel_err=terr[0], torch_lse_err=terr[1], us=us, us_torch=ut, us_v1=u1, timing=mode, n_caches=nbuf,
             tbps=c['bytes'] / us / 1e6, pct_bw=100 * c['bytes'] / us / 1e-6 / H200_BW,
             tflops=c['flops'] / us / 1e6, pct_flop=100 * c['flops'] / us / 1e-6 / H200_BF16,
             floor_bw_us=c['us_bw'], floor_flop_us=c['us_flop'], speedup_vs_torch=ut / us)
    del kvs
    torch.cuda.empty_cache()
    return r

def bench_extra(T, H, P, kind, seed=1, **kw):
    "v2 time for one shape with a forced split count / tile config (`kw`), after an fp64 check."
    kvs, ql, qp, vis = make_inputs(T, H, P, kind, seed)
    nbuf = len(kvs)
    bits, scale = vis_to_bits(vis), DQK ** -0.5 * 2.0
    plan = verify_plan(T, H, P, **kw)
    ws = verify_workspace(T, H, plan['splits'], 'cuda') if plan['splits'] > 1 else None
    out = torch.full((T, H, DC), float('nan'), dtype=torch.bfloat16, device='cuda')
    lse = torch.full((T, H), float('nan'), dtype=torch.float32, device='cuda')
    mla_tree_attention(ql, qp, kvs[0], P, bits, scale, out=out, lse=lse, workspace=ws, **kw)
    ro, rl = mla_tree_attention_ref(ql.double(), qp.double(), kvs[0][:, :DC].double(), kvs[0][:, DC:].double(), P, vis, scale)
    err = verify_error(out, lse, ro, rl)
    del ro, rl
    seq = [kvs[i % nbuf] for i in range(max(20, nbuf))]
    us, mode = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, workspace=ws, **kw) for kv in seq])
    c = verify_cost(T, H, P)
    del kvs; torch.cuda.empty_cache()
    return dict(T=T, H=H, P=P, kw={k: str(v) for k, v in kw.items()}, plan={k: plan[k] for k in ('kernel', 'splits', 'grid')}, rel_err=err[0], lse_err=err[1],
                us=us, timing=mode, pct_bw=100 * c['bytes'] / us / 1e-6 / H200_BW, pct_flop=100 * c['flops'] / us / 1e-6 / H200_BF16)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='.')
    ap.add_argument('--quick', action='store_true')
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    dev = torch.cuda.get_device_properties(0)
    print(f"GPU: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}", flush=True)
    try: commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    except Exception: commit = '?'
    # correctness matrix first (same code as the notebook's cuda tests)
    t0 = time.time()
    checks = [verify_selftest_case(*c, seed=i) for i, c in enumerate(VERIFY_CASES)]
    for r in checks: print(f"check T={r['T']:5d} H={r['H']:3d} P={r['P']:6d} {r['kind']:6s} rel={r['rel']:.2e} dlse={r['lse']:.2e} {'ok' if r['ok'] else 'FAIL'}", flush=True)
    print(f"checks: {sum(r['ok'] for r in checks)}/{len(checks)} ok ({time.time() - t0:.0f} s)", flush=True)
    shapes = [(1, 64, 4096, 'chain', True), (1, 64, 32768, 'chain', True), (1, 64, 131072, 'chain', False),
              (16, 64, 8192, 'tree', True), (64, 64, 8192, 'tree', False), (256, 64, 8192, 'tree', False)]
    if a.quick: shapes = shapes[:2]
    rows = []
    for T, H, P, kind, v1 in shapes:
        r = bench_shape(T, H, P, kind, v1=v1)
        rows.append(r)
        print(json.dumps(r), flush=True)
    # how the split count and the tile config move the AR step and the largest tree (same inputs as above)
    extra = []
    if not a.quick:
        for T, P, kw in [(1, 32768, dict(splits=33)), (1, 32768, dict(splits=65)), (1, 32768, dict(splits=257)),
                         (1, 131072, dict(splits=257)), (256, 8192, dict(config=(64, 32, 2))), (256, 8192, dict(config=(32, 32, 1)))]:
            extra.append(bench_extra(T, 64, P, 'tree' if T > 1 else 'chain', **kw)); print(json.dumps(extra[-1]), flush=True)
    res = dict(gpu=dev.name, sms=dev.multi_processor_count, torch=torch.__version__, commit=commit, date=time.strftime('%Y-%m-%d'),
               command=' '.join(sys.argv), checks=checks, bench=rows, extra=extra)
    (out / 'bench_verify.json').write_text(json.dumps(res, indent=1, default=str))
    lines = ['| shape (H=64) | plan | µs | floor bw / flop µs | TB/s (% of 4.27) | TFLOP/s (% of 799) | torch µs | speedup | v1 µs | rel err |',
             '|---|---|---|---|---|---|---|---|---|---|']
    for r in rows:
        v1 = '' if r['us_v1'] is None else f"{r['us_v1']:.0f}"
        lines.append(f"| T={r['T']}, P={r['P']} {r['kind']} | {r['plan']['kernel'][12:]} x{r['plan']['splits']} | {r['us']:.1f} | "
                     f"{r['floor_bw_us']:.1f} / {r['floor_flop_us']:.1f} | {r['tbps']:.2f} ({r['pct_bw']:.0f}%) | {r['tflops']:.0f} ({r['pct_flop']:.0f}%) | "
                     f"{r['us_torch']:.1f} | {r['speedup_vs_torch']:.1f}x | {v1} | {r['rel_err']:.1e} |")
    lines += ['', '| sweep | plan | µs | % of 4.27 TB/s | % of 799 TFLOP/s | rel err |', '|---|---|---|---|---|---|']
    for r in extra:
        lines.append(f"| T={r['T']}, P={r['P']} {r['kw']} | {r['plan']['kernel'][12:]} x{r['plan']['splits']} | {r['us']:.1f} | {r['pct_bw']:.0f}% | {r['pct_flop']:.0f}% | {r['rel_err']:.1e} |")
    (out / 'bench_verify.md').write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines))

if __name__ == '__main__': main()
