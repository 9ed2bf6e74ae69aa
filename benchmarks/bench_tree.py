"""Benchmark the GPU draft-tree builder: the shipped version beside the previous one ("before": kernels/dev/tree_build_v2.cu)
and the reference path, in one run (nbs/02_tree_builder.ipynb, issue 18). Phase 1 in its three versions: v2 (three
launches), v4 (the default on sm_90+: one cluster launch, candidates above a bound from the thread maxima) and v3 (v4's
kernel with its histogram path forced).

    python benchmarks/bench_tree.py [--iters 300] [--out results.md] [--commit abc1234] [--vocab 4096 --budgets 8,16]

L=15, V=163840 (`--vocab`), bf16 logits randn*scale (`--scales` 1,4), B in {16, 64, 256, 1024} (`--budgets`). Every tree is checked against `build_tree_ref` first.
Under the tables, napkin math: each shipped build against the floor of reading its logits once at the card's copy ceiling.
Where `tb_small` fits (V <= 8192, B <= 32: `tree.small_e`; the default takes it up to B = 16), it and the general pair
(tb_rows + tb_tree) are timed beside the default.
Times are CUDA-event medians of CUDA-graph replays, per build: each graph holds `--copies` builds back to back (10), as a
captured decode round runs its build behind other kernels, so the host's graph launch is not in the time. The whole
builder (also with tb_tree launched plainly, not as a programmatic dependent of phase 1, and one build a replay, the
method of the tables before session 24, which adds the graph launch's latency), phase 1 (per-depth top-k +
log-sum-exp) alone and phase 2 (`tb_tree`) alone. The stage columns split the shipped `tb_tree` by its own clock64 stamps (stats[4..11]).
Reference path: torch.topk + logsumexp on the GPU, copy to host, heapq and ancestor mask on the host (wall clock).
"""
import argparse, datetime, statistics, subprocess, time
import torch
from ddtree_nb.tree import (TreeBuffers, fill_tree, launch_rows, launch_tree, build_tree_ref, tree_from_ranked, tree_smem,
                            CHUNK, small_e, small_default)
from ddtree_nb.reliability import check_same_tree
from ddtree_nb.runtime import engine_stream, load_kernel

STAGES = ['lists', 'tau', 'bfs', 'select', 'rank', 'index', 'emit', 'links']
COPY_TBPS = {'H200': 4.27, 'H100': 3.0}   # device-copy ceilings measured on each kind (TB/s; verify.H200_BW, sim_kv_ring.py)

def napkin(L: int, V: int, B: int, elem: int, gpu: str) -> dict:
    "What a build must do at the least: read its logits once (MB, and µs at the card's copy ceiling, None on another card) in its launches (tb_small 1, else tb_rows + tb_tree)."
    mb, tb = L * V * elem / 1e6, next((v for k, v in COPY_TBPS.items() if k in gpu), None)
    return dict(mb=mb, floor_us=mb / tb if tb else None, launches=1 if small_default(V, B) else 2)

def napkin_lines(rows, L: int, V: int, gpu: str) -> list:
    "The napkin table under bench_tree's results: each shipped build against its floor, and how much of it is phase 2 (latency: one block, its barriers)."
    out = ["", f"Napkin math ({gpu}): the floor is reading the L x V bf16 logits once at the card's copy ceiling ({', '.join(f'{k} {v} TB/s' for k, v in COPY_TBPS.items())}); phase 1 reads them, "
           "phase 2 (`tb_tree`, one block) reads only the L sorted lists and is latency: its stages end at block barriers (ncu, session 28: 44 "
           "barriers at B = 64, 57 at B = 1,024) and each stage's last global or shared round trip.", "",
           "| logits | B | logits MB | floor µs | launches | shipped µs | shipped / floor | phase 1 µs (x floor) | phase 2 µs (share of phase 1 + 2) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for sc, B, to, tn, tg, t1, tpl, p1o, p1v2, p1, v4p, p13, p2o, p2, *_ in rows:
        n = napkin(L, V, B, 2, gpu); f = n['floor_us']
        x = lambda t: f"{t / f:.0f}x" if f else '-'
        out.append(f"| randn*{sc:g} | {B} | {n['mb']:.2f} | {'-' if f is None else f'{f:.2f}'} | {n['launches']} | {tn:.1f} | {x(tn)} | {p1:.1f} ({x(p1)}) | {p2:.1f} ({p2 / (p1 + p2):.0%}) |")
    return out

def ref_path(x, B):
    "torch.topk + logsumexp on the GPU, copy to host, heapq and ancestor mask on the host."
    xf = x.float()
    lse = torch.logsumexp(xf, -1, keepdim=True)
    v, i = torch.topk(xf, min(B, x.shape[1]), -1)
    lq, ii = (v - lse).double().cpu(), i.cpu()
    return tree_from_ranked([(a.tolist(), b.tolist()) for a, b in zip(lq, ii)], x.shape[0], B)

class OldBuilder:
    "v2 (kernels/dev/tree_build_v2.cu): three phase-1 launches and the bitonic-sorting tb_tree, on the same buffers."
    def __init__(self, dtype):
        import pycuda.driver as drv
        src, sfx = 'dev/tree_build_v2.cu', {torch.bfloat16: 'bf16', torch.float32: 'f32'}[dtype]
        self.hist = load_kernel(src, f'tb_hist_{sfx}', 'PiiPPPPP')
        self.collect = load_kernel(src, f'tb_collect_{sfx}', 'PiPP')
        self.rowsort = load_kernel(src, f'tb_rowsort_{sfx}', 'PiPPPPPP')
        self.tree = load_kernel(src, 'tb_tree', 'PPPiiiiiii' + 'P' * 20)
        optin = drv.Context.get_device().get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.limit = optin - self.tree.fn.get_attribute(drv.function_attribute.SHARED_SIZE_BYTES)
        self.tree.set_max_dynamic_shared(self.limit)
    def rows(self, buf, x, B):
        (L, V), w, C = x.shape, buf.ws, (x.shape[1] + CHUNK - 1) // CHUNK
        self.hist(x, V, min(B, V), w['hist'], w['stat'], w['row_done'], w['rowinfo'], w['rowlse'], grid=(C, L), block=256)
        self.collect(x, V, w['rowinfo'], w['cand'], grid=(C, L), block=256)
        self.rowsort(x, V, w['rowinfo'], w['rowlse'], w['cand'], w['lq'], w['ltok'], w['kd'], grid=L, block=1024)
    def tb_tree(self, buf, x, B):
        (L, V), w, k = x.shape, buf.ws, min(B, x.shape[1])
        nb, flags = tree_smem(L, k, self.limit)   # v2's tb_tree takes the same layout
        self.tree(w['lq'], w['ltok'], w['kd'], L, B, buf.max_budget, buf.W, 0, k, flags, buf.root_token,
                  w['u_score'], w['u_par'], w['u_rank'], w['u_depth'], w['slot_idx'],
                  w['h_score'], w['h_par'], w['h_rank'], w['h_depth'], w['h_prev'], w['stats'],
                  buf.n_nodes, buf.tokens, buf.depths, buf.parents, buf.first_child, buf.next_sibling, buf.vis_bits, buf.scores,
                  grid=1, block=1024, shared=nb)
    def __call__(self, buf, x, B): self.rows(buf, x, B); self.tb_tree(buf, x, B)

def events_median(fn, iters, stream):
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream); fn(); b.record(stream)
        b.synchronize(); ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)

def graph_time(fn, stream, iters, copies=1):
    "Median µs of one `fn` inside a graph of `copies` back-to-back calls (copies = 1: the graph launch's latency included)."
    fn(); stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(copies): fn()
    return events_median(g.replay, iters, stream) / copies

def stages(buf, clock_mhz):
    "tb_tree's stage times (µs) from its clock64 stamps; '-' for a stage the run skipped."
    cyc, prev, out = buf.ws['stats'][4:12].tolist(), 0, []
    for v in cyc:
        if v < 0: out.append('-'); continue
        out.append(f"{(v - prev) / clock_mhz:.1f}"); prev = v
    return out

V4_STAGES = ['load', 'sort', 'A', 'B', 'cand', 'C', 'rank']
SMALL_STAGES = ['load', 't_w', 'lists', 'merge', 'ticket', 'heap', 'emit']

def small_stages(buf, clock_mhz):
    "tb_small's stage times (µs) in the block that built the tree, from its clock64 stamps (stats[4..10])."
    cyc, prev, out = buf.ws['stats'][4:11].tolist(), 0, []
    for v in cyc: out.append(f"{(v - prev) / clock_mhz:.1f}"); prev = v
    return out

def v4_stages(buf, L, clock_mhz):
    "Phase 1 v4's stage times (µs, median over rows, from the first block of each row) and the spread of the rows' start times (µs)."
    st = buf.ws['stat'].view(torch.int64)[:L * 8].view(L, 8).cpu()
    cyc = st[:, :7].double()
    d = torch.cat([cyc[:, :1], cyc[:, 1:] - cyc[:, :-1]], 1).median(0).values / clock_mhz
    return [f"{x:.1f}" for x in d.tolist()], (st[:, 7].max() - st[:, 7].min()).item() / 1e3

def tau_detail(buf, clock_mhz):
    "tb_tree's threshold search split (µs), when it ran (its stamps 9-12 taken): the range and the histogram cleared, the comb's histogram, the bin holding the B-th best, the smallest score at or above it."
    t = [0] + buf.ws['stats'][4:16].tolist()   # tst[0..12] as cycles since tst[0], -1 where a stage was skipped
    if min(t[9:13]) < 0: return '-'
    return ' / '.join(f"{(b - a) / clock_mhz:.1f}" for a, b in ((t[1], t[9]), (t[9], t[10]), (t[10], t[11]), (t[11], t[12])))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--iters', type=int, default=300)
    ap.add_argument('--out', default=None)
    ap.add_argument('--commit', default=None, help='commit to record (default: git rev-parse HEAD)')
    ap.add_argument('--copies', type=int, default=10, help='builds back to back in each timed graph')
    ap.add_argument('--vocab', type=int, default=163840, help="V, the logits per depth (Kimi's 163840; the demo pair's 4096)")
    ap.add_argument('--budgets', default='16,64,256,1024', help='comma-separated B')
    ap.add_argument('--scales', default='1,4', help='comma-separated logit scales (randn * scale)')
    a = ap.parse_args()
    import pycuda.driver as drv
    es = engine_stream(); s = es.torch
    gt = lambda fn: graph_time(fn, s, a.iters, a.copies)
    clock = drv.Context.get_device().get_attribute(drv.device_attribute.CLOCK_RATE) / 1e3
    L, V = 15, a.vocab
    rows = []
    with es:
        old = OldBuilder(torch.bfloat16)
        for scale in (float(v) for v in a.scales.split(',')):
            x = (torch.randn(L, V, device='cuda', generator=torch.Generator('cuda').manual_seed(0)) * scale).bfloat16()
            for B in (int(v) for v in a.budgets.split(',')):
                buf, want = TreeBuffers(B), build_tree_ref(x, B)
                old(buf, x, B); s.synchronize()
                check_same_tree(buf.to_draft_tree(), want, x.float())
                t_old = gt(lambda: old(buf, x, B))
                p1_old = gt(lambda: old.rows(buf, x, B))
                p2_old = gt(lambda: old.tb_tree(buf, x, B))
                fill_tree(buf, x, B); s.synchronize()
                check_same_tree(buf.to_draft_tree(), want, x.float())
                path, st = buf.ws['stats'][:3].tolist(), stages(buf, clock)
                t_new, t_small, t_gen, sst = gt(lambda: fill_tree(buf, x, B)), None, None, None
                if small_e(V, B) is not None:   # tb_small fits: it and the general pair, each checked, with their stage clocks
                    fill_tree(buf, x, B, small=True); s.synchronize()
                    check_same_tree(buf.to_draft_tree(), want, x.float())
                    sst, t_small = small_stages(buf, clock), gt(lambda: fill_tree(buf, x, B, small=True))
                    fill_tree(buf, x, B, small=False); s.synchronize()
                    check_same_tree(buf.to_draft_tree(), want, x.float())
                    st, t_gen = stages(buf, clock), gt(lambda: fill_tree(buf, x, B, small=False))
                t_one = graph_time(lambda: fill_tree(buf, x, B), s, a.iters)   # one build a replay
                t_plain = gt(lambda: fill_tree(buf, x, B, pdl=False, small=False))   # tb_rows + tb_tree, tb_tree not a programmatic dependent
                p1 = gt(lambda: launch_rows(buf, x, B))
                v4path = sorted(set(buf.ws['rowinfo'].view(-1, 8)[:L, 6].tolist())), int(buf.ws['rowinfo'].view(-1, 8)[:L, 7].max())
                v4st = v4_stages(buf, L, clock)
                p1_v2 = gt(lambda: launch_rows(buf, x, B, 'v2'))
                p1_v3 = gt(lambda: launch_rows(buf, x, B, 'v3'))
                p2 = gt(lambda: launch_tree(buf, x.dtype, L, V, B))
                tau = tau_detail(buf, clock)
                ts = []
                for _ in range(15):
                    s.synchronize(); t0 = time.perf_counter(); ref_path(x, B); ts.append((time.perf_counter() - t0) * 1e6)
                ref = statistics.median(ts)
                rows.append((scale, B, t_old, t_new, (t_small, t_gen), t_one, t_plain, p1_old, p1_v2, p1, v4path, p1_v3, p2_old, p2, st, ref, path, v4st, tau, sst))
                print(rows[-1], flush=True)
    commit = a.commit or subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
    out = [f"date {datetime.date.today()}, GPU {torch.cuda.get_device_name()}, commit {commit}, torch {torch.__version__}, SM clock attribute {clock:.0f} MHz",
           f"command: python benchmarks/bench_tree.py --iters {a.iters} --copies {a.copies} --vocab {V} --budgets {a.budgets} --scales {a.scales}", "",
           f"L = {L}, V = {V}, bf16 logits.", "",
           "µs per build, " + (f"{a.copies} builds back to back in each graph" if a.copies > 1 else "one build a graph replay") + "; the column 'shipped, one build a replay': one build in each graph, the graph launch included.", "",
           "| logits | B | before µs | **shipped µs** | tb_small / tb_rows + tb_tree µs (where tb_small fits) | shipped, one build a replay µs | tb_rows + tb_tree, tb_tree plain launch µs | before/shipped | phase 1 before µs | phase 1 v2 / **v4** / v3 µs | v4 path (1 cand, 2 hist), most candidates | phase 2 before → shipped µs | shipped tb_tree stages µs (" + ' / '.join(STAGES) + ") | reference path µs | ref/shipped | phase-2 path |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for sc, B, to, tn, tg, t1, tpl, p1o, p1v2, p1, v4p, p13, p2o, p2, st, r, path, v4st, tau, sst in rows:
        out.append(f"| randn*{sc:g} | {B} | {to:.1f} | **{tn:.1f}** | {'-' if tg[0] is None else f'{tg[0]:.1f} / {tg[1]:.1f}'} | {t1:.1f} | {tpl:.1f} | {to / tn:.1f}x | {p1o:.1f} | {p1v2:.1f} / **{p1:.1f}** / {p13:.1f} | {v4p[0]}, {v4p[1]} | {p2o:.1f} → {p2:.1f} | {' / '.join(st)} | {r:.0f} | {r / tn:.0f}x | {path} |")
    out += ["", "Phase 1 v4 by stage (µs, clock64 of each row's first block, median over rows; " + ' / '.join(V4_STAGES) +
            "), the spread of the rows' start times (µs, global timer), and tb_tree's threshold search (µs: range / histogram / bin / min):", "",
            "| logits | B | v4 stages µs | row start spread µs | tau detail µs |", "|---|---|---|---|---|"]
    for sc, B, *_, v4st, tau, sst in rows:
        out.append(f"| randn*{sc:g} | {B} | {' / '.join(v4st[0])} | {v4st[1]:.1f} | {tau} |")
    if any(r[-1] for r in rows):
        out += ["", "tb_small by stage in the block that built the tree (µs, its clock64 stamps: " + ' / '.join(SMALL_STAGES) + "):", "",
                "| logits | B | tb_small stages µs |", "|---|---|---|"]
        out += [f"| randn*{r[0]:g} | {r[1]} | {' / '.join(r[-1])} |" for r in rows if r[-1]]
    out += napkin_lines(rows, L, V, torch.cuda.get_device_name())
    text = '\n'.join(out)
    print(text)
    if a.out: open(a.out, 'w').write(text + '\n')

if __name__ == '__main__': main()
