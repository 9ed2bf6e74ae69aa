"""Losslessness sweep (issue 12): greedy DDTree and DFlash give exactly AR's tokens on the demo pair.

For N held-out prompts of the demo pair's corpus (`ddtree_nb.demo.held_out_prompts`), every budget and both
speculative methods, `generate(..., temperature=0)` must return AR's tokens. Backends: 'torch' (the decode round with the
kernels' torch faces, `Stages('torch')`, on any device) and, on a GPU with pycuda, 'cuda' (the kernels; CUDA-graph
replay at T=0). 'cuda-faces' is the old name of 'torch' (until the one round, a second, eager round was 'torch').
Writes OUT.json and OUT.md; exits 1 on any mismatch.

  python benchmarks/lossless_sweep.py --prompts 50 --budgets 1,8,64,256 --backends torch --out benchmarks/lossless_sweep
"""
from __future__ import annotations
import argparse, datetime, json, sys, time
from pathlib import Path
import torch

def _csv(t): return lambda s: [t(x) for x in s.split(',') if x.strip()]

def stages_for(backend: str):
    "(backend argument, stages object) of `generate` for a sweep backend name."
    if backend in ('torch', 'cuda-faces'): return 'torch', None
    if backend == 'cuda': return 'cuda', None
    raise ValueError(f"backend must be torch, cuda-faces or cuda, got {backend!r}")

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--prompts', type=int, default=50)
    ap.add_argument('--prompt-tokens', type=int, default=32)
    ap.add_argument('--max-new-tokens', type=int, default=32)
    ap.add_argument('--budgets', type=_csv(int), default=[1, 8, 64, 256])
    ap.add_argument('--methods', type=_csv(str), default=['ddtree', 'dflash'])
    ap.add_argument('--backends', type=_csv(str), default=['torch'])
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--commit', default=None)
    ap.add_argument('--out', default='lossless_sweep')
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    from ddtree_nb.demo import load_demo_pair, held_out_prompts
    from ddtree_nb.decode import generate
    from ddtree_nb.bench import git_commit, device_name
    dtype = torch.float32 if a.device == 'cpu' else torch.bfloat16
    target, drafter, tok = load_demo_pair(a.device, dtype)
    prompts = held_out_prompts(tok, n=a.prompts, prompt_tokens=a.prompt_tokens)
    t0, rows, mismatches = time.time(), [], []
    for i, p in enumerate(prompts):
        ar = generate(target, None, p, method='ar', max_new_tokens=a.max_new_tokens, backend='torch').tokens
        for be in a.backends:
            for m in a.methods:
                for B in a.budgets:
                    backend, stages = stages_for(be)
                    g = generate(target, drafter, p, method=m, budget=B, max_new_tokens=a.max_new_tokens, backend=backend, stages=stages)
                    ok = g.tokens == ar
                    rows.append(dict(prompt=i, backend=be, method=m, budget=B, ok=ok, mean_acceptance=g.mean_acceptance))
                    if not ok: mismatches.append(dict(prompt=i, backend=be, method=m, budget=B, got=g.tokens, want=ar))
        print(f"prompt {i + 1}/{len(prompts)}: {len(rows)} runs, {len(mismatches)} mismatches, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'), device=device_name(target.embed_tokens.weight.device),
                dtype=str(dtype), commit=a.commit or git_commit(), torch=torch.__version__,
                command='python benchmarks/lossless_sweep.py ' + ' '.join(argv if argv is not None else sys.argv[1:]),
                prompts=len(prompts), prompt_tokens=a.prompt_tokens, max_new_tokens=a.max_new_tokens, seconds=round(time.time() - t0, 1))
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix('.json').write_text(json.dumps(dict(meta=meta, rows=rows, mismatches=mismatches), indent=1))
    md = ['## Losslessness sweep (greedy: speculative output == AR output)', '', *(f"- {k}: {v}" for k, v in meta.items()), '',
          '| backend | method | budget | runs | identical to AR | mean acceptance length |', '|---|---|---|---|---|---|']
    for be in a.backends:
        for m in a.methods:
            for B in a.budgets:
                rs = [r for r in rows if (r['backend'], r['method'], r['budget']) == (be, m, B)]
                md.append(f"| {be} | {m} | {B} | {len(rs)} | {sum(r['ok'] for r in rs)} | {sum(r['mean_acceptance'] for r in rs) / len(rs):.2f} |")
    md += ['', f"**{len(rows) - len(mismatches)} of {len(rows)} runs identical to AR; {len(mismatches)} mismatches.**"]
    out.with_suffix('.md').write_text('\n'.join(md) + '\n')
    print('\n'.join(md))
    return 1 if mismatches else 0

if __name__ == '__main__': sys.exit(main())
