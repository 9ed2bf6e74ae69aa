#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over every cuda-flagged notebook test, one notebook per
# run so a finding names its notebook. Writes $outdir/sanitize.log (date, GPU, commit, commands, each run's tail and exit
# code) and one full log per run; exits non-zero if any run fails or reports an error.
# Usage (repo root, on the GPU machine, after `source .device/boot.sh`):
#   bash benchmarks/sanitize.sh [outdir] [tool ...]      # default outdir: $OUT or /tmp; default: all four tools
# Env: NOTEBOOKS (default: every nbs/*.ipynb with a "#| cuda" cell), SANITIZE_TIMEOUT (s per run, default 1800; the device
# runner allows 600 s per command, so there pass fewer notebooks/tools per call and e.g. SANITIZE_TIMEOUT=540),
# OMP_NUM_THREADS (default 2), DDTREE_FUZZ_SECONDS (default 10), DDTREE_LONG_RUN_TOKENS (default 300).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp}}; [ $# -gt 0 ] && shift
tools=("$@"); [ ${#tools[@]} -eq 0 ] && tools=(memcheck racecheck initcheck synccheck)
mkdir -p "$out"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$CS" ] || { echo "compute-sanitizer not found (looked on PATH and /usr/local/cuda/bin)" >&2; exit 2; }
nbs=${NOTEBOOKS:-$(grep -l '"#| cuda' nbs/*.ipynb | sort | tr '\n' ' ')}
log="$out/sanitize.log"
# torch's caching allocator hands out slices of big blocks: without this memcheck can't see an overrun into a
# neighbouring tensor and initcheck can't see reads of never-written memory.
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MKL_NUM_THREADS=${MKL_NUM_THREADS:-${OMP_NUM_THREADS:-2}}
# the GPU fuzzers and the long run are time- or size-bounded; keep them short under the (10-100x slower) sanitizers
export DDTREE_FUZZ_SECONDS=${DDTREE_FUZZ_SECONDS:-10} DDTREE_LONG_RUN_TOKENS=${DDTREE_LONG_RUN_TOKENS:-300}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"
  echo "sanitizer: $("$CS" --version 2>/dev/null | tail -1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__)')"
  echo "commit: ${DDTREE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat .device/commit 2>/dev/null || echo unknown)}"
  echo "notebooks: $nbs"
  echo "env: PYTORCH_NO_CUDA_MEMORY_CACHING=1 OMP_NUM_THREADS=$OMP_NUM_THREADS DDTREE_FUZZ_SECONDS=$DDTREE_FUZZ_SECONDS DDTREE_LONG_RUN_TOKENS=$DDTREE_LONG_RUN_TOKENS"
  echo
} > "$log"
fail=0
for tool in "${tools[@]}"; do
  extra=()
  case $tool in
    memcheck)  extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report all) ;;
    initcheck) extra=(--track-unused-memory no) ;;
    synccheck) ;;
    *) echo "unknown tool $tool" >&2; exit 2 ;;
  esac
  for nb in $nbs; do
    name=$(basename "$nb" .ipynb)
    run_log="$out/sanitize_${tool}_${name}.log"
    cmd=("$CS" --tool "$tool" "${extra[@]}" --target-processes all --error-exitcode 99 --print-limit 50
         nbdev_test --path "$nb" --flags cuda --do_print)
    echo "== $tool $nb: ${cmd[*]}" | tee -a "$log"
    start=$(date +%s)
    timeout "${SANITIZE_TIMEOUT:-1800}" "${cmd[@]}" > "$run_log" 2>&1; rc=$?
    errs=$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$run_log" | awk '{s+=$3} END {print s+0}')
    echo "exit $rc, sanitizer errors $errs, $(( $(date +%s) - start )) s" | tee -a "$log"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|Invalid|Uninitialized|hazard|Barrier|Tests Failed' "$run_log" | head -20 >> "$log"
    [ "$rc" -ne 0 ] || [ "$errs" -ne 0 ] && fail=1
  done
done
echo "result: $([ $fail -eq 0 ] && echo 'zero findings, all tests passed' || echo 'FINDINGS or failures: see the per-run logs')" | tee -a "$log"
exit $fail
