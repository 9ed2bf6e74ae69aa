"""budget='auto''s cost model against the rounds it prices: the round seconds `Stages._calibrate` measured at each size, beside
the GPU time per round of fixed-budget generations at the same sizes (graph replays, kept Stages). Demo pair, one GPU.
Usage: python benchmarks/auto_cost_check.py [--dtype bfloat16] [--n-prompts 4] [--max-new-tokens 128]"""
import argparse, json, torch
from ddtree_nb.demo import load_demo_pair, held_out_prompts
from ddtree_nb.decode import generate, Stages
from ddtree_nb.budget import AUTO_SIZES

ap = argparse.ArgumentParser()
ap.add_argument('--dtype', default='bfloat16'); ap.add_argument('--n-prompts', type=int, default=4); ap.add_argument('--max-new-tokens', type=int, default=128)
a = ap.parse_args()
t, d, tok = load_demo_pair('cuda', getattr(torch, a.dtype))
ps = held_out_prompts(tok, n=a.n_prompts)
st = Stages(keep=True)
generate(t, d, ps[0], budget='auto', max_new_tokens=a.max_new_tokens, stages=st)   # calibrates
pol = st.auto                                                                       # the policy, on the cost it measured
st.release(None, free=True)
rows = []
for b in AUTO_SIZES:
    st = Stages(keep=True)
    generate(t, d, ps[0], budget=b, max_new_tokens=a.max_new_tokens, stages=st)   # warm-up: capture
    ms, rounds, toks = 0.0, 0, 0
    for p in ps:
        g = generate(t, d, p, budget=b, max_new_tokens=a.max_new_tokens, stages=st)
        ms += 1e3 * g.stage_times.get('round', 0.0); rounds += len(g.acceptance_lengths); toks += len(g.tokens) - 1
    st.release(None, free=True)
    rows.append(dict(size=b, model_ms=1e3 * pol.secs[AUTO_SIZES.index(b)], round_ms=ms / rounds, accept=toks / rounds))
    print(json.dumps(rows[-1]))
print(f"per-round choice: measured wait {pol.wait_s * 1e6:.0f} us")
