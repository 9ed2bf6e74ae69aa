"""Fusion A/B for the round's torch parts (issue 17): the demo target's forward uncompiled and with each decoder layer
`torch.compile`d (inductor, triton; `TargetModel.compile_layers`), the PyCUDA verify kernel either a graph break
(`torch.compiler.disable`, the default) or a custom op inside the graph (`trace_attention`); with the projections of one
input merged into one GEMM (`model.merge_projections`) or not; and compiled variants under inductor options (combo
kernels, programmatic dependent launch, GEMM autotuning). Each variant is captured
in one CUDA graph on the engine stream; reported per T (1 = an AR step, 65 = a DDTree B=64 verify): kernels per forward
(torch.profiler, CUPTI), the most frequent names and the whole ordered list with each kernel's µs, graph-replay time (CUDA events, median of many), the largest |logit|
difference to the uncompiled forward, the error against an fp32 copy of the weights, and the first call's time (the
compile). A variant whose option this torch lacks is reported as an error row. Not a test.

    python benchmarks/bench_compile.py --out OUTDIR [--commit HASH] [--reps 200] [--variants eager,compiled,...] [--tokens 1,65]
"""
import argparse, collections, json, os, statistics, time, traceback
from pathlib import Path
import torch, torch._dynamo

VARIANTS = {   # name: (torch.compile kwargs, or None for the uncompiled layers; projections merged; attention traced as a custom op)
    'eager': (None, False, False), 'eager+merge': (None, True, False), 'compiled': ({}, False, False),
    'compiled+merge': ({}, True, False), 'compiled+merge+traced': ({}, True, True),
    'compiled+merge+combo': (dict(options={'combo_kernels': True}), True, False),
    'compiled+merge+pdl': (dict(options={'triton.enable_pdl': True}), True, False),
    'compiled+merge+autotune': (dict(mode='max-autotune-no-cudagraphs'), True, False),
    'compiled+merge+autotune-ar': (dict(by_tokens={1: dict(mode='max-autotune-no-cudagraphs')}), True, False)}   # = model.AUTOTUNE_AR

def kernels(fn):
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p: fn(); torch.cuda.synchronize()
    ev = [e for e in p.events() if e.device_type.name == 'CUDA' and not e.name.startswith(('Memcpy', 'Memset'))]
    seq = [(e.name[:60], round(e.device_time, 2)) for e in sorted(ev, key=lambda e: e.time_range.start)]   # every kernel, in order: where a layer's launches go
    return len(ev), sum(e.device_time for e in ev), collections.Counter(e.name[:60] for e in ev).most_common(8), seq

def replay_ms(g, es, reps):
    "Median ms of `reps` replays of graph `g` on engine stream `es` (the replays and their CUDA events on that stream)."
    ts = []
    with es:
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(es.torch); g.replay(); b.record(es.torch); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

def setup_variant(t, name):
    "The variant on the model's own switches (what `Stages(compile=True, merge=...)` sets): dynamo's caches dropped, then merge, trace, compile."
    from ddtree_nb.model import merge_projections
    kw, merged, traced = VARIANTS[name]
    torch._dynamo.reset()
    merge_projections(t, merged)
    t.compiled_layers, t.use_compiled, t.trace_attention = None, kw is not None, traced
    if kw is not None: t.compile_layers(**kw)

def main():
    ap = argparse.ArgumentParser(); ap.add_argument('--out', required=True); ap.add_argument('--commit', default='unknown')
    ap.add_argument('--reps', type=int, default=200); ap.add_argument('--variants', default=','.join(VARIANTS))
    ap.add_argument('--tokens', default='1,65', help='token counts of the forwards, comma-separated (1 = an AR step, 17 = a DFlash / DDTree B=16 verify, 65 = B=64)')
    ap.add_argument('--draft', action='store_true', help="also the drafter's one draft (a round's front): eager and compiled, merged, kernels in order and replay ms")
    ap.add_argument('--draft-kernel', default='1', help="with --draft: DDTREE_DRAFT_KERNEL values to run the draft under, comma-separated (0: block_attention under the mask, 1: the draft attention kernel, 2: also norm and RoPE in the kernels)"); a = ap.parse_args()
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
    torch._dynamo.config.cache_size_limit = torch._dynamo.config.accumulated_cache_size_limit = 256   # a graph per layer kind per T
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    meta = dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), torch=torch.__version__, commit=a.commit,
                command=f'python benchmarks/bench_compile.py --out {a.out} --commit {a.commit} --reps {a.reps} --variants {a.variants} --tokens {a.tokens}' + (f' --draft --draft-kernel {a.draft_kernel}' if a.draft else ''))
    res, first_fwd, ref = [], {}, {}
    for variant in a.variants.split(','):
        try: setup_variant(t, variant)
        except Exception as e: res.append(dict(variant=variant, error=repr(e)[:300])); print(res[-1], flush=True); continue
        for T in (int(x) for x in a.tokens.split(',')):
            try: r = dict(variant=variant, T=T, **measure(t, t32, cache, start, P, rows, T, es, a.reps, ref, first_fwd, vis_to_bits))
            except Exception: r = dict(variant=variant, T=T, error=traceback.format_exc()[-600:])
            print(json.dumps(r), flush=True); res.append(r)
        (out / 'bench_compile.json').write_text(json.dumps(dict(meta=meta, rows=res), indent=1))   # after each variant: a timeout keeps the rest
    if a.draft:
        for dk in a.draft_kernel.split(','):
            os.environ['DDTREE_DRAFT_KERNEL'] = dk
            d.__dict__.pop('_compiled_draft', None); torch._dynamo.reset()   # the setting is read when the draft is traced
            for compiled in (False, True):
                name = 'draft ' + ('compiled+merge' if compiled else 'eager+merge') + f' kernel={dk}'
                try: r = dict(variant=name, **measure_draft(d, compiled, es, a.reps))
                except Exception: r = dict(variant=name, error=traceback.format_exc()[-600:])
                print(json.dumps(r), flush=True); res.append(r)
                (out / 'bench_compile.json').write_text(json.dumps(dict(meta=meta, rows=res), indent=1))   # after each row: a timeout keeps the rest

def measure_draft(d, compiled, es, reps, P=1000):
    "The drafter's one draft as a round runs it (merged; 16 feature rows, a context of P rows): kernels in order (one of them the length reset), replay ms."
    from ddtree_nb.model import merge_projections
    merge_projections(d, True)
    c = d.config
    cache = d.new_cache(P + 64); cache.length.fill_(P)
    feats = torch.randn(d.block_size, len(c.target_layer_ids) * c.hidden_size, device='cuda', generator=torch.Generator('cuda').manual_seed(0)).bfloat16()   # the same draft for every setting
    n_new, root = torch.tensor([5], dtype=torch.int32, device='cuda'), torch.tensor([7], device='cuda')
    draft = d.compiled_draft() if compiled else d.draft
    def fwd():
        cache.length.fill_(P); return draft(cache, feats, n_new, root)
    r, g, o, _ = profile_and_capture(fwd, es)
    return dict(r, replay_ms=round(replay_ms(g, es, reps), 4), argmax=o.argmax(-1).tolist(), logits_sum=round(o.double().sum().item(), 3))

def profile_and_capture(fwd, es):
    "On engine stream `es`: `fwd`'s first call (timed: the compile), 3 warm calls, its kernels (`kernels`), then its capture in a graph -> (row fields, graph, first output, graph output)."
    with es:
        t0 = time.time(); o = fwd(); torch.cuda.synchronize(); first_s = time.time() - t0
        for _ in range(3): fwd()
        n_k, k_us, top, seq = kernels(fwd)
        g = torch.cuda.CUDAGraph(); torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=es.torch): gout = fwd()
        g.replay(); torch.cuda.synchronize()
    return dict(kernels=n_k, kernel_us=round(k_us, 1), first_call_s=round(first_s, 1), top=top, sequence=seq), g, o, gout

def measure(t, t32, cache, start, P, rows, T, es, reps, ref, first_fwd, vis_to_bits):
    ids = torch.randint(t.config.vocab_size, (T,), device='cuda', generator=torch.Generator('cuda').manual_seed(T))
    pos = P + torch.arange(T, device='cuda')
    vis = vis_to_bits(torch.ones(T, T, dtype=torch.bool, device='cuda').tril())
    kv0 = cache.kv.clone()
    if T not in ref:
        c32 = t32.new_cache(rows); c32.kv.copy_(kv0)
        ref[T] = t32(ids, pos, c32, start, vis, hidden_layers=(1, 3, 5)).logits.float()
    def fwd(): return t(ids, pos, cache, start, vis, hidden_layers=(1, 3, 5)).logits
    r, g, o, gout = profile_and_capture(fwd, es)
    cache.kv.copy_(kv0)
    ms = replay_ms(g, es, reps)
    base = first_fwd.setdefault(T, o.float())          # the first variant's forward (eager, in the default order)
    return dict(r, replay_ms=round(ms, 4),
                rel_max_logit_diff=(gout.float() - base).abs().max().item() / base.abs().max().item(),
                same_argmax=bool((gout.argmax(-1) == base.argmax(-1)).all()),
                rel_err_vs_fp32=((gout.float() - ref[T]).norm() / ref[T].norm()).item(),
                argmax_agree_fp32=float((gout.argmax(-1) == ref[T].argmax(-1)).float().mean()))

if __name__ == '__main__': main()
