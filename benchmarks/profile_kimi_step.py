"""Where a Kimi-width AR step's time goes, kernel by kernel (GPU only; issue 17).

Builds the Kimi K2.6-width slice of `bench_kimi_slice.py` (random weights on the device, routed experts INT4 on the W4A16
kernel, attention on the verify kernel), fills a latent cache of --ctx rows, and runs one AR step (1 token at position
ctx) under `torch.profiler`. Each CUDA kernel is put in one class by its name (MoE kernels, the verify kernel, GEMMs,
elementwise, reductions, copies, other); per class: kernel count, GPU time, the bytes the class must read at least
(bf16 weights for the GEMMs, the routed experts hit for the MoE, the cache rows for attention), and those bytes over
that time against the 4.27 TB/s copy ceiling. It also reports the step's CUDA-graph replay time beside the kernels'
summed time: the difference is launch gaps inside the graph.

Run: python benchmarks/profile_kimi_step.py --layers 5 --ctx 4096 [--compile] --out $OUT/profile_kimi_step
"""
from __future__ import annotations
import argparse, json, re, sys, datetime, collections
from pathlib import Path
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_kimi_slice import KIMI, build_on_device, layer_bytes, graph_ms, timed

CLASSES = (('moe', r'moe|gate_up|down_v|combine_v|group_pairs'), ('verify attention', r'verify|mla|split_combine|attn'),
           ('topk / sort', r'topk|sort|radix'), ('fused (triton)', r'^triton_'),
           ('gemm', r'gemm|gemv|cutlass|xmma|cublas|sm90_|splitK|Kernel2|nvjet'), ('elementwise', r'elementwise|vectorized|unrolled|pointwise'),
           ('reduce', r'reduce|softmax|norm'), ('copy / cat / index', r'copy|cat|index|scatter|gather|fill'))

def kernel_class(name: str) -> str:
    "The class of a CUDA kernel, by the first pattern of `CLASSES` its lower-cased name matches ('other' if none)."
    n = name.lower()
    return next((c for c, pat in CLASSES if re.search(pat, n)), 'other')

def class_bytes(c: dict, layers: int, ctx: int) -> dict:
    "Least bytes an AR step reads per class: bf16 weights (GEMMs, incl. lm_head and routers), the top-k routed experts (MoE), the cache rows (attention)."
    H, I, k = c['hidden_size'], c['moe_intermediate_size'], c['num_experts_per_tok']
    per_expert = 3 * H * I * (0.5 + 2 / 32)
    routed_all = c['n_routed_experts'] * per_expert
    dense = layer_bytes(c, True) + (layers - 1) * (layer_bytes(c, False, int4_experts=True) - routed_all) + c['vocab_size'] * H * 2
    return {'gemm': dense, 'moe': (layers - 1) * k * per_expert, 'verify attention': layers * ctx * (c['kv_lora_rank'] + c['qk_rope_head_dim']) * 2}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--layers', type=int, default=5, help='decoder layers: 1 dense + MoE')
    ap.add_argument('--ctx', type=int, default=4096)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--compile', action='store_true', help="the decoder layers under torch.compile (`TargetModel.compile_layers`), kernels outside it")
    ap.add_argument('--routing', choices=('router', 'route', 'torch'), default='router',
                    help="MoE routing: router = GEMV + top-k + grouping in one launch (default); route = cuBLAS logits + moe_route_group; torch = Router.select + moe_group")
    ap.add_argument('--moe-version', type=int, default=None, help="the W4A16 MoE kernel version (default `moe.CUDA_VERSION`)")
    ap.add_argument('--commit', default=None)
    ap.add_argument('--out', default='benchmarks/profile_kimi_step')
    args = ap.parse_args(argv)
    if not torch.cuda.is_available(): sys.exit("profile_kimi_step: needs a CUDA GPU")
    c = dict(KIMI, num_hidden_layers=args.layers)
    model = build_on_device(c, args.seed)
    model.attn_backend, model.check_inputs = 'cuda', False
    from ddtree_nb.moe import PackedMoE
    PackedMoE.fused_routing, PackedMoE.router_gemv = args.routing != 'torch', args.routing == 'router'
    import ddtree_nb.moe as moe
    if args.moe_version is not None: moe.CUDA_VERSION = args.moe_version   # read by moe_w4a16 at each call
    if args.compile: model.compile_layers().use_compiled = True
    cache = model.new_cache(args.ctx + 2)
    cache.kv.normal_(0.0, 1.0, generator=torch.Generator(device='cuda').manual_seed(args.seed + 1))
    ids, pos = torch.tensor([7], device='cuda'), torch.tensor([args.ctx], device='cuda')
    step = lambda: model(ids, pos, cache, args.ctx)
    eager_ms, graph_step_ms = timed(step, args.reps), graph_ms(step, args.reps)
    from torch.profiler import profile, ProfilerActivity
    for _ in range(3): step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(); torch.cuda.synchronize()
    kern = [e for e in prof.events() if e.device_type.name == 'CUDA']
    if not kern: sys.exit("profile_kimi_step: the profiler recorded no CUDA kernels (CUPTI unavailable?)")
    by_name, by_class = collections.defaultdict(lambda: [0, 0.0]), collections.defaultdict(lambda: [0, 0.0])
    for e in kern:
        us = e.time_range.elapsed_us()                  # a kernel event's interval is its run on the GPU
        by_name[e.name][0] += 1; by_name[e.name][1] += us
        by_class[kernel_class(e.name)][0] += 1; by_class[kernel_class(e.name)][1] += us
    total_us = sum(v[1] for v in by_class.values())
    nbytes = class_bytes(c, args.layers, args.ctx)
    rows = [dict(cls=k, kernels=n, us=us, share=us / total_us, gb=nbytes.get(k, 0) / 1e9,
                 pct_of_ceiling=(nbytes[k] / (us * 1e-6) / 4.27e12 * 100) if k in nbytes and us else None)
            for k, (n, us) in sorted(by_class.items(), key=lambda kv: -kv[1][1])]
    top = [dict(name=n[:110], kernels=v[0], us=v[1], cls=kernel_class(n)) for n, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:25]]
    allb = sum(nbytes.values())
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'), device=torch.cuda.get_device_name(),
                commit=args.commit, torch=torch.__version__, command='python ' + ' '.join([sys.argv[0]] + (argv or sys.argv[1:])),
                layers=args.layers, ctx=args.ctx, compiled=args.compile, routing=args.routing, moe_version=moe.CUDA_VERSION, kernels=len(kern), kernel_us=total_us, eager_ms=eager_ms, graph_ms=graph_step_ms,
                step_gb=allb / 1e9, graph_pct_of_ceiling=allb / (graph_step_ms * 1e-3) / 4.27e12 * 100)
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + '.json').write_text(json.dumps(dict(meta=meta, classes=rows, top=top), indent=1))
    f = lambda x: '–' if x is None else f"{x:.0f}%"
    md = ['## Kimi-width AR step, kernel by kernel', '', *(f"- {k}: {v}" for k, v in meta.items()), '',
          '| class | kernels | GPU µs | share | least GB read | % of 4.27 TB/s |', '|---|---|---|---|---|---|',
          *(f"| {r['cls']} | {r['kernels']} | {r['us']:.1f} | {r['share']:.1%} | {r['gb']:.3f} | {f(r['pct_of_ceiling'])} |" for r in rows),
          '', '| kernel | class | count | GPU µs |', '|---|---|---|---|',
          *(f"| `{t['name']}` | {t['cls']} | {t['kernels']} | {t['us']:.1f} |" for t in top)]
    out.with_name(out.name + '.md').write_text('\n'.join(md) + '\n')
    print('\n'.join(md))

if __name__ == '__main__': main()
