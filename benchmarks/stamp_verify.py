"""Where a T = 1 verify call spends its time (issue 19: T = 1, P = 32k at 31% of 4.27 TB/s, with ~15 µs of a 28 µs call
fixed). Runs the default plan's sm_90a split kernel built with -DVERIFY_STAMPS (each block records %globaltimer at its
start, when Q and its first key tile have landed, when its key loop is done, and at its end, with its SM and tile count),
followed by the shipped combine, for `--calls` calls back to back in one CUDA graph over cache copies that do not fit L2,
as bench_verify.py times them. The stamped outputs are checked bit for bit against the shipped kernels' first.

    python benchmarks/stamp_verify.py [--H 64] [--P 4096,32768,131072] [--clusters default,1,4] [--out DIR]

Prints per shape (medians over the calls but the first and last): the split kernel's span (first block start -> last
block end), its ramp (spread of the block starts), the first tile's wait (start -> Q and tile 0 landed), the loop time
per later tile, the merge and writes (loop done -> end; for the cluster kernels split into the wait at the first cluster
barrier, the pushes up to the second, and the sums and stores), the tail (last end - median end), and the gap from one call's
last split block end to the next call's first block start, which holds the combine and the next launch. Also the
graph-replayed µs a call of: the shipped call, the split kernel alone, the combine alone.
"""
import argparse, json, os, statistics, sys
from pathlib import Path
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_verify import make_inputs, gpu_time_us
from ddtree_nb.verify import (DQK, SIG_V2, SIG_COMBINE, verify_plan, verify_workspace, mla_tree_attention, vis_to_bits,
                              _kernel)
from ddtree_nb.runtime import load_kernel, engine_stream
from ddtree_nb.bench import git_commit



def launchers(T, H, P, ql, qp, bits, scale, out, lse, stamped: bool, cluster=None, source='verify_attn_sm90.cu'):
    "(split(kv, stamps), combine(), plan) for the default plan: the split kernel (stamped or shipped) and the combine, as _verify_cuda launches them."
    plan = verify_plan(T, H, P, impl='sm90', cluster=cluster)
    n = plan['parts']
    ws_o, ws_lse = verify_workspace(T, H, n, 'cuda') if n > 1 else (0, 0)
    opts = ('-DVERIFY_STAMPS',) if stamped else ()
    k = load_kernel(source, plan['kernel'], SIG_V2 + ('P' if stamped else ''), options=opts, arch='sm_90a')
    k.set_max_dynamic_shared(plan['smem'])
    W = bits.shape[1]
    def split(kv, st=None):
        args = (ql, qp, kv, bits, W, T, H, P, 0, kv.shape[0], float(scale), out, lse, ws_o, ws_lse, plan['splits'], 0, 0)   # packed token-major rows (head_major 0, q_ld 0)
        k(*(args + ((st,) if stamped else ())), grid=plan['grid'], block=(256,), shared=plan['smem'])
    def combine():
        if n == 1: return
        L, G = plan['combine']
        name = 'verify_attn_combine_pdl' if plan['pdl'] else 'verify_attn_combine'
        kc = _kernel(name, SIG_COMBINE) if isinstance(source, str) else load_kernel(source.parent / 'verify_attn.cu', name, SIG_COMBINE)
        kc(ws_o, ws_lse, n, T * H, out, lse, grid=(T * H, 512 // (8 * L)), block=(L, G), pdl=plan['pdl'])
    return split, combine, plan


def timeline(st: torch.Tensor) -> dict:
    "Per-call numbers (µs) from stamps [calls, blocks, 8], medians over the calls but the first and the last."
    st = st.double()
    rows = []
    for c in range(1, st.shape[0] - 1):
        t0, t1, t2, t3, tiles = st[c, :, 0], st[c, :, 1], st[c, :, 2], st[c, :, 3], st[c, :, 5]
        base, some, later = t0.min(), tiles > 0, tiles > 1
        t1 = torch.where(some, t1, t0)
        rows.append(dict(
            span=(t3.max() - base) / 1e3, ramp=(t0.max() - base) / 1e3, first_tile=((t1 - t0)[some] / 1e3).median(),
            per_later_tile=(((t2 - t1) / (tiles - 1).clamp(min=1))[later] / 1e3).median() if later.any() else float('nan'),
            loop=((t2 - t0) / 1e3).median(), merge=((t3 - t2) / 1e3).median(), tail=(t3.max() - t3.median()) / 1e3,
            gap_to_next=(st[c + 1, :, 0].min() - t3.max()) / 1e3, tiles=tiles.median()))
        if (st[c, :, 6] > 0).all():   # the cluster merge: its first barrier (the other blocks' loops), the stats and staging up to its second
            # barrier, then the sums and writes (merge_push is named after session 25's pushed variant, kept for the saved runs)
            t6, t7 = st[c, :, 6], st[c, :, 7]
            rows[-1].update(merge_wait=((t6 - t2) / 1e3).median(), merge_push=((t7 - t6) / 1e3).median(), merge_sum=((t3 - t7) / 1e3).median())
    return {k: round(float(statistics.median([float(r[k]) for r in rows])), 2) for k in rows[0]}


def shape(T, H, P, calls, cluster=None, against=None):
    kvs, ql, qp, vis = make_inputs(T, H, P, 'chain', 0)
    bits, scale = vis_to_bits(vis), DQK ** -0.5 * 2.0
    out = torch.empty(T, H, 512, dtype=torch.bfloat16, device='cuda'); lse = torch.empty(T, H, dtype=torch.float32, device='cuda')
    seq = [kvs[i % len(kvs)] for i in range(max(calls, len(kvs)))]
    split_s, comb, plan = launchers(T, H, P, ql, qp, bits, scale, out, lse, True, cluster)
    split_p, _, _ = launchers(T, H, P, ql, qp, bits, scale, out, lse, False, cluster)
    nb = plan['grid'][0] * plan['grid'][1]
    st = torch.zeros(len(seq), nb, 8, dtype=torch.int64, device='cuda')
    es = engine_stream()
    with es:   # the stamped build's outputs equal the shipped call's, bit for bit
        mla_tree_attention(ql, qp, kvs[0], P, bits, scale, out=out, lse=lse, cluster=cluster); torch.cuda.synchronize()
        ref = (out.clone(), lse.clone())
        split_s(kvs[0], st[0]); comb(); torch.cuda.synchronize()
    same = bool(torch.equal(out, ref[0]) and torch.equal(lse, ref[1]))
    if against:   # earlier versions of the kernel files: the same outputs, bit for bit?
        split_o, comb_o, _ = launchers(T, H, P, ql, qp, bits, scale, out, lse, False, cluster, Path(against) / 'verify_attn_sm90.cu')
        with es: split_o(kvs[0]); comb_o(); torch.cuda.synchronize()
        same_as = bool(torch.equal(out, ref[0]) and torch.equal(lse, ref[1]))
        print(f"  {against}: bit-equal {same_as}" + ('' if same_as else f", max |diff| {(out.float() - ref[0].float()).abs().max().item():.3g}"), flush=True)
    us_stamped, _ = gpu_time_us([lambda i=i, kv=kv: (split_s(kv, st[i]), comb()) for i, kv in enumerate(seq)])
    tl = timeline(st.cpu())
    us_call, _ = gpu_time_us([lambda kv=kv: mla_tree_attention(ql, qp, kv, P, bits, scale, out=out, lse=lse, cluster=cluster) for kv in seq])
    us_split, _ = gpu_time_us([lambda kv=kv: split_p(kv) for kv in seq])
    us_comb, _ = gpu_time_us([comb for _ in seq])
    r = dict(T=T, H=H, P=P, plan={k: plan[k] for k in ('kernel', 'splits', 'cluster', 'parts', 'grid', 'pdl')}, bit_equal=same,
             us_call=round(us_call, 2), us_split_alone=round(us_split, 2), us_combine_alone=round(us_comb, 2),
             us_stamped_call=round(us_stamped, 2), timeline=tl)
    print(f"T={T} H={H} P={P} {plan['kernel']} x{plan['splits']} parts {plan['parts']} pdl {plan['pdl']}: bit-equal {same}; "
          f"call {us_call:.1f} µs, split alone {us_split:.1f}, combine alone {us_comb:.1f}, stamped call {us_stamped:.1f}; "
          + ', '.join(f'{k} {v}' for k, v in tl.items()), flush=True)
    del kvs; torch.cuda.empty_cache()
    return r


if __name__ == '__main__':
    ap = argparse.ArgumentParser(); ap.add_argument('--H', default='64'); ap.add_argument('--P', default='4096,32768,131072')
    ap.add_argument('--T', type=int, default=1); ap.add_argument('--calls', type=int, default=20); ap.add_argument('--clusters', default='default'); ap.add_argument('--out', default=None)
    ap.add_argument('--against', default=None, help='a folder with earlier copies of verify_attn_sm90.cu and verify_attn.cu: check the shipped outputs equal theirs, bit for bit (copies from session 41 on: the launch passes their head_major and q_ld arguments)')
    a = ap.parse_args()
    res = []
    clusters = [None if c == 'default' else int(c) for c in a.clusters.split(',')]
    for H, P, c in [(H, P, c) for H in map(int, a.H.split(',')) for P in map(int, a.P.split(',')) for c in clusters]:
        try: res.append(shape(a.T, H, P, a.calls, c, a.against))
        except Exception as e:
            print(f"T={a.T} H={H} P={P} cluster={c}: {type(e).__name__}: {e}", flush=True)
            res.append(dict(T=a.T, H=H, P=P, cluster=c, error=str(e)))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), command=' '.join(sys.argv), rows=res),
                  open(os.path.join(a.out, 'stamp_verify.json'), 'w'), indent=1)
