"""Benchmark the GPU draft-tree builder against the reference path (nbs/02_tree_builder.ipynb, issue 4).

    python benchmarks/bench_tree.py [--iters 300] [--out results.md]

L=15, V=163840, bf16 logits, B in {16, 64, 256, 1024}, two logit scales (randn*1: flat, randn*4: peaked).
Kernel times: CUDA events around each call, median; eager (4 launches from Python), one CUDA-graph replay, phase 1
(3 kernels) and phase 2 (1 kernel) alone as graphs, and phase 2 v1 (single-thread heap) as a graph.
Reference path (same run): torch.topk + logsumexp on the GPU, copy to host, heapq, visibility on the host.
"""
import argparse, datetime, statistics, subprocess, time
import torch
from ddtree_nb.tree import TreeBuffers, fill_tree, _launch_rows, _launch_tree, _heap_tree, build_tree_ref, check_same_tree
from ddtree_nb.runtime import engine_stream

def ref_path(x, B):
    "torch.topk + logsumexp on the GPU, copy to host, heapq and ancestor mask on the host."
    xf = x.float()
    lse = torch.logsumexp(xf, -1, keepdim=True)
    v, i = torch.topk(xf, min(B, x.shape[1]), -1)
    lq, ii = (v - lse).double().cpu(), i.cpu()
    return _heap_tree([(a.tolist(), b.tolist()) for a, b in zip(lq, ii)], x.shape[0], B)

def events_median(fn, iters, stream):
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream); fn(); b.record(stream)
        b.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)

def graph_of(fn, stream):
    fn(); stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream): fn()
    return g

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--iters', type=int, default=300)
    ap.add_argument('--out', default=None)
    ap.add_argument('--commit', default=None, help='commit to record (default: git rev-parse HEAD)')
    a = ap.parse_args()
    es = engine_stream(); s = es.torch
    L, V = 15, 163840
    rows = []
    with es:
        for scale in (1.0, 4.0):
            x = (torch.randn(L, V, device='cuda', generator=torch.Generator('cuda').manual_seed(0)) * scale).bfloat16()
            for B in (16, 64, 256, 1024):
                buf = TreeBuffers(B)
                fill_tree(buf, x, B); s.synchronize()
                check_same_tree(buf.to_draft_tree(), build_tree_ref(x, B), x.float())
                path = buf.ws['stats'][:3].tolist()
                eager = events_median(lambda: fill_tree(buf, x, B), a.iters, s)
                g_all = graph_of(lambda: fill_tree(buf, x, B), s)
                graph = events_median(g_all.replay, a.iters, s)
                g1 = graph_of(lambda: _launch_rows(buf, x, B), s)
                p1 = events_median(g1.replay, a.iters, s)
                g2 = graph_of(lambda: _launch_tree(buf, x.dtype, L, V, B), s)
                p2 = events_median(g2.replay, a.iters, s)
                g3 = graph_of(lambda: _launch_tree(buf, x.dtype, L, V, B, force_heap=True), s)
                heap = events_median(g3.replay, max(20, a.iters // 10), s)
                ts = []
                for _ in range(15):
                    s.synchronize(); t0 = time.perf_counter(); ref_path(x, B); ts.append((time.perf_counter() - t0) * 1e6)
                ref = statistics.median(ts)
                def tk():
                    xf = x.float(); torch.logsumexp(xf, -1); torch.topk(xf, B, -1)
                topk = events_median(tk, 50, s)
                rows.append((scale, B, graph, eager, p1, p2, heap, topk, ref, path))
                print(rows[-1], flush=True)
    commit = a.commit or subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    out = [f"date {datetime.date.today()}, GPU {torch.cuda.get_device_name()}, commit {commit}, torch {torch.__version__}",
           f"command: python benchmarks/bench_tree.py --iters {a.iters}", "",
           "| logits | B | graph replay µs | eager µs | phase 1 µs | phase 2 v2 µs | phase 2 v1 heap µs | topk+lse µs | reference path µs | speed-up (ref/graph) | phase-2 path |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for sc, B, g, e, p1, p2, h, tk, r, path in rows:
        out.append(f"| randn*{sc:g} | {B} | {g:.1f} | {e:.1f} | {p1:.1f} | {p2:.1f} | {h:.1f} | {tk:.1f} | {r:.0f} | {r / g:.0f}x | {path} |")
    text = '\n'.join(out)
    print(text)
    if a.out: open(a.out, 'w').write(text + '\n')

if __name__ == '__main__': main()
