"""Run-ahead A/B and a launch census of the decode round on the GPU (the shipped demo pair, bf16, cuda faces, CUDA graph).

Not a test. For AR, DFlash and DDTree (`--budgets`, default 16 and 64) at T=0 and T=0.8: the same generations with `Decoder(run_ahead=False)`
(enqueue a round, wait for its record, emit, enqueue the next) and `run_ahead=True` (round k+1 enqueued before round
k's record is read). Reports decode tokens/s and wall ms per round from round 3 on (prefill, the eager round 1 and the
round-2 capture excluded: every generation captures its own graph), the host's own ms per round (wall less its waits for
the rounds' records: above the GPU ms, the host sets the pace), GPU ms per round (CUDA events, a separate run), and
checks that both give the same tokens and, at T=0, each method's tokens against AR's. Then, for every case, counts the
kernels one eager round launches (torch.profiler, CUPTI: PyCUDA kernels included) and sums their GPU µs, by stage and by
name. Writes run_ahead.json and run_ahead.md into --out, and each T = 0 output with the prompts' ids into t0_tokens.json
(`python benchmarks/soak_ties.py OUT/t0_tokens.json` judges where each differs from AR's in float32).

    python benchmarks/bench_run_ahead.py --out OUTDIR [--commit HASH] [--max-new 256] [--reps 3]
"""
import argparse, json, statistics, time, traceback
from pathlib import Path
import torch
from ddtree_nb.bench import first_difference, weights_note

CASES = [('ar', 0), ('dflash', 15), ('ddtree', 16), ('ddtree', 64)]
MERGE = None    # --merge on|off: Stages(merge=...); None: Stages' default (merged on the cuda faces)
FOLD = None    # --fold on|off: Stages(fold=...), the target's latent products folded into q_b_proj and o_proj; None: Stages' default (decode.fold_pays)


def decode(t, d, p, method, B, T, ahead, n_new, timed=None, seed=0, compile=False):
    "One generation with a manual round loop; (tokens, acceptance lengths, decode wall s, stage seconds or None, new tokens, rounds, the host's own seconds: wall less its waits for records)."
    from ddtree_nb.decode import Decoder, Stages, _EventClock
    g = torch.Generator(device='cuda').manual_seed(seed) if T > 0 else None
    dec = Decoder(t, d if method != 'ar' else None, p, method=method, budget=B, temperature=T, max_new_tokens=n_new,
                  backend='cuda', generator=g, stages=Stages(graph=True, compile=compile, merge=MERGE, fold=FOLD), run_ahead=ahead)
    dec.prefill(); dec.step(); dec.step()          # round 1 (eager, the prompt's features) and round 2 (captured) are not timed:
    n0, r0 = len(dec.tokens), len(dec.acceptance_lengths)   # each generation captures its own graph (tens of ms, noisy)
    if timed: dec.timed = _EventClock(dec.device)
    torch.cuda.synchronize(); t0, w0 = time.perf_counter(), dec.stages.host_wait_s
    while not dec.done: dec.step()
    torch.cuda.synchronize(); wall, wait = time.perf_counter() - t0, dec.stages.host_wait_s - w0
    stages = dec.timed.totals() if timed else None
    out = (list(dec.tokens), list(dec.acceptance_lengths), wall, stages, len(dec.tokens) - n0, len(dec.acceptance_lengths) - r0, wall - wait)
    dec.close()
    return out


def ab(t, d, prompts, n_new, reps, log, temps=(0.0, 0.8), compile=False):
    rows = []
    for T in temps:
        for method, B in CASES:
            r = dict(method=method, budget=B, temperature=T)
            for ahead in (False, True):
                toks, walls, busy, rounds, ntok = [], [], [], 0, 0
                for i, p in enumerate(prompts):
                    decode(t, d, p, method, B, T, ahead, n_new, seed=i, compile=compile)   # warm-up: workspaces, kernels
                    w = []
                    for _ in range(reps):
                        tk, lens, wall, _, nt, nr, hb = decode(t, d, p, method, B, T, ahead, n_new, seed=i, compile=compile)
                        w.append((wall, hb))
                    toks.append(tk); walls.append(statistics.median(x for x, _ in w)); busy.append(statistics.median(h for _, h in w))
                    rounds += nr; ntok += nt
                key = 'ahead' if ahead else 'plain'
                r[key] = dict(tokens_per_s=ntok / sum(walls), ms_per_round=1e3 * sum(walls) / rounds,
                              host_ms_per_round=1e3 * sum(busy) / rounds, rounds=rounds, mean_acceptance=ntok / rounds)
                r[key + '_tokens'] = toks
            plain = r.pop('plain_tokens'); r['same_tokens'] = plain == r.pop('ahead_tokens')
            if method == 'ar': ar = plain
            if T == 0:          # greedy: every method's output is the AR output (lossless), prompt by prompt
                r['tokens'] = plain     # for t0_tokens.json (not run_ahead.json): soak_ties.py judges each difference
                r['same_as_ar'] = sum(a == b for a, b in zip(plain, ar))
                r['first_difference'] = min((first_difference(a, b) for a, b in zip(plain, ar) if a != b), default=None)
            gpu, rounds = 0.0, 0      # CUDA events around each round (a graph replay: one span, so no stage split here; the census has it)
            for i, p in enumerate(prompts):
                _, _, _, st, _, nr, _ = decode(t, d, p, method, B, T, False, n_new, timed=True, seed=i, compile=compile)
                gpu += sum(v for k, v in st.items() if k != 'prefill'); rounds += nr
            r['gpu_ms_per_round'] = 1e3 * gpu / rounds
            r['speedup'] = r['ahead']['tokens_per_s'] / r['plain']['tokens_per_s']
            rows.append(r)
            log(f"T={T} {method:6s} B={B:3d}  plain {r['plain']['tokens_per_s']:8.1f} tok/s {r['plain']['ms_per_round']:.3f} ms/round | "
                f"ahead {r['ahead']['tokens_per_s']:8.1f} tok/s {r['ahead']['ms_per_round']:.3f} ms/round (host {r['ahead']['host_ms_per_round']:.3f}) | GPU {r['gpu_ms_per_round']:.3f} "
                f"ms/round | x{r['speedup']:.3f} same={r['same_tokens']} same_as_ar={r.get('same_as_ar', '-')} tau={r['plain']['mean_acceptance']:.2f}")
    return rows


def kernel_kind(name: str) -> str:
    "A kernel's family for the census: cuBLAS GEMM, inductor's triton, ours (PyCUDA), or torch's own (at::)."
    if name.startswith(('nvjet', 'sm90_xmma', 'cutlass', 'ampere_', 'sm80_')) or 'gemm' in name.lower(): return 'gemm'
    if name.startswith('triton_'): return 'triton_' + name.split('_')[1]     # per (one reduction a row), red, poi (pointwise)
    if 'at::native' in name or name.startswith('void at::'): return 'torch'
    return 'ours'


def census(t, d, p, method, B, log, compile=False):
    "Kernels launched by one eager round (round 3 of a generation; compiled as the graphs are, so the same kernels), counted and their GPU µs summed by stage, and counted by name."
    from torch.profiler import profile, ProfilerActivity, record_function
    from ddtree_nb.decode import Decoder, Stages
    dec = Decoder(t, d if method != 'ar' else None, p, method=method, budget=B, max_new_tokens=64, backend='cuda', stages=Stages(graph=False, compile=compile, merge=MERGE, fold=FOLD))
    dec.prefill(); dec.step(); dec.step(); torch.cuda.synchronize()
    def rf(stage, f, *a):
        with record_function('stage:' + stage): return f(*a)
    dec.timed = rf
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        dec.step(); torch.cuda.synchronize()
    dec.close()
    trace = Path(f'/tmp/census_{method}_{B}.json'); prof.export_chrome_trace(str(trace))
    evs = json.loads(trace.read_text())['traceEvents']
    spans = [(e['name'][6:], e['ts'], e['ts'] + e.get('dur', 0)) for e in evs if e.get('name', '').startswith('stage:') and e.get('cat') == 'user_annotation']
    launch = {e['args']['correlation']: e['ts'] for e in evs if e.get('cat') in ('cuda_runtime', 'cuda_driver') and 'correlation' in e.get('args', {})}
    kern = [e for e in evs if e.get('cat') == 'kernel']
    by_stage, us_by_stage, by_name, by_kind, gpu_us = {}, {}, {}, {}, 0.0
    for k in kern:      # a kernel belongs to the stage whose host span holds its launch call
        ts = launch.get(k.get('args', {}).get('correlation'))
        s = next((n for n, a, b in spans if ts is not None and a <= ts <= b), '?')
        us = k.get('dur', 0)
        by_stage[s] = by_stage.get(s, 0) + 1; us_by_stage[s] = us_by_stage.get(s, 0.0) + us
        nm = k['name'][:60]; by_name[nm] = by_name.get(nm, 0) + 1
        e = by_kind.setdefault(f'{s}:{kernel_kind(k["name"])}', [0, 0.0]); e[0] += 1; e[1] += us
        gpu_us += us
    res = dict(method=method, budget=B, kernels=len(kern), by_stage=by_stage, us_by_stage={k: round(v, 1) for k, v in us_by_stage.items()}, gpu_us=gpu_us,
               top=sorted(by_name.items(), key=lambda x: -x[1])[:25],
               by_kind={k: [n, round(v, 1)] for k, (n, v) in sorted(by_kind.items())})
    log(f"census {method} B={B}: {len(kern)} kernels, {gpu_us:.0f} us summed; by stage {by_stage}, us {res['us_by_stage']}")
    return res


def goals(rows) -> list:
    "Issue 17's figures from the run-ahead rows: each method's tokens/s over AR's at its temperature, that over its acceptance (the ratio), and over DFlash's."
    ref = {(r['temperature'], r['method']): r['ahead']['tokens_per_s'] for r in rows if r['method'] in ('ar', 'dflash')}
    out = []
    for r in rows:
        tps, tau, ar, df = r['ahead']['tokens_per_s'], r['plain']['mean_acceptance'], ref.get((r['temperature'], 'ar')), ref.get((r['temperature'], 'dflash'))
        over = tps / ar if ar else None
        out.append(dict(temperature=r['temperature'], method=r['method'], budget=r['budget'], tau=tau, over_ar=over,
                        ratio=None if over is None else over / tau, over_dflash=tps / df if df and r['method'] == 'ddtree' else None))
    return out


def markdown(res) -> str:
    m = res['meta']
    sa = lambda r: '-' if 'same_as_ar' not in r else f"{r['same_as_ar']}/{m['prompts']}" + (f" (first at token {r['first_difference']})" if r['first_difference'] is not None else '')
    lines = [f"# Run-ahead A/B and launch census ({m['date']}, {m['gpu']}, commit {m['commit']})", '',
             f"Command: `{m['command']}`; demo pair bf16, cuda faces, CUDA graph{', torch.compile' if m.get('compile') else ''}{' (one-token forwards autotuned)' if m.get('compile') is True or isinstance(m.get('compile'), dict) and {1, '1'} & set(m['compile']) else ''}{''.join(', ' + w for w in weights_note(m.get('merge'), m.get('fold')))}{', traced attention' if m.get('traced') else ''}{', folded q_latent read in place' if m.get('q_in_place') else ''}, {m['prompts']} prompts x {m['max_new']} new tokens, "
             f"median of {m['reps']} runs per prompt after a warm-up; rounds 3 onwards (graph replays) only: prefill, the eager round 1 "
             f"and the capture of round 2 excluded.", '',
             '| T | method | B | tau | plain tok/s | ahead tok/s | speed-up | plain ms/round | ahead ms/round | GPU ms/round | host ms/round (ahead) | same tokens | same as AR (T = 0) |',
             '|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for r in res['ab']:
        lines.append(f"| {r['temperature']} | {r['method']} | {r['budget']} | {r['plain']['mean_acceptance']:.2f} | {r['plain']['tokens_per_s']:.1f} | "
                     f"{r['ahead']['tokens_per_s']:.1f} | {r['speedup']:.3f} | {r['plain']['ms_per_round']:.3f} | {r['ahead']['ms_per_round']:.3f} | "
                     f"{r['gpu_ms_per_round']:.3f} | {r['ahead'].get('host_ms_per_round', float('nan')):.3f} | {r['same_tokens']} | {sa(r)} |")
    f = lambda x, k=3: '-' if x is None else f"{x:.{k}f}"
    lines += ['', "## Issue 17's figures (run ahead): tokens/s over AR's, the ratio (that over tau; goals 0.6 at T = 0, 0.5 at T = 1), over DFlash's (goal 1.25)", '',
              '| T | method | B | tau | over AR | ratio | over DFlash |', '|---|---|---|---|---|---|---|']
    lines += [f"| {g['temperature']} | {g['method']} | {g['budget']} | {g['tau']:.2f} | {f(g['over_ar'])} | {f(g['ratio'])} | {f(g['over_dflash'])} |" for g in goals(res['ab'])]
    lines += ['', "## Kernels per eager round (the graphs' kernels: each stage's count and summed GPU µs)", '']
    for c in res['census']:
        lines.append(f"- {c['method']} B={c['budget']}: {c['kernels']} kernels ({c['gpu_us']:.0f} µs summed); by stage {c['by_stage']}, µs {c.get('us_by_stage', {})}")
        lines.append('  - top names: ' + ', '.join(f"{n} x{k}" for n, k in c['top'][:12]))
        if c.get('by_kind'): lines.append('  - by stage and kind (count, µs): ' + ', '.join(f"{k} {n} / {v}" for k, (n, v) in c['by_kind'].items()))
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True); ap.add_argument('--commit', default='unknown')
    ap.add_argument('--max-new', type=int, default=256); ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--prompts', type=int, default=2)
    ap.add_argument('--compile', action='store_true', help="Stages(compile=True): the round's target layers and draft through torch.compile")
    ap.add_argument('--merge', choices=('on', 'off'), default=None, help="Stages(merge=True / False): the projections of one input as one GEMM each (default: Stages' own, on for cuda)")
    ap.add_argument('--autotune-ar', action=argparse.BooleanOptionalAction, default=None, help="with --compile: Stages(compile=model.AUTOTUNE_AR), the one-token forwards (the AR step) through inductor's max-autotune; --no-autotune-ar: Stages(compile={}); default: Stages(compile=True), which autotunes them")
    ap.add_argument('--autotune-tokens', default=None, help="with --compile: Stages(compile={T: AUTOTUNE_AR's options for each T listed}), e.g. 1,16,17,65: the verify forwards (T = budget + 1) through max-autotune too")
    ap.add_argument('--draft-fused', type=int, default=0, metavar='G', help="with --compile: the round's draft through kernels/dev/draft_fused.cu at G blocks (bench_draft_fused.route_drafts), not the compiled torch draft")
    ap.add_argument('--fold', choices=('on', 'off'), default=None, help="Stages(fold=True / False): the target's W_UK folded into q_b_proj and W_UV into o_proj (model.fold_projections; two GEMMs a layer fewer); default: Stages' own (on for DDTree and DFlash on the demo pair)")
    ap.add_argument('--q-in-place', action='store_true', help="model.FOLDED_Q_IN_PLACE: a folded layer hands q_latent to the verify kernel as a view of its GEMM's rows (verify.strided_rows), not a copy")
    ap.add_argument('--traced', action='store_true', help="target.trace_attention: compiled layers keep the verify kernel inside their graph (a custom op)")
    ap.add_argument('--temps', default='0,0.8', help='temperatures, comma-separated')
    ap.add_argument('--budgets', default='16,64', help="DDTree budgets, comma-separated (AR and DFlash always run; each budget B compiles a verify forward of B + 1 tokens)")
    a = ap.parse_args(argv)
    global MERGE, FOLD; MERGE, FOLD = {'on': True, 'off': False}.get(a.merge), {'on': True, 'off': False}.get(a.fold)
    if a.draft_fused and not a.compile: ap.error("--draft-fused needs --compile (it takes the compiled draft's place)")
    CASES[2:] = [('ddtree', int(b)) for b in a.budgets.split(',') if b.strip()] or ap.error('--budgets: at least one budget')
    if a.autotune_ar is not None:
        if not a.compile: ap.error('--autotune-ar / --no-autotune-ar need --compile')
        from ddtree_nb.model import AUTOTUNE_AR
        a.compile = AUTOTUNE_AR if a.autotune_ar else {}   # Stages(compile=...) takes the per-token-count options as its value
    if a.autotune_tokens:
        if not a.compile or a.autotune_ar is not None: ap.error('--autotune-tokens needs --compile, without --autotune-ar')
        from ddtree_nb.model import AUTOTUNE_AR
        a.compile = {int(x): AUTOTUNE_AR[1] for x in a.autotune_tokens.split(',')}
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    logf = open(out / 'run_ahead.log', 'w')
    def log(s): print(s, flush=True); logf.write(s + '\n'); logf.flush()
    from ddtree_nb.demo import load_demo_pair, held_out_prompts
    t, d, tok = load_demo_pair('cuda', torch.bfloat16)
    t.trace_attention = a.traced
    import ddtree_nb.model; ddtree_nb.model.FOLDED_Q_IN_PLACE = a.q_in_place
    if a.draft_fused: import bench_draft_fused; bench_draft_fused.route_drafts(d, a.draft_fused)
    prompts = held_out_prompts(tok, n=a.prompts, prompt_tokens=32)
    res = dict(meta=dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), commit=a.commit, torch=torch.__version__,
                         command='python benchmarks/bench_run_ahead.py ' + ' '.join(argv or __import__('sys').argv[1:]),
                         prompts=len(prompts), max_new=a.max_new, reps=a.reps, compile=a.compile, merge=MERGE, fold=FOLD, traced=a.traced, q_in_place=a.q_in_place,
                         draft_fused=a.draft_fused))
    res['ab'] = ab(t, d, prompts, a.max_new, a.reps, log, tuple(float(x) for x in a.temps.split(',')), a.compile)
    res['goals'] = goals(res['ab'])
    runs = [dict(method=r['method'], budget=r['budget'], temperature=0, prompt=i, tokens=tk)   # soak_ties.py's input format
            for r in res['ab'] for i, tk in enumerate(r.pop('tokens', ()))]
    if runs: (out / 't0_tokens.json').write_text(json.dumps(dict(config=dict(prompt_ids=prompts, command=res['meta']['command'], commit=a.commit), runs=runs)))
    res['census'] = []
    for m, B in CASES:          # every method and budget: where a round's GPU time goes, stage by stage
        try: res['census'].append(census(t, d, prompts[0], m, B, log, a.compile))
        except Exception: log(f"census {m} B={B} failed:\n{traceback.format_exc()}")
    (out / 'run_ahead.json').write_text(json.dumps(res, indent=1))
    (out / 'run_ahead.md').write_text(markdown(res))
    log(markdown(res))


if __name__ == '__main__':
    main()
