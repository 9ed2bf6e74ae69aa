"""Benchmark the tree-masked MLA verify attention kernels (nbs/03_verify): v2 (mma.sync, every GPU), the sm_90a
kernel (wgmma, H100/H200) and the best torch path, side by side.

Validates before it times, and never times a wrong kernel: first the correctness matrix against the fp64 reference
(v2: VERIFY_CASES; sm_90a: SM90_CASES with both PV issue widths, forced splits, a device-held prefix and the edge
cases, in a child process so a crash or a hang of the new kernel cannot take the rest of the run down), then each
benchmark shape is checked again on its own inputs, then timed with CUDA events around a CUDA graph of many
launches (no Python launch overhead in the numbers), rotating over enough cache copies (>= 256 MB) that each launch
reads its cache from HBM, not L2 (as in a real forward, where every layer has its own cache).

    python benchmarks/bench_verify.py --impl both --out DIR    # v2 and sm_90a side by side (~5 min on an H200)
    python benchmarks/bench_verify.py --out DIR [--quick]      # v2 only, as before (with v1 and the v2 sweeps)

Writes DIR/bench_verify.json and DIR/bench_verify.md after every shape (a run cut short keeps what it measured),
DIR/validate_sm90.json (the child's checks), DIR/ptxas_sm90.txt and, where cuobjdump exists, DIR/sass_sm90.txt.
"""
import argparse, json, math, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
import torch
from ddtree_nb.verify import (DC, DQK, H200_BW, H200_BF16, SM90_KERNELS, mla_tree_attention, vis_to_bits, verify_cost, verify_plan,
                              verify_workspace, sm90_fits)
from ddtree_nb.reliability import (SM90_CASES, SM90_BRUTE_CASES, VERIFY_CASES, brute_case, verify_error, first_mismatch,
                                   verify_selftest_case, tree_parents, edge_case_inputs, check_edge_case)
from ddtree_nb.reference import ancestor_mask, mla_tree_attention_ref
from ddtree_nb.runtime import engine_stream, device_arch, device_limits, find_nvcc, kernel_path

SHAPES = [  # (T, H, P, kind): the AR step and trees at H = 64, then H = 16 / 8 (a Kimi layer over 4 / 8 GPUs)
    (1, 64, 4096, 'chain'), (1, 64, 32768, 'chain'), (1, 64, 131072, 'chain'),
    (16, 64, 8192, 'tree'), (64, 64, 8192, 'tree'), (256, 64, 8192, 'tree'),
    (1, 16, 32768, 'chain'), (16, 16, 8192, 'tree'), (1, 8, 32768, 'chain'), (16, 8, 8192, 'tree')]

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

def rates(T, H, P, us):
    c = verify_cost(T, H, P)
    return dict(tbps=c['bytes'] / us / 1e6, pct_bw=100 * c['bytes'] / us / 1e-6 / H200_BW, tflops=c['flops'] / us / 1e6,
                pct_flop=100 * c['flops'] / us / 1e-6 / H200_BF16, floor_bw_us=c['us_bw'], floor_flop_us=c['us_flop'])

def bench_shape(T, H, P, kind, impls: dict, seed=0, with_torch=True, v1=False, calls_min=20):
    "Check each kernel variant in `impls` (name -> mla_tree_attention kwargs) on this shape's inputs against fp64, time the ones that pass."
    kvs, ql, qp, vis = make_inputs(T, H, P, kind, seed)
    nbuf = len(kvs)
    bits, scale = vis_to_bits(vis), DQK ** -0.5 * 2.0
    out = torch.empty(T, H, DC, dtype=torch.bfloat16, device='cuda')
    lse = torch.empty(T, H, dtype=torch.float32, device='cuda')
    ro, rl = mla_tree_attention_ref(ql.double(), qp.double(), kvs[0][:, :DC].double(), kvs[0][:, DC:].double(), P, vis, scale)
    seq = [kvs[i % nbuf] for i in range(max(calls_min, nbuf))]
    res = dict(T=T, H=H, P=P, kind=kind, n_caches=nbuf, impls={})
    for name, kw in impls.items():
        plan = verify_plan(T, H, P, **{k: v for k, v in kw.items() if k in ('config', 'splits', 'impl', 'pv_n', 'cluster')})
        ws = verify_workspace(T, H, plan['parts'], 'cuda') if plan['parts'] > 1 else None
        out.fill_(float('nan')); lse.fill_(float('nan'))
        mla_tree_attention(ql, qp, kvs[0], P, bits, scale, out=out, lse=lse, workspace=ws, **kw)
        torch.cuda.synchronize()
        rel, dl = verify_error(out, lse, ro, rl)
        r = dict(kw={k: str(v) for k, v in kw.items()}, plan={k: plan[k] for k in ('kernel', 'splits', 'cluster', 'parts', 'grid', 'smem')}, rel_err=rel, lse_err=dl)
        if not (rel <= 1e-2 and dl <= 1e-2):
            r.update(ok=False, first_bad=first_mismatch(out, ro) or first_mismatch(lse, rl), note='wrong on this shape: not timed')
        else:
            us, mode = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, workspace=ws, **kw) for kv in seq])
            r.update(ok=True, us=us, timing=mode, **rates(T, H, P, us))
        res['impls'][name] = r
        print(f"  {name:10s} {r['plan']['kernel']:24s} x{plan['splits']:<4d} " + (f"{r['us']:9.1f} us  {r['pct_bw']:5.1f}% bw  {r['pct_flop']:5.1f}% flop" if r['ok'] else f"WRONG rel={rel:.2e} first_bad={r['first_bad']}") + f"  rel={rel:.1e}", flush=True)
    if with_torch:
        to, tl = torch_path(ql, qp, kvs[0], P, vis, scale)
        res['torch_rel_err'] = verify_error(to, tl, ro, rl)[0]
        del to, tl
        res['us_torch'], _ = gpu_time_us([lambda kv=kv: torch_path(ql, qp, kv, P, vis, scale) for kv in seq])
    if v1: res['us_v1'], _ = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, version=1) for kv in seq[:nbuf]], reps=3)
    del kvs, ro, rl
    torch.cuda.empty_cache()
    return res

# ------------------------------------------------------------------------------------------ sm_90a validation (child)
def validate_sm90(out: Path) -> dict:
    "Every sm_90a check, per PV width: SM90_CASES, forced splits, device prefix, mask words, edge cases. Writes validate_sm90.json."
    t0, res = time.time(), dict(arch=device_arch(), by_pv_n={}, failures=[])
    for n in SM90_KERNELS:
        fails, count = [], 0
        cases = [(c, dict(seed=400 + i)) for i, c in enumerate(SM90_CASES)]
        for i, c in enumerate([(1, 64, 32768, 'chain'), (16, 64, 4096, 'tree'), (64, 8, 32768, 'tree'), (2, 16, 100, 'star')]):
            cases += [(c, dict(seed=500 + i, splits=s)) for s in (1, 7, 300)]
            cases += [(c, dict(seed=600 + i, device_prefix=True)), (c, dict(seed=700 + i, uint32=True, words=40))]
        for c, kw in cases:
            r = verify_selftest_case(*c, impl='sm90', pv_n=n, **kw)
            count += 1
            line = f"sm90 pv_n={n:3d} T={r['T']:5d} H={r['H']:3d} P={r['P']:6d} {r['kind']:6s} {kw} rel={r['rel']:.2e} dlse={r['lse']:.2e} " + ('ok' if r['ok'] else f"FAIL first_bad={r['first_bad']}")
            print(line, flush=True)
            if not r['ok']: fails.append(line)
            if c == SM90_CASES[0] and 'splits' not in kw:   # one key: out = its c_kv row (PV alone), lse = its score (QK alone)
                print(f"  one-key case: PV path {'ok' if r['rel'] <= 1e-2 else 'WRONG'} (out rel {r['rel']:.1e}), "
                      f"QK path {'ok' if r['lse'] <= 1e-2 else 'WRONG'} (lse err {r['lse']:.1e})", flush=True)
        for i, c in enumerate(SM90_BRUTE_CASES):
            count += 1
            try: brute_case(*c, seed=800 + i, impl='sm90', pv_n=n)
            except AssertionError as x:
                fails.append(f"sm90 pv_n={n} brute {c}: {x}"); print(fails[-1], flush=True)
        edges = [dict(nan_slots=(2,)), dict(P=0, dead_rows=(1, 4)), dict(P=0, dead_rows=(5,), nan_slots=(1, 4)), dict(P=200, nan_slots=(3, 5)),
                 dict(P=0, dead_rows=tuple(range(6))), dict(P=70, T=40, parents=tuple(range(-1, 39)), nan_slots=(30,))]
        for i, e in enumerate(edges):
            a = edge_case_inputs(**e, H=16, device='cuda', seed=i)
            for s in (1, 7, 300):
                o = torch.full_like(a['q_latent'], float('nan')); l = torch.full(a['q_latent'].shape[:2], float('nan'), device='cuda')
                mla_tree_attention(**a, out=o, lse=l, impl='sm90', pv_n=n, splits=s)
                torch.cuda.synchronize()
                count += 1
                try: check_edge_case(a, o, l, nan_slots=e.get('nan_slots', ()))
                except AssertionError as x:
                    fails.append(f"sm90 pv_n={n} edge {e} splits={s}: {x}"); print(fails[-1], flush=True)
        res['by_pv_n'][n] = dict(ok=not fails, checks=count, failed=len(fails))
        res['failures'] += fails
        print(f"sm90 pv_n={n}: {count - len(fails)}/{count} checks ok", flush=True)
    res['seconds'] = time.time() - t0
    (out / 'validate_sm90.json').write_text(json.dumps(res, indent=1, default=str))
    return res

def run_child_validation(out: Path, timeout: int) -> dict:
    "Run validate_sm90 in a child process (a crash, an illegal instruction or a hang there leaves this process's CUDA context alive)."
    cmd = [sys.executable, __file__, '--validate-sm90', '--out', str(out)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        (out / 'validate_sm90.log').write_text(p.stdout + p.stderr)
        print(p.stdout[-6000:] + p.stderr[-3000:], flush=True)
        if p.returncode != 0: return dict(by_pv_n={}, error=f"child exited {p.returncode} after {time.time() - t0:.0f} s: {p.stderr.strip()[-1500:]}")
    except subprocess.TimeoutExpired as e:
        (out / 'validate_sm90.log').write_text((e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or ''))
        return dict(by_pv_n={}, error=f"child timed out after {timeout} s (a hang in the sm_90a kernel?)")
    return json.loads((out / 'validate_sm90.json').read_text())

def kernel_report(out: Path):
    "ptxas -v of the sm_90a file and, where cuobjdump exists, its SASS with the HGMMA count per kernel (the wgmma path must show HGMMA)."
    nvcc = find_nvcc()
    if nvcc is None: print("no nvcc: no ptxas report"); return
    src = kernel_path('verify_attn_sm90.cu')
    with tempfile.TemporaryDirectory() as td:
        cub = Path(td) / 'v.cubin'
        p = subprocess.run([nvcc, '-cubin', '-gencode=arch=compute_90a,code=sm_90a', '-std=c++17', '-O3', '--use_fast_math', '-lineinfo',
                            '-Xptxas', '-v', '-I', str(src.parent), '-o', str(cub), str(src)], capture_output=True, text=True)
        (out / 'ptxas_sm90.txt').write_text(p.stdout + p.stderr)
        print('\n'.join(l for l in (p.stdout + p.stderr).splitlines() if 'registers' in l or 'spill' in l or 'error' in l or 'warning' in l), flush=True)
        cuobj = shutil.which('cuobjdump')
        if cuobj and cub.is_file():
            s = subprocess.run([cuobj, '--dump-sass', str(cub)], capture_output=True, text=True).stdout
            (out / 'sass_sm90.txt').write_text(s)
            fn, counts = None, {}
            for line in s.splitlines():
                if 'Function :' in line: fn = line.split(':')[-1].strip(); counts[fn] = {'HGMMA': 0, 'HMMA': 0}
                elif fn:
                    for op in counts[fn]:
                        if f' {op}.' in line: counts[fn][op] += 1
            print(f"SASS instruction counts: {counts}", flush=True)

# ------------------------------------------------------------------------------------------ report
def write_report(out: Path, res: dict):
    (out / 'bench_verify.json').write_text(json.dumps(res, indent=1, default=str))
    names = [n for n in ('v2', 'sm90_n256', 'sm90_n64') if any(n in r['impls'] for r in res['bench'])]
    lines = ['| shape | ' + ' | '.join(f'{n} µs (% of 4.27 TB/s, % of 799 TFLOP/s)' for n in names) + ' | floor bw / flop µs | sm90 vs v2 | torch µs | rel err |',
             '|---|' + '---|' * len(names) + '---|---|---|---|']
    for r in res['bench']:
        cells, best = [], None
        for n in names:
            x = r['impls'].get(n)
            if x is None: cells.append('')
            elif not x['ok']: cells.append(f"WRONG (rel {x['rel_err']:.1e})")
            else: cells.append(f"{x['us']:.1f} ({x['pct_bw']:.0f}%, {x['pct_flop']:.0f}%) {x['plan']['kernel'].replace('verify_attn_', '')} x{x['plan']['splits']}")
        v2 = r['impls'].get('v2', {})
        s9 = [r['impls'][n] for n in ('sm90_n256', 'sm90_n64') if n in r['impls'] and r['impls'][n]['ok']]
        sp = f"{v2['us'] / min(x['us'] for x in s9):.2f}x" if s9 and v2.get('ok') else ''
        c = verify_cost(r['T'], r['H'], r['P'])
        errs = ' / '.join(f"{r['impls'][n]['rel_err']:.1e}" for n in names if n in r['impls'])
        lines.append(f"| T={r['T']} H={r['H']} P={r['P']} {r['kind']} | " + ' | '.join(cells) +
                     f" | {c['us_bw']:.1f} / {c['us_flop']:.1f} | {sp} | {r.get('us_torch', float('nan')):.1f} | {errs} |")
    if res.get('extra'):
        lines += ['', '| sweep | plan | µs | % of 4.27 TB/s | % of 799 TFLOP/s | rel err |', '|---|---|---|---|---|---|']
        for r in res['extra']:
            for n, x in r['impls'].items():
                lines.append(f"| T={r['T']} H={r['H']} P={r['P']} {x['kw']} | {x['plan']['kernel']} x{x['plan']['splits']} | " +
                             (f"{x['us']:.1f} | {x['pct_bw']:.0f}% | {x['pct_flop']:.0f}% | {x['rel_err']:.1e} |" if x['ok'] else f"WRONG | | | {x['rel_err']:.1e} |"))
    (out / 'bench_verify.md').write_text('\n'.join(lines) + '\n')
    return lines

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='.')
    ap.add_argument('--impl', choices=('v2', 'sm90', 'both'), default='v2')
    ap.add_argument('--quick', action='store_true', help='the first two shapes only, no sweeps')
    ap.add_argument('--budget', type=float, default=540, help='seconds: shapes not started by then are skipped (results so far are kept)')
    ap.add_argument('--validate-sm90', action='store_true', help=argparse.SUPPRESS)   # the child process of the sm_90a checks
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    if a.validate_sm90: validate_sm90(out); return
    t_start = time.time()
    dev = torch.cuda.get_device_properties(0)
    print(f"GPU: {dev.name}, {dev.multi_processor_count} SMs, {device_arch()}, torch {torch.__version__}", flush=True)
    try: commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    except Exception: commit = ''
    dc = Path(__file__).resolve().parent.parent / '.device' / 'commit'   # the GPU machine gets no .git
    commit = commit or (dc.read_text().strip() if dc.is_file() else '?')
    res = dict(gpu=dev.name, sms=dev.multi_processor_count, torch=torch.__version__, commit=commit, date=time.strftime('%Y-%m-%d'),
               command=' '.join(sys.argv), checks=[], validate_sm90=None, bench=[], extra=[])
    impls = {}
    if a.impl in ('v2', 'both'):
        t0 = time.time()
        res['checks'] = [verify_selftest_case(*c, seed=i, impl='v2') for i, c in enumerate(VERIFY_CASES)]
        for r in res['checks']: print(f"v2 check T={r['T']:5d} H={r['H']:3d} P={r['P']:6d} {r['kind']:6s} rel={r['rel']:.2e} dlse={r['lse']:.2e} {'ok' if r['ok'] else 'FAIL ' + str(r['first_bad'])}", flush=True)
        n_ok = sum(r['ok'] for r in res['checks'])
        print(f"v2 checks: {n_ok}/{len(res['checks'])} ok ({time.time() - t0:.0f} s)", flush=True)
        if n_ok == len(res['checks']): impls['v2'] = dict(impl='v2')   # explicit: the default ('auto') is the sm_90a kernel on an H200
        else: print("v2 is wrong on the matrix: not timed", flush=True)
    if a.impl in ('sm90', 'both'):
        if not sm90_fits(device_arch(), device_limits(torch.cuda.current_device())['smem_block']):
            print(f"sm_90a kernel skipped: this GPU is {device_arch()}", flush=True)
        else:
            kernel_report(out)
            v = res['validate_sm90'] = run_child_validation(out, timeout=240)
            if v.get('error'): print(f"sm_90a validation did not finish: {v['error']}", flush=True)
            for n, r in v.get('by_pv_n', {}).items():
                if r['ok']: impls[f'sm90_n{n}'] = dict(impl='sm90', pv_n=int(n))
                else: print(f"sm_90a pv_n={n}: {r['failed']} of {r['checks']} checks failed: not timed (validate_sm90.json has each)", flush=True)
    print(f"timing: {sorted(impls)}", flush=True)
    shapes = SHAPES[:2] if a.quick else SHAPES if a.impl != 'v2' else SHAPES[:6]
    for T, H, P, kind in shapes:
        if time.time() - t_start > a.budget: print(f"budget of {a.budget:.0f} s spent: T={T} H={H} P={P} and later shapes skipped", flush=True); break
        print(f"T={T} H={H} P={P} {kind}", flush=True)
        res['bench'].append(bench_shape(T, H, P, kind, impls, v1=(a.impl == 'v2' and T * (P + T) <= 16 * 8300)))
        write_report(out, res)
    if not a.quick:
        sweeps = []
        if 'v2' in impls and a.impl == 'v2':
            sweeps += [(1, 64, 32768, 'chain', {f'v2_s{s}': dict(splits=s)}) for s in (33, 65, 257)]
            sweeps += [(256, 64, 8192, 'tree', {f'v2_{c}': dict(config=c)}) for c in ((64, 32, 2), (32, 32, 1))]
        s9 = next((k for k in ('sm90_n256', 'sm90_n64') if k in impls), None)
        if s9:
            sweeps += [(1, 64, 32768, 'chain', {f'{s9}_s{s}': dict(impls[s9], splits=s) for s in (33, 65, 257)}),
                       (64, 64, 8192, 'tree', {f'{s9}_s{s}': dict(impls[s9], splits=s) for s in (1, 4)})]
        for T, H, P, kind, kws in sweeps:
            if time.time() - t_start > a.budget: print("budget spent: sweeps cut short", flush=True); break
            print(f"sweep T={T} H={H} P={P} {kind}", flush=True)
            res['extra'].append(bench_shape(T, H, P, kind, kws, seed=1, with_torch=False))
            write_report(out, res)
    lines = write_report(out, res)
    print('\n'.join(lines))
    print(f"total {time.time() - t_start:.0f} s", flush=True)

if __name__ == '__main__': main()
