"""How much of a demo target's greedy text repeats itself: the fraction of repeated n-grams in each held-out prompt's
greedy continuation, per pair directory, over the whole continuation and its first 128 tokens (CPU, fp32).

    python benchmarks/pair_repetition.py ddtree_nb/demo_pair /path/to/other_pair --n-prompts 8 --new-tokens 512
"""
import argparse, json, torch
from pathlib import Path
from transformers import AutoTokenizer
from ddtree_nb.checkpoint import load_target
from ddtree_nb.bench import repeated_fraction
from ddtree_nb.demo import greedy_continuations, held_out_prompts

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('pairs', nargs='+')
    ap.add_argument('--n-prompts', type=int, default=8)
    ap.add_argument('--new-tokens', type=int, default=512)
    ap.add_argument('--n', type=int, default=16, help='n-gram length')
    a = ap.parse_args()
    for d in map(Path, a.pairs):
        target = load_target(d / 'target', device='cpu', dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(str(d / 'target'))
        out = greedy_continuations(target, torch.tensor(held_out_prompts(tok, n=a.n_prompts)), a.new_tokens)[:, 48:]
        rec = dict(pair=str(d), seq_len=json.loads((d / 'train_log.json').read_text())['hyper']['seq_len'],
                   whole=[round(repeated_fraction(o.tolist(), a.n), 2) for o in out],
                   first_128=[round(repeated_fraction(o[:128].tolist(), a.n), 2) for o in out],
                   sample=tok.decode(out[0, :120].tolist()))
        print(json.dumps(rec))

if __name__ == '__main__': main()
