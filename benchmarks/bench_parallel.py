"""AR step and tree-verify time of a Kimi-K2-shaped slice with the target split over the torchrun ranks.

NOT RUN YET: written while no multi-GPU machine was lent. Run it on N GPUs of one host (N in 1, 2, 4, 8):

    torchrun --nproc_per_node N benchmarks/bench_parallel.py --layers 3 --prefix 4096 --out benchmarks/parallel_N.json

Every rank builds only its own shard (`ShardedTarget` on the meta device, allocated on its GPU, random bf16
weights; replicated weights are identical on all ranks so routing agrees), fills `--prefix` rows of the
replicated latent cache, then times with CUDA events (warm-up, barrier before each rep, median over reps):
  - one AR step: T = 1 token at position P;
  - one tree verify per budget B: T = B + 1 tokens (root + B nodes of a random tree) at positions P + depth;
  - one all-reduce of [T, hidden] bf16 alone, times the 2 all-reduces per layer, to show the collective share.
Rank 0 prints a markdown table and writes JSON. Numbers go to benchmarks/parallel.md with date, GPU, commit, command.
"""
import argparse, json, statistics, zlib, subprocess, datetime
import torch
import torch.distributed as dist
from ddtree_nb.model import config_from_dict, Router, kimi_config
from ddtree_nb.reference import ancestor_mask, tree_depths
from ddtree_nb.parallel import ShardedTarget, init_distributed, shard_spec

KIMI_K2 = kimi_config()   # Kimi K2.6 widths (ddtree_nb.model.kimi_config); only the layer count is cut


def random_shard(cfg, rank, world, device, dtype=torch.bfloat16, seed=0, std=0.02):
    "This rank's ShardedTarget with random weights; replicated tensors seeded by name only, so all ranks hold the same."
    m = ShardedTarget(cfg, rank, world).to_empty(device=device)
    routers = {n for n, mod in m.named_modules() if isinstance(mod, Router)}
    with torch.no_grad():
        for name, p in m.state_dict(keep_vars=True).items():
            if name == 'rope_inv_freq': continue
            g = torch.Generator(device=device).manual_seed(seed + zlib.crc32(name.encode()) + (rank if shard_spec(name) is not None else 0))
            fp32 = name.rsplit('.', 1)[0] in routers
            t = torch.empty(p.shape, dtype=torch.float32 if fp32 else dtype, device=device)
            if name.endswith('norm.weight'): t.fill_(1.0)
            else: t.normal_(0, std, generator=g)
            p.data = t
    m.init_rope()
    m.check_inputs = False            # no host read of positions per call
    return m.eval().requires_grad_(False)


def random_tree(n_nodes, seed):
    "parents [n+1] of a random tree: node i hangs under a random earlier node, biased to recent ones (deep, bushy)."
    g = torch.Generator().manual_seed(seed)
    parents = [-1] + [max(0, i - 1 - int(torch.randint(0, 4, (1,), generator=g))) for i in range(1, n_nodes + 1)]
    return torch.tensor(parents)


def time_ms(fn, warmup, reps):
    for _ in range(warmup): fn()
    out = []
    for _ in range(reps):
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--layers', type=int, default=3, help='decoder layers in the slice (first is dense, the rest MoE)')
    ap.add_argument('--prefix', type=int, default=4096, help='tokens already in the latent cache')
    ap.add_argument('--budgets', default='8,16,32,64,128,256,512,1024')
    ap.add_argument('--attn', default='torch', choices=('torch', 'cuda'), help="attention backend (cuda needs ddtree_nb.verify)")
    ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--out', default=None)
    args = ap.parse_args()
    rank, world, device = init_distributed()
    if device.type != 'cuda': raise SystemExit("bench_parallel.py times CUDA events: run it on GPUs")
    cfg = config_from_dict(dict(KIMI_K2, num_hidden_layers=args.layers))
    model = random_shard(cfg, rank, world, device)
    model.attn_backend = args.attn
    budgets = [int(b) for b in args.budgets.split(',')]
    P = args.prefix
    cache = model.new_cache(P + max(budgets) + 1)
    g = torch.Generator(device=device).manual_seed(1)
    cache.kv.normal_(0, 1, generator=g)                     # the same prefix on every rank (replicated cache)
    ids_all = torch.randint(0, cfg.vocab_size, (max(budgets) + 1,), generator=g, device=device)
    rows = []
    for B in [0] + budgets:                                 # B = 0: the AR step (root only)
        parents = random_tree(B, seed=B)
        vis = ancestor_mask(parents).to(device)
        pos = (P + tree_depths(parents)).to(device)
        ids = ids_all[:B + 1]
        fwd = lambda: model(ids, pos, cache, P, vis)
        ms = time_ms(fwd, args.warmup, args.reps)
        x = torch.randn(B + 1, cfg.hidden_size, dtype=torch.bfloat16, device=device)
        ar = time_ms(lambda: dist.all_reduce(x), args.warmup, args.reps) if world > 1 else 0.0
        rows.append(dict(B=B, T=B + 1, forward_ms=ms, per_layer_ms=ms / args.layers, allreduce_ms=ar,
                         allreduce_share=(2 * args.layers * ar / ms) if ms else 0.0))
    mem = torch.cuda.max_memory_allocated(device) / 2**30
    if rank == 0:
        try: commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
        except OSError: commit = '?'
        meta = dict(date=datetime.date.today().isoformat(), gpu=torch.cuda.get_device_name(device), world=world, layers=args.layers,
                    prefix=P, attn=args.attn, torch=torch.__version__, commit=commit, max_mem_gib_rank0=round(mem, 1))
        print(json.dumps(meta))
        print('| B | T | forward ms | per layer ms | one all-reduce ms | 2L all-reduces / forward |')
        print('|---|---|---|---|---|---|')
        for r in rows:
            print(f"| {r['B']} | {r['T']} | {r['forward_ms']:.3f} | {r['per_layer_ms']:.3f} | {r['allreduce_ms']:.3f} | {100 * r['allreduce_share']:.0f}% |")
        if args.out:
            with open(args.out, 'w') as f: json.dump(dict(meta=meta, rows=rows), f, indent=2)
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
