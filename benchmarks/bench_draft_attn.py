"""The draft's block attention alone (issue 17): `drafter.draft_attention` through kernels/draft_attn.cu against its torch face
(the block's two index copies, then `block_attention` over every cache row under the mask), at the demo drafter's shape
(16 rows, 4 KV heads of 64) and a Qwen3-8B DFlash drafter's (16 rows, 32 query heads on 8 KV heads of 128), over cache
layers of S rows with the block at rows [S - 48, S - 32); `kernel_nr` is the same call with q and the block's keys raw (the
_nr kernel RMS-norms and rotates them itself), `kernel_nr_c{2,4,8}` the _nr kernel with its splits merged in a thread-block
cluster of that many blocks (the op called with `cluster`; sm_90+, skipped where the kernel file has none), `_tc` the same with
the tile's QK and PV on tensor cores (mma.sync), `cluster_auto` / `cluster_auto_tc` the sizes `draft_cluster` picks at DDTREE_DRAFT_KERNEL=3 / 4, `append` is `append_kv` of 16 context rows. Each output is checked against fp64 math first. Timing: 20 calls
back to back in one CUDA graph, CUDA events around each replay, median of 30 replays / 20: the µs a call costs inside a
captured round (launch gaps included). Not a test.

    python benchmarks/bench_draft_attn.py OUT.json [--commit HASH]
"""
import json, os, statistics, sys, time
import torch

SHAPES = {'demo (nh 4, nkv 4, hd 64)': (4, 4, 64), 'Qwen3-8B DFlash (nh 32, nkv 8, hd 128)': (32, 8, 128)}
SIZES = (64, 300, 600, 1064, 2048, 4096)


def time_call(fn, reps=30, per=20):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(per): fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) * 1000 / per)
    return statistics.median(ts)


def main(path, commit='unknown'):
    from ddtree_nb.drafter import draft_attention, draft_blocks, draft_cluster, append_kv, RMSNorm, DA_CLUSTERS
    from ddtree_nb.reference import gqa_attention_ref
    dev, T, res = torch.device('cuda'), 16, []
    os.environ['DDTREE_DRAFT_KERNEL'] = '2'            # the _nr kernel and append_kv's kernel too (the default may be lower)
    gen = torch.Generator(device='cuda').manual_seed(0)
    for name, (nh, nkv, hd) in SHAPES.items():
        for S in SIZES:
            L = S - 48
            q, kb, vb = (torch.randn(*s, device=dev, generator=gen).bfloat16() for s in ((T, nh, hd), (T, nkv, hd), (T, nkv, hd)))
            k, v = (torch.randn(S, nkv, hd, device=dev, generator=gen).bfloat16() for _ in range(2))
            ln, tk = torch.tensor([L], dtype=torch.int32, device=dev), torch.zeros(nkv, dtype=torch.int32, device=dev)
            want = gqa_attention_ref(q, torch.cat([k[:L], kb]), torch.cat([v[:L], vb]), hd ** -0.5).cpu()
            row = dict(shape=name, S=S, live=L + T, splits=draft_blocks(S), cluster_auto=draft_cluster(S, T * nh // nkv),
                       cluster_auto_tc=draft_cluster(S, T * nh // nkv, True))
            norms = [RMSNorm(hd).requires_grad_(False) for _ in range(2)]
            for m in norms: m.weight.uniform_(0.5, 1.5)
            want_nr = draft_attention(*(x.double().cpu() for x in (q, kb, vb, k, v)), ln.cpu(), hd ** -0.5, None, [m.double() for m in norms], 1e6)
            norms = [m.to(dev, torch.bfloat16) for m in norms]
            for face, t, nr, w in (('kernel', tk, None, want), ('kernel_nr', tk, norms, want_nr), ('torch', None, None, want)):
                err = (draft_attention(q, kb, vb, k, v, ln, hd ** -0.5, t, nr, 1e6).double().cpu() - w).abs().max().item()
                row[f'{face}_err'] = round(err, 5)
                row[f'{face}_us'] = round(time_call(lambda: draft_attention(q, kb, vb, k, v, ln, hd ** -0.5, t, nr, 1e6)), 2) if err < 0.02 * w.abs().max().item() else None
            for c, tc in [(c, tc) for tc in (False, True) for c in (0,) + DA_CLUSTERS if (c, tc) != (0, False)]:   # kernel_nr's other forms
                run = lambda: torch.ops.ddtree.draft_attention(q, kb, vb, k, v, ln, hd ** -0.5, tk, norms[0].weight, norms[1].weight,
                                                               norms[0].eps, norms[1].eps, 1e6, c, tc)
                col = f"kernel_nr{f'_c{c}' if c else ''}{'_tc' * tc}"
                try: err = (run().double().cpu() - want_nr).abs().max().item()
                except Exception as e:                 # no such kernel in this kernel file (DDTREE_KERNELS_DIR), or no sm_90
                    print(f'{col}: {type(e).__name__}: {str(e)[:120]}', flush=True); continue
                row[f'{col}_err'] = round(err, 5)
                row[f'{col}_us'] = round(time_call(run), 2) if err < 0.02 * want_nr.abs().max().item() else None
            row['append_us'] = round(time_call(lambda: append_kv(kb, vb, k, v, ln, norms[1], 1e6)), 2)
            row['bytes_read_MB'] = round(2 * (L + T) * nkv * hd * 2 / 1e6, 3)
            print(json.dumps(row), flush=True); res.append(row)
    meta = dict(date=time.strftime('%Y-%m-%d %H:%M'), gpu=torch.cuda.get_device_name(), torch=torch.__version__, commit=commit,
                command=f'python benchmarks/bench_draft_attn.py {path} --commit {commit}')
    json.dump(dict(meta=meta, rows=res), open(path, 'w'), indent=1)


if __name__ == '__main__':
    a = sys.argv[1:]
    main(a[0], a[a.index('--commit') + 1] if '--commit' in a else os.environ.get('DDTREE_COMMIT', 'unknown'))
