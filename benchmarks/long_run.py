"""The long runs of issue 21 on a GPU: GPU memory flat after warm-up over thousands of rounds (GPU only).

  1. nbs/08's long-run pair (a tiny random bf16 target and a random one-layer drafter), DDTree B=64, --tokens new tokens
     in one `generate` call, at T=0 and at T=1;
  2. a Kimi K2.6-width slice (`bench_kimi_slice.build_on_device`: hidden 7168, MLA 512 + 64, 384 routed experts top-8
     INT4-packed on the W4A16 kernel, vocab 163840; --kimi-layers layers) with a random one-layer drafter of the same
     width, --kimi-tokens new tokens at T=0 and T=1.

Each run goes through `ddtree_nb.reliability.long_run`: `torch.cuda.memory_allocated()` sampled once per round; growth =
largest sample after 3 warm-up rounds minus the first of them; peak against the first warm rounds' peak; the target
cache allocated once. Random drafters accept little, so a run is thousands of rounds. Writes OUT.md and OUT.json;
exits 1 when any run's memory grew by more than 1 MiB.

Run (one H200): python benchmarks/long_run.py --out "$OUT/long_run" --commit "$(cat .device/commit)"
"""
from __future__ import annotations
import argparse, json, sys, datetime
from pathlib import Path
import torch

def _row(name: str, T: float, r: dict) -> dict:
    g = r['gen']
    return dict(run=name, temperature=T, tokens=len(g.tokens), rounds=len(g.acceptance_lengths), mean_acceptance=round(g.mean_acceptance, 3),
                seconds=round(r['seconds'], 1), tokens_per_s=round(len(g.tokens) / r['seconds'], 1), growth_bytes=r['growth'],
                peak_mib=round(r['peak'] / 2**20, 1), first_peak_mib=round(r['first_peak'] / 2**20, 1),
                cache_rows=r['cache_rows'], new_caches=r['new_caches'])

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--tokens', type=int, default=20_000)
    ap.add_argument('--kimi-tokens', type=int, default=4000)
    ap.add_argument('--kimi-layers', type=int, default=3, help='1 dense + (k-1) MoE layers at Kimi widths')
    ap.add_argument('--budget', type=int, default=64)
    ap.add_argument('--commit', default='unknown')
    ap.add_argument('--out', default='benchmarks/long_run')
    a = ap.parse_args(argv)
    if not torch.cuda.is_available(): sys.exit("long_run: needs a CUDA GPU")
    from ddtree_nb.reliability import long_run, long_run_pair
    from ddtree_nb.model import tiny_config, kimi_config
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_kimi_slice import build_on_device
    rows = []
    tc = tiny_config(max_position_embeddings=a.tokens + 4096, rope_scaling=None)
    pairs = [('tiny bf16 (nbs/08)', a.tokens, lambda: long_run_pair(tc))]
    kc = kimi_config(num_hidden_layers=a.kimi_layers)
    pairs.append((f'Kimi-width slice, {a.kimi_layers} layers, INT4 experts', a.kimi_tokens,
                   lambda: long_run_pair(kc, target=build_on_device(kc, seed=0), drafter_intermediate=2048)))
    for name, n, make in pairs:
        tgt, dr = make()
        for T in (0.0, 1.0):
            r = long_run(tgt, dr, n, budget=a.budget, temperature=T)
            rows.append(_row(name, T, r)); print(json.dumps(rows[-1]), flush=True)
        del tgt, dr; torch.cuda.empty_cache()
    head = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%MZ'), gpu=torch.cuda.get_device_name(),
                torch=torch.__version__, commit=a.commit, command=' '.join(['python benchmarks/long_run.py'] + (argv or sys.argv[1:])))
    out = Path(a.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix('.json').write_text(json.dumps(dict(**head, rows=rows), indent=1))
    cols = list(rows[0])
    md = [f"- {k}: {v}" for k, v in head.items()] + ['', '| ' + ' | '.join(cols) + ' |', '|' + '---|' * len(cols)]
    md += ['| ' + ' | '.join(str(r[c]) for c in cols) + ' |' for r in rows]
    out.with_suffix('.md').write_text('\n'.join(md) + '\n'); print('\n'.join(md))
    sys.exit(1 if any(r['growth_bytes'] > 1 << 20 for r in rows) else 0)

if __name__ == '__main__': main()
