# CPU check (session 28): acceptance of the shipped demo pair over 128 vs 256 new tokens, bench_run_ahead's held_out_prompts; run: python benchmarks/s28_h100/acceptance_by_length.py
import torch, json, time
torch.set_num_threads(1)
from ddtree_nb.demo import load_demo_pair, held_out_prompts
from ddtree_nb.decode import generate
t, d, tok = load_demo_pair('cpu', torch.float32)
res = {}
for pt, n_new, npr in ((32, 256, 2), (32, 128, 2), (48, 128, 2), (48, 256, 2)):
    ps = held_out_prompts(tok, n=npr, prompt_tokens=pt)
    accs = []
    for p in ps:
        r = generate(t, d, p, budget=64, max_new_tokens=n_new)
        accs.append(round(r.mean_acceptance, 2))
    res[f'prompt {pt} new {n_new}'] = accs
    print(pt, n_new, accs, flush=True)
