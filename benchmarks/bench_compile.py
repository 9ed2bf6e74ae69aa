"""Fusion A/B for the round's torch parts (issue 17): the demo target's forward as today vs the same forward with each
decoder layer `torch.compile`d (inductor, triton), the PyCUDA verify kernel left opaque (`torch.compiler.disable`, one
graph break per layer). Each variant is captured in one CUDA graph on the engine stream; reported per T (1 = an AR step,
65 = a DDTree B=64 verify): kernels per forward (torch.profiler, CUPTI), graph-replay time (CUDA events, median of many),
the largest |logit| difference to the uncompiled forward, and the compile time. Not a test.

    python benchmarks/bench_compile.py --out OUTDIR [--commit HASH] [--reps 200]
"""
import argparse, json, statistics, time
from pathlib import Path
import torch, torch._dynamo

def kernels(fn):
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p: fn(); torch.cuda.synchronize()
    ev = [e for e in p.events() if e.device_type.name == 'CUDA' and not e.name.startswith(('Memcpy', 'Memset'))]
    return len(ev), sum(e.device_time for e in ev)

def replay_ms(g, es, reps):
    "Median ms of `reps` replays of graph `g` on engine stream `es` (the replays and their CUDA events on that stream)."
    ts = []
    with es:
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(es.torch); g.replay(); b.record(es.torch); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', required=True); ap.add_argument('--commit', default='unknown')
    ap.add_argument('--reps', type=int, default=200); a = ap.parse_args()
    from ddtree_nb import model as M
    from ddtree_nb.demo import load_demo_pair
    from ddtree_nb.verify import vis_to_bits
    from ddtree_nb.runtime import engine_stream
    torch.manual_seed(0)
    t, d, tok = load_demo_pair('cuda', torch.bfloat16)
    t.moe_dispatch, t.check_inputs, t.attn_backend = 'dense', False, 'cuda'
    es = engine_stream(0)
    P, rows = 1000, 1200
    cache = t.new_cache(rows); cache.kv.normal_(0, 0.5)
    start = torch.tensor([P], dtype=torch.int32, device='cuda')
    t32 = load_demo_pair('cuda', torch.float32)[0]       # the reference: fp32 weights (the bf16 ones, upcast), torch attention
    t32.moe_dispatch, t32.check_inputs = 'dense', False
    res, eager_fwd, ref = [], {}, {}
    for variant in ('eager', 'compiled'):
        if variant == 'compiled':
            plain = M.attention_fn
            M.attention_fn = lambda *x: torch.compiler.disable(plain(*x))     # the verify kernel stays opaque
            torch._dynamo.config.cache_size_limit = torch._dynamo.config.accumulated_cache_size_limit = 256   # a graph per layer per T
            for l in t.layers: l.forward = torch.compile(l.forward, dynamic=False)
        for T in (1, 65):
            ids = torch.randint(t.config.vocab_size, (T,), device='cuda', generator=torch.Generator('cuda').manual_seed(T))
            pos = P + torch.arange(T, device='cuda')
            vis = vis_to_bits(torch.ones(T, T, dtype=torch.bool, device='cuda').tril())
            kv0 = cache.kv.clone()
            if T not in ref:
                c32 = t32.new_cache(rows); c32.kv.copy_(kv0)
                ref[T] = t32(ids, pos, c32, start, vis, hidden_layers=(1, 3, 5)).logits.float()
            def fwd(): return t(ids, pos, cache, start, vis, hidden_layers=(1, 3, 5)).logits
            with es:
                t0 = time.time(); out = fwd(); torch.cuda.synchronize(); first_s = time.time() - t0
                for _ in range(3): fwd()
                n_k, k_us = kernels(fwd)
                g = torch.cuda.CUDAGraph(); torch.cuda.synchronize()
                with torch.cuda.graph(g, stream=es.torch): gout = fwd()
                g.replay(); torch.cuda.synchronize()
            cache.kv.copy_(kv0)
            ms = replay_ms(g, es, a.reps)
            if variant == 'eager': eager_fwd[T] = out.float()
            diff = (gout.float() - eager_fwd[T]).abs().max().item() / eager_fwd[T].abs().max().item()
            same_argmax = bool((gout.argmax(-1) == eager_fwd[T].argmax(-1)).all())
            err32 = ((gout.float() - ref[T]).norm() / ref[T].norm()).item()
            r = dict(variant=variant, T=T, kernels=n_k, kernel_us=round(k_us, 1), replay_ms=round(ms, 4), first_call_s=round(first_s, 1),
                     rel_max_logit_diff=diff, same_argmax=same_argmax, rel_err_vs_fp32=err32,
                     argmax_agree_fp32=float((gout.argmax(-1) == ref[T].argmax(-1)).float().mean()))
            print(json.dumps(r), flush=True); res.append(r)
            del g
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), torch=torch.__version__, commit=a.commit,
                command=f'python benchmarks/bench_compile.py --out {a.out} --commit {a.commit} --reps {a.reps}')
    (out / 'bench_compile.json').write_text(json.dumps(dict(meta=meta, rows=res), indent=1))

if __name__ == '__main__': main()
