"""Small direct calls of each of our PyCUDA kernels, each checked against the torch/reference path, for compute-sanitizer.

Run under a sanitizer by benchmarks/sanitize_kernels.sh (one run per tool); alone it is a plain correctness run.
No CUDA-graph capture; references run on the CPU so that the GPU sees almost only our kernels (and torch's fills/copies).

  python benchmarks/sanitize_kernels.py [--kernels tree,verify_split,tb_tree,...]   # run the cases (needs a GPU)
  python benchmarks/sanitize_kernels.py --list [--kernels ...]                        # the cases, their kernels (no GPU)
  python benchmarks/sanitize_kernels.py --names                                       # our kernel names (kernels/*.cu)
  python benchmarks/sanitize_kernels.py --table LOGDIR [--out FILE]                   # sanitizer logs -> markdown table

--kernels takes groups (smoke, tree, verify, accept, moe, draft), case names or kernel names, comma-separated.
--canary TOOL (memcheck, racecheck, synccheck, initcheck) runs, after everything else, one inline kernel
(`sanitize_canary`) with a deliberate fault of that tool's kind: the table checks the sanitizer reported it, which
proves the kernel-name filter and the log parser see our kernels (a 0 elsewhere in that column then means 0).
Output markers (parsed by --table): `SANITIZE_CASE <name> ok|FAIL|skipped <s> [info]`, `SANITIZE_LIVE <ptr> <bytes> <what>`
(CUDA tensors still alive at exit: what a leak check may report), `SANITIZE_DONE ok=N failed=M skipped=K`
(a skipped case, e.g. the sm_90a kernel on another GPU, launched nothing: its kernels count as not run).
"""
from __future__ import annotations
import argparse, gc, os, re, sys, time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS_DIR = REPO / 'kernels'
GROUP_OF_FILE = {'smoke': 'smoke', 'tree_build': 'tree', 'verify_attn': 'verify', 'verify_attn_sm90': 'verify', 'tree_accept': 'accept', 'moe_w4a16': 'moe', 'draft_attn': 'draft'}
GROUPS = ('smoke', 'tree', 'verify', 'accept', 'moe', 'draft')
TOOLS = ('memcheck', 'racecheck', 'synccheck', 'initcheck')
CANARY = 'sanitize_canary'
DEV, BACKEND = 'cuda', 'cuda'   # the CPU tests (benchmarks/test_sanitize_kernels.py) run the cases with 'cpu' and 'torch'

def sync():
    if DEV == 'cuda':
        import torch
        torch.cuda.synchronize()

# ------------------------------------------------------------------------------------------------ kernel names
_GLOBAL = re.compile(r'extern\s+"C"\s+__global__\s+void[\s\\]+(?:__\w+__\s*\([^)]*\)[\s\\]*)*(\w+)[\s\\]*\(')
_DEFINE = re.compile(r'#define\s+(\w+)\s*\(\s*(\w+)\s*[,)]((?:[^\n]*\\\n)*[^\n]*)')

def kernel_names(kdir: Path = KERNELS_DIR) -> dict:
    "Every `extern \"C\" __global__` name in `kdir/*.cu` -> its file's stem (names made by a macro: its invocations' first argument)."
    out = {}
    for f in sorted(kdir.glob('*.cu')):
        text = f.read_text()
        macros = {}
        for m in _DEFINE.finditer(text):               # a macro whose body declares a kernel named by its first parameter
            g = _GLOBAL.search(m.group(3))
            if g and g.group(1) == m.group(2): macros[m.group(1)] = m.span()
        spans = list(macros.values())
        for g in _GLOBAL.finditer(text):
            if not any(a <= g.start() < b for a, b in spans): out[g.group(1)] = f.stem
        for mac in macros:
            for inv in re.finditer(rf'^\s*{mac}\s*\(\s*(\w+)\s*,', text, re.M): out[inv.group(1)] = f.stem
    return out

def device_functions(kdir: Path = KERNELS_DIR) -> dict:
    "Names of the `__device__` functions in `kdir/*.cu` -> file stem (to attribute a finding that names no kernel)."
    out = {}
    for f in sorted(kdir.glob('*.cu')):
        for line in f.read_text().splitlines():
            if '__device__' not in line or '__global__' in line: continue
            for m in re.finditer(r'\b(\w+)\s*\(', line):
                if not m.group(1).startswith('__') and m.group(1) not in ('asm', 'volatile', 'sizeof'):
                    out.setdefault(m.group(1), f.stem); break
    return out

# ------------------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    name: str
    group: str
    kernels: tuple   # kernel names it launches
    what: str
    fn: object       # () -> str (info), raises on a mismatch

CASES: list = []

class Skipped(Exception):
    "Raised by a case that can't run here (e.g. an arch-specific kernel on another GPU): reported as skipped, not ok."

def case(name, group, kernels, what):
    def deco(fn):
        CASES.append(Case(name, group, tuple(kernels), what, fn)); return fn
    return deco

def _tree_kernels(dt):
    return (f'tb_hist_{dt}', f'tb_collect_{dt}', f'tb_rowsort_{dt}', 'tb_tree')

# ---- smoke (nbs/00a)
@case('smoke_axpy', 'smoke', ['axpy'], 'axpy on n=1000 and n=1 (a partial block)')
def _smoke():
    import torch
    from ddtree_nb.runtime import load_kernel
    k = load_kernel('smoke.cu', 'axpy', 'PPfi')
    for n in (1000, 1):
        g = torch.Generator().manual_seed(n)
        y, x = torch.randn(n, generator=g), torch.randn(n, generator=g)
        want, yd = y + 2.5 * x, y.to(DEV)
        k(yd, x.to(DEV), 2.5, n, grid=(n + 255) // 256, block=256)
        torch.testing.assert_close(yd.cpu(), want)
    return ''

# ---- tree builder (nbs/02): fill_tree's four launches
def _logits(kind, L, V, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    if kind == 'randn': return torch.randn(L, V, generator=g) * 2.5
    if kind == 'const': return torch.zeros(L, V)                              # one bin holds the whole row
    if kind == 'crowded':                                                      # 3500 > CAPB tied top logits
        x = torch.randn(L, V, generator=g) - 4.0
        for r in range(L): x[r, torch.randperm(V, generator=g)[:3500]] = 1.0
        return x
    if kind == 'ties': return torch.randint(0, 4, (L, V), generator=g).float()
    raise ValueError(kind)

def _tree_run(L, V, B, dtype, seed, kind='randn', force_heap=False, root=None, phase1='v2'):   # v2 unless a case says: its kernels are the ones named
    import torch
    from ddtree_nb.tree import TreeBuffers, fill_tree, build_tree_ref
    from ddtree_nb.reliability import check_same_tree, check_tree_buffers
    x = _logits(kind, L, V, seed).to(getattr(torch, dtype))
    buf = TreeBuffers(max(B, 1), DEV)
    for t in (buf.tokens, buf.depths, buf.parents, buf.first_child, buf.next_sibling, buf.vis_bits): t.fill_(12345)
    buf.n_nodes.fill_(-7)
    rt = None if root is None else torch.tensor([root], dtype=torch.int32, device=DEV)
    fill_tree(buf, x.to(DEV), B, root_token=rt, force_heap=force_heap, phase1=phase1)
    sync()
    check_same_tree(buf.to_draft_tree(), build_tree_ref(x, B), x.float())
    cpu = TreeBuffers(buf.max_budget, 'cpu')                     # the layout checks read the buffers many times: on a copy
    for nm in ('n_nodes', 'root_token', 'tokens', 'depths', 'parents', 'first_child', 'next_sibling', 'vis_bits', 'scores'):
        getattr(cpu, nm).copy_(getattr(buf, nm))
    check_tree_buffers(cpu)
    if root is not None: assert int(cpu.tokens[0]) == root, f"root token {int(cpu.tokens[0])} != {root}"
    info = f"n={int(cpu.n_nodes[0])} stats={buf.ws['stats'][:3].tolist()}"
    try: info += f" max_bin_count={int(buf.ws['rowinfo'].view(-1, 8)[:L, 2].max())}"   # > 3072: tb_rowsort's crowded-bin path
    except Exception: pass
    return info

for _dt in ('bf16', 'f32'):
    _t = 'bfloat16' if _dt == 'bf16' else 'float32'
    case(f'tree_{_dt}', 'tree', _tree_kernels(_dt), 'L=7 V=4096 B=64, randn, root token given')(
        lambda _t=_t: _tree_run(7, 4096, 64, _t, 1, root=11))
    case(f'tree_{_dt}_chunks', 'tree', _tree_kernels(_dt), 'L=5 V=10000 (3 chunks, the last partial) B=256')(
        lambda _t=_t: _tree_run(5, 10000, 256, _t, 2))
    case(f'tree_{_dt}_crowded', 'tree', _tree_kernels(_dt), 'L=3 V=4096 B=64, 3500 tied top logits per row: tb_rowsort slow path')(
        lambda _t=_t: _tree_run(3, 4096, 64, _t, 3, kind='crowded'))
    case(f'tree_{_dt}_const', 'tree', _tree_kernels(_dt), 'L=3 V=4096 B=64, constant rows (one bin holds all)')(
        lambda _t=_t: _tree_run(3, 4096, 64, _t, 4, kind='const'))
    # phase 1 v4: one kernel per (blocks per row, logits per thread); random logits take its candidate path, ties
    # (values 0..3: a quarter of the row ties for the top) its histogram fallback
    for _c, _E, _V in ((1, 4, 4096), (1, 8, 8000), (1, 16, 16000), (1, 32, 30000), (8, 8, 50000), (8, 16, 100000), (8, 32, 200000)):
        case(f'tree_{_dt}_v4_c{_c}_e{_E}', 'tree', (f'tb_rows_{_dt}_c{_c}_e{_E}', 'tb_tree'), f'phase1=v4, L=3 V={_V} B=128, randn')(
            lambda _t=_t, _V=_V: _tree_run(3, _V, 128, _t, 11, phase1='v4'))
    for _c, _E, _V in ((1, 4, 4096), (8, 32, 200000)):
        case(f'tree_{_dt}_v4_hist_c{_c}_e{_E}', 'tree', (f'tb_rows_{_dt}_c{_c}_e{_E}', 'tb_tree'), f'phase1=v4, L=3 V={_V} B=128, ties')(
            lambda _t=_t, _V=_V: _tree_run(3, _V, 128, _t, 12, kind='ties', phase1='v4'))
    # tb_small (both phases in one launch, V <= 8192 and B <= 32): one kernel per logits per thread; ties too
    for _E, _V in ((4, 2000), (8, 4096), (16, 8000)):
        case(f'tree_{_dt}_small_e{_E}', 'tree', (f'tb_small_{_dt}_e{_E}',), f'tb_small: L=7 V={_V} B=16, randn, root token given')(
            lambda _t=_t, _V=_V: _tree_run(7, _V, 16, _t, 13, root=11, phase1=None))
        case(f'tree_{_dt}_small_ties_e{_E}', 'tree', (f'tb_small_{_dt}_e{_E}',), f'tb_small: L=7 V={_V} B=16, ties')(
            lambda _t=_t, _V=_V: _tree_run(7, _V, 16, _t, 14, kind='ties', phase1=None))
case('tree_heap', 'tree', _tree_kernels('f32'), 'force_heap: L=7 V=4096 B=256 (the one-thread heap)')(
    lambda: _tree_run(7, 4096, 256, 'float32', 5, force_heap=True))
case('tree_heap_ties', 'tree', _tree_kernels('bf16'), 'force_heap on massive exact ties: L=7 V=4096 B=64')(
    lambda: _tree_run(7, 4096, 64, 'bfloat16', 6, kind='ties', force_heap=True))
case('tree_ties', 'tree', _tree_kernels('f32'), 'massive exact ties (values 0..3): L=7 V=4096 B=256')(
    lambda: _tree_run(7, 4096, 256, 'float32', 7, kind='ties'))
case('tree_max_budget', 'tree', _tree_kernels('bf16'), 'L=15 V=4096 B=1024 (the limit)')(
    lambda: _tree_run(15, 4096, 1024, 'bfloat16', 8))
case('tree_small_vocab', 'tree', _tree_kernels('f32'), 'L=7 V=50 B=256 (k = V < B)')(
    lambda: _tree_run(7, 50, 256, 'float32', 9))
case('tree_budget0', 'tree', ['tb_tree'], 'B=0: only tb_tree runs')(lambda: _tree_run(4, 4096, 0, 'float32', 10))

# ---- verify attention (nbs/03)
def _verify_run(T, H, P, kind='tree', seed=0, pad=8, device_prefix=False, uint32=False, words=None, **kw):
    kw = {'impl': 'v2', **kw}   # v2 unless asked: on an sm_90 GPU the default ('auto') is the sm_90a kernel, which verify_sm90 covers
    import torch
    from ddtree_nb.verify import DC, DR, DQK, mla_tree_attention, vis_to_bits
    from ddtree_nb.reliability import verify_error, tree_parents
    from ddtree_nb.reference import ancestor_mask, mla_tree_attention_ref
    g = torch.Generator().manual_seed(seed)
    S = P + T + pad
    kv = torch.randn(S, DQK, generator=g).to(torch.bfloat16)
    kv[P + T:] = float('nan')                                   # rows past P+T must never be used
    ql = torch.randn(T, H, DC, generator=g).to(torch.bfloat16)
    qp = torch.randn(T, H, DR, generator=g).to(torch.bfloat16)
    vis = ancestor_mask(tree_parents(kind, T, g))
    scale = DQK ** -0.5
    bits = vis_to_bits(vis, words=words).to(DEV)
    if uint32: bits = bits.view(torch.uint32)
    Parg = torch.tensor([P], dtype=torch.int32, device=DEV) if device_prefix else P
    out = torch.full((T, H, DC), float('nan'), dtype=torch.bfloat16, device=DEV)
    lse = torch.full((T, H), float('nan'), dtype=torch.float32, device=DEV)
    if kw.pop('workspace', False):
        from ddtree_nb.verify import verify_workspace
        kw['workspace'] = verify_workspace(T, H, kw['splits'], DEV)
    mla_tree_attention(ql.to(DEV), qp.to(DEV), kv.to(DEV), Parg, bits, scale, out=out, lse=lse, backend=BACKEND, **kw)
    sync()
    out, lse = out.cpu(), lse.cpu()
    assert bool(out.isfinite().all() and lse.isfinite().all()), "output not fully written (NaN left)"
    ro, rl = mla_tree_attention_ref(ql.double(), qp.double(), kv[:, :DC].double(), kv[:, DC:].double(), P, vis, scale)
    rel, dl = verify_error(out, lse, ro, rl)
    assert rel <= 1e-2 and dl <= 1e-2, f"rel err {rel:.3g}, lse err {dl:.3g} (bound 1e-2)"
    return f"rel={rel:.2e} dlse={dl:.2e}"

def _verify_edge(edge: dict, paths: list, seed: int):
    import torch
    from ddtree_nb.verify import mla_tree_attention
    from ddtree_nb.reliability import edge_case_inputs, check_edge_case
    a = edge_case_inputs(**edge, H=16, device=DEV, seed=seed)
    for kw in paths:
        o = torch.full_like(a['q_latent'], float('nan'))
        l = torch.full(a['q_latent'].shape[:2], float('nan'), device=DEV)
        mla_tree_attention(**a, out=o, lse=l, backend=BACKEND, **{'impl': 'v2', **kw})
        sync()
        check_edge_case(a, o, l, nan_slots=edge.get('nan_slots', ()))
    return f"{len(paths)} paths"

def _v2(c): return f'verify_attn_v2_{c[0]}x{c[1]}x{c[2]}'
_V2_H200 = _v2((64, 64, 2))   # the config the H200 picks (227 KB of shared memory per block)
_COMB = 'verify_attn_combine'
case('verify_tree', 'verify', [_V2_H200, _COMB], 'T=16 H=8 P=300 tree mask, the default plan')(lambda: _verify_run(16, 8, 300, seed=1))
case('verify_split', 'verify', [_V2_H200, _COMB], 'T=16 H=8 P=300 splits=7 + combine (64 lanes)')(lambda: _verify_run(16, 8, 300, seed=2, splits=7))
case('verify_split_ws', 'verify', [_V2_H200, _COMB], 'splits=4 with a caller-made workspace')(lambda: _verify_run(16, 8, 300, seed=3, splits=4, workspace=True))
case('verify_ar_step', 'verify', [_V2_H200, _COMB], 'T=1 H=64 P=2000 chain, splits=20 + combine (8 lanes x 32)')(lambda: _verify_run(1, 64, 2000, 'chain', seed=4, splits=20))
case('verify_P0', 'verify', [_V2_H200, _COMB], 'T=32 H=4 P=0 (tree mask only), default and splits=3')(
    lambda: _verify_run(32, 4, 0, seed=5) + ' / ' + _verify_run(32, 4, 0, seed=5, splits=3))
case('verify_prefix_dev', 'verify', [_V2_H200, _COMB], 'device-held P (int32 tensor), uint32 mask words, W=40')(
    lambda: _verify_run(16, 8, 300, seed=6, device_prefix=True, uint32=True, words=40))
case('verify_T64', 'verify', [_V2_H200, _COMB], 'T=64 H=16 P=1000 tree mask, default plan')(lambda: _verify_run(64, 16, 1000, seed=7))
case('verify_edge_dead', 'verify', [_V2_H200, _COMB], 'P=0 rows that see nothing, NaN slots: v2, v2 split 7')(
    lambda: _verify_edge(dict(P=0, dead_rows=(1, 4), nan_slots=(2,)), [dict(), dict(splits=7)], 8))
case('verify_edge_nan', 'verify', [_V2_H200, _COMB], 'P=200, NaN value rows at tree slots 3, 5: default and split 7')(
    lambda: _verify_edge(dict(P=200, nan_slots=(3, 5)), [dict(), dict(splits=7)], 9))
# v1 (kernels/dev/verify_attn_v1.cu) is history, not shipped: not sanitized here (the earlier runs in sanitize_kernels.md covered it)

def _verify_configs():
    from ddtree_nb.verify import V2_CONFIGS
    return ' / '.join(_verify_run(16, 4, 100, seed=11 + i, config=c, splits=s) for i, c in enumerate(V2_CONFIGS) for s in (1, 5))
case('verify_configs', 'verify', [_v2(c) for c in ((64, 64, 2), (64, 32, 2), (32, 32, 1))] + [_COMB],
     'every v2 tile config, splits 1 and 5: T=16 H=4 P=100')(_verify_configs)

def _need_sm90():
    "Skip a case of the sm_90a kernels on any GPU but an sm_90 one (the CPU tests, BACKEND 'torch', run it everywhere)."
    if BACKEND == 'cuda':
        from ddtree_nb.runtime import device_arch
        if device_arch() != 'sm_90': raise Skipped(f"the sm_90a kernel needs an sm_90 GPU, this one is {device_arch()}")

def _verify_sm90():
    _need_sm90()
    runs = [_verify_run(16, 8, 300, seed=20 + i, impl='sm90', pv_n=n, splits=s) for i, (n, s) in enumerate([(256, 1), (256, 7), (64, 1), (64, 7)])]
    runs.append(_verify_run(1, 64, 2000, 'chain', seed=24, impl='sm90', splits=20))
    runs.append(_verify_edge(dict(P=0, dead_rows=(1, 4), nan_slots=(2,)), [dict(impl='sm90'), dict(impl='sm90', pv_n=64, splits=7)], 25))
    return ' / '.join(runs)
case('verify_sm90', 'verify', ['verify_attn_sm90_n256', 'verify_attn_sm90_n64', _COMB],
     'sm_90a kernel (sm_90 GPUs only): both PV widths x splits 1 and 7, AR step with 20 splits, edge cases')(_verify_sm90)

def _verify_sm90_cluster():
    _need_sm90()
    runs = [_verify_run(16, 8, 300, seed=30 + i, impl='sm90', cluster=c, splits=k * c) for i, (c, k) in enumerate([(2, 1), (4, 2), (8, 1), (8, 3)])]
    runs.append(_verify_run(1, 64, 2000, 'chain', seed=34, impl='sm90'))   # the default plan: clusters of 2
    runs.append(_verify_edge(dict(P=0, dead_rows=(1, 4), nan_slots=(2,)), [dict(impl='sm90', cluster=2, splits=2), dict(impl='sm90', cluster=8, splits=16)], 35))
    return ' / '.join(runs)
case('verify_sm90_cluster', 'verify', ['verify_attn_sm90_c2', 'verify_attn_sm90_c4', 'verify_attn_sm90_c8', _COMB],
     'the sm_90a cluster merge (sm_90 GPUs only): clusters of 2, 4, 8, direct and with the combine, the default plan at T=1 H=64, edge cases')(_verify_sm90_cluster)

case('verify_pdl', 'verify', [_V2_H200, 'verify_attn_combine_pdl'],
     'the split combine as a programmatic dependent (pdl=True): T=1 H=64 P=2000 splits=20, T=16 H=8 P=300 splits=7')(
    lambda: ' / '.join([_verify_run(1, 64, 2000, 'chain', seed=31, splits=20, pdl=True), _verify_run(16, 8, 300, seed=32, splits=7, pdl=True)]))

# ---- the draft's block attention (nbs/05a)
def _draft_run(g, hd, S, n, seed):
    "16 block rows to cache rows [n, n + 16), 2 KV heads of g query heads each, attending to rows [0, n + 16) of S; against fp64 math on the CPU."
    import torch
    from ddtree_nb.drafter import draft_attention
    from ddtree_nb.reference import gqa_attention_ref
    gen, T, nkv = torch.Generator().manual_seed(seed), 16, 2
    q, kb, vb, k, v = (torch.randn(*s, generator=gen).bfloat16() for s in ((T, nkv * g, hd), (T, nkv, hd), (T, nkv, hd), (S, nkv, hd), (S, nkv, hd)))
    want = gqa_attention_ref(q, torch.cat([k[:n], kb]), torch.cat([v[:n], vb]), hd ** -0.5)
    tk = torch.zeros(nkv, dtype=torch.int32, device=DEV) if BACKEND == 'cuda' else None
    kd, vd = k.to(DEV), v.to(DEV)
    got = draft_attention(q.to(DEV), kb.to(DEV), vb.to(DEV), kd, vd, torch.tensor([n], dtype=torch.int32, device=DEV), hd ** -0.5, tk)
    err = (got.double().cpu() - want).abs().max().item()
    assert err < 0.02 * want.abs().max().item() and (tk is None or not tk.any()) and torch.equal(kd[n:n + T].cpu(), kb) and torch.equal(vd[n:n + T].cpu(), vb), (g, hd, S, n, err)
    return f'g={g} hd={hd} S={S} n={n} err={err:.1e}'
case('draft_attn', 'draft', [f'draft_attn_r{16 * g}_d{hd}' for hd in (64, 128) for g in (1, 2, 4)],
     'the draft block attention: every built shape, one split (S=40) and many (up to 32, some past the live rows)')(
    lambda: ' / '.join(_draft_run(g, hd, S, n, i) for i, (g, hd, S, n) in enumerate(
        [(1, 64, 40, 10), (1, 64, 1100, 600), (2, 64, 700, 300), (4, 64, 300, 100), (1, 128, 2000, 1500), (2, 128, 129, 50), (4, 128, 3000, 2900)])))

def _at_level2(f, *args):
    "f(*args) with DDTREE_DRAFT_KERNEL=2 (the _nr kernel with tickets, draft_kv_write, whatever the default), put back after."
    old = os.environ.get('DDTREE_DRAFT_KERNEL')
    os.environ['DDTREE_DRAFT_KERNEL'] = '2'
    try: return f(*args)
    finally:
        if old is None: os.environ.pop('DDTREE_DRAFT_KERNEL')
        else: os.environ['DDTREE_DRAFT_KERNEL'] = old

def _draft_nr_level2(g, hd, S, n, seed):
    "_draft_run with q and kb raw (the _nr kernel norms and rotates them), then the same rows through append_kv; against the fp64 torch face on the CPU."
    import torch
    from ddtree_nb.drafter import draft_attention, append_kv, RMSNorm
    gen, T, nkv = torch.Generator().manual_seed(seed), 16, 2
    q, kb, vb, k, v = (torch.randn(*s, generator=gen).bfloat16() for s in ((T, nkv * g, hd), (T, nkv, hd), (T, nkv, hd), (S, nkv, hd), (S, nkv, hd)))
    norms = [RMSNorm(hd).requires_grad_(False) for _ in range(2)]
    for m in norms: m.weight.uniform_(0.5, 1.5, generator=gen)
    d64 = [RMSNorm(hd).double().requires_grad_(False) for _ in range(2)]
    for a, b in zip(d64, norms): a.weight.copy_(b.weight.bfloat16())
    ln = lambda dev: torch.tensor([n], dtype=torch.int32, device=dev)
    k64, v64 = k.double(), v.double()
    want = draft_attention(q.double(), kb.double(), vb.double(), k64, v64, ln('cpu'), hd ** -0.5, None, d64, 1e6)
    tk = torch.zeros(nkv, dtype=torch.int32, device=DEV) if BACKEND == 'cuda' else None
    nd = [m.to(DEV, torch.bfloat16) for m in norms]
    kd, vd = k.to(DEV), v.to(DEV)
    got = draft_attention(q.to(DEV), kb.to(DEV), vb.to(DEV), kd, vd, ln(DEV), hd ** -0.5, tk, nd, 1e6)
    err = (got.double().cpu() - want).abs().max().item()
    kerr = (kd[n:n + T].double().cpu() - k64[n:n + T]).abs().max().item()
    assert err < 0.02 * want.abs().max().item() and kerr < 0.02 * k64[n:n + T].abs().max().item() and (tk is None or not tk.any()), (g, hd, S, n, err, kerr)
    kd, vd = k.to(DEV), v.to(DEV)
    append_kv(kb.to(DEV), vb.to(DEV), kd, vd, ln(DEV), nd[1], 1e6)
    aerr = (kd[n:n + T].double().cpu() - k64[n:n + T]).abs().max().item()
    assert aerr < 0.02 * k64[n:n + T].abs().max().item() and torch.equal(vd[n:n + T].cpu(), vb) and torch.equal(kd[:n].cpu(), k[:n]), (g, hd, S, n, aerr)
    return f'g={g} hd={hd} S={S} n={n} err={err:.1e} keys={kerr:.1e} append={aerr:.1e}'
case('draft_attn_nr', 'draft', [f'draft_attn_r{16 * g}_d{hd}_nr' for hd in (64, 128) for g in (1, 2, 4)] + ['draft_kv_write_d64', 'draft_kv_write_d128'],
     'the draft block attention with q and kb raw (normed and rotated in the kernel), and the context rows through draft_kv_write: every built shape, one split and many')(
    lambda: ' / '.join(_at_level2(_draft_nr_level2, g, hd, S, n, 10 + i) for i, (g, hd, S, n) in enumerate(
        [(1, 64, 40, 10), (1, 64, 1100, 600), (2, 64, 700, 300), (4, 64, 300, 100), (1, 128, 2000, 1500), (2, 128, 129, 50), (4, 128, 3000, 2900)])))

def _draft_kv_layers(nl, hd, S, n, seed):
    "append_kv_layers over a DrafterCache's layers (draft_kv_write_layers: one launch) against append_kv in fp64 on the CPU, a layer at a time; rows past S: dropped by the kernel (the torch face is given only the rows that fit)."
    import torch
    from ddtree_nb.drafter import append_kv, append_kv_layers, DrafterCache, RMSNorm
    gen, R, nkv = torch.Generator().manual_seed(seed), 16, 2
    kr, vr = (torch.randn(nl, R, nkv, hd, generator=gen).bfloat16() for _ in range(2))
    k0, v0 = (torch.randn(nl, S, nkv, hd, generator=gen).bfloat16() for _ in range(2))
    norms = [RMSNorm(hd).double().requires_grad_(False) for _ in range(nl)]
    for m in norms: m.weight.copy_(torch.empty(hd).uniform_(0.5, 1.5, generator=gen).bfloat16())
    wk, wv, ln, fit = k0.double(), v0.double(), lambda dev: torch.tensor([n], dtype=torch.int32, device=dev), min(R, S - n)
    for y in range(nl): append_kv(kr[y, :fit].double(), vr[y, :fit].double(), wk[y], wv[y], ln('cpu'), norms[y], 1e6)
    c = DrafterCache(nl, S, nkv, hd, torch.bfloat16, DEV); c.k.copy_(k0); c.v.copy_(v0)
    rows = R if BACKEND == 'cuda' else fit
    append_kv_layers(kr[:, :rows].to(DEV), vr[:, :rows].to(DEV), *c.layers(), ln(DEV), [m.to(DEV, torch.bfloat16) for m in norms], 1e6)
    err = (c.k.double().cpu() - wk).abs().max().item()
    assert err < 0.02 * wk.abs().max().item() and torch.equal(c.v.double().cpu(), wv) and torch.equal(c.k[:, :n].cpu(), k0[:, :n]), (nl, hd, S, n, err)
    return f'layers={nl} hd={hd} S={S} n={n} err={err:.1e}'
case('draft_kv_layers', 'draft', ['draft_kv_write_layers_d64', 'draft_kv_write_layers_d128'],
     "every drafter layer's context rows in one launch (append_kv_layers): one layer and many, rows past the cache's end dropped")(
    lambda: ' / '.join(_at_level2(_draft_kv_layers, nl, hd, S, n, 90 + i) for i, (nl, hd, S, n) in enumerate(
        [(1, 64, 40, 10), (3, 64, 300, 100), (8, 64, 100, 90), (5, 128, 700, 300), (2, 128, 20, 10)])))

def _draft_cluster_run(g, hd, S, n, c, seed, tc=False):
    "The _nr kernel with its splits merged in a cluster of c blocks (the op called with `cluster`; c = 0: tickets), its math on tensor cores with `tc`; against the fp64 torch face on the CPU."
    import torch
    from ddtree_nb.drafter import draft_attention, RMSNorm
    gen, T, nkv = torch.Generator().manual_seed(seed), 16, 2
    q, kb, vb, k, v = (torch.randn(*s, generator=gen).bfloat16() for s in ((T, nkv * g, hd), (T, nkv, hd), (T, nkv, hd), (S, nkv, hd), (S, nkv, hd)))
    norms = [RMSNorm(hd).double().requires_grad_(False) for _ in range(2)]
    for m in norms: m.weight.copy_(torch.empty(hd).uniform_(0.5, 1.5, generator=gen).bfloat16())
    want = draft_attention(q.double(), kb.double(), vb.double(), k.double(), v.double(), torch.tensor([n], dtype=torch.int32), hd ** -0.5, None, norms, 1e6)
    kd, vd, tk, ln = k.to(DEV), v.to(DEV), torch.zeros(nkv, dtype=torch.int32, device=DEV), torch.tensor([n], dtype=torch.int32, device=DEV)
    w = [m.weight.to(DEV, torch.bfloat16) for m in norms]
    if BACKEND == 'cuda': got = torch.ops.ddtree.draft_attention(q.to(DEV), kb.to(DEV), vb.to(DEV), kd, vd, ln, hd ** -0.5, tk, w[0], w[1], 1e-6, 1e-6, 1e6, c, tc)
    else: got = draft_attention(q, kb, vb, kd, vd, ln, hd ** -0.5, None, [m.to(torch.bfloat16) for m in norms], 1e6)   # the torch face
    err = (got.double().cpu() - want).abs().max().item()
    assert err < 0.02 * want.abs().max().item() and not tk.any() and torch.equal(vd[n:n + T].cpu(), vb), (g, hd, S, n, c, tc, err)
    return f'g={g} hd={hd} S={S} n={n} c={c}{" tc" * tc} err={err:.1e}'
case('draft_attn_cluster', 'draft', [f'draft_attn_r{16 * g}_d{hd}_nr_c{c}' for hd in (64, 128) for g in (1, 2, 4) for c in (2, 4, 8)],
     'the _nr kernels with their splits merged in clusters of 2, 4, 8 (sm_90 GPUs only): every built shape, empty splits, several tiles a split')(
    lambda: ' / '.join(_draft_cluster_run(g, hd, S, n, c, 40 + i) for i, (g, hd, S, n, c) in enumerate(
        [(g, hd, S, n, c) for c in (2, 4, 8) for (g, hd, S, n) in [(1, 64, 1100, 600), (2, 64, 129, 20), (4, 64, 300, 100),
                                                                    (1, 128, 2000, 1500), (2, 128, 700, 300), (4, 128, 90, 50)]])))

case('draft_attn_tc', 'draft', [f'draft_attn_r{16 * g}_d{hd}_nr{c}_tc' for hd in (64, 128) for g in (1, 2, 4) for c in ('', '_c2', '_c4', '_c8')],
     'the _nr kernels with the tile math on tensor cores (mma.sync), tickets and clusters of 2, 4, 8 (sm_90 GPUs only for clusters): every built shape')(
    lambda: ' / '.join(_draft_cluster_run(g, hd, S, n, c, 70 + i, tc=True) for i, (g, hd, S, n, c) in enumerate(
        [(g, hd, S, n, c) for c in (0, 2, 4, 8) for (g, hd, S, n) in [(1, 64, 1100, 600), (2, 64, 129, 20), (4, 64, 300, 100),
                                                                       (1, 128, 2000, 1500), (2, 128, 700, 300), (4, 128, 90, 50)]])))

# ---- accept + compaction (nbs/04)
def _accept_run(V, B, T, seed, compact=None, max_budget=None):
    import torch
    from ddtree_nb.tree import build_tree_ref
    from ddtree_nb.accept import accept_compact, tree_buffers_from, Accepted, MAX_PATH
    g = torch.Generator().manual_seed(seed)
    tree = build_tree_ref(torch.randn(8, V, generator=g) * 3, B)
    lg = torch.randn(tree.n + 1, V, generator=g)
    node, want = 0, [0]
    while True:                                    # plant the path that always takes the last child
        kids = (tree.parents[1:] == node).nonzero()[:, 0] + 1
        if not len(kids): break
        node = int(kids[-1]); lg[want[-1], int(tree.tokens[node])] = lg[want[-1]].max() + 60.0; want.append(node)
    keys = torch.randint(0, 2**32, (2,), generator=g)
    ref_args, dev_args = [], []
    if compact:
        nl, row, dt, P = compact
        kv = torch.randn(nl, P + tree.n + 40, row, generator=g).to(dt)
        hid = torch.randn(tree.n + 1, 96, generator=g).to(dt)
        fo = torch.full((MAX_PATH, 96), 3.0, dtype=dt)
        pl = torch.tensor([P], dtype=torch.int32)
        ref_args = [kv.clone(), pl.clone(), hid, fo.clone()]
        dev_args = [kv.to(DEV), pl.to(DEV), hid.to(DEV), fo.to(DEV)]
    want_a = accept_compact(tree, lg, *ref_args, temperature=T, keys=keys)
    bufs = tree_buffers_from(tree, max_budget, device=DEV)
    out = Accepted(*(torch.full(s, -7, dtype=torch.int32, device=DEV) for s in ((MAX_PATH,), (1,), (1,))))
    accept_compact(bufs, lg.to(DEV), *dev_args, temperature=T, keys=keys.to(DEV), backend=BACKEND, out=out)
    sync()
    for nm, a, b in zip(('path', 'accepted_len', 'bonus'), out, want_a): assert torch.equal(a.cpu(), b), f"{nm}: {a.cpu().tolist()} != {b.tolist()}"
    for nm, a, b in zip(('kv', 'prefix_len', 'hidden', 'feats_out'), dev_args, ref_args):
        assert torch.equal(a.cpu(), b), f"{nm} differs from the torch compaction"
    if T == 0: assert want_a.nodes() == want, f"planted path {want}, accepted {want_a.nodes()}"
    return f"n={tree.n} accepted={len(want_a.nodes())}"

case('accept_greedy', 'accept', ['tree_accept'], 'V=4096 B=120 T=0, planted path')(lambda: _accept_run(4096, 120, 0.0, 1))
case('accept_sampled', 'accept', ['tree_accept'], 'V=4096 B=120 T=1, buffers sized for 256')(lambda: _accept_run(4096, 120, 1.0, 2, max_budget=256))
case('accept_tiny_vocab', 'accept', ['tree_accept'], 'V=7 B=60 T=0.6')(lambda: _accept_run(7, 60, 0.6, 3))
case('accept_root_only', 'accept', ['tree_accept'], 'a tree of the root only (B=0)')(lambda: _accept_run(300, 0, 0.0, 4))
case('accept_compact_bf16', 'accept', ['tree_accept'], '+ compaction: 4 layers x 576 bf16 rows, features, P=17, T=0')(
    lambda: _accept_run(300, 120, 0.0, 5, compact=(4, 576, __import__('torch').bfloat16, 17)))
case('accept_compact_f32', 'accept', ['tree_accept'], '+ compaction: 3 layers x 36 fp32 rows, T=1')(
    lambda: _accept_run(300, 120, 1.0, 6, compact=(3, 36, __import__('torch').float32, 5)))

def _accept_edges():
    "NaN rows on the no-check path (the torch face's choice) and rows past the cache (refused, nothing written)."
    import torch
    from ddtree_nb.tree import build_tree_ref
    from ddtree_nb.accept import accept, accept_compact
    g = torch.Generator().manual_seed(7)
    tree = build_tree_ref(torch.randn(8, 1000, generator=g) * 3, 60)
    lg = torch.randn(tree.n + 1, 1000, generator=g)
    lg[0] = float('nan'); lg[1:, ::7] = float('nan')
    ninf = float('-inf')
    want = accept(tree, lg.nan_to_num(ninf, 3e38, ninf))        # the rule: a NaN counts as -inf (no NaN left: the checked path)
    got = accept(tree, lg.to(DEV), backend=BACKEND, check_values=False)
    sync()
    assert got.nodes() == want.nodes() and int(got.bonus[0]) == int(want.bonus[0]), f"NaN rows: {got.nodes()} != {want.nodes()}"
    lg = torch.randn(tree.n + 1, 1000, generator=g)
    node, last = 0, 0
    while True:                                    # plant a path to a leaf, then make the cache end just before its row
        kids = (tree.parents[1:] == node).nonzero()[:, 0] + 1
        if not len(kids): break
        nxt = int(kids[-1]); lg[node, int(tree.tokens[nxt])] = 100.0; node = last = nxt
    kv = torch.randn(2, 5 + last, 64, generator=g).to(DEV); kv0 = kv.clone()
    pl = torch.tensor([5], dtype=torch.int32, device=DEV)
    try: accept_compact(tree, lg.to(DEV), kv, pl, backend=BACKEND); raise AssertionError("rows past the cache not refused")
    except ValueError as e: assert 'past the cache' in str(e), e
    sync()
    assert torch.equal(kv, kv0) and int(pl[0]) == 5, "the cache or prefix_len moved"
    return f"n={tree.n} last={last}"

case('accept_edges', 'accept', ['tree_accept'], 'NaN rows (no-check path), rows past the cache (refused)')(_accept_edges)

# ---- W4A16 MoE (nbs/03a)
def _moe_run(T, E, H, I, k, how='spread', seed=0, versions=(None,), pdl=False):
    import torch
    from ddtree_nb.moe import MoEWorkspace, moe_w4a16, check_grouping
    from ddtree_nb.reliability import random_packed_experts
    g = torch.Generator().manual_seed(seed)
    ex_cpu = random_packed_experts(E, H, I, g)
    ex = ex_cpu.to(DEV)
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    idx = torch.rand(T, E, generator=g).topk(k, dim=-1).indices if how in ('spread', 'repeat') else torch.full((T, k), E - 1)
    if how == 'repeat': idx[:, 1] = idx[:, 0]                          # an expert twice in each token's list
    idx = idx.to(torch.int32).contiguous()
    w = torch.rand(T, k, generator=g); w = (w / w.sum(-1, keepdim=True)).float().contiguous()
    ref = moe_w4a16(x, idx, w, ex_cpu, 2.827).float()
    ran = []
    for v in versions:
        ws = MoEWorkspace(T, k, E, H, I, DEV)
        out = torch.full((T, H), float('nan'), dtype=torch.bfloat16, device=DEV)
        try: moe_w4a16(x.to(DEV), idx.to(DEV), w.to(DEV), ex, 2.827, out=out, backend=BACKEND, ws=ws, version=v, pdl=pdl)
        except ValueError as e:
            if 'version must be one of' in str(e): continue   # a version this checkout does not have
            raise
        sync()
        if BACKEND == 'cuda': check_grouping(ws.grouping(), idx, E)   # the torch face (CPU tests) fills no workspace
        got = out.cpu().float()
        assert got.isfinite().all(), f"version {v}: output not fully written"
        err = ((got - ref).norm() / ref.norm()).item()
        assert err <= 1e-2, f"version {v}: rel err {err:.3g} > 1e-2"
        ran.append(v)
    return f"versions run: {ran}"

_MOE_DEFAULT = ('moe_group', 'moe_gate_up_v14', 'moe_down_v14', 'moe_gate_up_v13', 'moe_down_v13', 'moe_combine')   # CUDA_VERSION = 14 (v13's kernels at T <= 8), plain launches
case('moe_pdl', 'moe', ('moe_group', 'moe_gate_up_v13_pdl', 'moe_down_v13_pdl', 'moe_combine_pdl'), 'T=1 and T=8, the T <= 8 launches as programmatic dependents (sm_90+)')(
    lambda: (_moe_run(1, 64, 256, 128, 8, seed=21, pdl=True), _moe_run(8, 64, 256, 128, 8, seed=22, pdl=True))[-1])
def _moe_v24():
    runs = (_moe_run(1, 64, 256, 128, 8, seed=31, versions=(24,)), _moe_run(8, 64, 256, 128, 8, seed=32, versions=(24,), pdl=True),
            _moe_run(8, 64, 256, 128, 16, how='repeat', seed=33, versions=(24,), pdl=True))
    assert all(r == 'versions run: [24]' for r in runs), runs   # not skipped as a version this checkout lacks
    return runs[-1]
case('moe_v24', 'moe', ('moe_gate_up_v24', 'moe_down_v24', 'moe_combine', 'moe_combine_pdl'),
     'T=1 plain, T=8 PDL, T=8 top-16 (128 pairs, a repeated expert) PDL; v24: no grouping launch')(_moe_v24)
for _T in (1, 2, 16, 64, 257):
    case(f'moe_T{_T}', 'moe', _MOE_DEFAULT, f'T={_T} E=64 H=256 I=128 top-8, default version')(
        lambda _T=_T: _moe_run(_T, 64, 256, 128, 8, seed=_T))
case('moe_one_expert', 'moe', _MOE_DEFAULT, 'T=64, every pair to one expert')(lambda: _moe_run(64, 64, 256, 128, 8, how='one', seed=3))
for _v, _what in ((11, 'v12 before its lop3'), (12, 'v13 with pass-major runs')):
    case(f'moe_v{_v}', 'moe', ('moe_group', f'moe_gate_up_v{_v}', f'moe_down_v{_v}', 'moe_combine'), f'T=40 and T=1, version {_v} ({_what})')(
        lambda _v=_v: (_moe_run(40, 8, 256, 128, 8, seed=_v, versions=(_v,)), _moe_run(1, 64, 256, 128, 8, seed=_v + 1, versions=(_v,)))[-1])

def _route_run(T, E, H=256, I=128, k=8, seed=0, gemv=False):
    "moe_w4a16_routed with a one-group sigmoid router: the top-k picked in the grouping launch (`gemv`: the router's GEMV too), against the torch face."
    import torch
    from ddtree_nb.model import Router, config_from_dict, tiny_config
    from ddtree_nb.moe import MoEWorkspace, moe_w4a16_routed, check_grouping
    from ddtree_nb.reliability import random_packed_experts
    g = torch.Generator().manual_seed(seed)
    ex_cpu = random_packed_experts(E, H, I, g)
    r = Router(config_from_dict(tiny_config(n_routed_experts=E, num_experts_per_tok=k, n_group=1, topk_group=1, hidden_size=H)))
    r.weight.data.normal_(0, 0.05, generator=g); r.e_score_correction_bias.normal_(0, 0.02, generator=g)
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    lg = r.logits(x)
    ref = moe_w4a16_routed(x, r, lg, ex_cpu).float()
    ws, rd = MoEWorkspace(T, k, E, H, I, DEV), r.to(DEV)
    out = moe_w4a16_routed(x.to(DEV), rd, None if gemv else lg.to(DEV), ex_cpu.to(DEV), backend=BACKEND, ws=ws)
    sync()
    if BACKEND == 'cuda': check_grouping(ws.grouping(), ws.topk_idx[:T * k].view(T, k), E)
    err = ((out.cpu().float() - ref).norm() / ref.norm()).item()
    assert err <= 1e-2, f"rel err {err:.3g} > 1e-2"
    return f"rel err {err:.2e}"

_ROUTED = ('moe_gate_up_v14', 'moe_down_v14', 'moe_gate_up_v13', 'moe_down_v13', 'moe_combine')
case('moe_route_e384', 'moe', ('moe_route_group_e384', *_ROUTED), 'T=16 E=384 top-8, routing fused into the grouping')(lambda: _route_run(16, 384, seed=4))
case('moe_route_e1024', 'moe', ('moe_route_group_e1024', *_ROUTED), 'T=40 E=512 top-8, routing fused into the grouping')(lambda: _route_run(40, 512, seed=5))
case('moe_router_e384', 'moe', ('moe_router_group_e384', *_ROUTED), 'T=1 E=384 top-8, the router GEMV + the one-token pick')(lambda: _route_run(1, 384, seed=6, gemv=True))
case('moe_router_e1024', 'moe', ('moe_router_group_e1024', *_ROUTED), 'T=5 E=512 top-8, the router GEMV + warp-per-token picks')(lambda: _route_run(5, 512, seed=7, gemv=True))
# versions 1..10 (kernels/dev/moe_w4a16_v1_v10.cu) are the history, not shipped: not sanitized here (runs 1-3 covered them
# while they were in kernels/moe_w4a16.cu)

# ------------------------------------------------------------------------------------------------ canary
CANARY_SRC = r'''
extern "C" __global__ void sanitize_canary(int mode, float *buf, int n) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    if (mode == 0) { if (t == 0) buf[0] = buf[n]; }                    // memcheck: one element past the end
    else if (mode == 1) { s[t] = (float)t; buf[t] = s[(t + 1) % 64]; } // racecheck: a neighbour's write, no barrier
    else if (mode == 2) { if (t < 32) __syncwarp(~1u); }               // synccheck: lane 0 syncs on a mask without itself
    else { if (t == 0) buf[0] = buf[1]; }                              // initcheck: buf[1] was never written
}
'''

def canary(tool: str):
    "A launcher of `sanitize_canary` with `tool`'s deliberate fault and its buffer (made before the live-tensor listing)."
    import torch
    from ddtree_nb.runtime import load_kernel
    k = load_kernel(CANARY_SRC, CANARY, 'iPi')
    n = 128   # 512 bytes: a whole multiple of the allocator's rounding, so buf[n] lies past the allocation
    buf = torch.empty(n, device=DEV) if tool == 'initcheck' else torch.zeros(n, device=DEV)
    def launch():
        print(f"SANITIZE_CANARY {tool} start", flush=True)
        try:
            k(TOOLS.index(tool), buf, n, grid=1, block=64)
            sync()
        except Exception as e: print(f"SANITIZE_CANARY {tool} raised {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        print(f"SANITIZE_CANARY {tool} end", flush=True)
    return launch

# ------------------------------------------------------------------------------------------------ running
def select(tokens):
    "Cases matching any token (a group, a case name or a kernel name; all if none), round robin over the groups; ValueError naming the unknown ones."
    names = set(kernel_names())
    bad = [t for t in tokens if t not in GROUPS and t not in names and all(t != c.name for c in CASES)]
    if bad: raise ValueError(f"--kernels: unknown {bad}; use groups {list(GROUPS)}, case names (--list) or kernel names (--names)")
    sel = [c for c in CASES if not tokens or c.group in tokens or c.name in tokens or set(c.kernels) & set(tokens)]
    rank = {}                              # round robin over the groups: a run cut short by its timeout has still
    for c in sel: rank[c.name] = sum(d.group == c.group for d in sel[:sel.index(c)])   # run every group's first cases
    return sorted(sel, key=lambda c: rank[c.name])

def live_cuda_tensors():
    "(ptr, bytes, description) of every CUDA storage a Python object still holds (after gc)."
    import torch, warnings
    gc.collect()
    seen = {}
    with warnings.catch_warnings():          # isinstance() on some of torch's deprecated proxies warns
        warnings.simplefilter('ignore')
        for o in gc.get_objects():
            try:
                if isinstance(o, torch.Tensor) and o.is_cuda:
                    s = o.untyped_storage()
                    seen[s.data_ptr()] = (s.nbytes(), f"{o.dtype} {tuple(o.shape)}")
            except Exception: pass
    return sorted((p, b, d) for p, (b, d) in seen.items())

def run(cases, tool=None) -> int:
    import torch
    gpu = torch.cuda.get_device_name() if DEV == 'cuda' else DEV
    print(f"SANITIZE_START {len(cases)} cases, torch {torch.__version__}, gpu {gpu}, "
          f"PYTORCH_NO_CUDA_MEMORY_CACHING={os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING', '')}", flush=True)
    ok = bad = skipped = 0
    for c in cases:
        print(f"SANITIZE_BEGIN {c.name} {','.join(c.kernels)}", flush=True)
        t0 = time.perf_counter()
        try:
            info = c.fn(); sync(); ok += 1
            print(f"SANITIZE_CASE {c.name} ok {time.perf_counter() - t0:.2f} {info}", flush=True)
        except Skipped as e:
            skipped += 1
            print(f"SANITIZE_CASE {c.name} skipped {time.perf_counter() - t0:.2f} {e}", flush=True)
        except Exception as e:
            bad += 1
            msg = ' '.join(str(e).split())[:300]
            print(f"SANITIZE_CASE {c.name} FAIL {time.perf_counter() - t0:.2f} {type(e).__name__}: {msg}", flush=True)
    if tool: launch = canary(tool)
    else:                          # the plain run compiles the canary too, so no sanitizer run waits for nvcc
        launch = None
        if DEV == 'cuda':
            from ddtree_nb.runtime import load_kernel
            load_kernel(CANARY_SRC, CANARY, 'iPi')
    for p, b, d in live_cuda_tensors(): print(f"SANITIZE_LIVE {p:#x} {b} {d}", flush=True)
    print(f"SANITIZE_DONE ok={ok} failed={bad} skipped={skipped}", flush=True)
    if launch: launch()            # last: without --destroy-on-device-error kernel a memcheck fault ends the context
    return 1 if bad else 0

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kernels', default='', help='comma-separated groups, case names or kernel names (default: all)')
    ap.add_argument('--list', action='store_true', help='list the selected cases and exit (no GPU)')
    ap.add_argument('--names', action='store_true', help="print our kernel names (kernels/*.cu) and the canary's, one a line")
    ap.add_argument('--canary', choices=TOOLS, help="after the cases, launch sanitize_canary with this tool's fault")
    ap.add_argument('--table', metavar='LOGDIR', help='write the markdown table of the sanitizer logs in LOGDIR')
    ap.add_argument('--out', help='with --table: the markdown file (default LOGDIR/sanitize_kernels.md)')
    a = ap.parse_args(argv)
    if a.names:
        print('\n'.join([*kernel_names(), CANARY])); return 0
    if a.table:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sanitize_table import write_table
        out = write_table(Path(a.table), Path(a.out) if a.out else None)
        print(f"wrote {out}"); return 0
    try: cases = select([t for t in a.kernels.split(',') if t])
    except ValueError as e: ap.error(str(e))
    if a.list:
        for c in cases: print(f"{c.group:7s} {c.name:20s} {','.join(c.kernels):60s} {c.what}")
        names = kernel_names()
        print(f"{len(cases)} cases, {len({k for c in cases for k in c.kernels} & set(names))} of our {len(names)} kernels")
        return 0
    return run(cases, a.canary)

if __name__ == '__main__':
    sys.exit(main())
