#!/usr/bin/env bash
# How the shipped demo pair (ddtree_nb/demo_pair) was made; see nbs/06_demo_models.ipynb and benchmarks/demo_pair.md.
# Step 1 (CPU, the Python whose stdlib is the corpus: 3.11.7 here): split, tokenizer, token streams -> build/gpu_data.
# Step 2 (one GPU, ~5.5 min; on the project's leased H200 this ran in one `run` call that carried build/gpu_data):
#   the target, its greedy continuations, the drafter; every phase on a wall-clock budget, --deadline-s caps the run.
# Afterwards copy OUT/{target,drafter,train_log.json} over ddtree_nb/demo_pair/ and run benchmarks/eval_demo_pair.py.
set -euo pipefail
STEP=${1:-all}
OUT=${2:-/tmp/pair}
if [[ $STEP == prepare || $STEP == all ]]; then
  python -m ddtree_nb.demo prepare --out build/gpu_data --vocab-size 4096
fi
if [[ $STEP == train || $STEP == all ]]; then
  python3 -m ddtree_nb.demo train --out "$OUT" --data build/gpu_data --device cuda --seed 0 \
    --target '{"hidden_size": 256, "num_hidden_layers": 6, "moe_intermediate_size": 128, "intermediate_size": 768}' \
    --drafter '{"num_hidden_layers": 3, "target_layer_ids": [1, 3, 5]}' \
    --seq-len 256 --target-steps 100000 --target-batch 64 --target-lr 2e-3 --target-warmup 100 --target-time-s 120 \
    --prompt-len 48 --new-tokens 128 --gen-seqs 65536 --gen-batch 4096 --gen-time-s 30 --eval-seqs 256 \
    --drafter-steps 100000 --drafter-batch 128 --anchors-per-seq 16 --drafter-lr 2e-3 --drafter-warmup 100 \
    --drafter-time-s 200 --deadline-s 340 --target-shards 2
fi
