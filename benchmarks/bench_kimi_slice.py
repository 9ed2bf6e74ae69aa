"""Kimi-shaped slice: one AR step vs one tree-verify pass, by tree size and context (GPU only).

A slice of a Kimi K2.6-shaped target (ddtree_nb.model) at the real widths -- hidden 7168, 64 heads, MLA q_lora 1536 /
kv_lora 512 / nope 128 / rope 64 / v 128, 384 routed experts top-8 + 1 shared (moe_intermediate 2048), first layer
dense (intermediate 18432), vocab 163840 -- with as many layers as fit on the GPU, random weights generated on the
device (nothing downloaded). For contexts 4k and 32k (latent cache filled with random rows) and tree sizes
1..256 (tokens verified: root + drafted nodes, a DDTree-shaped tree from random draft logits), it times

  - one AR step (1 token at position ctx) and
  - one verify pass (the tree's tokens at positions ctx + depth under the ancestor mask),

with CUDA events (warm-up, median of --reps), and counts the distinct routed experts each MoE layer selects for the
tree's tokens. Writes OUT.json (rows: ctx, tree_size, ar_ms, verify_ms, experts_per_layer), OUT.md and OUT.png
(ddtree_nb.bench.plot_kimi_ratio).

What it measures and what it doesn't:
  - Routed experts are held in bf16 (the package's MoE runs bf16 weights; INT4 group-32 is a checkpoint format that
    load_target dequantises), so fewer layers fit than with INT4 storage, and expert reads cost 4x the bytes an INT4
    kernel would move. The MoE is the package's torch path (a loop over the distinct experts hit, one host sync per
    layer), so the verify/AR ratio is that implementation's, not a fused grouped-GEMM's.
  - Random routers route near-uniformly: distinct experts vs tree size is the pessimistic case (real siblings share
    prefixes and route alike).
  - A 61-layer estimate scales the slice linearly: t61 = t_slice * 61 / layers (the slice's embedding + lm_head are
    counted once per layer too, a small overestimate), drafter time not included.

Run (on a machine with one H200):
  python benchmarks/bench_kimi_slice.py --out benchmarks/kimi_slice
  python benchmarks/bench_kimi_slice.py --layers 2 --contexts 4096 --tree-sizes 1,16,256 --reps 3   # quick
Status: written, NOT yet run (the GPU budget of the session that wrote it was spent).
"""
from __future__ import annotations
import argparse, json, sys, time, datetime, statistics
from pathlib import Path
import torch

KIMI = dict(model_type='kimi_k2', architectures=['DeepseekV3ForCausalLM'], vocab_size=163840, hidden_size=7168,
            intermediate_size=18432, moe_intermediate_size=2048, num_attention_heads=64, num_key_value_heads=64,
            q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
            n_routed_experts=384, n_shared_experts=1, num_experts_per_tok=8, n_group=1, topk_group=1, first_k_dense_replace=1,
            norm_topk_prob=True, routed_scaling_factor=2.827, scoring_func='sigmoid', topk_method='noaux_tc', hidden_act='silu',
            rms_norm_eps=1e-6, max_position_embeddings=262144, rope_theta=50000.0, rope_interleave=True, tie_word_embeddings=False,
            rope_scaling=dict(type='yarn', factor=64.0, original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0,
                              mscale=1.0, mscale_all_dim=1.0))

def _csv(t): return lambda s: [t(x) for x in s.split(',') if x.strip()]

def layer_bytes(c: dict, dense: bool, elt: int=2) -> int:
    "Parameter bytes of one decoder layer."
    H, nh = c['hidden_size'], c['num_attention_heads']
    qk = c['qk_nope_head_dim'] + c['qk_rope_head_dim']
    attn = (H * c['q_lora_rank'] + c['q_lora_rank'] * nh * qk + H * (c['kv_lora_rank'] + c['qk_rope_head_dim'])
            + c['kv_lora_rank'] * nh * (c['qk_nope_head_dim'] + c['v_head_dim']) + nh * c['v_head_dim'] * H)
    if dense: mlp = 3 * H * c['intermediate_size']
    else: mlp = 3 * H * c['moe_intermediate_size'] * (c['n_routed_experts'] + c['n_shared_experts']) + c['n_routed_experts'] * H * 2  # router fp32
    return (attn + mlp) * elt

def fit_layers(c: dict, free_bytes: int, frac: float, max_ctx: int, max_T: int) -> int:
    "Most layers (1 dense + k MoE) whose weights, latent cache and a working margin fit in frac * free_bytes."
    fixed = 2 * c['vocab_size'] * c['hidden_size'] * 2 + 8 * 2**30                       # embed + lm_head (bf16) + 8 GiB activations/workspace
    per_cache = (max_ctx + max_T + 1) * (c['kv_lora_rank'] + c['qk_rope_head_dim']) * 2
    budget = frac * free_bytes - fixed - layer_bytes(c, True) - per_cache
    return 1 + max(0, int(budget // (layer_bytes(c, False) + per_cache)))

@torch.no_grad()
def build_on_device(c: dict, seed: int, device='cuda'):
    "TargetModel at config c, allocated directly on the GPU in bf16 (router fp32), random N(0, 0.02) weights."
    from ddtree_nb.model import TargetModel, config_from_dict, Router
    cfg = config_from_dict(c)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device): m = TargetModel(cfg)
    finally: torch.set_default_dtype(old)
    m._init_rope()                                   # the rope buffer in fp32, as build_target makes it
    g = torch.Generator(device=device).manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, Router):
            mod.weight.data = torch.randn(mod.weight.shape, generator=g, device=device, dtype=torch.float32) * 0.02
            mod.e_score_correction_bias.copy_(torch.randn(mod.e_score_correction_bias.shape, generator=g, device=device) * 0.05)
    for name, p in m.named_parameters():
        if p.dtype == torch.float32: continue        # routers, done above
        if name.endswith('layernorm.weight') or name == 'norm.weight': p.fill_(1.0)
        else: p.normal_(0.0, 0.02, generator=g)
    return m.eval().requires_grad_(False)

def random_tree(T: int, seed: int):
    "A DDTree-shaped tree of T tokens (root + T-1 nodes) from random peaked draft logits."
    from ddtree_nb.tree import build_tree_ref
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(15, 256, generator=g) * 3
    return build_tree_ref(logits, T - 1)

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
    ap.add_argument('--reps', type=int, default=10)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--out', default='benchmarks/kimi_slice')
    args = ap.parse_args(argv)
    if not torch.cuda.is_available(): sys.exit("bench_kimi_slice: needs a CUDA GPU")
    from tqdm.auto import tqdm
    from ddtree_nb.bench import git_commit, plot_kimi_ratio
    from ddtree_nb.model import MoE
    free, total = torch.cuda.mem_get_info()
    Tmax, Cmax = max(args.tree_sizes), max(args.contexts)
    n_layers = args.layers or fit_layers(KIMI, free, args.mem_frac, Cmax, Tmax)
    c = dict(KIMI, num_hidden_layers=n_layers)
    t0 = time.time()
    model = build_on_device(c, args.seed)
    model.attn_backend, model.check_inputs = args.attn_backend, False
    print(f"built {n_layers} layers in {time.time() - t0:.0f} s; {torch.cuda.memory_allocated() / 2**30:.1f} GiB allocated", file=sys.stderr)
    hits = {}
    for i, mod in enumerate(model.modules()):
        if isinstance(mod, MoE):
            mod.gate.register_forward_hook(lambda m_, inp, out, i=i: hits.__setitem__(i, int(out[1].unique().numel())))
    dev = 'cuda'
    cache = model.new_cache(Cmax + Tmax + 1)
    g = torch.Generator(device=dev).manual_seed(args.seed + 1)
    cache.kv.normal_(0.0, 1.0, generator=g)
    rows = []
    with tqdm(total=len(args.contexts) * len(args.tree_sizes), desc='kimi slice') as bar:
        for ctx in args.contexts:
            ids1 = torch.randint(0, c['vocab_size'], (1,), device=dev, generator=g)
            ar = timed(lambda: model(ids1, torch.tensor([ctx], device=dev), cache, ctx), args.reps)
            for T in args.tree_sizes:
                tree = random_tree(T, args.seed + T)
                ids = torch.randint(0, c['vocab_size'], (T,), device=dev, generator=g)
                pos, vis = tree.positions(ctx).to(dev), tree.visibility.to(dev)
                hits.clear()
                ver = timed(lambda: model(ids, pos, cache, ctx, vis), args.reps)
                rows.append(dict(ctx=ctx, tree_size=T, ar_ms=ar, verify_ms=ver, ratio=ver / ar, experts_per_layer=[hits[k] for k in sorted(hits)],
                                 est_61_layers_ar_ms=ar * 61 / n_layers, est_61_layers_verify_ms=ver * 61 / n_layers))
                bar.update()
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'), device=torch.cuda.get_device_name(),
                commit=git_commit(), torch=torch.__version__, command='python ' + ' '.join([sys.argv[0]] + (argv or sys.argv[1:])),
                layers=n_layers, moe_layers=n_layers - 1, n_routed_experts=c['n_routed_experts'], attn_backend=args.attn_backend,
                expert_dtype='bfloat16', reps=args.reps)
    res = dict(meta=meta, config=c, rows=rows)
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + '.json').write_text(json.dumps(res, indent=1))
    md = [f"## Kimi-shaped slice: AR step vs verify pass", '', *(f"- {k}: {v}" for k, v in meta.items()), '',
          '| ctx | tree size | AR ms | verify ms | verify/AR | distinct experts per MoE layer | est. 61-layer verify ms |', '|---|---|---|---|---|---|---|']
    md += [f"| {r['ctx']} | {r['tree_size']} | {r['ar_ms']:.2f} | {r['verify_ms']:.2f} | {r['ratio']:.2f} | {r['experts_per_layer']} | "
           f"{r['est_61_layers_verify_ms']:.1f} |" for r in rows]
    out.with_name(out.name + '.md').write_text('\n'.join(md) + '\n')
    plot_kimi_ratio(res).savefig(out.with_name(out.name + '.png'), dpi=110)
    print('\n'.join(md))

if __name__ == '__main__': main()
