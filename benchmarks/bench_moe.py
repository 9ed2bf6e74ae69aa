"""Validate and benchmark the W4A16 routed-experts kernel versions (v11 in kernels/moe_w4a16.cu, v1..v10 in kernels/dev/moe_w4a16_v1_v10.cu) on one GPU, at Kimi K2 widths.

python benchmarks/bench_moe.py [--versions 1 2 ...] [--tokens 1 4 16 64 256] [--experts 384] [--topk 8] [--reps 30]
                               [--validate [small] [kimi]] [--passed val.json ...] [--bench] [--json out.json] [--commit C]

--validate (then no benchmark unless --bench) checks every version against the torch face (dequantize, fp32 matmul) on the issue's grid:
T in {1, 2, 16, 64, 256, 1025}, E in {8, 384}, top-k in {2, 8}, widths 96->160->96 and 7168->2048->7168, spread routing
and all-pairs-to-one-expert routing; outputs and workspaces poisoned with NaN; ||out - ref|| / ||ref|| <= 1e-2 and finite,
the GPU grouping checked against its invariants; with the small widths it also replays a captured CUDA graph of each version
on new inputs. Records are written before each launch (ok null), so a crash names its case. --passed keeps only the versions
whose every record in the given validation jsons is ok (one process per phase: a crashed kernel cannot take the others down).

Benchmark: one MoE layer, hidden 7168 -> expert width 2048 -> 7168, E experts (random packed INT4 words, bf16 scales,
group 32), top-k routing drawn uniformly (distinct experts per token). For each T and version:
  hit      distinct experts hit (read back after timing, for the byte count only)
  MB       bytes of packed words + scales of the hit experts (the bytes the kernel must stream at least once)
  kern_us  median µs of the four launches (grouping, gate/up, down, combine) between CUDA events, with a sleep
           kernel queued ahead so host enqueue time is hidden, L2 emptied before each rep (--flush: a 256 MB read; `write`, the method before 2026-12-04, adds 1 to 256 MB and leaves ~50 MB of dirty lines to be written back during the timed launches)
  graph_us the same launches replayed as one CUDA graph (--pdl auto: v13/v14/v24 at T <= 8 as programmatic dependents on sm_90+)
  TB/s, %  MB / graph_us, and against the measured H200 device-copy ceiling 4.27 TB/s (goal >= 70% at T <= 16)
  split    median µs of group / gate_up / down / combine (events between the launches). v24 at T <= 8 has no grouping
           launch: its grouping is paid inside gate/up and down, and its group column is only the events' own cost
  torch_us the dequantize-then-matmul torch face (bf16 weights materialised per hit expert, host loop), once per T
  err      ||kernel - torch|| / ||torch||
Prints markdown tables, and JSON with --json.
"""
import argparse, json, os, statistics, subprocess, time
import torch
from ddtree_nb.moe import MoEWorkspace, moe_w4a16, check_grouping, moe_cuda_launch, MOE_VERSIONS
from ddtree_nb.runtime import engine_stream
from ddtree_nb.reliability import random_packed_experts

H, I, CEIL = 7168, 2048, 4.27e12


def rand_packed(E, dev, seed=0, hidden=H, inter=I):
    "Random INT4 experts on `dev` (`reliability.random_packed_experts`, seeded)."
    return random_packed_experts(E, hidden, inter, torch.Generator(device=dev).manual_seed(seed))


def routing(T, E, k, how, dev, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    if how == 'spread': idx = torch.rand(T, E, generator=g, device=dev).topk(k, dim=-1).indices
    else: idx = torch.full((T, k), E - 1, device=dev)      # every pair to one expert
    w = torch.rand(T, k, generator=g, device=dev)
    return idx.to(torch.int32).contiguous(), (w / w.sum(-1, keepdim=True)).float().contiguous()


def pct_of_ceiling(mb, us):
    "% of the 4.27 TB/s ceiling for `mb` megabytes moved in `us` microseconds (one decimal)."
    return round(100 * mb * 1e6 / (us * 1e-6) / CEIL, 1)


def save_json(obj, out_dir, name):
    "Write `obj` as `out_dir/name` (indented JSON), making the folder; nothing when `out_dir` is empty (the scripts' `--out`)."
    if not out_dir: return
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name), 'w') as f: json.dump(obj, f, indent=1)

def rel_err(a, b): return ((a.float() - b.float()).norm() / b.float().norm()).item()


def validate(versions, dev, log, widths, res, dump):
    "The issue's correctness grid for every version; returns rows and raises nothing (failures are recorded)."
    rows, t0 = res.setdefault('validate', []), time.time()
    for hidden, inter, tag in [w for w in ((96, 160, 'small'), (H, I, 'kimi')) if w[2] in widths]:
        for E in (8, 384):
            ex = rand_packed(E, dev, seed=E, hidden=hidden, inter=inter)
            for k in (2, 8):
                for T in (1, 2, 16, 64, 256, 1025):
                    hows = ('spread', 'one') if tag == 'small' or T in (1, 16, 1025) else ('spread',)
                    for how in hows:
                        gx = torch.Generator(device=dev).manual_seed(T)
                        x = torch.randn(T, hidden, device=dev, generator=gx).to(torch.bfloat16)
                        idx, w = routing(T, E, k, how, dev, seed=T)
                        ref = moe_w4a16(x, idx, w, ex, 2.827)
                        ws = MoEWorkspace(T, k, E, hidden, inter, dev)
                        for v in versions:
                            r = dict(tag=tag, E=E, k=k, T=T, how=how, version=v, ok=None)   # ok None: launched, crashed
                            rows.append(r); dump()
                            ws.act.fill_(float('nan')); ws.ybuf.fill_(float('nan'))
                            out = torch.full_like(x, float('nan'))
                            try:
                                moe_w4a16(x, idx, w, ex, 2.827, out=out, backend='cuda', ws=ws, version=v)
                                torch.cuda.synchronize()
                                fin = bool(torch.isfinite(out).all())
                                err = rel_err(out, ref)
                                check_grouping(ws.grouping(), idx, E)
                                ok = fin and err <= 1e-2
                                msg = ''
                            except Exception as e:   # record, keep going: one GPU call has to tell everything
                                ok, fin, err, msg = False, False, float('nan'), f'{type(e).__name__}: {e}'[:200]
                            r.update(err=err, finite=fin, ok=ok, msg=msg)
                            if not ok: log(f"FAIL {r}")
            del ex; torch.cuda.empty_cache()
    for v in versions:
        rv = [r for r in rows if r['version'] == v]
        errs = [r['err'] for r in rv if r['err'] == r['err']]
        log(f"validate v{v}: {sum(r['ok'] for r in rv)}/{len(rv)} cases ok, max rel err {max(errs) if errs else float('nan'):.2e}")
    log(f"validation took {time.time() - t0:.1f} s")
    return rows


def passed_versions(files, versions):
    "Versions not failed by any of `files`: a file fails a version it validated unless every record of that version is ok"
    " and it ran as many cases as the most complete version of that file."
    keep = list(versions)
    for f in files:
        d = json.load(open(f))
        recs = d.get('validate', [])
        n = {v: sum(r['version'] == v for r in recs) for v in d['versions']}
        full = max(n.values()) if n else 0
        bad = {v for v in d['versions'] if n[v] < full or full == 0 or not all(r['ok'] for r in recs if r['version'] == v)}
        keep = [v for v in keep if v not in bad]
    return keep


def graph_check(versions, dev, log, res):
    "Capture each version once, replay on new inputs copied into the captured buffers."
    es = engine_stream()
    ex = rand_packed(64, dev, seed=3, hidden=256, inter=128)
    T, k = 16, 8
    for v in versions:
        ws = MoEWorkspace(T, k, 64, 256, 128, dev)
        xs = torch.randn(T, 256, device=dev).to(torch.bfloat16); idx_s, w_s = routing(T, 64, k, 'spread', dev, 1)
        out_s = torch.empty_like(xs)
        run = lambda: moe_w4a16(xs, idx_s, w_s, ex, 2.5, out=out_s, backend='cuda', ws=ws, check_values=False, version=v)
        with es:
            run(); torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=es.torch): run()
        errs = []
        for s in range(3):
            xn = torch.randn(T, 256, device=dev).to(torch.bfloat16); i2, w2 = routing(T, 64, k, 'spread', dev, 10 + s)
            xs.copy_(xn); idx_s.copy_(i2); w_s.copy_(w2); out_s.fill_(float('nan'))
            with es: graph.replay()
            torch.cuda.synchronize()
            errs.append(rel_err(out_s, moe_w4a16(xn, i2, w2, ex, 2.5)))
        res.setdefault('validate', []).append(dict(tag='graph', E=64, k=k, T=T, how='spread', version=v, err=max(errs),
                                                   finite=True, ok=max(errs) <= 1e-2, msg=''))
        log(f"graph replay v{v}: max rel err {max(errs):.2e} {'ok' if max(errs) <= 1e-2 else 'FAIL'}")
    return res


def make_flush(dev, how):
    "An L2 flush before each timed rep: 'read' sums 256 MB (L2 left holding clean lines: a cold cache, nothing to write back),\n"
    "'write' adds 1 to 256 MB (the method before 2026-12-04: ~50 MB of dirty lines are written back while the first kernel reads)."
    buf = torch.zeros(64 * 2**20, device=dev)
    return (lambda: buf.sum()) if how == 'read' else (lambda: buf.add_(1.0))


def gpu_time(fn, reps, flush, warm=5):
    ts = []
    for i in range(warm + reps):
        flush()
        torch.cuda._sleep(1_000_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        if i >= warm: ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def graph_time(fn, reps, flush, es, warm=5):
    "Median µs of `fn`'s launches captured as one CUDA graph on engine stream `es`, replayed after `flush` (and a sleep that hides the host)."
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=es.torch): fn()
    ts = []
    with es:
        for i in range(warm + reps):
            flush()
            torch.cuda._sleep(1_000_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); g.replay(); e.record(); e.synchronize()
            if i >= warm: ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def split_time(x, idx, w, ex, ws, out, v, reps, flush):
    "Median µs of each of the four launches."
    ts = [[] for _ in range(4)]
    for i in range(5 + reps):
        flush()
        torch.cuda._sleep(1_000_000)
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
        moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, v, marks=marks)
        marks[-1].synchronize()
        if i >= 5:
            for j in range(4): ts[j].append(marks[j].elapsed_time(marks[j + 1]) * 1e3)
    return [statistics.median(t) for t in ts]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--versions', type=int, nargs='+', default=[1, 4, 11], choices=sorted(MOE_VERSIONS),
                    help='kernel versions (v11: persistent, aimed at T <= 16)')
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 4, 16, 64, 256])
    ap.add_argument('--experts', type=int, default=384)
    ap.add_argument('--topk', type=int, default=8)
    ap.add_argument('--reps', type=int, default=30)
    ap.add_argument('--torch_reps', type=int, default=3)
    ap.add_argument('--validate', nargs='*', default=None, help="widths to validate: small kimi (no benchmark then)")
    ap.add_argument('--passed', nargs='*', default=None, help="keep only the versions that passed in these validation jsons")
    ap.add_argument('--bench', action='store_true', help="benchmark even when validating")
    ap.add_argument('--flush', choices=('read', 'write'), default='read', help="how L2 is emptied before each rep (see make_flush)")
    ap.add_argument('--pdl', choices=('auto', 'off'), default='auto', help="programmatic dependent launch where a version has it (auto: on sm_90+) or never")
    ap.add_argument('--json', default=None)
    ap.add_argument('--commit', default='')
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)
    dev = torch.device('cuda')
    gpu = subprocess.run(['nvidia-smi', '--query-gpu=name', '--format=csv,noheader'], capture_output=True, text=True).stdout.strip()
    if a.passed is not None:
        a.versions = passed_versions(a.passed, a.versions)
        log(f"versions that passed validation: {a.versions}")
    res = dict(gpu=gpu, commit=a.commit, experts=a.experts, topk=a.topk, versions=a.versions, flush=a.flush, pdl=a.pdl)
    dump = lambda: a.json and json.dump(res, open(a.json, 'w'), indent=1)
    if a.validate is not None:
        validate(a.versions, dev, log, a.validate or ['small', 'kimi'], res, dump); dump()
        if 'small' in (a.validate or ['small']): graph_check(a.versions, dev, log, res); dump()
        if not a.bench: return
    ex = rand_packed(a.experts, dev)
    per_expert = ex.bytes_per_expert
    flush = make_flush(dev, a.flush)
    es = engine_stream()
    rows = []
    res['rows'] = rows
    cases = []
    for T in a.tokens:
        g = torch.Generator(device=dev).manual_seed(T)
        x = torch.randn(T, H, device=dev, generator=g).to(torch.bfloat16)
        idx = torch.rand(T, a.experts, generator=g, device=dev).topk(a.topk, dim=-1).indices.to(torch.int32).contiguous()
        w = torch.rand(T, a.topk, generator=g, device=dev).float().contiguous()
        ref = moe_w4a16(x, idx, w, ex, 2.827)
        tor = gpu_time(lambda: moe_w4a16(x, idx, w, ex, 2.827), a.torch_reps, flush, warm=1) if a.torch_reps else float('nan')
        cases.append((T, x, idx, w, ref, tor, MoEWorkspace(T, a.topk, a.experts, H, I, dev)))
        log(f"T={T}: torch face {tor:.0f} us")
    pdl = None if a.pdl == 'auto' else False
    for v in a.versions:          # versions outer: a crash in one version keeps the rows of the earlier ones
        for T, x, idx, w, ref, tor, ws in cases:
            out = torch.empty_like(x)
            run = lambda: moe_w4a16(x, idx, w, ex, 2.827, out=out, backend='cuda', ws=ws, check_values=False, version=v, pdl=pdl)
            with es:
                run(); torch.cuda.synchronize()
                kern = gpu_time(run, a.reps, flush)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=es.torch): run()
                gr = gpu_time(graph.replay, a.reps, flush)
                split = split_time(x, idx, w, ex, ws, out, v, a.reps, flush)
            hit = int(ws.n_hit[0])
            err = rel_err(out, ref)
            nbytes = hit * per_expert
            rows.append(dict(T=T, version=v, hit=hit, MB=nbytes / 1e6, kern_us=kern, graph_us=gr, TBps=nbytes / gr / 1e6,
                             pct=pct_of_ceiling(nbytes / 1e6, gr), split=split, torch_us=tor, err=err))
            log(f"T={T} v{v}: {rows[-1]}")
            dump()
    rows.sort(key=lambda r: (r['T'], r['version']))
    log(f"GPU: {gpu}; commit {a.commit}; flush {a.flush}; E={a.experts} top-{a.topk}, {H}->{I}->{H}, {per_expert / 1e6:.2f} MB per expert packed")
    log('| T | v | hit | MB | kern_us | graph_us | TB/s | % of 4.27 | group/gate_up/down/combine us | torch_us | rel err |')
    log('|---|---|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        log(f"| {r['T']} | {r['version']} | {r['hit']} | {r['MB']:.1f} | {r['kern_us']:.1f} | {r['graph_us']:.1f} | {r['TBps']:.2f} | "
            f"{r['pct']:.0f} | {' / '.join(f'{s:.1f}' for s in r['split'])} | {r['torch_us']:.0f} | {r['err']:.1e} |")
    dump()


if __name__ == '__main__':
    main()
