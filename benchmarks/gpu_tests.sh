#!/usr/bin/env bash
# Run every notebook's tests including the GPU cells, on the GPU machine, and write a log with date, GPU,
# commit and command. Usage (from the repo root, after `source .device/boot.sh`):
#   bash benchmarks/gpu_tests.sh [outdir]          # default outdir: $OUT or /tmp
set -uo pipefail
out=${1:-${OUT:-/tmp}}
log="$out/gpu_tests.log"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__)')"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || cat .device/commit 2>/dev/null || echo unknown)"
  echo "command: nbdev_test --flags cuda --do_print --timing"
  echo
} > "$log"
nbdev_test --flags cuda --do_print --timing 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
echo "exit: $rc" | tee -a "$log"
exit $rc
