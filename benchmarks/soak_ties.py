"""Where a T=0 bench run left AR's tokens, judge the first difference with the demo target in float32 (CPU is enough).

For every (method, budget) row of a `ddtree bench --demo` JSON whose greedy tokens differ from AR's on a prompt, this
finds the first differing new token i, runs the demo target in float32 over prompt + AR's first i tokens, and prints the
two candidate tokens' float32 logits: their gap, the largest logit, float32's own top two, and how often float32's
argmax agrees with the benchmark's AR tokens (teacher-forced over the whole output; a low value means the bench's
prompts are not the ones rebuilt here: `held_out_prompts` reads this machine's Python stdlib files; bench files written
since session 8 carry the prompts' token ids in `config.prompt_ids`, and those are used instead).

Run: python benchmarks/soak_ties.py benchmarks/soak/bf16_soak_1.json [--stdlib /path/to/lib/python3.12]
(--stdlib: the Python stdlib the bench machine read its prompts from, when this machine's Python differs)
"""
import json, sys
import torch
from ddtree_nb.demo import load_demo_pair, held_out_prompts
from ddtree_nb.bench import first_difference

def judge(path: str, target, prompts: list) -> list[dict]:
    res = json.load(open(path))
    runs, prompts = res['runs'], res['config'].get('prompt_ids') or prompts     # newer bench files carry their prompts' ids
    ar = {r['prompt']: r['tokens'] for r in runs if r['method'] == 'ar' and r['temperature'] == 0}
    out = []
    for r in runs:
        if r['temperature'] != 0 or r['method'] == 'ar' or r['tokens'] == ar[r['prompt']]: continue
        a, g, p = ar[r['prompt']], r['tokens'], prompts[r['prompt']]
        i = first_difference(a, g)
        full = p + a
        lg = target(torch.tensor(full), torch.arange(len(full)), target.new_cache(len(full)), 0).logits   # causal: row j sees tokens <= j
        agree = float((lg[len(p) - 1:-1].argmax(-1) == torch.tensor(a)).float().mean())
        x = lg[len(p) - 1 + i]
        top = x.topk(2)
        out.append(dict(method=r['method'], budget=r['budget'], prompt=r['prompt'], at=i, ar_token=a[i], got_token=g[i],
                        fp32_gap=round(float(x[a[i]] - x[g[i]]), 4), max_logit=round(float(x.abs().max()), 2),
                        fp32_top2=top.indices.tolist(), fp32_top2_logits=[round(v, 4) for v in top.values.tolist()], agree=round(agree, 3)))
    return out

if __name__ == '__main__':
    args = sys.argv[1:]
    root = args.pop(args.index('--stdlib') + 1) if '--stdlib' in args else None
    args = [a for a in args if a != '--stdlib']
    t, _, tok = load_demo_pair('cpu', torch.float32)
    ps = held_out_prompts(tok, n=8, root=root)
    for f in args:
        for row in judge(f, t, ps): print(json.dumps(row))
