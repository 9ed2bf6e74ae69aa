"""A tiny driver for `ncu` on the W4A16 MoE launches at Kimi widths (384 experts, top-8, hidden 7168, width 2048), with
bench_moe.py's experts and spread routing.

    ncu --kernel-name regex:moe_ --launch-skip 8 --launch-count 4 --set full python benchmarks/ncu_moe.py --tokens 1 [--version 11]
"""
import argparse, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, rand_packed, routing
from ddtree_nb.moe import MoEWorkspace, moe_w4a16

p = argparse.ArgumentParser(); p.add_argument('--tokens', type=int, default=1); p.add_argument('--version', type=int, default=None)
p.add_argument('--reps', type=int, default=3)
a = p.parse_args()
dev, E, k = torch.device('cuda'), 384, 8
ex = rand_packed(E, dev)
x = torch.randn(a.tokens, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
idx, w = routing(a.tokens, E, k, 'spread', dev, seed=1)
ws, out = MoEWorkspace(a.tokens, k, E, H, I, dev), torch.empty_like(x)
for _ in range(a.reps): moe_w4a16(x, idx, w, ex, 2.827, out=out, backend='cuda', ws=ws, version=a.version)
torch.cuda.synchronize()
ref = moe_w4a16(x, idx, w, ex, 2.827)
print('ok', a.tokens, ((out.float() - ref.float()).norm() / ref.float().norm()).item())
