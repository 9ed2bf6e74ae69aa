"""A tiny driver for `ncu` on the W4A16 MoE launches at Kimi widths (384 experts, top-8, hidden 7168, width 2048).

    ncu --kernel-name regex:moe_ --launch-skip 8 --launch-count 4 --set full python benchmarks/ncu_moe.py --tokens 1 [--version 11]
"""
import argparse, torch
from ddtree_nb.moe import MoEWorkspace, moe_w4a16
from ddtree_nb.reliability import random_packed_experts

p = argparse.ArgumentParser(); p.add_argument('--tokens', type=int, default=1); p.add_argument('--version', type=int, default=None)
p.add_argument('--reps', type=int, default=3)
a = p.parse_args()
dev, E, k, H, I = torch.device('cuda'), 384, 8, 7168, 2048
ex = random_packed_experts(E, H, I, torch.Generator(device=dev).manual_seed(0))
g = torch.Generator(device=dev).manual_seed(1)
x = torch.randn(a.tokens, H, device=dev, generator=g).bfloat16()
idx = torch.rand(a.tokens, E, generator=g, device=dev).topk(k, dim=-1).indices.int().contiguous()
w = torch.rand(a.tokens, k, generator=g, device=dev); w = (w / w.sum(-1, keepdim=True)).contiguous()
ws, out = MoEWorkspace(a.tokens, k, E, H, I, dev), torch.empty_like(x)
kw = {} if a.version is None else dict(version=a.version)
for _ in range(a.reps): moe_w4a16(x, idx, w, ex, 2.827, out=out, backend='cuda', ws=ws, **kw)
torch.cuda.synchronize()
ref = moe_w4a16(x, idx, w, ex, 2.827)
print('ok', a.tokens, ((out.float() - ref.float()).norm() / ref.float().norm()).item())
