"""Which inputs decide how inductor compiles the verify forward's latent products (issue 17, bench_compile.md session 36).

Not a test. In one process: short generations (compiled layers, merged projections, eager rounds) of the cases in
`--order` (e.g. `ar,dflash,ddtree:8,ddtree:16`), in that order, so each token count compiles when its first case runs; then
one round of each case under torch.profiler (bench_run_ahead's census). Per case it prints the verify forward's kernels by
family, the layout copies around the latent products (triton pointwise kernels whose name holds `bmm` or `permute`),
the cuBLAS kernels by name, inductor's counters (pad_mm_bench: GEMMs it timed padded against plain), and the strides the attention saw (q_latent in, out) at each token count. Run it in fresh
processes with different orders (and under TORCH_LOGS=recompiles) to see what decides the layout.

    python benchmarks/diag_compile_layout.py --order ddtree:8 --out OUT/diag_a.json
"""
import argparse, json, sys, time
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).parent))
import bench_run_ahead as bra


def watch_attention(seen: dict):
    "Wrap `model.attention_fn` so every attention call records (q_latent stride, q_pe stride, out stride) by token count."
    import ddtree_nb.model as M
    inner = M.attention_fn
    def attention_fn(*a, **k):
        f = inner(*a, **k)
        if getattr(f, 'traceable', False): return f
        def g(q_latent, q_pe, kv, prefix_len, scale):
            o = f(q_latent, q_pe, kv, prefix_len, scale)
            seen.setdefault(q_latent.shape[0], set()).add((tuple(q_latent.stride()), tuple(q_pe.stride()), tuple(o.stride())))
            return o
        return g
    M.attention_fn = attention_fn


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--order', required=True, help="cases in the order they first run: ar, dflash, ddtree:B (comma-separated)")
    ap.add_argument('--out', required=True); ap.add_argument('--max-new', type=int, default=24)
    ap.add_argument('--pad', action='store_true', help="inductor's pad_mm on (model.INDUCTOR_OPTIONS = {}), as before session 37")
    a = ap.parse_args(argv)
    import ddtree_nb.model as M
    if a.pad: M.INDUCTOR_OPTIONS = {}
    cases = [(c.split(':')[0], int(c.split(':')[1]) if ':' in c else (15 if c == 'dflash' else 0)) for c in a.order.split(',')]
    from ddtree_nb.demo import load_demo_pair, held_out_prompts
    from ddtree_nb.decode import Decoder, Stages
    t, d, tok = load_demo_pair('cuda', torch.bfloat16)
    p = held_out_prompts(tok, n=1, prompt_tokens=32)[0]
    seen, res = {}, dict(order=a.order, gpu=torch.cuda.get_device_name(), torch=torch.__version__, cases=[])
    watch_attention(seen)
    for m, B in cases:      # compile in this order
        t0 = time.perf_counter()
        dec = Decoder(t, d if m != 'ar' else None, p, method=m, budget=B, max_new_tokens=a.max_new, backend='cuda',
                      stages=Stages(graph=False, compile=True, merge=True))
        dec.prefill()
        while not dec.done: dec.step()
        dec.close(); torch.cuda.synchronize()
        print(f"generated {m} B={B} in {time.perf_counter() - t0:.1f} s", flush=True)
    bra.MERGE = True
    for m, B in cases:
        c = bra.census(t, d, p, m, B, print, compile=True)
        c['copies'] = [(n, k) for n, k in c['top'] if n.startswith('triton_poi') and ('bmm' in n or 'permute' in n)]
        c['gemms'] = [(n, k) for n, k in c['top'] if bra.kernel_kind(n) == 'gemm']
        verify = {k: v for k, v in c['by_kind'].items() if k.startswith('verify:')}
        print(f"{m} B={B}: verify {c['by_stage'].get('verify')} kernels {c['us_by_stage'].get('verify')} us; {verify}\n"
              f"  copies {c['copies']}\n  gemms {c['gemms']}", flush=True)
        res['cases'].append(c)
    from torch._dynamo.utils import counters
    from torch._inductor import utils as iu
    from torch._inductor.fx_passes import pad_mm
    res['inductor_counters'] = dict(counters['inductor'])
    checks = dict(tflops=lambda: iu.get_device_tflops(torch.bfloat16), dram_gbps=iu.get_gpu_dram_gbps,
                  compute_bound_9x128x512=lambda: pad_mm.is_mm_compute_bound(9, 128, 512, torch.bfloat16),
                  compute_bound_9x256x704=lambda: pad_mm.is_mm_compute_bound(9, 256, 704, torch.bfloat16))
    res['pad_checks'] = {}
    for k, f in checks.items():
        try: res['pad_checks'][k] = f()
        except Exception as e: res['pad_checks'][k] = f'{type(e).__name__}: {e}'[:300]
    print('inductor counters', res['inductor_counters'], '\npad checks', res['pad_checks'], flush=True)
    res['strides'] = {T: sorted(map(list, s)) for T, s in sorted(seen.items())}
    for T, s in res['strides'].items(): print(f"T={T}: (q_latent, q_pe, out) strides {s}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True); Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == '__main__':
    main()
