"""Kimi-shaped slice: one AR step vs one tree-verify pass, by tree size and context (GPU only).

A slice of a Kimi K2.6-shaped target (ddtree_nb.model) at the real widths -- hidden 7168, 64 heads, MLA q_lora 1536 /
kv_lora 512 / nope 128 / rope 64 / v 128, 384 routed experts top-8 + 1 shared (moe_intermediate 2048), first layer
dense (intermediate 18432), vocab 163840 -- with as many layers as fit on the GPU, random weights generated on the
device (nothing downloaded). For contexts 4k and 32k (latent cache filled with random rows) and tree sizes
1..256 (tokens verified: root + drafted nodes, a DDTree-shaped tree from random draft logits), it times

  - one AR step (1 token at position ctx) and
  - one verify pass (the tree's tokens at positions ctx + depth under the ancestor mask),

with CUDA events (warm-up, median of --reps), eagerly and as a CUDA-graph replay (captured on the engine stream, as the
decode round is; --no-graph skips it), counts the distinct routed experts each MoE layer selects for the tree's tokens, and
sets the bytes each forward must read (`step_bytes`) against its time: TB/s against the 4.27 TB/s copy ceiling. Writes OUT.json (rows: ctx, tree_size, ar_ms, verify_ms, experts_per_layer), OUT.md and OUT.png
(ddtree_nb.bench.plot_kimi_ratio).

What it measures and what it doesn't:
  - Routed experts (default `--experts int4`) stay INT4-packed on the GPU (int32 words + bf16 group-32 scales, random)
    and run through ddtree_nb.moe's W4A16 kernel (`PackedMoE`, backend 'cuda', no host sync), as a Kimi checkpoint
    would be served; `--experts bf16` keeps them in bf16 and runs the package's torch MoE (a loop over the distinct
    experts hit, one host sync per layer): 4x the bytes, about a quarter of the layers fit.
  - Distinct experts are counted in one extra, untimed forward per tree size (the count needs a host read).
  - Random routers route near-uniformly: distinct experts vs tree size is the pessimistic case (real siblings share
    prefixes and route alike).
  - A 61-layer estimate scales the slice linearly: t61 = t_slice * 61 / layers (the slice's embedding + lm_head are
    counted once per layer too, a small overestimate), drafter time not included.

Run (on a machine with one H200):
  python benchmarks/bench_kimi_slice.py --out benchmarks/kimi_slice
  python benchmarks/bench_kimi_slice.py --layers 2 --contexts 4096 --tree-sizes 1,16,256 --reps 3   # quick
"""
from __future__ import annotations
import argparse, json, sys, time, datetime, statistics
from pathlib import Path
import torch

from ddtree_nb.model import kimi_config
KIMI = kimi_config()   # Kimi K2.6 widths; the slice only cuts num_hidden_layers

def _csv(t): return lambda s: [t(x) for x in s.split(',') if x.strip()]

def layer_bytes(c: dict, dense: bool, elt: int=2, int4_experts: bool=False) -> int:
    "Parameter bytes of one decoder layer (routed experts INT4 group-32 packed: 0.5 B per weight + a bf16 scale per 32)."
    H, nh = c['hidden_size'], c['num_attention_heads']
    qk = c['qk_nope_head_dim'] + c['qk_rope_head_dim']
    attn = (H * c['q_lora_rank'] + c['q_lora_rank'] * nh * qk + H * (c['kv_lora_rank'] + c['qk_rope_head_dim'])
            + c['kv_lora_rank'] * nh * (c['qk_nope_head_dim'] + c['v_head_dim']) + nh * c['v_head_dim'] * H)
    if dense: mlp = 3 * H * c['intermediate_size']
    else:
        routed = 3 * H * c['moe_intermediate_size'] * c['n_routed_experts']
        mlp = 3 * H * c['moe_intermediate_size'] * c['n_shared_experts'] + c['n_routed_experts'] * H * 2  # router fp32
        if int4_experts: return (attn + mlp) * elt + routed // 2 + routed // 32 * 2
        mlp += routed
    return (attn + mlp) * elt

def fit_layers(c: dict, free_bytes: int, frac: float, max_ctx: int, max_T: int, int4_experts: bool=False) -> int:
    "Most layers (1 dense + k MoE) whose weights, latent cache and a working margin fit in frac * free_bytes."
    fixed = 2 * c['vocab_size'] * c['hidden_size'] * 2 + 8 * 2**30                       # embed + lm_head (bf16) + 8 GiB activations/workspace
    per_cache = (max_ctx + max_T + 1) * (c['kv_lora_rank'] + c['qk_rope_head_dim']) * 2
    budget = frac * free_bytes - fixed - layer_bytes(c, True) - per_cache
    return 1 + max(0, int(budget // (layer_bytes(c, False, int4_experts=int4_experts) + per_cache)))

@torch.no_grad()
def build_on_device(c: dict, seed: int, device='cuda', int4_experts: bool=True):
    "TargetModel at config c, allocated directly on the GPU in bf16 (router fp32), random N(0, 0.02) weights; routed experts INT4-packed."
    from ddtree_nb.model import TargetModel, config_from_dict, Router
    from ddtree_nb.moe import PackedMoE, packed_placeholders
    cfg = config_from_dict(c)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device('meta'): m = TargetModel(cfg)     # nothing allocated yet
    finally: torch.set_default_dtype(old)
    if int4_experts: packed_placeholders(m, backend='cuda')   # packed experts in place of bf16 ones, before anything is allocated
    m.to_empty(device=device)
    m.init_rope()                                   # the rope buffer in fp32, as build_target makes it
    g = torch.Generator(device=device).manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, PackedMoE):               # random nibbles (uniform -8..7) x scale 0.006: weights of std ~0.028
            for k in PackedMoE.experts_keys:
                t = getattr(mod, k)
                if k.endswith('packed'): t.random_(-2**31, 2**31 - 1, generator=g)
                else: t.fill_(0.006)
    for mod in m.modules():
        if isinstance(mod, Router):
            mod.weight.data = torch.randn(mod.weight.shape, generator=g, device=device, dtype=torch.float32) * 0.02
            mod.e_score_correction_bias.copy_(torch.randn(mod.e_score_correction_bias.shape, generator=g, device=device) * 0.05)
    for name, p in m.named_parameters():
        if p.dtype == torch.float32: continue        # routers, done above
        if p.dtype != torch.bfloat16: raise TypeError(f"{name}: unexpected dtype {p.dtype}")
        if name.endswith('layernorm.weight') or name == 'norm.weight': p.fill_(1.0)
        else: p.normal_(0.0, 0.02, generator=g)
    return m.eval().requires_grad_(False)

def random_tree(T: int, seed: int):
    "A DDTree-shaped tree of T tokens (root + T-1 nodes) from random peaked draft logits."
    from ddtree_nb.tree import build_tree_ref
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(15, 256, generator=g) * 3
    return build_tree_ref(logits, T - 1)

def step_bytes(c: dict, layers: int, ctx: int, experts_hit, int4_experts: bool=True) -> int:
    """HBM bytes one forward must read at least: every dense weight once, the lm_head, the routed experts hit in each MoE layer
    (`experts_hit`: one count per MoE layer; an AR step hits top-k), and the latent cache's ctx rows in every layer."""
    H, I, V = c['hidden_size'], c['moe_intermediate_size'], c['vocab_size']
    per_expert = 3 * H * I * (0.5 + 2 / 32) if int4_experts else 3 * H * I * 2      # INT4: nibbles + a bf16 scale per 32
    routed_all = c['n_routed_experts'] * per_expert
    moe_rest = layer_bytes(c, False, int4_experts=int4_experts) - routed_all       # attention, shared expert, router
    cache = layers * ctx * (c['kv_lora_rank'] + c['qk_rope_head_dim']) * 2
    return int(V * H * 2 + layer_bytes(c, True) + sum(moe_rest + n * per_expert for n in experts_hit) + cache)

def graph_ms(fn, reps: int, warmup: int=2) -> float:
    "Median ms of one CUDA-graph replay of fn() (warmed up, then captured on the engine stream as the decode round is), CUDA events."
    from ddtree_nb.runtime import engine_stream
    es = engine_stream(torch.cuda.current_device())
    from bench_compile import replay_ms        # benchmarks/: the same replay timing as the compile A/B
    with es:                                   # the warm-up and the capture on the engine stream too
        for _ in range(warmup): fn()           # allocates the workspaces outside the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=es.torch): fn()
    ms = replay_ms(g, es, reps)
    del g
    return ms

def timed(fn, reps: int, warmup: int=2) -> float:
    "Median ms of fn() over reps, CUDA events."
    for _ in range(warmup): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--contexts', type=_csv(int), default=[4096, 32768])
    ap.add_argument('--tree-sizes', type=_csv(int), default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    ap.add_argument('--layers', type=int, default=0, help='decoder layers (1 dense + MoE); 0 = as many as fit')
    ap.add_argument('--mem-frac', type=float, default=0.85)
    ap.add_argument('--attn-backend', default='cuda', choices=('cuda', 'torch'))
    ap.add_argument('--experts', default='int4', choices=('int4', 'bf16'), help='routed experts packed INT4 (W4A16 kernel) or bf16 (torch loop)')
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--no-graph', dest='graph', action='store_false', help='skip the CUDA-graph replays (eager timings only)')
    ap.add_argument('--compile', action='store_true', help='decoder layers under torch.compile (`TargetModel.compile_layers`; the kernels outside the trace)')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', default='benchmarks/kimi_slice')
    args = ap.parse_args(argv)
    if not torch.cuda.is_available(): sys.exit("bench_kimi_slice: needs a CUDA GPU")
    from tqdm.auto import tqdm
    from ddtree_nb.bench import git_commit, plot_kimi_ratio
    from ddtree_nb.model import MoE
    from ddtree_nb.moe import PackedMoE, memory_by_kind
    free, total = torch.cuda.mem_get_info()
    Tmax, Cmax = max(args.tree_sizes), max(args.contexts)
    int4 = args.experts == 'int4'
    n_layers = args.layers or fit_layers(KIMI, free, args.mem_frac, Cmax, Tmax, int4)
    c = dict(KIMI, num_hidden_layers=n_layers)
    t0 = time.time()
    model = build_on_device(c, args.seed, int4_experts=int4)
    model.attn_backend, model.check_inputs = args.attn_backend, False
    if args.compile: model.compile_layers().use_compiled = True     # compiled per token count on first use (the warm-ups)
    print(f"built {n_layers} layers in {time.time() - t0:.0f} s; {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated", file=sys.stderr)
    hits, counting = {}, [False]
    def _count(i):
        def hook(m_, inp, out):
            if counting[0]: hits[i] = int(out[1].unique().numel())
        return hook
    for i, mod in enumerate(model.modules()):
        if isinstance(mod, (MoE, PackedMoE)): mod.gate.register_forward_hook(_count(i))
    dev = 'cuda'
    cache = model.new_cache(Cmax + Tmax + 1)
    g = torch.Generator(device=dev).manual_seed(args.seed + 1)
    cache.kv.normal_(0.0, 1.0, generator=g)
    mem = memory_by_kind(model, cache)
    print(f"memory by kind (GiB): " + ', '.join(f"{k} {v / 2**30:.1f}" for k, v in mem.items() if k != 'moe_layers'), file=sys.stderr)
    rows = []
    with tqdm(total=len(args.contexts) * len(args.tree_sizes), desc='kimi slice') as bar:
        for ctx in args.contexts:
            ids1 = torch.randint(0, c['vocab_size'], (1,), device=dev, generator=g)
            pos1 = torch.tensor([ctx], device=dev)
            ar = timed(lambda: model(ids1, pos1, cache, ctx), args.reps)
            ar_g = graph_ms(lambda: model(ids1, pos1, cache, ctx), args.reps) if args.graph else None
            ar_bytes = step_bytes(c, n_layers, ctx, [c['num_experts_per_tok']] * (n_layers - 1), int4)
            for T in args.tree_sizes:
                tree = random_tree(T, args.seed + T)
                ids = torch.randint(0, c['vocab_size'], (T,), device=dev, generator=g)
                pos, vis = tree.positions(ctx).to(dev), tree.visibility.to(dev)
                hits.clear(); counting[0] = True
                packed = [m_ for m_ in model.modules() if isinstance(m_, PackedMoE)]
                for m_ in packed: m_.fused_routing = False         # the count hooks the router module (the fused launch skips it)
                model.use_compiled = False                         # eager: no recompile for the switched attribute
                model(ids, pos, cache, ctx, vis)                   # untimed: count the distinct experts hit
                model.use_compiled = args.compile
                for m_ in packed: m_.fused_routing = True
                counting[0] = False
                ver = timed(lambda: model(ids, pos, cache, ctx, vis), args.reps)
                ver_g = graph_ms(lambda: model(ids, pos, cache, ctx, vis), args.reps) if args.graph else None
                ex = [hits[k] for k in sorted(hits)]
                vb = step_bytes(c, n_layers, ctx, ex, int4)
                best = lambda e, g_: g_ if g_ is not None else e        # the graph replay where there is one
                rows.append(dict(ctx=ctx, tree_size=T, ar_ms=ar, verify_ms=ver, ratio=ver / ar, experts_per_layer=ex,
                                 ar_graph_ms=ar_g, verify_graph_ms=ver_g, ar_bytes=ar_bytes, verify_bytes=vb,
                                 ar_tb_s=ar_bytes / best(ar, ar_g) / 1e9, verify_tb_s=vb / best(ver, ver_g) / 1e9,
                                 est_61_layers_ar_ms=best(ar, ar_g) * 61 / n_layers, est_61_layers_verify_ms=best(ver, ver_g) * 61 / n_layers))
                bar.update()
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'), device=torch.cuda.get_device_name(),
                commit=git_commit(), torch=torch.__version__, command='python ' + ' '.join([sys.argv[0]] + (argv or sys.argv[1:])),
                layers=n_layers, moe_layers=n_layers - 1, compiled=args.compile, n_routed_experts=c['n_routed_experts'], attn_backend=args.attn_backend,
                expert_dtype='int4 (group 32, W4A16 kernel)' if int4 else 'bfloat16 (torch loop)', reps=args.reps,
                bytes_by_kind={k: v for k, v in mem.items()})
    res = dict(meta=meta, config=c, rows=rows)
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + '.json').write_text(json.dumps(res, indent=1))
    md = [f"## Kimi-shaped slice: AR step vs verify pass", '', *(f"- {k}: {v}" for k, v in meta.items()), '',
          'Eager = one forward from Python; graph = its CUDA-graph replay. TB/s = the bytes a forward must read (`step_bytes`: dense '
          'weights, lm_head, the experts hit, the cache rows) over its best time, against 4.27 TB/s; 61-layer estimates scale the best time.', '',
          '| ctx | tree size | AR ms eager / graph | verify ms eager / graph | verify/AR (eager) | AR GB, TB/s | verify GB, TB/s | distinct experts per MoE layer | est. 61-layer AR / verify ms |',
          '|---|---|---|---|---|---|---|---|---|']
    f2 = lambda x: '–' if x is None else f"{x:.2f}"
    md += [f"| {r['ctx']} | {r['tree_size']} | {r['ar_ms']:.2f} / {f2(r['ar_graph_ms'])} | {r['verify_ms']:.2f} / {f2(r['verify_graph_ms'])} | "
           f"{r['ratio']:.2f} | {r['ar_bytes'] / 1e9:.2f}, {r['ar_tb_s']:.2f} | {r['verify_bytes'] / 1e9:.2f}, {r['verify_tb_s']:.2f} | "
           f"{r['experts_per_layer']} | {r['est_61_layers_ar_ms']:.1f} / {r['est_61_layers_verify_ms']:.1f} |" for r in rows]
    out.with_name(out.name + '.md').write_text('\n'.join(md) + '\n')
    plot_kimi_ratio(res).savefig(out.with_name(out.name + '.png'), dpi=110)
    print('\n'.join(md))

if __name__ == '__main__': main()
