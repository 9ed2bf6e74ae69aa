"""A CPU model of `top32_block` (kernels/tree_build.cu): the 32 largest of 1024 keys by warp sorts and pairwise warp merges,
shuffle for shuffle and barrier level for barrier level, checked against sorted() on random keys, many ties, all zeros
and a few large keys among zeros (300 cases). The kernel's phase 1 v4 takes it for the kb-th largest thread max when
kb <= 32 (B <= 256 at V = 163840); on a GPU, bench_tree.py and nbs/02's cuda cells check the trees themselves.

    python benchmarks/sim_top32.py
"""
import random

RT = 1024

def shfl_step(x, keep_max):
    "One compare-exchange over lane pairs: keep_max(t) says whether thread t keeps the larger key."
    def step(j, active=lambda t: True):
        return [(max if keep_max(t, j) else min)(x[t], x[(t & ~31) | ((t & 31) ^ j)]) if active(t) else x[t] for t in range(RT)]
    return step

def top32_block(keys):
    "The kernel's network: lane l of warp 0 ends with the (l + 1)-th largest key."
    x = list(keys)
    k = 2
    while k <= 32:   # each warp sorts descending
        j = k >> 1
        while j:
            x = shfl_step(x, lambda t, j, k=k: (((t & 31) & j) == 0) == (((t & 31) & k) == 0))(j); j >>= 1
        k <<= 1
    s, step = [None] * RT, 1
    while step < RT // 32:
        for t in range(RT):
            if ((t >> 5) & (2 * step - 1)) == step: s[t] = x[t]          # partners publish
        owner = lambda t, step=step: ((t >> 5) & (2 * step - 1)) == 0
        x = [max(x[t], s[((t >> 5) + step) * 32 + 31 - (t & 31)]) if owner(t) else x[t] for t in range(RT)]
        for j in (16, 8, 4, 2, 1):
            x = shfl_step(x, lambda t, j: not ((t & 31) & j))(j, owner)
        step <<= 1
    return x[:32]

def cases(n=300, seed=1):
    rnd = random.Random(seed)
    for i in range(n):
        kind = i % 4
        if kind == 0: yield [rnd.getrandbits(32) for _ in range(RT)]
        elif kind == 1: yield [rnd.choice([0, 5, 7, 7, 9, 2 ** 31]) for _ in range(RT)]
        elif kind == 2:
            keys = [0] * RT
            for t in rnd.sample(range(RT), rnd.randint(0, 40)): keys[t] = rnd.getrandbits(32)
            yield keys
        else: yield [rnd.randint(0, 50) if rnd.random() < 0.5 else 0 for _ in range(RT)]

if __name__ == '__main__':
    for i, keys in enumerate(cases()):
        assert top32_block(keys) == sorted(keys, reverse=True)[:32], i
    print('top32_block: 300 cases equal to sorted()[:32]')
