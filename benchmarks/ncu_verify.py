"""A tiny driver for `ncu` on the verify attention at issue 19's AR-step shape: T = 1, H = 64 over P = 32k cache rows,
the default plan (the sm_90a kernel, clusters of 2 and the combine) and the plain one (cluster=1), a few calls each.

    ncu --kernel-name regex:verify_attn --launch-skip 4 --launch-count 12 --set full python benchmarks/ncu_verify.py [--P 32768]

What it is for: where the ~17 µs of fixed cost in a 30 µs call goes (`verify_attn.md`, "Session 22"): the first tile's
wait, the merge, the combine.
"""
import argparse, torch
from ddtree_nb.verify import DC, DR, DQK, mla_tree_attention

p = argparse.ArgumentParser(); p.add_argument('--P', type=int, default=32768); p.add_argument('--T', type=int, default=1)
p.add_argument('--H', type=int, default=64); p.add_argument('--reps', type=int, default=4)
a = p.parse_args()
g = torch.Generator(device='cuda').manual_seed(0)
kv = torch.randn(a.P + a.T, DQK, generator=g, device='cuda').bfloat16()
ql = torch.randn(a.T, a.H, DC, generator=g, device='cuda').bfloat16()
qp = torch.randn(a.T, a.H, DR, generator=g, device='cuda').bfloat16()
bits = torch.full((a.T, 1), -1, dtype=torch.int32, device='cuda')   # every tree slot visible: the mask does not matter here
for kw in (dict(impl='sm90'), dict(impl='sm90', cluster=1)):
    for _ in range(a.reps): mla_tree_attention(ql, qp, kv, a.P, bits, DQK ** -0.5, **kw)
torch.cuda.synchronize()
print('ok')
