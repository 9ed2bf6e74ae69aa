#!/usr/bin/env bash
# Trains the shipped demo pair (ddtree_nb/demo_pair) on a 2-core CPU (shared with other jobs, so one thread) in about 25 minutes; log on stdout.
# For a larger pair on a GPU: raise the sizes in --target/--drafter, the steps and time budgets, and pass --device cuda.
set -euo pipefail
OUT=${1:-demo_pair_out}
python -m ddtree_nb.demo train --out "$OUT" --threads 1 --seed 0 --vocab-size 1024 \
  --target '{"hidden_size": 128, "moe_intermediate_size": 64, "intermediate_size": 256}' \
  --drafter '{"num_hidden_layers": 2}' \
  --seq-len 128 --target-steps 5000 --target-batch 16 --target-lr 3e-3 --target-time-s 540 \
  --drafter-steps 5000 --drafter-batch 8 --anchors-per-seq 6 --drafter-lr 3e-3 --drafter-time-s 660 --drafter-labels target
