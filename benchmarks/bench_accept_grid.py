"""`tree_accept`'s grid (`accept_compact(..., grid=)`): one launch's µs at every grid from one block to one per SM, at the
demo pair's shape (V = 4,096, 6 layers of 576-wide bf16 latent, 768-wide bf16 features) and at Kimi's (V = 163,840, 61
layers, 5 x 7,168 features), T = 0 and 1, a few tree sizes; the launch is checked against the one-block-per-SM launch first.

Not a test. Each case: 20 launches back to back in one CUDA graph (each with its own prefix length, reset before each
replay outside the timed span), CUDA events around the replay, median over --reps replays, µs per launch. A path of
--accept nodes is planted (tau, the acceptance length, as in the demo pair's rounds at 512 tokens: about 2).
What the grid trades: at small V, fewer blocks mean fewer arrivals at each pass's grid barrier but more columns and more
compaction units a block. Session 36 (H100): the default, one block per SM, is within 0.24-0.54 µs of the best grid at the
demo pair's shape and the fastest at Kimi's (`tree_accept.md`, "Session 36").

    python benchmarks/bench_accept_grid.py [--grids 1,2,4,8,12,16,24,33,66,0] [--out OUT.md] [--commit HASH]
(grid 0: one block per SM, the shipped default)
"""
import argparse, json, statistics, time
import torch
from ddtree_nb.accept import accept_compact, new_accepted, tree_buffers_from
from ddtree_nb.tree import build_tree_ref
from ddtree_nb.runtime import engine_stream

SHAPES = {'demo': dict(V=4096, nl=6, F=768, rows=(1, 9, 16)), 'kimi': dict(V=163840, nl=61, F=5 * 7168, rows=(1, 17, 65))}
N = 20


def case(shape, rows, T, grids, sms, reps, acc, dev):
    s = SHAPES[shape]; V, nl, F = s['V'], s['nl'], s['F']
    g = torch.Generator().manual_seed(rows)
    t = build_tree_ref(torch.randn(15, V, generator=g) * 3, rows - 1)
    lg = torch.randn(t.n + 1, V, generator=g)
    node = 0
    for _ in range(acc - 1):                                 # plant a path of `acc` nodes (first children)
        kids = (t.parents[1:] == node).nonzero()[:, 0] + 1
        if not len(kids): break
        nxt = int(kids[0]); lg[node, int(t.tokens[nxt])] = lg[node].max() + 60; node = nxt
    lg = lg.to(dev)
    bufs = tree_buffers_from(t, device=dev)
    P0, S = 512, 512 + 64
    kv = torch.randn(nl, S, 576, device=dev).to(torch.bfloat16)
    hid = torch.randn(t.n + 1, F, device=dev).to(torch.bfloat16)
    fo = torch.zeros(64, F, device=dev).to(torch.bfloat16)
    keys = torch.tensor([12345, 678], dtype=torch.int64, device=dev)
    pls = torch.full((N, 1), P0, dtype=torch.int32, device=dev)
    es = engine_stream()
    res, want = {}, None
    for gr in grids:
        G = sms if gr == 0 else gr
        if G > sms: continue
        out = new_accepted(dev)
        with es:
            pls.fill_(P0); kv0 = kv.clone()
            accept_compact(bufs, lg, kv, pls[0], hid, fo, T, backend='cuda', out=out, keys=keys, check_values=False, grid=G)
            torch.cuda.synchronize()
            got = (out.path.tolist(), out.bonus.item(), pls[0].item(), kv.clone(), fo.clone())
            kv.copy_(kv0)
            if want is None: want = got
            ok = got[:3] == want[:3] and torch.equal(got[3], want[3]) and torch.equal(got[4], want[4])
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=es.torch):
                for i in range(N):
                    accept_compact(bufs, lg, kv, pls[i], hid, fo, T, backend='cuda', out=out, keys=keys, check_values=False, grid=G)
            ts = []
            for _ in range(reps):
                pls.fill_(P0)
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(es.torch); graph.replay(); b.record(es.torch); b.synchronize()
                ts.append(1e3 * a.elapsed_time(b) / N)
            kv.copy_(kv0)
        res[G] = dict(us=round(statistics.median(ts), 2), same=ok, accepted=len(got[0]) - got[0].count(-1))
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--grids', default='1,2,4,8,12,16,24,33,66,0')
    ap.add_argument('--reps', type=int, default=50)
    ap.add_argument('--accept', type=int, default=2, help='nodes on the planted path, the root included')
    ap.add_argument('--shapes', default='demo,kimi')
    ap.add_argument('--out', default=None); ap.add_argument('--commit', default='unknown')
    a = ap.parse_args(argv)
    dev = torch.device('cuda'); sms = torch.cuda.get_device_properties(dev).multi_processor_count
    grids = [int(x) for x in a.grids.split(',')]
    lines = [f"# tree_accept by grid ({time.strftime('%Y-%m-%d')}, {torch.cuda.get_device_name()}, {sms} SMs, commit {a.commit})", '',
             f"Command: `python benchmarks/bench_accept_grid.py {' '.join(argv or __import__('sys').argv[1:])}`; µs a launch (median of {a.reps} "
             f"graph replays of {N} launches), a planted path of {a.accept} nodes; 'same': the walk, prefix length, compacted cache and "
             f"features equal the first grid's. The default grid (one block per SM) marked *.", '']
    rows_json = []
    for shape in a.shapes.split(','):
        s = SHAPES[shape]
        cols = sorted({sms if x == 0 else x for x in grids if (sms if x == 0 else x) <= sms})
        lines += [f"## {shape}: V = {s['V']}, {s['nl']} layers, features {s['F']}", '',
                  '| T | rows | ' + ' | '.join(f'G = {c}' for c in cols) + ' | best |', '|---|---|' + '---|' * (len(cols) + 1)]
        for T in (0.0, 1.0):
            for rows in s['rows']:
                r = case(shape, rows, T, grids, sms, a.reps, a.accept, dev)
                pick = sms
                best = min(r, key=lambda G: r[G]['us'])
                cell = lambda G: f"{r[G]['us']}{'*' if G == pick else ''}{'' if r[G]['same'] else ' (DIFFERS)'}"
                lines.append(f"| {T} | {rows} | " + ' | '.join(cell(G) for G in cols) + f" | {best} |")
                rows_json.append(dict(shape=shape, T=T, rows=rows, by_grid=r, pick=pick))
                print(lines[-1], flush=True)
        lines.append('')
    text = '\n'.join(lines) + '\n'
    print(text)
    if a.out:
        open(a.out, 'w').write(text)
        open(a.out.rsplit('.', 1)[0] + '.json', 'w').write(json.dumps(rows_json, indent=1))


if __name__ == '__main__':
    main()
