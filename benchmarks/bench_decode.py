"""Decode-round benchmark on the GPU: the shipped demo pair, backend torch vs cuda (eager) vs cuda (CUDA graph).

Not a test. For AR, DFlash and DDTree (B in 16, 64, 256): tokens/s, mean acceptance length and per-stage time per
round; plus a correctness matrix (every method/budget/backend against AR's tokens), a count of the host syncs torch
reports inside cuda rounds, and a Kimi-width bf16 random pair (verify kernel inside the round).
Writes decode.json and decode.md into --out.

    python benchmarks/bench_decode.py --out OUTDIR [--commit HASH] [--max-new 128]
"""
import argparse, json, os, sys, time, traceback, warnings
from pathlib import Path
import torch


def _prompts(tok, n=2, k=32):
    from ddtree_nb.demo import held_out_prompts
    try: return held_out_prompts(tok, n=n, prompt_tokens=k)
    except FileNotFoundError:
        return [tok.encode("def parse(argv):\n    parser = argparse.ArgumentParser("),
                tok.encode("class Node:\n    def __init__(self, value):\n        self.")][:n]


def _variants():
    from ddtree_nb.decode import Stages
    return {'torch': dict(backend='torch'), 'cuda': dict(stages_fn=lambda: Stages(graph=False)),
            'cuda+graph': dict(stages_fn=lambda: Stages(graph=True))}


def _gen(t, d, p, variant, **kw):
    from ddtree_nb.decode import generate
    v = dict(_variants()[variant])
    fn = v.pop('stages_fn', None)
    if fn is not None: v['stages'] = fn()
    return generate(t, d if kw.get('method') != 'ar' else None, p, **v, **kw)


def correctness(t, d, prompts, n_new, log):
    "Every method x budget x variant against AR's greedy tokens (torch backend)."
    from ddtree_nb.decode import generate
    rows = []
    for pi, p in enumerate(prompts):
        ref = generate(t, None, p, method='ar', max_new_tokens=n_new, backend='torch').tokens
        cases = [('ar', 0)] + [(m, B) for m in ('ddtree', 'dflash') for B in (0, 1, 8, 64, 256)]
        for m, B in cases:
            for var in _variants():
                r = dict(prompt=pi, method=m, budget=B, variant=var)
                try:
                    g = _gen(t, d, p, var, method=m, budget=B, max_new_tokens=n_new)
                    same = g.tokens == ref
                    first = next((i for i, (a, b) in enumerate(zip(g.tokens, ref)) if a != b), None)
                    r.update(same_as_ar=same, first_diff=first, mean_acceptance=g.mean_acceptance, graph_rounds='round' in g.stage_times)
                except Exception as e:
                    r.update(error=f"{type(e).__name__}: {e}", tb=traceback.format_exc()[-3000:])
                rows.append(r)
                log(f"check p{pi} {m:6s} B={B:3d} {var:10s} -> " + ('ERROR ' + r['error'] if 'error' in r else f"same={r['same_as_ar']} first_diff={r['first_diff']} tau={r['mean_acceptance']:.2f} graph={r['graph_rounds']}"))
    return rows


def timing(t, d, prompts, n_new, log, reps=1):
    "tokens/s, mean acceptance, per-round stage ms for AR, DFlash, DDTree 16/64/256 on each variant."
    out = []
    for m, B in (('ar', 0), ('dflash', 16), ('ddtree', 16), ('ddtree', 64), ('ddtree', 256)):
        for var in _variants():
            r = dict(method=m, budget=B, variant=var)
            try:
                _gen(t, d, prompts[0], var, method=m, budget=B, max_new_tokens=n_new)        # warm-up (compile, cuBLAS, capture)
                toks = wall = rounds = 0; acc = []; st = {}
                for _ in range(reps):
                    for p in prompts:
                        torch.cuda.synchronize()
                        g = _gen(t, d, p, var, method=m, budget=B, max_new_tokens=n_new)
                        toks += len(g.tokens); wall += g.wall_s - g.stage_times.get('prefill', 0.0)
                        rounds += len(g.acceptance_lengths); acc += g.acceptance_lengths
                        for k, v in g.stage_times.items(): st[k] = st.get(k, 0.0) + v
                r.update(tokens=toks, rounds=rounds, decode_s=wall, tokens_per_s=toks / wall, mean_acceptance=sum(acc) / len(acc),
                         ms_per_round={k: 1e3 * v / rounds for k, v in st.items() if k != 'prefill'}, ms_per_round_wall=1e3 * wall / rounds)
                log(f"time {m:6s} B={B:3d} {var:10s} {r['tokens_per_s']:8.1f} tok/s  tau {r['mean_acceptance']:.2f}  "
                    f"{r['ms_per_round_wall']:.2f} ms/round  " + ' '.join(f"{k} {v:.2f}" for k, v in r['ms_per_round'].items()))
            except Exception as e:
                r.update(error=f"{type(e).__name__}: {e}", tb=traceback.format_exc()[-3000:]); log(f"time {m} B={B} {var}: ERROR {r['error']}")
            out.append(r)
    return out


def sync_count(t, d, p, n_new, log):
    "Synchronising torch calls that torch's sync debug mode reports inside cuda rounds (the prefill excluded)."
    from ddtree_nb.decode import Decoder, Stages
    res = {}
    for m, B, graph in (('ddtree', 64, False), ('dflash', 16, False), ('ar', 0, False), ('ddtree', 64, True)):
        try:
            dec = Decoder(t, d if m != 'ar' else None, p, method=m, budget=B, max_new_tokens=n_new, stages=Stages(graph=graph))
            dec.prefill()
            n = 0
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter('always')
                torch.cuda.set_sync_debug_mode('warn')
                try:
                    while dec.step() is not None: n += 1
                finally: torch.cuda.set_sync_debug_mode(0)
            msgs = sorted({str(x.message).split('\n')[0][:160] for x in w})
            res[f"{m} B={B} graph={graph}"] = dict(rounds=n, torch_syncs=len(w), messages=msgs)
            log(f"syncs {m} B={B} graph={graph}: {len(w)} torch-reported syncs in {n} rounds {msgs[:3]}")
        except Exception as e:
            res[f"{m} B={B} graph={graph}"] = dict(error=f"{type(e).__name__}: {e}", tb=traceback.format_exc()[-3000:])
            log(f"syncs {m} B={B}: ERROR {e}")
    return res


def kimi_width(log, n_new=24):
    "A random bf16 target with Kimi's latent widths (512 + 64): the verify kernel inside the cuda round."
    from ddtree_nb.model import build_target, tiny_config
    from ddtree_nb.drafter import Drafter, DrafterConfig
    from ddtree_nb.decode import generate, Stages
    res = {}
    try:
        t = build_target(tiny_config(vocab_size=512, hidden_size=256, num_hidden_layers=3, num_attention_heads=8, kv_lora_rank=512,
                                     qk_rope_head_dim=64, qk_nope_head_dim=64, v_head_dim=64, q_lora_rank=64, max_position_embeddings=1024),
                         dtype=torch.bfloat16, device='cuda', seed=1, std=0.08)
        c = DrafterConfig.from_dict(dict(model_type='qwen3', hidden_size=256, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=32, vocab_size=512, num_target_layers=3, block_size=16,
                                         dflash_config=dict(mask_token_id=511, target_layer_ids=[0, 2])))
        d = Drafter(c, t).to('cuda', torch.bfloat16)
        p = list(range(40, 72))
        ar_c = generate(t, None, p, method='ar', max_new_tokens=n_new, backend='cuda')
        ar_t = generate(t, None, p, method='ar', max_new_tokens=n_new, backend='torch')
        res['ar_cuda_vs_ar_torch_same'] = ar_c.tokens == ar_t.tokens
        for m, B in (('ddtree', 64), ('dflash', 16), ('ddtree', 256)):
            for graph in (False, True):
                g = generate(t, d, p, method=m, budget=B, max_new_tokens=n_new, stages=Stages(graph=graph))
                first = next((i for i, (a, b) in enumerate(zip(g.tokens, ar_c.tokens)) if a != b), None)
                res[f"{m} B={B} graph={graph}"] = dict(same_as_ar_cuda=g.tokens == ar_c.tokens, first_diff=first, tau=g.mean_acceptance)
        log(f"kimi-width bf16: {json.dumps(res)}")
    except Exception as e:
        res['error'] = f"{type(e).__name__}: {e}"; res['tb'] = traceback.format_exc()[-3000:]
        log(f"kimi-width: ERROR {res['error']}\n{res['tb']}")
    return res


def markdown(res) -> str:
    m = res['meta']
    lines = [f"Run {m['date']} on {m['gpu']} (torch {m['torch']}), commit {m['commit']}, demo pair fp32, "
             f"{m['prompts']} prompts x {m['max_new']} new tokens, greedy.", '',
             '| method | B | backend | tokens/s | mean acceptance | ms/round (wall) | stage ms/round |', '|---|---|---|---|---|---|---|']
    for r in res['timing']:
        if 'error' in r: lines.append(f"| {r['method']} | {r['budget']} | {r['variant']} | error: {r['error'][:80]} | | | |"); continue
        st = ', '.join(f"{k} {v:.2f}" for k, v in r['ms_per_round'].items() if v > 0)
        lines.append(f"| {r['method']} | {r['budget']} | {r['variant']} | {r['tokens_per_s']:.1f} | {r['mean_acceptance']:.2f} | {r['ms_per_round_wall']:.2f} | {st} |")
    bad = [r for r in res.get('correctness', []) if 'error' in r or not r.get('same_as_ar')]
    lines += ['', f"Correctness matrix: {len(res.get('correctness', []))} runs, {len(bad)} not identical to AR."]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='.'); ap.add_argument('--commit', default=os.environ.get('COMMIT', '?'))
    ap.add_argument('--max-new', type=int, default=128); ap.add_argument('--check-new', type=int, default=40)
    ap.add_argument('--skip', default='', help='comma list of sections to skip: check,time,sync,kimi')
    a = ap.parse_args(argv)
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    logf = open(out / 'bench_decode.log', 'a')
    def log(s): print(s, flush=True); logf.write(s + '\n'); logf.flush()
    from ddtree_nb.demo import load_demo_pair
    t, d, tok = load_demo_pair('cuda', torch.float32)
    prompts = _prompts(tok)
    skip = set(a.skip.split(','))
    res = dict(meta=dict(date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                         commit=a.commit, max_new=a.max_new, prompts=len(prompts), command=' '.join(sys.argv)))
    t0 = time.time()
    sections = (('sync', 'syncs', lambda: sync_count(t, d, prompts[0], 48, log)),
                ('check', 'correctness', lambda: correctness(t, d, prompts, a.check_new, log)),
                ('time', 'timing', lambda: timing(t, d, prompts, a.max_new, log)),
                ('kimi', 'kimi_width', lambda: kimi_width(log)))
    for name, key, f in sections:
        if name in skip: continue
        res[key] = f()
        (out / 'decode.json').write_text(json.dumps(res, indent=1))          # after every section: a timeout keeps what finished
        if 'timing' in res: (out / 'decode.md').write_text(markdown(res))
        log(f"[{name} done at {time.time() - t0:.0f} s]")


if __name__ == '__main__': main()
