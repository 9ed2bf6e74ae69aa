#!/usr/bin/env bash
# What waits for the GPU (benchmarks/README.md, "Waiting for the GPU"), as device calls of < 600 s each.
# Usage, from the repo root on the GPU machine after `source .device/boot.sh` (write the commit to .device/commit first:
# the machine gets no .git):
#   bash benchmarks/gpu_next.sh validate  "$OUT"   # notebooks whose GPU code merged without a GPU run      (~5 min)
#   bash benchmarks/gpu_next.sh long      "$OUT"   # 08: kernel fuzzers + the 20,000-token long run           (<= 9 min)
#   bash benchmarks/gpu_next.sh bench     "$OUT"   # decode round + ddtree bench --demo + Kimi slice         (<= 9 min)
#   bash benchmarks/gpu_next.sh sanitize  "$OUT"   # compute-sanitizer, all four tools, kernel notebooks     (<= 9 min)
#   bash benchmarks/gpu_next.sh tree      "$OUT"   # the tree builder alone: its GPU tests + bench_tree        (~2 min)
#   bash benchmarks/gpu_next.sh profile_tree "$OUT" # ncu of one B=256 build, with per-line stall samples       (~2 min)
#   bash benchmarks/gpu_next.sh profile_verify "$OUT" # ncu of the verify attention at T = 1, P = 32k, default and plain plans (~3 min)
#   bash benchmarks/gpu_next.sh verify90  "$OUT"   # the sm_90a verify kernel: its checks, then v2 vs sm_90a timings (<= 9 min)
#   bash benchmarks/gpu_next.sh sanitize_kernels "$OUT"   # compute-sanitizer x 4 tools over direct calls of our kernels (<= 9 min)
#   bash benchmarks/gpu_next.sh fuzz5     "$OUT" [300]  # the kernel fuzzers and the whole-loop one (graph, eager) at once, 300 s each (~5.5 min)
#   bash benchmarks/gpu_next.sh long_run  "$OUT"   # 20,000 tokens T=0 and 1 (tiny pair) + a Kimi-width INT4 slice: memory flat   (~3 min)
#   bash benchmarks/gpu_next.sh soak      "$OUT"   # ddtree bench --demo x3, budgets 4..1024, T = 0 and 1, 8 prompts (<= 9 min)
#   bash benchmarks/gpu_next.sh compile   "$OUT"   # 05's cuda cells, bench_compile, the round compiled and not (same commit) (<= 9 min)
#   bash benchmarks/gpu_next.sh moe       "$OUT"   # the MoE kernel: validation, bench_moe T = 1..1025 vs v4, 03a's cuda cells, sanitizer (~6 min; MOE_VERSIONS)
#   bash benchmarks/gpu_next.sh moe_pdl   "$OUT"   # the T <= 8 PDL chain: 03a's cuda cells, --stress 50, its sanitizer case, per-layer timings (<= 8.5 min)
#   bash benchmarks/gpu_next.sh moe_v24   "$OUT"   # moe_pdl's checks with v24 (no grouping launch) beside v13 in graphs of layers (<= 9 min)
#   bash benchmarks/gpu_next.sh compile_ab "$OUT"  # merged projections, traced attention, inductor options: bench_compile's variants, the compiled round with and without them (<= 9 min)
#   bash benchmarks/gpu_next.sh verify_pdl "$OUT"  # the PDL split combine and the split kernels' early trigger: 03's cells, sanitizer, --pdl timings, 60 s fuzz (<= 8.5 min)
#   bash benchmarks/gpu_next.sh s20a "$OUT"  # session 20, first call: tree (02 cells + bench_tree) and the verify PDL rule (03 cells + --pdl timings) (<= 8 min)
#   bash benchmarks/gpu_next.sh s20b "$OUT"  # session 20, second call: 05's cells, bench_compile at T = 1/17/65 (+ --draft), the round merged (<= 9 min)
#   bash benchmarks/gpu_next.sh s20c "$OUT"  # session 20, third call: the round with AUTOTUNE_AR, then issue 17's ratios at 8 x 512 (<= 9.5 min)
#   bash benchmarks/gpu_next.sh s21a "$OUT"  # session 21: 02/03/05 cuda cells, the compiled forward beside session 19's (.old/ = git archive 970b4f3), bench_tree (<= 9 min)
#   bash benchmarks/gpu_next.sh s21b "$OUT"  # session 21: the compiled merged round at T = 0 without and with AUTOTUNE_AR (<= 3.5 min)
#   bash benchmarks/gpu_next.sh splits "$OUT"  # the verify kernels' split counts swept at the demo pair's shapes (~2 min)
#   bash benchmarks/gpu_next.sh s22a "$OUT"  # session 22: s21c, nbs/03's cuda cells (the cluster merge), the split x cluster sweep at the demo shapes (<= 8.5 min)
#   bash benchmarks/gpu_next.sh s31a "$OUT"  # session 31: the draft kernel's new prologue and cluster merge (DDTREE_DRAFT_KERNEL=3) against session 30's kernel: nbs/05a, sanitizer, op, draft, round (<= 560 s)
#   bash benchmarks/gpu_next.sh s31b "$OUT"  # session 31 on an H200: the round at 8 x 512 (shipped; verify forwards autotuned), bench_tree + nbs/02, the verify tables (<= 570 s)
#   bash benchmarks/gpu_next.sh s32a "$OUT"  # session 32: the _tc kernels and the batched context K/V (one GEMM, one draft_kv_write_layers): nbs/05a, op, draft, the round at 3 / 4 / 4+batched+autotuned verify, sanitizer, 8 x 512 rounds (S32_SECONDS, default 550)
#   bash benchmarks/gpu_next.sh s31c "$OUT"  # session 31: the draft kernel's tile on tensor cores (DDTREE_DRAFT_KERNEL=4) and the batched context K/V: nbs/05a, the op, the draft at 3 / 4 / 3+batched, the round at 4, the _tc sanitizer case (<= 360 s)
#   bash benchmarks/gpu_next.sh s31d "$OUT"  # session 31's last call: s31c, then the round at 8 x 512 on levels 4 and 3 while the time allows (<= 500 s)
#   bash benchmarks/gpu_next.sh s30c "$OUT"  # session 30: s30b trimmed (<= 290 s): nbs/05a, the sanitizer, the op, the draft at 1/2, the round at 2
#   bash benchmarks/gpu_next.sh s30b "$OUT"  # session 30: norm and RoPE in the draft's kernels (DDTREE_DRAFT_KERNEL=2): nbs/05a, the sanitizer, the op, the draft at 0/1/2, the round at 1/2 (<= 520 s)
#   bash benchmarks/gpu_next.sh s30a "$OUT"  # session 30: the three issues' numbers on this card (an H200 if lent), then the tree fuzzer for the time left (<= 570 s)
#   bash benchmarks/gpu_next.sh s29 "$OUT"  # session 29: the draft attention kernel: nbs/05a's cuda cells, the op alone, the draft and the round off / on, the sanitizer
#   bash benchmarks/gpu_next.sh s27c "$OUT"  # the histogram pass's stop at the end of a list (0ff3baf): tree_quick, then 60 s of the tree fuzzer
#   bash benchmarks/gpu_next.sh s27b "$OUT"  # tb_tree's threshold from the histogram only, four ranks a thread in flight: tree_quick, then 300 s of the tree fuzzer
#   bash benchmarks/gpu_next.sh s26b "$OUT"  # issue 19 on an H200: the T = 1 timeline, the verify tables, 300 s of fuzz
#   bash benchmarks/gpu_next.sh s25d "$OUT"  # the combine with 8 chunks in flight, nbs/03, the verify sanitizer, 180 s of fuzz, the table
#   bash benchmarks/gpu_next.sh s25c "$OUT"  # the plain plan by default, the combine shape by rows: checks, tables, the round
#   bash benchmarks/gpu_next.sh s24b "$OUT"  # session 24's verify ring (two tiles in flight), tb_tree's tie order and warp minima, bench_tree's back-to-back timing: s24a's steps, then on an H200 the PDL plans (<= 9.5 min)
#   bash benchmarks/gpu_next.sh s24a "$OUT"  # session 23's four unrun kernel changes: tree_quick, nbs/03's cuda cells, 60 s of fuzz_verify, the verify timings (<= 7.5 min)
#   bash benchmarks/gpu_next.sh tree_quick "$OUT"  # bench_tree (every tree checked against the reference first), then nbs/02's cuda cells; <= 180 s
#   bash benchmarks/gpu_next.sh s23 "$OUT"   # s23b on an H200; on another GPU the round (run_ahead), nbs/05 cell by cell, ncu of verify and the tree build
#   bash benchmarks/gpu_next.sh cells05 "$OUT"  # nbs/05's tests (flags cuda) cell by cell with each cell's time, up to 540 s
#   bash benchmarks/gpu_next.sh s23a "$OUT"  # session 22's leftovers: nbs/05 alone on the cluster default, the cluster sanitizer case, sweep_combine (<= 8 min)
#   bash benchmarks/gpu_next.sh s23b "$OUT"  # on an H200: bench_verify_default --cluster and --pdl, the compiled round at T = 0 / 0.8 (<= 6.5 min)
#   bash benchmarks/gpu_next.sh s22c "$OUT"  # session 22: 03's and 05's cuda cells on the default cluster plan, plain vs default timings, 30 s fuzz (<= 6.5 min)
#   bash benchmarks/gpu_next.sh s21c "$OUT"  # session 21's changes: the compiled forward and draft, the round at T = 0 and 0.8, 8 x 128 tokens in fp32 (lossless check) (<= 3.5 min)
# Each step has its own timeout, so a slow one leaves the others' logs in $OUT; the summary is $OUT/gpu_next.log.
set -uo pipefail
part=${1:?part: validate, long, long_run, bench, sanitize, sanitize_kernels, tree, profile_tree, verify90, fuzz5, soak, compile, compile_ab, moe, moe_pdl, moe_v24, verify_pdl, s20a, s20b or s20c}
out=${2:-${OUT:-/tmp}}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
commit=${DDTREE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || cat .device/commit 2>/dev/null || echo unknown)}
log="$out/gpu_next.log"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
step() {   # step NAME SECONDS CMD...: run with a timeout, log the exit code and time
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s)
    echo "== $name: $*" | tee -a "$log"
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc, $(( $(date +%s) - t0 )) s$([ $rc -eq 124 ] && echo ' (TIMED OUT)')" | tee -a "$log"
    tail -3 "$out/$name.log" | sed 's/^/   | /' | tee -a "$log"
}
fuzz_gpu() {   # fuzz_gpu STEP LIMIT HARNESS SECONDS SEED [IMPL]: step STEP runs reliability.fuzz_HARNESS on the GPU for SECONDS
    local name=$1 limit=$2 h=$3 secs=$4 seed=$5 impl=${6:-}
    step "$name" "$limit" python -c "from ddtree_nb.reliability import fuzz_$h
r = fuzz_$h($secs, seed=$seed, backend='cuda'${impl:+, impl='$impl'}, out_dir='$out/fuzz_repro')
print(r['harness'], r['cases'], 'cases in', round(r['seconds']), 's,', len(r['mismatches']), 'mismatches')"
}
keep_few() {   # keep_few DIR FILE...: everything in DIR into DIR/all.tgz, then only the named files and all.tgz left (8 files come back)
    local d=$1; shift
    tar czf /tmp/all.tgz -C "$d" . && find "$d" -mindepth 1 -maxdepth 1 $(printf -- "-not -name %s " "$@") -exec rm -rf {} + && mv /tmp/all.tgz "$d/all.tgz"
}
ncu_pages() {   # ncu_pages REPORT: its details page (REPORT_details.txt) and per-line stall samples (REPORT_source.csv.xz), then the report removed
    ncu -i "$1.ncu-rep" --page details > "$1_details.txt" && ncu -i "$1.ncu-rep" --page source --csv --print-source cuda,sass > "$1_source.csv"
    xz -T4 "$1_source.csv"; rm -f "$1.ncu-rep"
}
cells05() {   # cells05 SECONDS: nbs/05's tests cell by cell, one line per cell as it ends (nbdev_test prints nothing before the end)
    step cells_05 "$1" python benchmarks/time_cells.py nbs/05_decode.ipynb --flags cuda --out "$out/cells_05.txt"
}
tree_steps() {   # the tree builder: its GPU tests, then bench_tree
    step tree_tests 120 nbdev_test --flags cuda --do_print --path nbs/02_tree_builder.ipynb
    step bench_tree 90 python benchmarks/bench_tree.py --iters 100 --commit "$commit" --out "$out/bench_tree.md"
}
verify_pdl_steps() {   # nbs/03's cuda cells, then the verify kernels with and without the PDL combine
    GPU_TESTS_TIMEOUT=110 step gpu_tests_03 120 bash benchmarks/gpu_tests.sh "$out" 03_verify
    export DDTREE_COMMIT=$commit   # the JSON records it (the machine has no .git)
    step bench_verify_pdl 120 python benchmarks/bench_verify_default.py --pdl --out "$out"
}
echo "date $(date -u +%FT%TZ), commit $commit, gpu $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null), part $part" >> "$log"
case $part in
  validate)
    GPU_TESTS_TIMEOUT=300 step gpu_tests 320 bash benchmarks/gpu_tests.sh "$out" 00a 01c 02 03_verify 03a 04 05_decode 06 ;;
  long)
    GPU_TESTS_TIMEOUT=540 step gpu_tests_08 560 bash benchmarks/gpu_tests.sh "$out" 08 ;;
  bench)
    step bench_decode 200 python benchmarks/bench_decode.py --out "$out" --commit "$commit"
    step bench_e2e 250 python -m ddtree_nb.cli bench --demo --plots --no-progress --n-prompts 4 --budgets 4,16,64,256,1024 --out "$out/e2e"
    step kimi_slice 150 python benchmarks/bench_kimi_slice.py --reps 5 --out "$out/kimi_slice" ;;
  sanitize)
    NOTEBOOKS="nbs/00a_runtime.ipynb nbs/02_tree_builder.ipynb nbs/03_verify.ipynb nbs/04_accept.ipynb" SANITIZE_TIMEOUT=120 \
      step sanitize 560 bash benchmarks/sanitize.sh "$out" ;;
  sanitize_kernels)   # writes $out/sanitize_kernels/ (per-tool logs, sanitize_kernels.md: errors per kernel per tool)
    step sanitize_kernels 540 bash benchmarks/sanitize_kernels.sh "$out/sanitize_kernels" ;;
  profile_tree)   # ncu of one B=256 build: the details page and per-source-line stall samples (SASS + CUDA), xz-compressed
    step ncu_tree 200 ncu --kernel-name regex:tb_ --launch-skip 4 --launch-count 20 --set full --import-source yes -f -o "$out/ncu_tree" python benchmarks/ncu_tree.py
    ncu_pages "$out/ncu_tree" ;;
  profile_verify)   # ncu of the verify attention at T = 1, H = 64, P = 32k, default (clusters) and plain plans: details page, per-line stall samples
    step ncu_verify 200 ncu --kernel-name regex:verify_attn --launch-skip 4 --launch-count 12 --set full --import-source yes -f -o "$out/ncu_verify" python benchmarks/ncu_verify.py
    ncu_pages "$out/ncu_verify" ;;
  verify90)
    step bench_verify 560 python benchmarks/bench_verify.py --impl both --budget 480 --out "$out/verify" ;;
  fuzz5)   # every GPU fuzzer for 5 minutes (issues 21, 19: verify:cuda:auto is the sm_90a kernel on an H100/H200), six processes sharing the GPU: bash benchmarks/gpu_next.sh fuzz5 "$OUT" [seconds]
    s=${3:-300}
    for h in tree:cuda accept:cuda verify:cuda verify:cuda:auto generate:cuda generate:eager_cuda; do   # harness:backend[:verify impl]
      f=${h%%:*} r=${h#*:}; b=${r%%:*} i=${r#$b}; i=${i#:}
      OMP_NUM_THREADS=2 step "fuzz5_${f}_$b${i:+_$i}" $((s + 90)) python -c "from ddtree_nb.reliability import fuzz_$f
r = fuzz_$f($s, seed=5, backend='$b', out_dir='$out/fuzz_repro'${i:+, impl='$i'})
print(r['harness'], r['cases'], 'cases in', round(r['seconds']), 's,', len(r['mismatches']), 'mismatches')
for m in r['mismatches'][:5]: print(m.get('path'), m['error'][:400])" &
    done
    wait ;;
  long_run)   # issue 21's long runs: memory flat after warm-up (exit 1 if it grew)
    step long_run 420 python benchmarks/long_run.py --out "$out/long_run" --commit "$commit" ;;
  compile)   # compiled rounds (issue 17): 05's cuda cells, one forward compiled vs not, the round compiled vs not on one commit
    GPU_TESTS_TIMEOUT=200 N_WORKERS=1 step gpu_tests_05 210 bash benchmarks/gpu_tests.sh "$out" 05
    step bench_compile 90 python benchmarks/bench_compile.py --out "$out/compile" --commit "$commit" --variants eager,compiled
    step run_ahead_compiled 150 python benchmarks/bench_run_ahead.py --out "$out/rac" --commit "$commit" --compile --temps 0,0.8 --reps 2
    step run_ahead 120 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --temps 0,0.8 --reps 2 ;;
  compile_ab)   # issue 17's launches: one forward per variant (merged projections, the attention traced as a custom op, inductor's combo kernels / PDL / GEMM autotuning), then the compiled round merged + traced and not
    step bench_compile_ab 300 python benchmarks/bench_compile.py --out "$out/compile_ab" --commit "$commit"
    step run_ahead_merge 120 python benchmarks/bench_run_ahead.py --out "$out/rac_merge" --commit "$commit" --compile --merge on --traced --temps 0 --reps 2
    step run_ahead_plain 120 python benchmarks/bench_run_ahead.py --out "$out/rac_plain" --commit "$commit" --compile --merge off --temps 0 --reps 2 ;;
  soak)   # ddtree bench --demo three times back to back, T = 0 and 1; a T=0 output other than AR's is a stderr warning (issue 21); SOAK_ARGS adds options (e.g. --backends cuda)
    for i in 1 2 3; do
      step "soak_$i" "${SOAK_LIMIT:-180}" python -m ddtree_nb.cli bench --demo --no-progress --n-prompts 8 --budgets 4,16,64,256,1024 --temperatures 0,1 --out "$out/soak_$i" ${SOAK_ARGS:-}
      grep -h "warning" "$out/soak_$i.log" | tee -a "$log"
    done ;;
  tree)
    tree_steps ;;
  moe)   # the W4A16 MoE kernel (issue 20): MOE_VERSIONS="13 14" (say) to compare; validation first, then the timings, nbs/03a's cuda cells, the sanitizer
    v=${MOE_VERSIONS:-14}
    step moe_val_small 90 python benchmarks/bench_moe.py --validate small --versions $v --json "$out/moe_val_small.json" --commit "$commit"
    step moe_val_kimi 120 python benchmarks/bench_moe.py --validate kimi --versions $v --json "$out/moe_val_kimi.json" --commit "$commit"
    step moe_bench 200 python benchmarks/bench_moe.py --reps 8 --torch_reps 0 --tokens 1 4 16 64 256 1025 --versions 4 $v --passed "$out/moe_val_small.json" "$out/moe_val_kimi.json" --json "$out/moe_bench.json" --commit "$commit"
    GPU_TESTS_TIMEOUT=120 step gpu_tests_03a 130 bash benchmarks/gpu_tests.sh "$out" 03a
    KERNELS=moe TIMEOUT_PLAIN=40 TIMEOUT_MEMCHECK=45 TIMEOUT_INITCHECK=40 TIMEOUT_SYNCCHECK=40 TIMEOUT_RACECHECK=50 \
      step sanitize_moe 150 bash benchmarks/sanitize_kernels.sh "$out/sanitize_moe" ;;
  moe_pdl)   # session 17's change to the PDL down (its trigger right after its wait) was not run on a GPU in its shipped form
    GPU_TESTS_TIMEOUT=120 step gpu_tests_03a 130 bash benchmarks/gpu_tests.sh "$out" 03a
    step moe_pdl_stress 100 python benchmarks/try_moe_pdl.py --stress 50 --tokens 1 2 4 8
    export DDTREE_COMMIT=$commit   # the JSONs record it (the machine has no .git)
    step moe_in_graph 120 python benchmarks/moe_in_graph.py --parts --out "$out"
    KERNELS=moe_pdl TIMEOUT_PLAIN=40 TIMEOUT_MEMCHECK=45 TIMEOUT_INITCHECK=40 TIMEOUT_SYNCCHECK=40 TIMEOUT_RACECHECK=50 \
      step sanitize_moe_pdl 150 bash benchmarks/sanitize_kernels.sh "$out/sanitize_moe_pdl"
    tar czf "$out/sanitize_moe_pdl.tgz" -C "$out" sanitize_moe_pdl && rm -rf "$out/sanitize_moe_pdl" ;;   # only ~8 files come back
  moe_v24)   # session 17's early trigger (not yet run in its shipped form) and session 18's v24 (no grouping launch), one call (<= 535 s)
    GPU_TESTS_TIMEOUT=120 step gpu_tests_03a 130 bash benchmarks/gpu_tests.sh "$out" 03a
    step moe_pdl_stress 100 bash -c "python benchmarks/try_moe_pdl.py --stress 50 --tokens 1 2 4 8 && python benchmarks/try_moe_pdl.py --stress 50 --tokens 1 2 4 8 --version 24"
    export DDTREE_COMMIT=$commit   # the JSONs record it (the machine has no .git)
    step moe_in_graph 140 python benchmarks/moe_in_graph.py --versions 13 24 --out "$out"
    KERNELS=moe_pdl,moe_v24 TIMEOUT_PLAIN=25 TIMEOUT_MEMCHECK=35 TIMEOUT_INITCHECK=30 TIMEOUT_SYNCCHECK=25 TIMEOUT_RACECHECK=45 \
      step sanitize_moe_v24 165 bash benchmarks/sanitize_kernels.sh "$out/sanitize_moe_v24"
    tar czf "$out/sanitize_moe_v24.tgz" -C "$out" sanitize_moe_v24 && rm -rf "$out/sanitize_moe_v24" ;;
  verify_pdl)   # sessions 17-18: the PDL split combine (off by default) and the split kernels' early trigger, one call (<= 505 s)
    verify_pdl_steps
    KERNELS=verify_pdl,verify_sm90,verify_ar_step TIMEOUT_PLAIN=25 TIMEOUT_MEMCHECK=35 TIMEOUT_INITCHECK=30 TIMEOUT_SYNCCHECK=25 TIMEOUT_RACECHECK=45 \
      step sanitize_verify_pdl 165 bash benchmarks/sanitize_kernels.sh "$out/sanitize_verify_pdl"
    tar czf "$out/sanitize_verify_pdl.tgz" -C "$out" sanitize_verify_pdl && rm -rf "$out/sanitize_verify_pdl"
    fuzz_gpu fuzz_verify_auto 100 verify 60 23 auto ;;
  s20a)   # one machine start for session 20's kernel checks (step timeouts 450 s)
    tree_steps
    verify_pdl_steps ;;
  s20b)   # the compiled round's changes (ends, router, shared expert, two graphs a layer): 05's cells, then the numbers (step timeouts 520 s)
    GPU_TESTS_TIMEOUT=200 N_WORKERS=1 step gpu_tests_05 210 bash benchmarks/gpu_tests.sh "$out" 05
    step bench_compile_ar 180 python benchmarks/bench_compile.py --out "$out/compile_ar" --commit "$commit" --variants compiled+merge,compiled+merge+autotune-ar --tokens 1,17,65 --draft
    step run_ahead_merge 130 python benchmarks/bench_run_ahead.py --out "$out/rac_merge" --commit "$commit" --compile --merge on --temps 0,0.8 --reps 2 ;;
  s20c)   # AUTOTUNE_AR in the round, then issue 17's ratios (E2E_ARGS=--autotune-ar if it paid in s20b) (step timeouts 560 s)
    step run_ahead_autotune 160 python benchmarks/bench_run_ahead.py --out "$out/rac_autotune" --commit "$commit" --compile --autotune-ar --merge on --temps 0,0.8 --reps 2
    step e2e_ratios 400 python -m ddtree_nb.cli bench --demo --compile --no-progress --n-prompts 8 --max-new-tokens 512 --budgets 16,64,256 \
      --temperatures 0,1 --out "$out/e2e_ratios" ${E2E_ARGS:-} ;;
  s21a)   # session 21, one call of <= 540 s: session 20's GPU code checked (02, 03, 05 cuda cells), then the compiled forward at T = 1 / 65
          # on this commit beside session 19's (970b4f3, staged as .old/ with its package, kernels and bench_compile.py), then bench_tree
    GPU_TESTS_TIMEOUT=210 N_WORKERS=3 step gpu_tests_02_03_05 220 bash benchmarks/gpu_tests.sh "$out" 02 03_verify 05
    step bench_compile_ar 170 python benchmarks/bench_compile.py --out "$out/compile_ar" --commit "$commit" --variants compiled+merge,compiled+merge+autotune-ar --tokens 1,65 --draft
    [ -d .old/ddtree_nb ] && { [ -d .old/ddtree_nb/demo_pair ] || cp -r ddtree_nb/demo_pair .old/ddtree_nb/; \
      step bench_compile_970b4f3 80 env PYTHONPATH="$PWD/.old:${PYTHONPATH:-}" python .old/benchmarks/bench_compile.py --out "$out/compile_970b4f3" --commit 970b4f3 --variants compiled+merge; }
    step bench_tree 60 python benchmarks/bench_tree.py --iters 100 --commit "$commit" --out "$out/bench_tree.md" ;;
  s21b)   # session 21, second call (<= 200 s): the compiled merged round at T = 0 without and with AUTOTUNE_AR, same commit and machine
    step run_ahead_merge 90 python benchmarks/bench_run_ahead.py --out "$out/rac_merge" --commit "$commit" --compile --merge on --temps 0 --reps 2
    step run_ahead_autotune 110 python benchmarks/bench_run_ahead.py --out "$out/rac_autotune" --commit "$commit" --compile --autotune-ar --merge on --temps 0 --reps 2 ;;
  s21c)   # session 21's own changes (router reduction, q contiguous in the graph, the draft's block_attention, fused keys and record, Stages(compile=True) autotuned), one call of <= 200 s
    step bench_compile_s21 70 python benchmarks/bench_compile.py --out "$out/compile_s21" --commit "$commit" --variants compiled+merge+autotune-ar --tokens 1,65 --draft
    step run_ahead_s21 70 python benchmarks/bench_run_ahead.py --out "$out/rac_s21" --commit "$commit" --compile --merge on --temps 0,0.8 --reps 2
    step e2e_fp32 50 python -m ddtree_nb.cli bench --demo --compile --dtype float32 --no-progress --n-prompts 8 --max-new-tokens 128 --budgets 64 --temperatures 0 --out "$out/e2e_fp32" ;;
  s22a)   # session 22's first call (<= 500 s of steps): s21c, nbs/03's cuda cells (the cluster merge's checks), the split and cluster sweep at the demo shapes
    bash "$0" s21c "$out"
    GPU_TESTS_TIMEOUT=130 step gpu_tests_03 140 bash benchmarks/gpu_tests.sh "$out" 03_verify
    step sweep_splits 170 python benchmarks/sweep_splits.py --out "$out/splits" ;;
  s22c)   # session 22's last call (<= 380 s of steps): 03's and 05's cuda cells on the default cluster plan, plain vs default timings, 30 s fuzz
    GPU_TESTS_TIMEOUT=200 N_WORKERS=2 step gpu_tests_03_05 210 bash benchmarks/gpu_tests.sh "$out" 03_verify 05
    export DDTREE_COMMIT=$commit
    step bench_verify_cluster 120 python benchmarks/bench_verify_default.py --cluster --out "$out"
    fuzz_gpu fuzz_verify_auto 45 verify 30 24 auto ;;
  s23a)   # session 22's leftovers, any sm_90 GPU (step timeouts sum to 475 s): nbs/05 alone on the default cluster plan, the cluster sanitizer case, the combine's block shapes
    GPU_TESTS_TIMEOUT=250 N_WORKERS=1 step gpu_tests_05 260 bash benchmarks/gpu_tests.sh "$out" 05
    KERNELS=verify_sm90_cluster TIMEOUT_PLAIN=20 TIMEOUT_MEMCHECK=30 TIMEOUT_INITCHECK=25 TIMEOUT_SYNCCHECK=20 TIMEOUT_RACECHECK=25 \
      step sanitize_cluster 120 bash benchmarks/sanitize_kernels.sh "$out/sanitize_cluster"
    cp "$out"/sanitize_cluster/*.md "$out"/ 2>/dev/null; tar czf "$out/sanitize_cluster.tgz" -C "$out" sanitize_cluster && rm -rf "$out/sanitize_cluster"
    export DDTREE_COMMIT=$commit
    step sweep_combine 95 python benchmarks/sweep_combine.py --out "$out" ;;
  s23b)   # the issues' numbers on an H200 (step timeouts sum to 390 s): the verify plans plain vs default, the PDL rule, the compiled round
    export DDTREE_COMMIT=$commit
    step bench_verify_cluster 120 python benchmarks/bench_verify_default.py --cluster --out "$out"
    step bench_verify_pdl 120 python benchmarks/bench_verify_default.py --pdl --out "$out"
    step run_ahead 150 python benchmarks/bench_run_ahead.py --out "$out/rac" --commit "$commit" --compile --merge on --temps 0,0.8 --reps 2 ;;   # 66 s warm in s22a, past 70 s cold in s23
  s24a)   # session 23's four kernel changes, none run: phase 1 v4 (30ab48a, 79c9141), the verify tile loads and descriptors (fbc4cf5, dc92d58); step timeouts sum to 445 s
    bash "$0" tree_quick "$out"
    GPU_TESTS_TIMEOUT=60 N_WORKERS=1 step gpu_tests_03 70 bash benchmarks/gpu_tests.sh "$out" 03_verify
    export DDTREE_COMMIT=$commit
    fuzz_gpu fuzz_verify_auto 75 verify 60 25 auto
    step bench_verify_cluster 120 python benchmarks/bench_verify_default.py --cluster --out "$out"
    keep_few "$out" gpu_next.log bench_tree.md bench_verify_cluster.json bench_verify_cluster.log gpu_tests.log ;;
  s24b)   # session 24's unrun changes: the verify kernel's two tiles in flight (50c8b78), tb_tree's warp minima (c3ca9dd) and ties by slot order (0f994aa), bench_tree's builds back to back in one graph; on an H200 then the PDL plans if time is left
    t_start=$(date +%s)
    bash "$0" s24a "$out"
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $(( $(date +%s) - t_start )) -lt 250 ]; then
      step bench_verify_pdl 120 python benchmarks/bench_verify_default.py --pdl --out "$out"
    fi ;;
  s25c)   # session 25 (s25a and s25b, its earlier calls, ran the same steps on the pushed merge and on the staged epilogue, with --clusters default,4,8 / default,1): the plain plan by default (clusters only where a pair writes out) and the combine's block shape by rows; bit for bit against .device/old, nbs/03, fuzz, the tables, then the round (about 6 min)
    export DDTREE_COMMIT=$commit
    step stamp_verify 130 python benchmarks/stamp_verify.py --H 64 --P 4096,32768,131072 --clusters default,2 --against .device/old --out "$out"
    step stamp_demo 60 python benchmarks/stamp_verify.py --T 65 --H 4 --P 1000 --clusters default,2 --against .device/old --out "$out/demo"
    step stamp_t17 60 python benchmarks/stamp_verify.py --T 17 --H 4 --P 1000 --clusters default,2 --against .device/old --out "$out/t17"
    GPU_TESTS_TIMEOUT=60 N_WORKERS=1 step gpu_tests_03 70 bash benchmarks/gpu_tests.sh "$out" 03_verify
    fuzz_gpu fuzz_verify_auto 75 verify 60 28 auto
    step bench_verify_cluster 120 python benchmarks/bench_verify_default.py --cluster --out "$out"
    step bench_verify_pdl 100 python benchmarks/bench_verify_default.py --pdl --out "$out"
    step run_ahead 150 python benchmarks/bench_run_ahead.py --out "$out/rac" --commit "$commit" --compile --merge on --temps 0,0.8 --reps 2
    keep_few "$out" gpu_next.log stamp_verify.log stamp_demo.log stamp_t17.log bench_verify_cluster.log bench_verify_pdl.log run_ahead.log ;;
  s25d)   # session 25's last call: the combine's 8 chunks in flight (bit for bit against .device/old), nbs/03, the sanitizer over the verify kernels, 180 s of fuzz, the table (about 6 min)
    export DDTREE_COMMIT=$commit
    step stamp_verify 60 python benchmarks/stamp_verify.py --H 64 --P 4096,32768 --against .device/old --out "$out"
    GPU_TESTS_TIMEOUT=60 N_WORKERS=1 step gpu_tests_03 70 bash benchmarks/gpu_tests.sh "$out" 03_verify
    KERNELS=verify TIMEOUT_PLAIN=50 TIMEOUT_MEMCHECK=70 TIMEOUT_INITCHECK=50 TIMEOUT_SYNCCHECK=50 TIMEOUT_RACECHECK=80 \
      step sanitize_verify 320 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out"/san/sanitize_kernels.md "$out"/ 2>/dev/null
    fuzz_gpu fuzz_verify_auto 195 verify 180 29 auto
    step bench_verify_cluster 60 python benchmarks/bench_verify_default.py --cluster --out "$out"
    keep_few "$out" gpu_next.log stamp_verify.log sanitize_kernels.md bench_verify_cluster.log bench_verify_cluster.json gpu_tests.log ;;
  s29)   # session 29's draft attention kernel: nbs/05a's cuda cells, the op alone, the draft off / on, the sanitizer, then the compiled round at T = 0 and 1 off / on (about 5 min)
    step tests_05a 240 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    step bench_draft_attn 120 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    step draft_ab 300 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge+autotune-ar --tokens 1 --draft --draft-kernel 0,1
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    KERNELS=draft step sanitize_draft 150 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_draft.md" 2>/dev/null
    step run_ahead_k0 200 env DDTREE_DRAFT_KERNEL=0 python benchmarks/bench_run_ahead.py --out "$out/k0" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    step run_ahead_k1 200 python benchmarks/bench_run_ahead.py --out "$out/k1" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    for k in k0 k1; do for f in "$out/$k"/*; do cp "$f" "$out/${k}_$(basename "$f")"; done; done
    keep_few "$out" gpu_next.log tests_05a.log bench_compile_draft_ab.json sanitize_draft.md bench_draft_attn.json k0_run_ahead.md k1_run_ahead.md ;;
  s31a)   # session 31: the draft's _nr kernel with 574ffa5's prologue and its splits merged in thread-block clusters (DDTREE_DRAFT_KERNEL=3), against session 30's kernel (kernels/dev/draft_attn_s30.cu through DDTREE_KERNELS_DIR) on one card: nbs/05a's cuda cells, the draft sanitizer, the op alone, the compiled draft, the round (<= 560 s)
    export DDTREE_COMMIT=$commit
    old=/tmp/kernels_s30; mkdir -p $old && cp kernels/*.cu kernels/*.cuh $old/ && cp kernels/dev/draft_attn_s30.cu $old/draft_attn.cu
    step tests_05a 150 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    KERNELS=draft step sanitize_draft 150 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_draft.md" 2>/dev/null
    step bench_draft_attn 50 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    DDTREE_KERNELS_DIR=$old step bench_draft_attn_s30 40 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn_s30.json" --commit "$commit-s30kernel"
    step draft_ab 80 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge --tokens 1 --draft --draft-kernel 2,3
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    DDTREE_KERNELS_DIR=$old step draft_s30 60 python benchmarks/bench_compile.py --out "$out/bc30" --commit "$commit-s30kernel" --variants compiled+merge --tokens 1 --draft --draft-kernel 2
    step run_ahead_k3 110 env DDTREE_DRAFT_KERNEL=3 python benchmarks/bench_run_ahead.py --out "$out/k3" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    DDTREE_KERNELS_DIR=$old step run_ahead_s30 80 env DDTREE_DRAFT_KERNEL=2 python benchmarks/bench_run_ahead.py --out "$out/k2s30" --commit "$commit-s30kernel" --compile --merge on --temps 0,1 --reps 2
    cat "$out/k3/run_ahead.md" "$out/k2s30/run_ahead.md" > "$out/run_ahead_ab.md" 2>/dev/null
    keep_few "$out" gpu_next.log tests_05a.log sanitize_draft.md bench_draft_attn.json bench_draft_attn_s30.json bench_compile_draft_ab.json run_ahead_ab.md ;;
  s31b)   # session 31, on an H200: issue 17's round at 8 x 512 (the shipped default, then the verify forwards autotuned too), issue 18's bench_tree and nbs/02, issue 19's verify tables (<= 570 s)
    export DDTREE_COMMIT=$commit
    step run_ahead_8x512 150 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512
    cp "$out/ra/run_ahead.md" "$out/run_ahead_8x512.md" 2>/dev/null
    step run_ahead_autotune 150 python benchmarks/bench_run_ahead.py --out "$out/rt" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512 --autotune-tokens 1,16,17,65
    cp "$out/rt/run_ahead.md" "$out/run_ahead_8x512_autotune.md" 2>/dev/null
    bash "$0" tree_quick "$out"
    step bench_verify_cluster 60 python benchmarks/bench_verify_default.py --cluster --out "$out"
    keep_few "$out" gpu_next.log run_ahead_8x512.md run_ahead_8x512_autotune.md bench_tree.md tree_tests.log bench_verify_cluster.log bench_verify_cluster.json ;;
  s31c)   # session 31: the draft kernel's tile on tensor cores (DDTREE_DRAFT_KERNEL=4, the _tc kernels): nbs/05a's cuda cells (every kernel against fp64), the op alone, the compiled draft at 3 / 4 and at 3 with the context K/V of all layers in one GEMM (DDTREE_DRAFT_CTX_BATCHED=1), the round at 4, the _tc sanitizer case; a step starts only if its limit fits in S31_SECONDS (default 360)
    export DDTREE_COMMIT=$commit; t_start=$(date +%s)
    fits() { [ $(( $(date +%s) - t_start + $1 )) -le ${S31_SECONDS:-360} ]; }
    fits 100 && step tests_05a 100 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    fits 45 && step bench_draft_attn 45 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    fits 55 && step draft_ab 55 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge --tokens 1 --draft --draft-kernel 3,4
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    fits 45 && DDTREE_DRAFT_CTX_BATCHED=1 step draft_ctx 45 python benchmarks/bench_compile.py --out "$out/bcx" --commit "$commit-ctxbatched" --variants compiled+merge --tokens 1 --draft --draft-kernel 3
    cp "$out/bcx/bench_compile.json" "$out/bench_compile_draft_ctx.json" 2>/dev/null
    fits 75 && step run_ahead_k4 75 env DDTREE_DRAFT_KERNEL=4 python benchmarks/bench_run_ahead.py --out "$out/k4" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    cp "$out/k4/run_ahead.md" "$out/run_ahead_k4.md" 2>/dev/null
    fits 60 && KERNELS=draft_attn_tc,draft_kv_layers step sanitize_tc 60 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_tc.md" 2>/dev/null
    [ "${KEEP_FEW:-1}" = 1 ] && keep_few "$out" gpu_next.log tests_05a.log bench_draft_attn.json bench_compile_draft_ab.json bench_compile_draft_ctx.json run_ahead_k4.md sanitize_tc.md ;;
  s31d)   # session 31's last call: s31c (the _tc kernels: checks, op, draft, round), then issue 17's round at 8 x 512 on levels 4 and 3 while the time allows (<= 500 s)
    t_start=$(date +%s)
    KEEP_FEW=0 bash "$0" s31c "$out"
    for k in 4 3; do
        [ $(( $(date +%s) - t_start )) -lt 380 ] && step run_ahead_8x512_k$k 110 env DDTREE_DRAFT_KERNEL=$k python benchmarks/bench_run_ahead.py --out "$out/ra$k" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512
        cp "$out/ra$k/run_ahead.md" "$out/run_ahead_8x512_k$k.md" 2>/dev/null
    done
    keep_few "$out" gpu_next.log tests_05a.log bench_draft_attn.json bench_compile_draft_ab.json run_ahead_k4.md run_ahead_8x512_k4.md run_ahead_8x512_k3.md ;;
  s32a)   # session 32: the _tc kernels (DDTREE_DRAFT_KERNEL=4) and the batched context K/V (DDTREE_DRAFT_CTX_BATCHED=1: one GEMM, one draft_kv_write_layers): nbs/05a's cuda cells, the op, the draft at 3 / 4 / 3+batched, the round (2 x 256) at 3, 4 and 4+batched with the verify forwards autotuned, the sanitizer, then 8 x 512 rounds; a step starts only if its limit fits in S32_SECONDS (default 550)
    export DDTREE_COMMIT=$commit; t_start=$(date +%s); b=${S32_SECONDS:-550}
    fits() { [ $(( $(date +%s) - t_start + $1 )) -le $b ]; }
    ra() {   # ra NAME LIMIT ENV... -- ARGS...: bench_run_ahead under the env, its table copied to NAME.md
        local name=$1 limit=$2; shift 2; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
        fits "$limit" && step "$name" "$limit" env "${envs[@]}" python benchmarks/bench_run_ahead.py --out "$out/$name" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 "$@"
        cp "$out/$name/run_ahead.md" "$out/$name.md" 2>/dev/null; }
    fits 100 && step tests_05a 100 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    fits 45 && step bench_draft_attn 45 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    fits 55 && step draft_ab 55 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge --tokens 1 --draft --draft-kernel 3,4
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    fits 45 && DDTREE_DRAFT_CTX_BATCHED=1 step draft_ctx 45 python benchmarks/bench_compile.py --out "$out/bcx" --commit "$commit-ctxbatched" --variants compiled+merge --tokens 1 --draft --draft-kernel 3,4
    cp "$out/bcx/bench_compile.json" "$out/bench_compile_draft_ctx.json" 2>/dev/null
    ra run_ahead_k3 75 DDTREE_DRAFT_KERNEL=3 --
    ra run_ahead_k4 75 DDTREE_DRAFT_KERNEL=4 --
    ra run_ahead_all 130 DDTREE_DRAFT_KERNEL=4 DDTREE_DRAFT_CTX_BATCHED=1 -- --autotune-tokens 1,16,17,65
    fits 60 && KERNELS=draft_attn_tc,draft_kv_layers step sanitize_tc 60 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_tc.md" 2>/dev/null
    ra run_ahead_8x512_k3 110 DDTREE_DRAFT_KERNEL=3 -- --prompts 8 --max-new 512
    ra run_ahead_8x512_all 150 DDTREE_DRAFT_KERNEL=4 DDTREE_DRAFT_CTX_BATCHED=1 -- --prompts 8 --max-new 512 --autotune-tokens 1,16,17,65
    keep_few "$out" gpu_next.log tests_05a.log bench_draft_attn.json bench_compile_draft_ab.json run_ahead_k3.md run_ahead_k4.md run_ahead_all.md ;;
  s30c)   # session 30's last call, s30b trimmed to the device time left (<= 290 s): nbs/05a's cuda cells, the draft sanitizer, the op alone, the compiled draft at 1 / 2, the round at 2
    export DDTREE_COMMIT=$commit
    step tests_05a 90 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    KERNELS=draft step sanitize_draft 100 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_draft.md" 2>/dev/null
    step bench_draft_attn 30 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    step draft_ab 80 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge --tokens 1 --draft --draft-kernel 1,2
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    step run_ahead_k2 100 env DDTREE_DRAFT_KERNEL=2 python benchmarks/bench_run_ahead.py --out "$out/k2" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    cp "$out/k2/run_ahead.md" "$out/run_ahead_k2.md" 2>/dev/null
    keep_few "$out" gpu_next.log tests_05a.log sanitize_draft.md bench_draft_attn.json bench_compile_draft_ab.json run_ahead_k2.md ;;
  s30a)   # session 30's first call, the issues' numbers on this card (meant for an H200): bench_tree and nbs/02 (issue 18), the T = 1 timeline, the verify tables and a plain read of T = 1, P = 32k's bytes (issue 19), the compiled round at T = 0 / 1 (issue 17), then the tree fuzzer for the time left (<= 570 s)
    t_start=$(date +%s); export DDTREE_COMMIT=$commit
    bash "$0" tree_quick "$out"
    step stamp_verify 90 python benchmarks/stamp_verify.py --H 64 --P 4096,32768,131072 --clusters default,2 --out "$out"
    step bench_verify_cluster 60 python benchmarks/bench_verify_default.py --cluster --out "$out"
    step bench_verify_pdl 60 python benchmarks/bench_verify_default.py --pdl --out "$out"
    step read_ceiling 90 python benchmarks/read_ceiling.py "$out/read_36.json" 36,72
    step run_ahead 150 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0,1 --reps 2
    cp "$out/ra/run_ahead.md" "$out/run_ahead.md" 2>/dev/null
    l=$(( 570 - ($(date +%s) - t_start) - 25 ))
    [ "$l" -gt 40 ] && fuzz_gpu fuzz_tree $(( l + 15 )) tree "$l" 30
    keep_few "$out" gpu_next.log bench_tree.md stamp_verify.log bench_verify_cluster.log bench_verify_pdl.log read_36.json run_ahead.md ;;
  s30b)   # session 30: the draft with RMS norm and RoPE inside its kernels (DDTREE_DRAFT_KERNEL=2: the _nr attention, draft_kv_write): nbs/05a's cuda cells, the sanitizer's draft group, the op alone, then the compiled draft at 0 / 1 / 2 and the round at 1 / 2 on one card (<= 520 s)
    export DDTREE_COMMIT=$commit
    step tests_05a 200 nbdev_test --flags cuda --do_print --path nbs/05a_drafter.ipynb
    KERNELS=draft step sanitize_draft 150 bash benchmarks/sanitize_kernels.sh "$out/san"
    cp "$out/san/sanitize_kernels.md" "$out/sanitize_draft.md" 2>/dev/null
    step bench_draft_attn 60 python benchmarks/bench_draft_attn.py "$out/bench_draft_attn.json" --commit "$commit"
    step draft_ab 150 python benchmarks/bench_compile.py --out "$out/bc" --commit "$commit" --variants compiled+merge --tokens 1 --draft --draft-kernel 0,1,2
    cp "$out/bc/bench_compile.json" "$out/bench_compile_draft_ab.json" 2>/dev/null
    for k in 1 2; do step run_ahead_k$k 100 env DDTREE_DRAFT_KERNEL=$k python benchmarks/bench_run_ahead.py --out "$out/k$k" --commit "$commit" --compile --merge on --temps 0,1 --reps 2; cp "$out/k$k/run_ahead.md" "$out/run_ahead_k$k.md" 2>/dev/null; done
    keep_few "$out" gpu_next.log tests_05a.log sanitize_draft.md bench_draft_attn.json bench_compile_draft_ab.json run_ahead_k1.md run_ahead_k2.md ;;
  s27c)   # the histogram pass's stop at the end of a list (0ff3baf): every bench tree against the reference, nbs/02's cuda cells, 60 s of the tree fuzzer (about 4 min)
    bash "$0" tree_quick "$out"
    fuzz_gpu fuzz_tree 75 tree 60 38 ;;
  s27b)   # session 27: tb_tree's threshold from the histogram only (the rounds dropped), four ranks a thread in flight: every bench tree against the reference, nbs/02's cuda cells, then the 5-minute tree fuzz issue 18 asks for (about 7 min)
    bash "$0" tree_quick "$out"
    fuzz_gpu fuzz_tree 320 tree 300 37 ;;
  s26b)   # issue 19's numbers on an H200 (elsewhere: the same steps, for the record): the T = 1 timeline, the verify table with the plain plans and the PDL rule, and the 5-minute fuzz the issue asks for (about 8 min)
    export DDTREE_COMMIT=$commit
    step stamp_verify 90 python benchmarks/stamp_verify.py --H 64 --P 4096,32768,131072 --clusters default,2 --out "$out"
    step bench_verify_cluster 60 python benchmarks/bench_verify_default.py --cluster --out "$out"
    step bench_verify_pdl 60 python benchmarks/bench_verify_default.py --pdl --out "$out"
    fuzz_gpu fuzz_verify_auto 320 verify 300 32 auto
    keep_few "$out" gpu_next.log stamp_verify.log stamp_verify.json bench_verify_cluster.log bench_verify_pdl.log fuzz_verify_auto.log ;;
  tree_quick)   # the tree builder in three minutes at most: bench_tree at 40 iterations, then nbs/02's cuda cells
    step bench_tree 100 python benchmarks/bench_tree.py --iters 40 --commit "$commit" --out "$out/bench_tree.md"
    step tree_tests 80 nbdev_test --flags cuda --do_print --path nbs/02_tree_builder.ipynb ;;
  s23)   # session 23's call: s23b on an H200; on another GPU the round, nbs/05 cell by cell and ncu of verify and the v4 tree build
    t_start=$(date +%s)
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash "$0" s23b "$out"; exit; fi
    export DDTREE_COMMIT=$commit
    left() { echo $(( ${S23_SECONDS:-575} - ($(date +%s) - t_start) )); }
    step run_ahead 150 python benchmarks/bench_run_ahead.py --out "$out/rac" --commit "$commit" --compile --merge on --temps 0,0.8 --reps 2
    cells05 300
    l=$(left); [ "$l" -gt 120 ] && l=120
    [ "$l" -gt 40 ] && step ncu_verify "$l" ncu --kernel-name regex:verify_attn --launch-skip 4 --launch-count 12 --set full --import-source yes -f -o "$out/ncu_verify" python benchmarks/ncu_verify.py && ncu_pages "$out/ncu_verify"
    l=$(left)
    [ "$l" -gt 40 ] && step ncu_tree "$l" ncu --kernel-name regex:tb_ --launch-skip 2 --launch-count 4 --set full --import-source yes -f -o "$out/ncu_tree" python benchmarks/ncu_tree.py --phase1 v4 && ncu_pages "$out/ncu_tree"
    true ;;
  cells05)   # nbs/05 alone, cell by cell (about 400 s on a fresh machine: session 23)
    cells05 540 ;;
  splits)   # the verify kernels' split counts at the demo pair's shapes (H = 4, P = 1000, T = 1 / 17 / 65), each checked, then timed (~2 min)
    step sweep_splits 150 python benchmarks/sweep_splits.py --out "$out/splits" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
