"""nbs/05's budget='auto' cuda cell as a script (one device call can run it beside a benchmark): greedy auto = AR's tokens on
the demo pair in fp32, every part a captured graph; sampled auto with a forced size = that budget's tokens."""
import torch
from fastcore.test import test_eq
from ddtree_nb.demo import load_demo_pair, held_out_prompts
from ddtree_nb.decode import generate, Stages
from ddtree_nb.budget import RoundCost
gt, gd, tok = load_demo_pair('cuda', torch.float32)
for gp in held_out_prompts(tok, n=2, prompt_tokens=32):
    ar = generate(gt, None, gp, method='ar', max_new_tokens=40, backend='torch').tokens
    st = Stages(keep=True)
    for _ in range(3): test_eq(generate(gt, gd, gp, budget='auto', max_new_tokens=40, stages=st).tokens, ar)
    assert st.graphs and {k if isinstance(k, str) else k[0] for k in st.graphs} <= {'front', 'back'}, st.graphs.keys()
    st.release(None, free=True)
    t = lambda **kw: generate(gt, gd, gp, temperature=0.8, max_new_tokens=40, generator=torch.Generator('cuda').manual_seed(2), **kw).tokens
    test_eq(t(budget='auto', stages=Stages(round_cost=RoundCost([4, 256], [1.0, 1e3]))), t(budget=4))
print('auto_gpu_check: passed')
