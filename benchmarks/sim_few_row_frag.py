"""CPU check of kernels/dev/few_row_gemm.cu's fragment bookkeeping (no GPU): the lanes' loads as the kernel issues them, fed
through mma.sync m16n8k16's documented fragment layout (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .bf16), the
split-K sum and the epilogue's stores, must give X @ W^T for every M <= 16 and the block's 16 columns.

What it models, per warp w (a quarter of K) and per 32-wide k step kb: lane (g = lane // 4, t = lane % 4) loads W rows n0 + g and
n0 + 8 + g at k = kb + 8t .. +7 (16 B each) and X rows g and g + 8 at the same k from shared memory; the first mma takes its
k 0-3 (registers .x, .y), the second its k 4-7 (.z, .w). The mma's A slot (row r, column c) is held by lane 4 (r % 8) + (c % 8) // 2
in register 2 (c // 8) + r // 8, element c % 2; B's (k row c, column n) by lane 4 n + (c % 8) // 2 in register c // 8, element
c % 2; C's (r, n) by lane 4 (r % 8) + n // 2 in element 2 (r // 8) + n % 2.

    python benchmarks/sim_few_row_frag.py     # prints 'ok' after random cases at K = 128 .. 1024, M = 1 .. 16
"""
import numpy as np


def mma(c, a_regs, b_regs):
    "One m16n8k16 on per-lane fragments: a_regs[lane] = 4 registers of 2 values, b_regs[lane] = 2 of 2, c[lane] = 4 floats."
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for reg in range(4):                        # a0: (g, 2t..), a1: (g + 8, 2t..), a2: (g, 2t + 8..), a3: (g + 8, 2t + 8..)
            r, c0 = g + 8 * (reg % 2), 2 * t + 8 * (reg // 2)
            A[r, c0:c0 + 2] = a_regs[lane][reg]
        for reg in range(2):                        # b0: (2t.., n = g), b1: (2t + 8.., n = g)
            B[2 * t + 8 * reg: 2 * t + 8 * reg + 2, g] = b_regs[lane][reg]
    D = A @ B
    for lane in range(32):
        g, t = lane // 4, lane % 4
        c[lane] += np.array([D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]])


def block(X, W, n0):
    "The kernel's one block: Y[:, n0:n0 + 16] as its lanes compute and store it."
    M, K = X.shape
    xs = np.zeros((16, K)); xs[:M] = X                # rows >= M are zero in shared memory
    kq, parts = K // 4, []
    for w in range(4):
        c0, c1 = np.zeros((32, 4)), np.zeros((32, 4))
        for kb in range(w * kq, (w + 1) * kq, 32):
            lo = [xs[l // 4, kb + 8 * (l % 4): kb + 8 * (l % 4) + 8] for l in range(32)]
            hi = [xs[l // 4 + 8, kb + 8 * (l % 4): kb + 8 * (l % 4) + 8] for l in range(32)]
            b0 = [W[n0 + l // 4, kb + 8 * (l % 4): kb + 8 * (l % 4) + 8] for l in range(32)]
            b1 = [W[n0 + 8 + l // 4, kb + 8 * (l % 4): kb + 8 * (l % 4) + 8] for l in range(32)]
            pair = lambda v, i: v[2 * i: 2 * i + 2]   # register i (.x .y .z .w) of a 16-B load: elements 2i, 2i + 1
            a_first = [[pair(lo[l], 0), pair(hi[l], 0), pair(lo[l], 1), pair(hi[l], 1)] for l in range(32)]
            a_second = [[pair(lo[l], 2), pair(hi[l], 2), pair(lo[l], 3), pair(hi[l], 3)] for l in range(32)]
            mma(c0, a_first, [[pair(b0[l], 0), pair(b0[l], 1)] for l in range(32)])
            mma(c0, a_second, [[pair(b0[l], 2), pair(b0[l], 3)] for l in range(32)])
            mma(c1, a_first, [[pair(b1[l], 0), pair(b1[l], 1)] for l in range(32)])
            mma(c1, a_second, [[pair(b1[l], 2), pair(b1[l], 3)] for l in range(32)])
        parts.append((c0, c1))
    c0 = sum(p[0] for p in parts); c1 = sum(p[1] for p in parts)
    Y = np.full((M, 16), np.nan)
    for l in range(32):                               # the epilogue's stores
        g, t = l // 4, l % 4
        if g < M: Y[g, 2 * t: 2 * t + 2], Y[g, 8 + 2 * t: 8 + 2 * t + 2] = c0[l, :2], c1[l, :2]
        if g + 8 < M: Y[g + 8, 2 * t: 2 * t + 2], Y[g + 8, 8 + 2 * t: 8 + 2 * t + 2] = c0[l, 2:], c1[l, 2:]
    return Y


if __name__ == '__main__':
    rng = np.random.default_rng(0)
    for K in (128, 256, 768, 1024):
        for M in (1, 5, 9, 16):
            X, W = rng.standard_normal((M, K)), rng.standard_normal((48, K))
            for n0 in (0, 16, 32):
                Y = block(X, W, n0)
                assert np.allclose(Y, X @ W[n0:n0 + 16].T), (K, M, n0, np.nanmax(np.abs(Y - X @ W[n0:n0 + 16].T)))
    print('ok')
