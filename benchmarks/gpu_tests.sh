#!/usr/bin/env bash
# Run the notebooks' tests including the GPU cells, on the GPU machine, and write a log with date, GPU, commit, command,
# each notebook's time and the exit code. Usage (from the repo root, after `source .device/boot.sh`):
#   bash benchmarks/gpu_tests.sh [outdir] [notebook ...]    # default outdir: $OUT or /tmp; default: every notebook
# A notebook is named as in nbs/ with or without the folder and .ipynb (04_accept, nbs/04_accept.ipynb), or by its number
# prefix when that is unique (04). Env:
#   OMP_NUM_THREADS   torch CPU threads per notebook (default 2: the notebooks run in parallel and their CPU parts are
#                     small; 16 workers x 16 threads on 16 cores starved every notebook)
#   N_WORKERS         notebooks in parallel (default: cores / OMP_NUM_THREADS, at most 8)
#   GPU_TESTS_TIMEOUT seconds for the whole run (default 570, under the device runner's 600 s per command); on expiry
#                     the run is stopped, the log says so, and the exit code is 124
#   DDTREE_FUZZ_SECONDS (default in the notebooks: 30 per harness), DDTREE_LONG_RUN_TOKENS (default 20000) are passed on.
# 08_reliability's long run (20,000 tokens) reports its progress live on stderr and in $OUT/progress.log; give it its own
# call (bash benchmarks/gpu_tests.sh "$OUT" 08_reliability) rather than sharing a 600 s window with every other notebook.
set -uo pipefail
out=${1:-${OUT:-/tmp}}; [ $# -gt 0 ] && shift
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export MKL_NUM_THREADS=${MKL_NUM_THREADS:-$OMP_NUM_THREADS}
ncpu=$(nproc 2>/dev/null || echo 2)
workers=${N_WORKERS:-$(( ncpu / OMP_NUM_THREADS ))}
[ "$workers" -gt 8 ] && [ -z "${N_WORKERS:-}" ] && workers=8
[ "$workers" -lt 1 ] && workers=1
limit=${GPU_TESTS_TIMEOUT:-570}

names=()
for a in "$@"; do
  b=$(basename "$a" .ipynb)
  if [ -f "nbs/$b.ipynb" ]; then names+=("$b"); continue; fi
  m=(nbs/"$b"_*.ipynb)
  if [ ${#m[@]} -ne 1 ] || [ ! -f "${m[0]}" ]; then echo "gpu_tests.sh: no single notebook matches '$a' (have: $(cd nbs && ls *.ipynb | tr '\n' ' '))" >&2; exit 2; fi
  names+=("$(basename "${m[0]}" .ipynb)")
done
sel=()
if [ ${#names[@]} -gt 0 ]; then
  re="^($(IFS='|'; echo "${names[*]}"))\\.ipynb\$"
  sel=(--file_re "$re")
fi
cmd=(nbdev_test --flags cuda --do_print --timing --n_workers "$workers" "${sel[@]}")

log="$out/gpu_tests.log"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__)')"
  echo "commit: ${DDTREE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat .device/commit 2>/dev/null || echo unknown)}"
  echo "notebooks: ${names[*]:-all}"
  echo "env: OMP_NUM_THREADS=$OMP_NUM_THREADS workers=$workers of $ncpu cores, timeout ${limit} s," \
       "DDTREE_FUZZ_SECONDS=${DDTREE_FUZZ_SECONDS:-default} DDTREE_LONG_RUN_TOKENS=${DDTREE_LONG_RUN_TOKENS:-default}"
  echo "command: ${cmd[*]}"
  echo
} > "$log"
start=$(date +%s)
# timeout signals the whole process group, so nbdev_test's worker processes stop too
timeout --kill-after=15 "$limit" "${cmd[@]}" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
el=$(( $(date +%s) - start ))
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "exit: $rc: TIMED OUT after ${el} s (GPU_TESTS_TIMEOUT=$limit); notebooks that had not finished are not listed as passed" | tee -a "$log"
else
  echo "exit: $rc after ${el} s" | tee -a "$log"
fi
exit $rc
