"""Compile kernel builds into the cubin cache side by side, so that the benches that load them next read the cache.

Not a test. nvcc compiles one file a process and a bench loads its builds one after another: bench_draft_fused.py --stamps
--builds called,inlined loads four builds of kernels/dev/draft_fused.cu (about 30 s of nvcc each on a 2-core machine), after
compiling the torch draft it compares with; session 39's short call ended (at most ~140 s into that step, on a fresh machine)
while the step was still in the torch compile, before any nvcc run. Each argument is FILE[:OPTION,OPTION...]: a file under kernels/ and its extra nvcc options, in the order the
bench passes them (the cache key is the source, the arch and the options in order: `runtime.nvcc_compile`). Built for
--arch, by default this GPU's.

    python benchmarks/prebuild_kernels.py [--arch sm_90] dev/draft_fused.cu dev/draft_fused.cu:-DDF_INLINE,-DDF_STAMPS ...
"""
import argparse, time
from concurrent.futures import ThreadPoolExecutor
from ddtree_nb.runtime import nvcc_compile, kernel_path


def build(spec: str, arch: str) -> str:
    "Compile one FILE[:OPTIONS] (or read it from the cache); its line for the log."
    f, _, opts = spec.partition(':')
    t0, p = time.perf_counter(), kernel_path(f)
    nvcc_compile(p, arch, tuple(o for o in opts.split(',') if o), name=p.stem)   # as load_kernel calls it: the same cache key
    return f"{spec} ({arch}): {time.perf_counter() - t0:.1f} s"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('specs', nargs='+', help='FILE[:OPTION,OPTION...]'); ap.add_argument('--arch')
    a = ap.parse_args(argv)
    if a.arch is None:
        from ddtree_nb.runtime import device_arch
        a.arch = device_arch()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(a.specs)) as ex:
        for line in ex.map(lambda s: build(s, a.arch), a.specs): print(line, flush=True)
    print(f"{len(a.specs)} builds in {time.perf_counter() - t0:.1f} s")


if __name__ == '__main__':
    main()
