"""A CPU model of tb_tree's tie order (kernels/tree_build.cu): the BFS slot layout at a threshold tau, and `slot_less`
(equal depth: slot order; else the deeper prefix walks up first) against the rank-tuple order that `build_tree_ref`
breaks ties by (Python's tuple comparison: a prefix before its extensions). Lists of heavily tied log-probabilities
(bf16-like values), random depths and thresholds; every pair of materialised prefixes, for each case.

    python benchmarks/sim_slot_order.py
"""
import random

def bfs(lists, tau, cap=400):
    "The kernel's BFS: depth 1 by rank, then each level's children parent by parent, ranks ascending; (score, par, rank, lvl).\n    `cap` truncates like the kernel's UCAP (there a full BFS is retried; here the layout so far is kept, which is all the test needs)."
    score, par, rank = [], [], []
    for r, q in enumerate(lists[0]):
        if q >= tau: score.append(q); par.append(-1); rank.append(r)
    lvl, s0, e0 = [0, len(score)], 0, len(score)
    for d in range(1, len(lists)):
        if e0 == s0: break
        for p in range(s0, e0):
            for r, q in enumerate(lists[d]):
                if score[p] + q >= tau and len(score) < cap: score.append(score[p] + q); par.append(p); rank.append(r)
        s0, e0 = e0, len(score)
        lvl.append(e0)
    return score, par, rank, lvl

def slot_less(x, y, lvl, par):
    "kernels/tree_build.cu's slot_less, line for line."
    dx = dy = 1
    while x >= lvl[dx]: dx += 1
    while y >= lvl[dy]: dy += 1
    yd = False
    while dx > dy: x = par[x]; dx -= 1
    while dy > dx: y = par[y]; dy -= 1; yd = True
    return yd if x == y else x < y

def ranks(x, par, rank):
    "The rank tuple of slot x, root first."
    t = []
    while x >= 0: t.append(rank[x]); x = par[x]
    return tuple(reversed(t))

def main(cases=200, seed=0):
    rng, pairs = random.Random(seed), 0
    for _ in range(cases):
        L, k = rng.randint(1, 6), rng.randint(1, 12)
        vals = sorted({-round(rng.expovariate(1.0) * 4) / 4 for _ in range(6)}, reverse=True)   # few distinct values: ties
        lists = [sorted((rng.choice(vals) for _ in range(k)), reverse=True) for _ in range(L)]
        score, par, rank, lvl = bfs(lists, tau=-rng.uniform(0.5, 4.0))
        n = len(score)
        for x in range(n):
            for y in range(n):
                assert slot_less(x, y, lvl, par) == (ranks(x, par, rank) < ranks(y, par, rank)), (lists, x, y)
        pairs += n * n
    print(f"slot_less == rank-tuple order on {pairs} pairs of {cases} BFS layouts")

if __name__ == '__main__': main()
