"""A tiny driver for `ncu` on the tree builder: a few builds at L=15, V=163840, B (default 256), phase 1 v2, v3 and v4.

    ncu --kernel-name regex:tb_ --launch-skip 4 --launch-count 20 --set full python benchmarks/ncu_tree.py [--budget 256]
    ncu --kernel-name regex:tb_ --launch-skip 2 --launch-count 4 --set full python benchmarks/ncu_tree.py --phase1 v4
    ncu --kernel-name regex:tb_tree --launch-skip 1 --launch-count 1 --set full --import-source yes python benchmarks/ncu_tree.py --phase1 v4 --budget 1024 --scale 1
"""
import argparse, torch
from ddtree_nb.tree import TreeBuffers, fill_tree

p = argparse.ArgumentParser(); p.add_argument('--budget', type=int, default=256); p.add_argument('--reps', type=int, default=3)
p.add_argument('--phase1', default='v2,v3,v4', help='phase-1 versions to build with, in order (v4 alone: two launches a build)')
p.add_argument('--scale', type=float, default=4.0, help='logits = randn * scale (bench_tree times 1 and 4: at B = 1024, scale 1 takes the all-ranked path, whose index stage is 12 µs)')
a = p.parse_args()
torch.manual_seed(0)
x = (torch.randn(15, 163840, device='cuda') * a.scale).bfloat16()
buf = TreeBuffers(a.budget, x.device)
for phase1 in a.phase1.split(','):
    for _ in range(a.reps): fill_tree(buf, x, a.budget, phase1=phase1)
torch.cuda.synchronize()
print('ok', int(buf.n_nodes.item()))
