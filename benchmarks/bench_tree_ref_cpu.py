"""The torch reference tree builder on the CPU (one thread): median of 15 builds, L = 15, random logits. Run: python benchmarks/bench_tree_ref_cpu.py"""
import torch, time
torch.set_num_threads(1)
from ddtree_nb.tree import build_tree
g=torch.Generator().manual_seed(0)
lg=torch.randn(15,4096,generator=g)*3
for V in (4096, 163840):
    lg=torch.randn(15,V,generator=g)*3
    for B in (16,64,256):
        build_tree(lg,B); ts=[]
        for _ in range(15):
            t=time.perf_counter(); build_tree(lg,B); ts.append(time.perf_counter()-t)
        ts.sort(); print(f"V={V} B={B}: median {ts[len(ts)//2]*1e3:.2f} ms")
