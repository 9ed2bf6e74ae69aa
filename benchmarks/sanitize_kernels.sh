#!/usr/bin/env bash
# compute-sanitizer over OUR kernels: benchmarks/sanitize_kernels.py (small direct calls of every kernel, each checked
# against its reference) once plain, then once under each of memcheck (--leak-check full), initcheck, synccheck and
# racecheck, each with its own timeout; then the table of errors per kernel per tool (benchmarks/sanitize_table.py).
# Usage (repo root, GPU machine, after `source .device/boot.sh`):
#   bash benchmarks/sanitize_kernels.sh [outdir] [--dry-run]     # default outdir: $OUT/sanitize_kernels or /tmp/...
# Writes outdir/{meta.txt,runs.txt,plain.log,<tool>.log,sanitize_kernels.md}; copy the .md to benchmarks/.
# Env: KERNELS (the script's --kernels filter, default all), TIMEOUT_PLAIN/TIMEOUT_MEMCHECK/TIMEOUT_INITCHECK/
# TIMEOUT_SYNCCHECK/TIMEOUT_RACECHECK (s; defaults 70/110/95/75/130, 480 s in all), TOOLS (default all four).
# torch's caching allocator is off (PYTORCH_NO_CUDA_MEMORY_CACHING=1): every tensor is its own cudaMalloc, so memcheck
# sees an overrun past one and initcheck a read of never-written memory. memcheck/synccheck/racecheck instrument only
# our kernels (--kernel-name kns=NAME per kernel) when this sanitizer takes the option; initcheck instruments every
# kernel (a write by an uninstrumented torch kernel would look like uninitialised memory to it). Every run ends with
# sanitize_canary, a deliberate fault of the tool's kind, which the table must show as seen.
set -uo pipefail
cd "$(dirname "$0")/.."
dry=0; args=()
for a in "$@"; do [ "$a" = --dry-run ] && dry=1 || args+=("$a"); done
out=${args[0]:-${OUT:-/tmp}/sanitize_kernels}
PY=${PYTHON:-python3}
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tools=(${TOOLS:-memcheck initcheck synccheck racecheck})
declare -A limit=([plain]=${TIMEOUT_PLAIN:-70} [memcheck]=${TIMEOUT_MEMCHECK:-110} [initcheck]=${TIMEOUT_INITCHECK:-95}
                  [synccheck]=${TIMEOUT_SYNCCHECK:-75} [racecheck]=${TIMEOUT_RACECHECK:-130})
script=(benchmarks/sanitize_kernels.py ${KERNELS:+--kernels "$KERNELS"})
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} PYTHONUNBUFFERED=1
names=$($PY benchmarks/sanitize_kernels.py --names) || { echo "could not list the kernel names" >&2; exit 2; }
filters=(); for n in $names; do filters+=(--kernel-name "kns=$n"); done
common=(--error-exitcode 99 --print-limit 10000)

# Options beyond the basic ones are used only if this sanitizer takes them: each is tried on `true` (no CUDA; hence
# --require-cuda-init no), exit 0 = accepted. --destroy-on-device-error kernel: a memory or barrier error ends the
# kernel, not the context, so the cases after it (and the canary) still run; --padding: an overrun into the next
# allocation is caught; initcheck --check-api-memory-access no: the checks' device->host copies of partly written
# buffers are not our kernels' reads.
use_filters=yes; probe=(--require-cuda-init no)
opt_ok() { [ $dry -eq 1 ] || timeout 15 "$CS" "${probe[@]}" "$@" true >/dev/null 2>&1; }
if [ $dry -eq 0 ]; then
  [ -x "$CS" ] || { echo "compute-sanitizer not found (PATH, /usr/local/cuda/bin)" >&2; exit 2; }
  opt_ok || probe=()
fi
opt_ok --show-backtrace device && common+=(--show-backtrace device)
opt_ok --tool memcheck "${common[@]}" "${filters[@]}" || use_filters="no (option rejected)"
declare -A more=([memcheck]="--leak-check full" [initcheck]="" [synccheck]="" [racecheck]="")
for o in "memcheck --padding 1024" "memcheck --destroy-on-device-error kernel" "synccheck --destroy-on-device-error kernel" \
         "initcheck --check-api-memory-access no"; do
  set -- $o; t=$1; shift
  opt_ok --tool "$t" "$@" && more[$t]="${more[$t]} $*"
done
tool_cmd() {   # tool_cmd TOOL: the command line of one run, in the array `cmd`
  local t=$1 extra=()
  case $t in
    plain) cmd=("$PY" "${script[@]}"); return ;;
    memcheck|initcheck|synccheck|racecheck) extra=(${more[$t]}) ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
  local f=(); [ "$use_filters" = yes ] && [ "$t" != initcheck ] && f=("${filters[@]}")
  cmd=("$CS" --tool "$t" "${extra[@]}" "${common[@]}" "${f[@]}" "$PY" "${script[@]}" --canary "$t")
}
short() { sed -E 's/(--kernel-name kns=[A-Za-z0-9_]+ )+/--kernel-name kns=<each of our kernels> /' <<< "$*"; }

if [ $dry -eq 1 ]; then
  echo "# outdir $out; env PYTORCH_NO_CUDA_MEMORY_CACHING=1; $(wc -w <<< "$names") kernel names"
  for t in plain "${tools[@]}"; do tool_cmd "$t"; echo "timeout ${limit[$t]} ${cmd[*]} > $out/$t.log 2>&1"; done
  echo "$PY benchmarks/sanitize_kernels.py --table $out --out $out/sanitize_kernels.md"
  exit 0
fi

mkdir -p "$out" && out=$(cd "$out" && pwd)
: > "$out/runs.txt"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "sanitizer: $("$CS" --version 2>/dev/null | tail -1)"
  echo "torch: $($PY -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"
  echo "commit: ${DDTREE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat .device/commit 2>/dev/null || echo unknown)}"
  echo "command: bash benchmarks/sanitize_kernels.sh $out${KERNELS:+ (KERNELS=$KERNELS)}"
  echo "env: PYTORCH_NO_CUDA_MEMORY_CACHING=1"
  echo "kernel filter: $use_filters (initcheck: none)"
} > "$out/meta.txt"
cat "$out/meta.txt"
for t in plain "${tools[@]}"; do
  tool_cmd "$t"
  echo "== $t: $(short "${cmd[*]}")"
  t0=$(date +%s)
  timeout -k 10 "${limit[$t]}" "${cmd[@]}" > "$out/$t.log" 2>&1; rc=$?
  secs=$(( $(date +%s) - t0 ))
  echo "tool=$t rc=$rc secs=$secs limit=${limit[$t]} cmd=$(short "${cmd[*]}")" >> "$out/runs.txt"
  echo "   exit $rc, $secs s$([ $rc -eq 124 ] && echo ' (TIMED OUT)'); $(grep -E 'SANITIZE_DONE|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$out/$t.log" | tr '\n' ' ')"
  grep -E 'SANITIZE_CASE .* FAIL' "$out/$t.log" | head -5 | sed 's/^/   | /'
  # the memcheck run proves the filter: if it reached its canary but printed no record naming it, the filter hid our
  # kernels (e.g. repeated --kernel-name options not OR-ed): run the other tools unfiltered (the table attributes anyway)
  if [ "$t" = memcheck ] && [ "$use_filters" = yes ] && grep -q 'SANITIZE_CANARY memcheck start' "$out/$t.log" \
     && ! grep -E '^=========' "$out/$t.log" | grep -q sanitize_canary; then
    use_filters="no (memcheck's canary was not reported with the filter on)"
    echo "kernel filter: $use_filters" | tee -a "$out/meta.txt"
  fi
done
$PY benchmarks/sanitize_kernels.py --table "$out" --out "$out/sanitize_kernels.md" && cat "$out/sanitize_kernels.md"
