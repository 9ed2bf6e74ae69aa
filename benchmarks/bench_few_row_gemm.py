"""A few-row GEMM (kernels/dev/few_row_gemm.cu) against cuBLAS at the demo pair's projection shapes: is it the lever for
the verify forward's 43 GEMMs of ~2.7 µs each (bench_compile.md, "Session 36")?

Not a test. For each (K, N) of the demo target's projections and M = 1, 9, 16 rows (bf16): `F.linear` (cuBLAS), the kernel
without a norm, `F.rms_norm` + `F.linear`, and the kernel with the RMS norm in its prologue. Each output is checked against
float32 math first (max |error| over max |reference|); then µs a call: 20 calls back to back in one CUDA graph, CUDA events
around the replay, median of --reps replays. Weights are the same tensor every call (the demo pair's weights, a few MB,
stay in L2 between its rounds too).

    python benchmarks/bench_few_row_gemm.py [--reps 30] [--out OUT.md] [--commit HASH]
"""
import argparse, json, statistics, time
import torch
import torch.nn.functional as F
from ddtree_nb.runtime import load_kernel, engine_stream

# (K, N, what): the demo target's projections (hidden 256, q_lora 128, kv_lora 512 + rope 64, 4 heads, 16 experts x 64)
SHAPES = [(256, 704, 'q_a + kv_a (merged)'), (128, 768, 'q_b'), (512, 256, 'o_proj'), (256, 2048, 'experts gate/up (dense)'),
          (1024, 256, 'experts down (dense)'), (256, 1536, 'dense MLP gate/up'), (768, 256, 'dense MLP down'), (256, 4096, 'lm_head')]
N_CALLS, EPS = 20, 1e-6
SIG = 'PiiPiPfP'


def kernel():
    return load_kernel('dev/few_row_gemm.cu', 'few_row_gemm', SIG)


def few_row(k, x, w, g, y):
    M, K = x.shape; N = w.shape[0]
    assert M <= 16 and K % 128 == 0 and N % 16 == 0, f"few_row_gemm takes M <= 16, K % 128 == 0, N % 16 == 0, got {M, K, N}"
    smem = 16 * (K + 32) * 2 + 4 * 32 * 8 * 4     # the demo's shapes stay within the default 48 KB (K = 1,024: 37.9 KB)
    assert smem <= 48 * 1024, f"K = {K} needs {smem} B of shared memory, over the 48 KB this bench launches with"
    k(x, M, K, w, N, g if g is not None else 0, EPS, y, grid=(N // 16,), block=(128,), shared=smem)


def ref(x, w, g):
    xf = x.float()
    if g is not None:
        xf = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(torch.bfloat16).float() * g.float()
        xf = xf.to(torch.bfloat16).float()
    return xf @ w.float().T


def timed(fn, es, reps):
    with es:
        fn(); torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=es.torch):
            for _ in range(N_CALLS): fn()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(es.torch); g.replay(); b.record(es.torch); b.synchronize()
            ts.append(1e3 * a.elapsed_time(b) / N_CALLS)
    return round(statistics.median(ts), 2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--reps', type=int, default=30); ap.add_argument('--rows', default='1,9,16')
    ap.add_argument('--out', default=None); ap.add_argument('--commit', default='unknown')
    a = ap.parse_args(argv)
    dev = torch.device('cuda'); es = engine_stream(); k = kernel()
    gen = torch.Generator(device=dev).manual_seed(0)
    lines = [f"# Few-row GEMM against cuBLAS ({time.strftime('%Y-%m-%d')}, {torch.cuda.get_device_name()}, commit {a.commit})", '',
             f"Command: `python benchmarks/bench_few_row_gemm.py {' '.join(argv or __import__('sys').argv[1:])}`; µs a call (median of "
             f"{a.reps} graph replays of {N_CALLS} calls); err: max |out - float32 math| / max |float32 math|.", '',
             '| K | N | what | M | cuBLAS µs | few-row µs | rms_norm + cuBLAS µs | few-row with norm µs | err cuBLAS / few-row / with norm |',
             '|---|---|---|---|---|---|---|---|---|']
    rows = []
    for K, N, what in SHAPES:
        w = (torch.randn(N, K, device=dev, generator=gen) * K ** -0.5).to(torch.bfloat16)
        g = (1 + 0.1 * torch.randn(K, device=dev, generator=gen)).to(torch.bfloat16)
        for M in (int(m) for m in a.rows.split(',')):
            x = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
            y, yn, yc = (torch.empty(M, N, device=dev, dtype=torch.bfloat16) for _ in range(3))
            with es:
                few_row(k, x, w, None, y); few_row(k, x, w, g, yn); yc.copy_(F.linear(x, w)); torch.cuda.synchronize()
            r0, r1 = ref(x, w, None), ref(x, w, g)
            err = lambda out, r: float((out.float() - r).abs().max() / r.abs().max())
            e = (err(yc, r0), err(y, r0), err(yn, r1))
            t = dict(cublas=timed(lambda: F.linear(x, w), es, a.reps), few=timed(lambda: few_row(k, x, w, None, y), es, a.reps),
                     norm_cublas=timed(lambda: F.linear(F.rms_norm(x, (K,), g, EPS), w), es, a.reps),
                     few_norm=timed(lambda: few_row(k, x, w, g, yn), es, a.reps))
            rows.append(dict(K=K, N=N, what=what, M=M, err=e, **t))
            lines.append(f"| {K} | {N} | {what} | {M} | {t['cublas']} | **{t['few']}** | {t['norm_cublas']} | **{t['few_norm']}** | "
                         f"{e[0]:.1e} / {e[1]:.1e} / {e[2]:.1e} |")
            print(lines[-1], flush=True)
    text = '\n'.join(lines) + '\n'
    print(text)
    if a.out:
        open(a.out, 'w').write(text); open(a.out.rsplit('.', 1)[0] + '.json', 'w').write(json.dumps(rows, indent=1))


if __name__ == '__main__':
    main()
