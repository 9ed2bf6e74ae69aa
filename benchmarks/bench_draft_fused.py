"""The demo drafter's whole draft in one launch (kernels/dev/draft_fused.cu) against the compiled torch draft the round runs.

Not a test. The demo pair in bf16 on the GPU; the drafter's context cache filled with --ctx rows from random features, then one
draft of 16 feature rows (n_new of them real) and a root token. Checked first, against the same draft in float32 (the
drafter loaded in float32, its cache filled from the same features): the logits' max |error| of the torch bf16 draft and of the
kernel, the share of depths whose argmax equals float32's, the cache rows the draft writes (context and block keys and values
against the torch bf16 draft's) and the cache length. Then µs a draft: 20 drafts back to back in one CUDA graph (each after a
one-element copy that puts the cache length back), CUDA events around the replay, median of --reps replays; the copy alone
is timed too and subtracted. The kernel at each grid size of --grids.

With --stamps, a build with -DDF_STAMPS runs one draft at each grid size and the stages' µs are added (work: from block 0
leaving the barrier before to the last block arriving at the next; barrier: from that arrival to block 0 leaving it; and
the most any block took from its own start of a stage to its X rows ready, its GEMM done and its arrival at the next).

--builds called,inlined times the kernel as built (its helpers called) and with -DDF_INLINE (inlined into every stage, v2).

    python benchmarks/bench_draft_fused.py [--ctx 600] [--n-new 5] [--grids 16,32,64,96,128] [--builds called] [--reps 30] [--stamps] [--out OUT.md] [--commit HASH]
"""
import argparse, json, time
import torch
from ddtree_nb.runtime import load_kernel, engine_stream
from ddtree_nb.demo import load_demo_pair
from ddtree_nb.model import merge_projections
from bench_few_row_gemm import timed     # µs a call: 20 back to back in a graph, median of reps replays

SIG = 'PPPPP' + 'i' * 9 + 'ffiP'
P_LAYER0, L_STRIDE = 16, 8


_WEIGHTS = {}   # id(drafter) -> (the drafter, its layers' k | v | q and gate | up weights as the kernel reads them)


def layer_weights(drafter):
    "Each layer's k | v | q and gate | up rows as one tensor each (copies, made once a drafter)."
    if _WEIGHTS.get(id(drafter), (None,))[0] is not drafter:
        _WEIGHTS[id(drafter)] = (drafter, [(torch.cat([l.self_attn.k_proj.weight, l.self_attn.v_proj.weight, l.self_attn.q_proj.weight]),
                                           torch.cat([l.mlp.gate_proj.weight, l.mlp.up_proj.weight])) for l in drafter.layers])
    return _WEIGHTS[id(drafter)][1]


def pack(drafter, cache, ws, parts, bar):
    "The kernel's pointer table (kernels/dev/draft_fused.cu's P_* and L_* order) and the tensors it points into (kept alive)."
    keep, ptr = [], lambda t: (keep.append(t), t.data_ptr())[1]
    P = [0] * (P_LAYER0 + L_STRIDE * len(drafter.layers))
    P[:11] = [ptr(drafter.fc.weight.contiguous()), ptr(drafter.hidden_norm.weight), ptr(drafter.embed_tokens.weight),
              ptr(drafter.lm_head.weight), ptr(drafter.norm.weight), ptr(cache.k), ptr(cache.v), ptr(cache.length), ptr(ws),
              ptr(bar), ptr(parts)]
    for l, (layer, (wkvq, wgu)) in enumerate(zip(drafter.layers, layer_weights(drafter))):
        a, m = layer.self_attn, layer.mlp
        P[P_LAYER0 + l * L_STRIDE: P_LAYER0 + (l + 1) * L_STRIDE] = [
            ptr(wkvq), ptr(a.q_norm.weight), ptr(a.k_norm.weight), ptr(a.o_proj.weight.contiguous()),
            ptr(layer.input_layernorm.weight), ptr(layer.post_attention_layernorm.weight), ptr(wgu), ptr(m.down_proj.weight.contiguous())]
    return torch.tensor(P, dtype=torch.int64, device=cache.k.device), keep


class Fused:
    "The kernel with its workspace, over `cache` (bf16), for drafts of `feats` [R <= 16, KF]."
    def __init__(self, drafter, cache, feats, n_new, root, stamps=False, options=()):
        c, dev = drafter.config, feats.device
        self.H, self.I, self.NH, self.NL, self.S = c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_hidden_layers, cache.max_tokens
        self.R, self.KF, self.V = feats.shape[0], feats.shape[1], c.vocab_size
        assert c.num_key_value_heads == self.NH and c.head_dim == 64 and c.block_size == 16 and self.R <= 16
        self.out = torch.empty(15, self.V, dtype=torch.float32, device=dev)
        ws = torch.empty(16 * (2 * self.H + 2 * 64 * self.NH + self.I), dtype=torch.bfloat16, device=dev)
        parts = torch.empty(self.NH * -(-self.S // 128) * (32 + 16 * 64), dtype=torch.float32, device=dev)   # (max, sum, O) a head and 128 keys
        self.bar = torch.zeros(2 + self.NH, dtype=torch.int32, device=dev)   # the barrier, then a ticket a head
        self.P, self.keep = pack(drafter, cache, ws, parts, self.bar)
        self.args = (feats, n_new, root, self.out)
        self.k = load_kernel('dev/draft_fused.cu', 'draft_fused', SIG, options=tuple(options) + (('-DDF_STAMPS',) if stamps else ()))
        self.stages = ['A', 'B'] + [f'{s}{l}' for l in range(self.NL) for s in (['C', 'D', 'E', 'F'] if l == 0 else ['Q', 'C', 'D', 'E', 'F'])] + ['H']
        self.stamps = torch.zeros(5 * (len(self.stages) + 1), dtype=torch.int64, device=dev) if stamps else None   # 5 slots an index (the kernel's DF_STAMPS)
        kmax = max(self.KF, self.I, self.H, 64 * self.NH)   # the widest GEMM input (the kernel's DF_KMAX: 1024)
        assert kmax <= 1024, f"draft_fused takes GEMM inputs up to 1024 wide, this drafter's widest is {kmax}"
        ldx = kmax + 32
        H, I, KF, NH = self.H, self.I, self.KF, self.NH
        self.wsm = max(16 * (KF + 32), 64 * (H + 32), 16 * (64 * NH + 32), 32 * (H + 32), 16 * (I + 32))   # a unit's W rows
        self.smem = 2 * (max(16 * ldx, 9 * 16 * 72) + self.wsm) + 4 * (8 * 16 * 64 + 8 * 2 * 16 + 16 * 68 + 8 * 32 * 2 + 16 + 1)
        self.k.set_max_dynamic_shared(self.smem)
        self.eps, self.theta, self.mask = c.rms_norm_eps, c.rope_theta, c.mask_token_id

    def stage_us(self, grid):
        "One stamped draft, µs a stage: work (block 0 leaving the barrier before -> the last block arriving at the next), barrier (-> block 0 leaving it), and the most any block took from its own start to its X rows ready, its GEMM (attention: its partial, its merge) done and its arrival."
        self.stamps.zero_(); self(grid); torch.cuda.synchronize()
        t, n, us = self.stamps.cpu().tolist(), len(self.stages), lambda x: round(x / 1e3, 2)
        return {nm: dict(work=us(t[5 * (k + 1)] - t[5 * k + 1]), barrier=us(t[5 * (k + 1) + 1] - t[5 * (k + 1)]) if k + 1 < n else None,
                         x=us(t[5 * k + 2]), gemm=us(t[5 * k + 3]), end=us(t[5 * k + 4]))
                for k, nm in enumerate(self.stages)}

    def __call__(self, grid):
        self.k(self.P, *self.args, self.R, self.KF, self.H, self.I, self.V, self.NH, self.NL, self.S, self.mask, self.eps, self.theta, self.wsm, 0 if self.stamps is None else self.stamps,
               grid=(grid,), block=(256,), shared=self.smem)
        return self.out


def route_drafts(drafter, grid: int, options=()):
    "Make `drafter.compiled_draft()`, the draft a compiled round calls, this kernel at `grid` blocks: a `Fused` for each set of buffers (a generation's cache, feature rows, n_new and root token), made on its first, eager, draft."
    made = {}
    def draft(cache, features, n_new, root_token):
        key = (cache.k.data_ptr(), features.data_ptr(), n_new.data_ptr(), root_token.data_ptr())
        if key not in made:
            made.clear()            # a new generation: the last one's graph is gone with its decoder
            made[key] = Fused(drafter, cache, features, n_new, root_token, options=options)
        return made[key](grid)
    drafter.__dict__['_compiled_draft'] = draft
    return drafter


def filled_cache(drafter, S, ctx_feats):
    cache = drafter.new_cache(S)
    drafter.extend(cache, ctx_feats, torch.tensor([ctx_feats.shape[0]], dtype=torch.int32, device=ctx_feats.device))
    return cache


def clone_cache(cache):
    c = type(cache).__new__(type(cache))
    c.k, c.v, c.length, c.tickets = cache.k.clone(), cache.v.clone(), cache.length.clone(), cache.tickets.clone()
    return c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--ctx', type=int, default=600); ap.add_argument('--n-new', type=int, default=5)
    ap.add_argument('--max-tokens', type=int, default=2048); ap.add_argument('--grids', default='16,32,64,96,128')
    ap.add_argument('--reps', type=int, default=30); ap.add_argument('--out'); ap.add_argument('--commit', default='')
    ap.add_argument('--builds', default='called', help="comma list: called (the helpers called, the default build), inlined (-DDF_INLINE: inlined into every stage, as v2 had them)")
    ap.add_argument('--stamps', action='store_true', help="also each stage's work and barrier µs at every grid (a build with -DDF_STAMPS, one draft each)")
    a = ap.parse_args(argv)
    dev = torch.device('cuda')
    _, drafter, _ = load_demo_pair('cuda', torch.bfloat16)      # the drafter keeps its target's embedding and lm_head
    _, d32, _ = load_demo_pair('cuda', torch.float32)
    merge_projections(drafter)          # as the round runs it (Stages(merge=True))
    c = drafter.config
    KF = len(c.target_layer_ids) * c.hidden_size
    g = torch.Generator(device='cpu').manual_seed(0)
    ctx = torch.randn(a.ctx, KF, generator=g).to(dev)
    feats = torch.randn(16, KF, generator=g).to(dev)
    n_new, root = torch.tensor([a.n_new], dtype=torch.int32, device=dev), torch.tensor([1234], dtype=torch.int32, device=dev)
    base, base32 = filled_cache(drafter, a.max_tokens, ctx.bfloat16()), filled_cache(d32, a.max_tokens, ctx)
    L0, L1 = a.ctx, a.ctx + a.n_new
    # references: float32, and the torch bf16 draft (eager, as the engine's kernels run it)
    ref32 = d32.draft(clone_cache(base32), feats, n_new, root).float()
    cref = clone_cache(base)
    ref16 = drafter.draft(cref, feats.bfloat16(), n_new, root).float()
    fb = feats.bfloat16().contiguous()
    rows = []
    def errs(x):
        return dict(max_err=(x - ref32).abs().max().item(), argmax_eq=(x.argmax(-1) == ref32.argmax(-1)).float().mean().item())
    res = dict(meta=dict(date=time.strftime('%Y-%m-%d'), gpu=torch.cuda.get_device_name(), commit=a.commit, ctx=L0, n_new=a.n_new,
                         command='python benchmarks/bench_draft_fused.py ' + ' '.join(argv or __import__('sys').argv[1:])),
               torch_bf16=errs(ref16), logit_scale=ref32.abs().max().item())
    es = engine_stream()
    comp = drafter.compiled_draft()
    cc = clone_cache(base)
    reset_c = lambda: cc.length.fill_(L0)
    t_fill = timed(reset_c, es, a.reps)
    t_comp = timed(lambda: (reset_c(), comp(cc, fb, n_new, root)), es, a.reps) - t_fill
    t_eager = timed(lambda: (reset_c(), drafter.draft(cc, fb, n_new, root)), es, a.reps) - t_fill
    res.update(fill_us=round(t_fill, 2), compiled_us=round(t_comp, 2), eager_us=round(t_eager, 2))
    for build in a.builds.split(','):
      opts = {'called': (), 'inlined': ('-DDF_INLINE',)}[build]
      for G in [int(x) for x in a.grids.split(',')]:
        fc = clone_cache(base)
        f = Fused(drafter, fc, fb, n_new, root, options=opts)
        out = f(G).clone(); torch.cuda.synchronize()
        kv = [(fc.k[:, L0:L1 + 16] - cref.k[:, L0:L1 + 16]).abs().max().item(), (fc.v[:, L0:L1 + 16] - cref.v[:, L0:L1 + 16]).abs().max().item()]
        row = dict(build=build, grid=G, **errs(out), vs_torch_bf16=(out - ref16).abs().max().item(), length_ok=int(fc.length.item()) == L1,
                   kv_max_diff=kv, bar_zero=f.bar.abs().sum().item() == 0)
        reset_f = lambda: fc.length.fill_(L0)
        row['us'] = round(timed(lambda: (reset_f(), f(G)), es, a.reps) - t_fill, 2)
        if a.stamps:
            fs = Fused(drafter, clone_cache(base), fb, n_new, root, stamps=True, options=opts)
            fs(G); row['stages_us'] = fs.stage_us(G)       # the second draft (the first warmed up)
        rows.append(row); print(row, flush=True)
    res['fused'] = rows
    print(json.dumps({k: v for k, v in res.items() if k != 'fused'}, indent=1))
    if a.out:
        md = [f"# The draft in one launch (kernels/dev/draft_fused.cu) ({res['meta']['date']}, {res['meta']['gpu']}, commit {a.commit})", '',
              f"Command: `{res['meta']['command']}`; demo pair bf16, context {L0} rows, n_new {a.n_new}; µs a draft (20 back to back in a graph, the length reset copy subtracted: {res['fill_us']} µs).", '',
              f"- compiled torch draft (the round's): **{res['compiled_us']} µs**; eager torch draft: {res['eager_us']} µs",
              f"- torch bf16 draft against float32: max |logit error| {res['torch_bf16']['max_err']:.4f} (logits up to {res['logit_scale']:.1f}), argmax equal at {res['torch_bf16']['argmax_eq']:.3f} of depths", '',
              '| build | grid | µs | max err vs fp32 | argmax = fp32 | max diff vs torch bf16 | cache k, v max diff | length | barrier back to 0 |', '|---|---|---|---|---|---|---|---|---|']
        md += [f"| {r['build']} | {r['grid']} | **{r['us']}** | {r['max_err']:.4f} | {r['argmax_eq']:.3f} | {r['vs_torch_bf16']:.4f} | {r['kv_max_diff'][0]:.4f}, {r['kv_max_diff'][1]:.4f} | {r['length_ok']} | {r['bar_zero']} |" for r in rows]
        for r in rows:
            if 'stages_us' in r:
                md += ['', f"Stages, build {r['build']}, grid {r['grid']} (µs; work and barrier as the stamps' slots say; x, gemm, end: the most any block took from its start of the stage):", '',
                       '| stage | work | barrier after | X rows ready | GEMM (attention: partial) done | merge / end |', '|---|---|---|---|---|---|']
                md += [f"| {k} | {v['work']} | {v['barrier']} | {v['x']} | {v['gemm']} | {v['end']} |" for k, v in r['stages_us'].items()]
        open(a.out, 'w').write('\n'.join(md) + '\n')
        json.dump(res, open(a.out.rsplit('.', 1)[0] + '.json', 'w'), indent=1)


if __name__ == '__main__':
    main()
