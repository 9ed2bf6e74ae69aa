"""The torch reference tree builder (`build_tree(..., backend='torch')`) on the CPU, one thread.

Median of 15 builds per (V, B), L = 15, Gaussian logits (scale 3). Results: benchmarks/tree_build.md.
Run: python benchmarks/bench_tree_ref_cpu.py
"""
import time
import torch
from ddtree_nb.tree import build_tree

def median_ms(logits: torch.Tensor, budget: int, reps: int=15) -> float:
    "Median wall time of `build_tree(logits, budget)` in ms, after one warm-up build."
    build_tree(logits, budget)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); build_tree(logits, budget); ts.append(time.perf_counter() - t0)
    return sorted(ts)[reps // 2] * 1e3

if __name__ == '__main__':
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    for V in (4096, 163840):
        logits = torch.randn(15, V, generator=g) * 3
        for B in (16, 64, 256): print(f"V={V} B={B}: median {median_ms(logits, B):.2f} ms")
