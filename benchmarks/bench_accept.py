"""Benchmark tree accept + latent-cache compaction (kernels/tree_accept.cu) against the reference path, on one GPU,
with the previous kernel (kernels/dev/tree_accept_v1.cu: one warp per chain row, partials read in a loop, a
per-device barrier) timed beside it in the same run: every kernel column has a `v1_` twin.

python benchmarks/bench_accept.py [--budgets 16 256 1024] [--json out.json]

Kimi-sized: vocab 163840, 61 layers of 576-wide bf16 latent rows, hidden features F = 5 x 7168 bf16 per node.
Kernel times: CUDA events around one launch (the GPU is kept busy with a sleep kernel while the host enqueues, so
launch overhead on the host is not counted), median of --reps; and the same launch replayed as a CUDA graph.
Reference path (as in public ports): argmax over all rows + copy to host + Python walk; compaction with torch
index_select per layer (61 launches) and as one fancy-index copy over all layers. graph_cold_l2_us: graph replay
after writing 256 MB to evict the logits and cache rows from L2 (the other kernel numbers run with warm L2).
"""
import argparse, json, statistics, time
import torch
from ddtree_nb.accept import accept, accept_compact, accept_ref, tree_buffers_from, Accepted, MAX_PATH, new_accepted
from ddtree_nb.tree import build_tree_ref
from ddtree_nb.runtime import engine_stream, load_kernel

V, NL, ROW, F = 163840, 61, 576, 5 * 7168


class V1:
    "The previous kernel (kernels/dev/tree_accept_v1.cu) with its own partials and barrier, launched like the old accept."
    SIG = 'PiiqPPPidiPPPPPPPPiqiPPiP'

    def __init__(self, dev):
        self.k = load_kernel('dev/tree_accept_v1.cu', 'tree_accept', self.SIG)
        self.G = torch.cuda.get_device_properties(dev).multi_processor_count
        self.pv = torch.empty(2 * 16 * self.G, dtype=torch.float64, device=dev)
        self.pi = torch.empty(2 * 16 * self.G, dtype=torch.int32, device=dev)
        self.bar = torch.zeros(2, dtype=torch.int32, device=dev)

    def __call__(self, bufs, logits, T, keys, out, kv=None, pl=None, hidden=None, feats=None):
        R, V = logits.shape
        rv = kv.shape[-1] * kv.element_size() // 16 if kv is not None else 0
        fv = hidden.shape[-1] * hidden.element_size() // 16 if hidden is not None else 0
        self.k(logits.data_ptr(), R, V, logits.stride(0), bufs.n_nodes, bufs.parents, bufs.tokens, bufs.parents.numel(),
               1.0 / T if T > 0 else 0.0, int(T > 0), keys if T > 0 else 0, out.path, out.accepted_len, out.bonus,
               self.pv, self.pi, self.bar, kv if kv is not None else 0, kv.shape[0] if kv is not None else 0,
               kv.shape[1] if kv is not None else 0, rv, pl if pl is not None else 0,
               hidden if hidden is not None else 0, fv, feats if feats is not None else 0, grid=self.G, block=512)


def gpu_time(fn, reps, reset=None, warm=10):
    "Median µs between events around fn(), with a sleep kernel ahead so host enqueue time is hidden."
    ts = []
    for i in range(warm + reps):
        if reset: reset()
        torch.cuda._sleep(1_000_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        if i >= warm: ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def host_time(fn, reps, reset=None, warm=5):
    "Median µs of a path that syncs with the host anyway (events, no sleep ahead)."
    ts = []
    for i in range(warm + reps):
        if reset: reset()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        if i >= warm: ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def ref_walk(tree_par, tree_tok, logits):
    "The public-port path: argmax of every row, to the host, walk a child dict in Python."
    am = logits.argmax(-1).cpu().tolist()
    child = {(p, t): j for j, (p, t) in enumerate(zip(tree_par, tree_tok)) if j}
    path = [0]
    while (path[-1], am[path[-1]]) in child: path.append(child[(path[-1], am[path[-1]])])
    return path, am[path[-1]]


def plant_path(tree, logits, pick):
    "Make the target choose, from the root, child pick(kids) at each node until a leaf (boost 60 over the row max)."
    node, path = 0, [0]
    while True:
        kids = (tree.parents[1:] == node).nonzero()[:, 0] + 1
        if not len(kids): break
        nxt = int(pick(kids)); logits[node, int(tree.tokens[nxt])] = logits[node].max() + 60; path.append(nxt); node = nxt
    return path


def passes(tree, path):
    "Kernel passes for this path: a new pass whenever the path leaves the first-child chain or a chain of 16 ends."
    fc = {}
    for j in range(1, tree.n + 1): fc.setdefault(int(tree.parents[j]), j)
    p, run = 1, 1
    for a, b in zip(path, path[1:]):
        if fc.get(a) == b and run < 16: run += 1
        else: p, run = p + 1, 1
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--budgets', type=int, nargs='+', default=[16, 256, 1024])
    ap.add_argument('--reps', type=int, default=200)
    ap.add_argument('--json', default=None)
    a = ap.parse_args()
    dev = torch.device('cuda')
    es = engine_stream()
    P0, S = 2048, 4096
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(NL, S, ROW, device=dev, dtype=torch.bfloat16)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)   # written before a rep to evict L2 (50 MB)
    rows = []
    v1 = V1(dev)
    print(f"GPU {torch.cuda.get_device_name()}, V={V}, {NL} layers x {ROW} bf16, F={F} bf16")
    with es:
        for B in a.budgets:
            tree = build_tree_ref(torch.randn(15, V, generator=g) * 3, B)
            bufs = tree_buffers_from(tree, B, device=dev)
            hidden = torch.randn(B + 1, F, device=dev, dtype=torch.bfloat16)
            feats = torch.empty(MAX_PATH, F, device=dev, dtype=torch.bfloat16)
            pl = torch.tensor([P0], dtype=torch.int32, device=dev)
            reset = lambda: pl.fill_(P0)
            base = torch.randn(B + 1, V, generator=g).to(dev)
            par, tok = tree.parents.tolist(), tree.tokens.tolist()
            keys = torch.tensor([11, 22], dtype=torch.int64, device=dev)
            for scen in ('none', 'first-child chain', 'last-child path'):
                lg = base.clone()
                if scen == 'first-child chain': plant_path(tree, lg, lambda k: k[0])
                if scen == 'last-child path': plant_path(tree, lg, lambda k: k[-1])
                for T in (0.0, 1.0):
                    out = new_accepted(dev)
                    want = accept_ref(tree, lg, T, keys)
                    got = accept(bufs, lg, T, backend='cuda', out=out, keys=keys, check_values=False)
                    assert torch.equal(got.path, want.path) and torch.equal(got.bonus, want.bonus), (B, scen, T)
                    o1 = Accepted(*(torch.full_like(t, -7) for t in out))
                    v1(bufs, lg, T, keys, o1); torch.cuda.synchronize()
                    assert torch.equal(o1.path, want.path) and torch.equal(o1.bonus, want.bonus), ('v1', B, scen, T)
                    path = want.nodes()
                    r = dict(B=B, scenario=scen, T=T, accepted=len(path), passes=passes(tree, path))
                    for name, acc_only, fused in (
                            ('', lambda: accept(bufs, lg, T, backend='cuda', out=out, keys=keys, check_values=False),
                             lambda: accept_compact(bufs, lg, kv, pl, hidden, feats, T, backend='cuda', out=out, keys=keys, check_values=False)),
                            ('v1_', lambda: v1(bufs, lg, T, keys, out), lambda: v1(bufs, lg, T, keys, out, kv, pl, hidden, feats))):
                        r[name + 'kernel_accept_us'] = gpu_time(acc_only, a.reps)
                        r[name + 'kernel_accept_compact_us'] = gpu_time(fused, a.reps, reset)
                        try:
                            reset(); fused(); torch.cuda.synchronize()
                            graph = torch.cuda.CUDAGraph()
                            with torch.cuda.graph(graph, stream=es.torch): fused()
                            r[name + 'graph_accept_compact_us'] = gpu_time(graph.replay, a.reps, reset)
                            r[name + 'graph_cold_l2_us'] = gpu_time(graph.replay, a.reps, lambda: (reset(), flush.zero_()))
                        except Exception as ex:
                            print('graph failed:', name, repr(ex)[:300], flush=True)
                            r[name + 'graph_accept_compact_us'] = r[name + 'graph_cold_l2_us'] = float('nan')
                    if T == 0:
                        rp, rb = ref_walk(par, tok, lg)
                        assert rp == path and rb == int(want.bonus[0])
                        r['ref_walk_us'] = host_time(lambda: ref_walk(par, tok, lg), 50)
                        idx = torch.tensor(path, device=dev) + P0
                        A = len(path)
                        def per_layer():
                            for l in range(NL): kv[l, P0:P0 + A] = kv[l].index_select(0, idx)
                            feats[:A] = hidden.index_select(0, idx - P0)
                        def one_copy():
                            kv[:, P0:P0 + A] = kv[:, idx]; feats[:A] = hidden[idx - P0]
                        r['ref_compact_per_layer_us'] = host_time(per_layer, 50)
                        r['ref_compact_one_copy_us'] = host_time(one_copy, 50)
                    rows.append(r)
                    print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    print('\n| B | scenario | T | accepted | passes | v1 accept | accept | v1 accept+compact graph | accept+compact graph | v1 cold L2 | cold L2 |')
    print('|---|---|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        print(f"| {r['B']} | {r['scenario']} | {r['T']:g} | {r['accepted']} | {r['passes']} | " + ' | '.join(
            f"{r[k]:.1f}" for k in ('v1_kernel_accept_us', 'kernel_accept_us', 'v1_graph_accept_compact_us', 'graph_accept_compact_us',
                                   'v1_graph_cold_l2_us', 'graph_cold_l2_us')) + ' |')
    if a.json:
        with open(a.json, 'w') as f: json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
