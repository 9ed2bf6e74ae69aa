"""Issue 23: a per-round tree budget priced in verify cost, replayed on recorded rounds (CPU; the costs are GPU measurements).

    python benchmarks/bench_auto_budget.py [--n-prompts 8] [--max-new-tokens 128] [--b-max 256] [--out benchmarks/auto_budget]

1. Records greedy DDTree rounds of the shipped demo pair (float32, torch backend, held-out prompts) at the largest size
   `--b-max`: each round's tree scores and, at every node, the target's token (`ddtree_nb.budget.emitted_by_size` turns
   them into the tokens the round emits with its first b nodes; a check: at b-max that is the round's real acceptance).
2. Prices every size with captured-round costs measured on the H200 (both recorded in benchmarks/):
   - the Kimi-width slice (`kimi_slice.json`: CUDA-graph verify of T = b + 1 tokens, 12 layers scaled to 61, contexts
     4k and 32k, INT4 experts, random routers), verify only: drafting, the tree and accept are not in it;
   - the demo pair itself (`bench_compile.md`, 2026-12-04: compiled, graph-replayed DDTree rounds, ms per round).
3. Tokens per second of the recorded rounds at every fixed size; with the per-round pick alone (`auto_pick`: the
   candidate with the most expected tokens per second, from the drafter's scores, plain and scaled by the drafter's
   realised/promised ratio over the run); with the shipped policy (`AutoBudget`, the rounds in order: what `budget='auto'`
   runs); and with the per-round best size in hindsight (an upper bound).
Writes OUT.md and OUT.json.
"""
import argparse, datetime, json, subprocess, sys, time
from pathlib import Path
import torch

HERE = Path(__file__).resolve().parent
FIXED = [4, 8, 16, 32, 64, 128, 256]                       # issue 23's fixed budgets
DEMO_SIZES, DEMO_MS = [4, 16, 64, 256, 1024], [0.8651, 1.0005, 1.0102, 1.2338, 1.8813]   # bench_compile.md (2026-12-04)

def demo_rounds(pair, n_prompts: int, max_new: int, b: int):
    "Every round of greedy DDTree runs of the demo pair `(target, drafter, tokenizer)` at size b over the held-out prompts."
    from ddtree_nb.demo import held_out_prompts
    from ddtree_nb.decode import Decoder
    tgt, dr, tok = pair
    with torch.inference_mode():
        for i, p in enumerate(held_out_prompts(tok, n=n_prompts)):
            dec = Decoder(tgt, dr, p, budget=b, max_new_tokens=max_new, backend='torch')
            dec.prefill()
            while not dec.done: yield dec.step()
            dec.close()
            print(f"B={b}: prompt {i + 1}/{n_prompts} done", file=sys.stderr, flush=True)

def record(pair, n_prompts: int, max_new: int, b_max: int, sizes):
    "Rounds at size b_max, each as (expected tokens per size, {size: tokens emitted}, accepted path); and the drafter's realised/promised drafts."
    from ddtree_nb.budget import expected_tokens, accepted_path, realised_by_size
    rounds, prom, real = [], 0.0, 0.0
    for r in demo_rounds(pair, n_prompts, max_new, b_max):
        t = r.tree.to_draft_tree()
        E = expected_tokens(t.scores)
        path = accepted_path(t.parents, t.tokens, r.logits[:t.n + 1].argmax(-1))
        *em, full = realised_by_size(path, sizes + [t.n])
        assert full == len(r.path), f"replay at the recorded size {full} != the round's acceptance {len(r.path)}"
        rounds.append((E, dict(zip(sizes, em)), path)); prom += float(E[-1]) - 1; real += len(r.path) - 1
    return rounds, real / prom

def live_acceptance(pair, n_prompts: int, max_new: int, b: int) -> float:
    "Mean tokens per round of a real greedy run at size b (its own contexts), to check the replay against."
    lens = [len(r.path) for r in demo_rounds(pair, n_prompts, max_new, b)]
    return sum(lens) / len(lens)

def kimi_costs(path: Path):
    "{context: RoundCost over nodes b = T - 1} from the slice's graph-replayed verify, scaled to 61 layers."
    from ddtree_nb.budget import RoundCost
    js = json.loads(path.read_text())
    out = {}
    for ctx in sorted({r['ctx'] for r in js['rows']}):
        rows = sorted((r for r in js['rows'] if r['ctx'] == ctx), key=lambda r: r['tree_size'])
        out[f'Kimi 61 layers, ctx {ctx}'] = RoundCost([r['tree_size'] - 1 for r in rows], [r['est_61_layers_verify_ms'] / 1e3 for r in rows])
    return out

WAIT_S = 28e-6   # the host wait of a per-round choice measured on the H200 (auto_cost_check.py, demo pair): priced into the policy

def policy_rate(rounds, cost, cands, wait_s: float=WAIT_S):
    """Tokens per second of the rounds in order under the shipped policy (`AutoBudget`: per-round choice or a fixed size, each
    size's promise scaled by what earlier rounds realised, one size up every 16 rounds), a per-round choice paying `wait_s`; the sizes taken."""
    from ddtree_nb.budget import AutoBudget
    pol, toks, secs, taken = AutoBudget(cost, cands, wait_s), 0.0, 0.0, []
    for E, em, path in rounds:
        e = [float(E[min(b, len(E) - 1)]) for b in cands]
        b = pol.plan()
        chose = b is None
        if chose: b = pol.pick(e)
        toks, secs = toks + em[b], secs + cost(b) + (wait_s if chose else 0.0)
        pol.observe(e, path, b); taken.append(b)
    return toks / secs, taken

def table(rounds, cost, cands, scale):
    "Rates at every fixed candidate, auto (the per-round pick alone, plain and scaled; the shipped policy) and the hindsight best; the sizes taken."
    from ddtree_nb.budget import replay_rate, auto_pick
    pairs = [(E, em) for E, em, _ in rounds]
    fixed = {b: replay_rate(pairs, cost, lambda E, b=b: b)[0] for b in cands}
    auto, taken = replay_rate(pairs, cost, auto_pick(cost, cands))
    auto_s, taken_s = replay_rate(pairs, cost, auto_pick(cost, cands, scale))
    shipped, taken_p = policy_rate(rounds, cost, cands)
    pick = [max(cands, key=lambda b: em[b] / cost(b)) for _, em in pairs]    # each round's best size in hindsight
    best = sum(em[b] for (_, em), b in zip(pairs, pick)) / sum(cost(b) for b in pick)
    return dict(fixed=fixed, auto=auto, auto_scaled=auto_s, policy=shipped, hindsight=best,
                taken={b: taken.count(b) for b in cands}, taken_scaled={b: taken_s.count(b) for b in cands},
                taken_policy={b: taken_p.count(b) for b in cands})

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n-prompts', type=int, default=8)
    ap.add_argument('--max-new-tokens', type=int, default=128)
    ap.add_argument('--b-max', type=int, default=1024)
    ap.add_argument('--kimi', default=str(HERE / 'kimi_slice.json'))
    ap.add_argument('--out', default=str(HERE / 'auto_budget'))
    ap.add_argument('--check', type=lambda s: [int(x) for x in s.split(',') if x], default=[4, 16, 64],
                    help='sizes also run live (their own contexts) to check the replayed tokens per round; empty: skip')
    a = ap.parse_args()
    from ddtree_nb.budget import RoundCost
    t0 = time.time()
    sizes = sorted(set(FIXED + DEMO_SIZES) | {a.b_max})
    sizes = [b for b in sizes if b <= a.b_max]
    from ddtree_nb.demo import load_demo_pair
    pair = load_demo_pair('cpu', torch.float32)
    rounds, ratio = record(pair, a.n_prompts, a.max_new_tokens, a.b_max, sizes)
    costs = {**kimi_costs(Path(a.kimi)), 'demo pair, H200 compiled rounds': RoundCost(DEMO_SIZES, [m / 1e3 for m in DEMO_MS])}
    res = {}
    for name, cost in costs.items():
        cands = [b for b in (DEMO_SIZES if name.startswith('demo') else FIXED) if b <= a.b_max]
        res[name] = table(rounds, cost, cands, ratio)
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=HERE).stdout.strip()
    lines = [f"# budget='auto' replayed on recorded demo-pair rounds (issue 23)", "",
             f"- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, commit {commit}, torch {torch.__version__}, CPU recording "
             f"({time.time() - t0:.0f} s)",
             f"- command: `python benchmarks/bench_auto_budget.py --n-prompts {a.n_prompts} --max-new-tokens {a.max_new_tokens} --b-max {a.b_max}`",
             f"- rounds: {len(rounds)} greedy DDTree rounds at B = {a.b_max} (demo pair, float32, {a.n_prompts} held-out prompts x "
             f"{a.max_new_tokens} new tokens); the drafter realised {ratio:.3f} of the drafts its trees promised (`auto, scaled` uses it)",
             "- costs: Kimi rows = graph-replayed verify only (kimi_slice.json, 12 layers x 61/12; no drafter, tree or accept time); "
             "demo row = whole compiled rounds (bench_compile.md)", "",
             "Tokens per second of the same rounds at each fixed size, with the auto policy, and with each round's best size in hindsight:", ""]
    for name, r in res.items():
        bestb = max(r['fixed'], key=r['fixed'].get)
        lines += [f"### {name}", "", "| size | " + " | ".join(str(b) for b in r['fixed']) + " | auto | auto, scaled | policy | hindsight |",
                  "|---|" + "---|" * (len(r['fixed']) + 4),
                  "| tokens/s | " + " | ".join(f"{v:.1f}" for v in r['fixed'].values()) +
                  f" | {r['auto']:.1f} | {r['auto_scaled']:.1f} | **{r['policy']:.1f}** | {r['hindsight']:.1f} |",
                  "| of the best fixed | " + " | ".join(f"{v / r['fixed'][bestb]:.3f}" for v in r['fixed'].values()) +
                  f" | {r['auto'] / r['fixed'][bestb]:.3f} | {r['auto_scaled'] / r['fixed'][bestb]:.3f} | **{r['policy'] / r['fixed'][bestb]:.3f}**"
                  f" | {r['hindsight'] / r['fixed'][bestb]:.3f} |",
                  "| rounds auto took it | " + " | ".join(str(r['taken'][b]) for b in r['fixed']) + " | | | | |",
                  "| rounds the policy took it | " + " | ".join(str(r['taken_policy'][b]) for b in r['fixed']) + " | | | | |", ""]
    if a.check:   # the replay's one approximation: every size replays the b-max run's contexts
        lines += ["### The replay against live runs", "",
                  "Mean tokens per round of the recorded rounds replayed at size b, and of a real greedy run at b (its own contexts):", "",
                  "| size | replayed | live |", "|---|---|---|"]
        for b in a.check:
            rep = sum(em[b] for _, em, _ in rounds) / len(rounds)
            lines.append(f"| {b} | {rep:.2f} | {live_acceptance(pair, a.n_prompts, a.max_new_tokens, b):.2f} |")
        lines.append("")
    kimi = [n for n in res if n.startswith('Kimi')]
    if kimi:   # one budget for every context: the time to emit the same tokens at each context, summed
        tot = {b: sum(1 / res[n]['fixed'][b] for n in kimi) for b in res[kimi[0]]['fixed']}
        bb = min(tot, key=tot.get)
        auto_t, pol_t = (sum(1 / res[n][k] for n in kimi) for k in ('auto', 'policy'))
        lines += ["### Across the Kimi contexts together", "",
                  f"Seconds per token summed over the contexts (lower is better): best single fixed size {bb}: {tot[bb] * 1e3:.3f} ms; "
                  f"auto: {auto_t * 1e3:.3f} ms ({tot[bb] / auto_t:.3f}x); the shipped policy: {pol_t * 1e3:.3f} ms ({tot[bb] / pol_t:.3f}x).", ""]
    text = '\n'.join(lines)
    print(text)
    Path(a.out + '.md').write_text(text + '\n')
    Path(a.out + '.json').write_text(json.dumps(dict(ratio=ratio, rounds=len(rounds), results={
        n: {k: (v if not isinstance(v, dict) else {str(kk): vv for kk, vv in v.items()}) for k, v in r.items()} for n, r in res.items()}), indent=1))

if __name__ == '__main__': main()
