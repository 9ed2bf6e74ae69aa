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
#   bash benchmarks/gpu_next.sh compile_ab "$OUT"  # merged projections, traced attention, inductor options: bench_compile's variants, the compiled round with and without them (<= 9 min)
#   bash benchmarks/gpu_next.sh splits "$OUT"  # the verify kernels' split counts swept at the demo pair's shapes (~2 min)
#   bash benchmarks/gpu_next.sh s31b "$OUT"  # session 31 on an H200: the round at 8 x 512 (shipped), bench_tree + nbs/02, the verify tables (<= 420 s)
#   bash benchmarks/gpu_next.sh s37b "$OUT"  # (ran in session 37 inside s37c, 3fa28bf) the few-row GEMM (kernels/dev/few_row_gemm.cu) against cuBLAS at the demo pair's projections, with and without its norm (<= 150 s)
#   bash benchmarks/gpu_next.sh s41a "$OUT"  # session 41: nbs/03's cuda cells (q_latent read in place), then issue 17's round at 8 x 512 with the fold by default at B = 8, 32, 64, then B = 8 with q_latent in place (<= 540 s)
#   bash benchmarks/gpu_next.sh s41b "$OUT"  # session 41: nbs/05's cuda cells on the fold by default (<= 540 s)
#   bash benchmarks/gpu_next.sh s40a "$OUT"  # (ran in session 41, 9752d2e) session 40's folded latent products (model.fold_projections, Stages(fold=True)): issue 17's round at 8 x 512, T = 0 and 1, B = 8, unfolded then folded on one machine, each with its census (<= 560 s)
#   bash benchmarks/gpu_next.sh s39a "$OUT"  # (not yet run: session 39's short call, 80710b2, reached its fused-draft step, which had not printed when the call ended at most ~140 s later on a fresh machine, still in the torch draft's compile) its five nvcc builds side by side first (prebuild_kernels.py), then session 38's fused draft, v3 with its helpers called (96 KB of code) and inlined (303 KB, as v2's 308), stamped, its grid barrier arriving by a release add (session 39): each of its 17 stages' µs at G = 64, 128 beside the compiled draft; the grid barrier alone, release against v1-v3's fence; then issue 17's round at 8 x 512 with the fused draft (B = 8, T = 0 and 1) (<= 560 s)
#   bash benchmarks/gpu_next.sh s38a "$OUT"  # (ran in session 38, aea7b43; its nbs/05 step ran out of time at cell 109 of 113, every cell before passed) session 37's compiles without pad_mm: nbs/05's cuda cells one at a time, then issue 17's round at 8 x 512, B = 8, 15, 16, T = 0 and 1 (<= 590 s)
#   bash benchmarks/gpu_next.sh s37c "$OUT"  # (ran in session 37, 3fa28bf) inductor's pad_mm on, then off (diag_compile_layout.py, fresh processes and caches), then the few-row GEMM bench (s37b) (<= 450 s)
#   bash benchmarks/gpu_next.sh s37a "$OUT"  # (ran in session 36, 5598d82) tree_accept's grid: nbs/04's cuda cells, then bench_accept_grid (one launch's µs at every grid, demo and Kimi shapes) (<= 240 s)
#   bash benchmarks/gpu_next.sh s36c "$OUT"  # (ran in session 36, a4f47a5; its nbs/05 step needs cells05's time) after s36b: nbs/05's cuda cells, then the census alone (each stage's kernels by family) at T = 0, B = 8, 16 (<= 560 s)
#   bash benchmarks/gpu_next.sh s36b "$OUT"  # (ran in session 36, 689b421, then merged) tb_small's branch-free heap checked and timed, then issue 17 at 8 x 512, B = 8, 15, 16 (<= 600 s)
#   bash benchmarks/gpu_next.sh s30a "$OUT"  # session 30: the three issues' numbers on this card (an H200 if lent), then the tree fuzzer for the time left (<= 570 s)
#   bash benchmarks/gpu_next.sh s27b "$OUT"  # tb_tree's threshold from the histogram only, four ranks a thread in flight: tree_quick, then 300 s of the tree fuzzer
#   bash benchmarks/gpu_next.sh s26b "$OUT"  # issue 19 on an H200: the T = 1 timeline, the verify tables, 300 s of fuzz
#   bash benchmarks/gpu_next.sh tree_quick "$OUT"  # bench_tree (every tree checked against the reference first), then nbs/02's cuda cells; <= 180 s
#   bash benchmarks/gpu_next.sh cells05 "$OUT"  # nbs/05's tests (flags cuda) cell by cell with each cell's time, up to 540 s
# Parts of earlier sessions that have run are in git (each result file names its commit and command).
# Each step has its own timeout, so a slow one leaves the others' logs in $OUT; the summary is $OUT/gpu_next.log.
set -uo pipefail
part=${1:?part: one of those listed at the top of this file}
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
fold_ab() {   # fold_ab SECS_UNFOLDED SECS_FOLDED TAG BENCH_ARGS...: issue 17's round at B = 8, unfolded then folded (Stages(fold=True)) on this machine
    local s0=$1 s1=$2 tag=$3; shift 3
    for f in unfolded folded; do
        step "round_$f" $([ $f = folded ] && echo "$s1" || echo "$s0") python benchmarks/bench_run_ahead.py --out "$out/ra_$f" --commit "$commit" --compile --merge on --fold $([ $f = folded ] && echo on || echo off) --budgets 8 "$@"
        for x in md json; do cp "$out/ra_$f/run_ahead.$x" "$out/run_ahead_${tag}_$f.$x" 2>/dev/null; done; rm -rf "$out/ra_$f"
    done
}
tree_steps() {   # the tree builder: its GPU tests, then bench_tree
    step tree_tests 120 nbdev_test --flags cuda --do_print --path nbs/02_tree_builder.ipynb
    step bench_tree 90 python benchmarks/bench_tree.py --iters 100 --commit "$commit" --out "$out/bench_tree.md"
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
  s31b)   # session 31, on an H200: issue 17's round at 8 x 512 (the shipped default; the autotuned verify forwards, which did not compile in 150 s in session 33, dropped), issue 18's bench_tree and nbs/02, issue 19's verify tables (<= 420 s)
    export DDTREE_COMMIT=$commit
    step run_ahead_8x512 150 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512
    cp "$out/ra/run_ahead.md" "$out/run_ahead_8x512.md" 2>/dev/null
    bash "$0" tree_quick "$out"
    step bench_verify_cluster 60 python benchmarks/bench_verify_default.py --cluster --out "$out"
    keep_few "$out" gpu_next.log run_ahead_8x512.md bench_tree.md tree_tests.log bench_verify_cluster.log bench_verify_cluster.json ;;
  s37b)   # the few-row GEMM (kernels/dev/few_row_gemm.cu; ran in session 37 inside s37c) against cuBLAS at the demo pair's projection shapes, M = 1, 9, 16, with and without the RMS norm in its prologue (<= 150 s)
    step bench_few_row_gemm 150 python benchmarks/bench_few_row_gemm.py --reps 30 --commit "$commit" --out "$out/bench_few_row_gemm.md" ;;
  s41a)   # session 41's changes, whose first run (8cdf6aa) stopped on a launcher check: nbs/03's cuda cells (the in-place q_latent, verify.strided_rows), issue 17's round at 8 x 512 with Stages' defaults (decode.fold_pays) at B = 8, 32, 64 (over DFlash's best budget), then B = 8 with q_latent read in place (model.FOLDED_Q_IN_PLACE) (<= 540 s)
    export DDTREE_COMMIT=$commit
    step verify_tests 100 nbdev_test --flags cuda --do_print --path nbs/03_verify.ipynb
    step round_copied 290 python benchmarks/bench_run_ahead.py --out "$out/ra_copied" --commit "$commit" --compile --temps 0,1 --reps 1 --prompts 8 --max-new 512 --budgets 8,32,64
    step round_in_place 140 python benchmarks/bench_run_ahead.py --out "$out/ra_in_place" --commit "$commit" --compile --temps 0 --reps 1 --prompts 8 --max-new 512 --budgets 8 --q-in-place
    for v in copied in_place; do for x in md json; do cp "$out/ra_$v/run_ahead.$x" "$out/run_ahead_8x512_$v.$x" 2>/dev/null; done; rm -rf "$out/ra_$v"; done ;;
  s41b)   # nbs/05's cuda cells on session 41's defaults (the fold where it pays; a round that is not kept leaves a kept round's folds alone), cell by cell (<= 540 s)
    export DDTREE_COMMIT=$commit
    cells05 530 ;;
  s40a)   # W_UK folded into q_b_proj and W_UV into o_proj (session 40): on this CPU's inductor 3 launches a layer fewer at T = 9, none at T = 1
    fold_ab 270 270 8x512 --temps 0,1 --reps 2 --prompts 8 --max-new 512 ;;
  s39a)   # the fused draft (kernels/dev/draft_fused.cu) with stage stamps: where its 103 µs go (session 38: ~1 µs a barrier, ~5 µs a stage's work)
    step prebuild 100 python benchmarks/prebuild_kernels.py dev/draft_fused.cu dev/draft_fused.cu:-DDF_STAMPS dev/draft_fused.cu:-DDF_INLINE dev/draft_fused.cu:-DDF_INLINE,-DDF_STAMPS dev/draft_fused.cu:-DDF_BAR_FENCE
    step draft_fused 240 python benchmarks/bench_draft_fused.py --stamps --builds called,inlined --grids 64,128 --reps 20 --commit "$commit" --out "$out/bench_draft_fused.md"
    step grid_barrier 60 python benchmarks/bench_grid_barrier.py --grids 16,64,128 --barriers 0,1,17 --builds release,fence --out "$out/bench_grid_barrier.txt"
    step round_fused 160 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --draft-fused 128 --temps 0,1 --reps 2 --prompts 8 --max-new 512 --budgets 8
    cp "$out/ra/run_ahead.md" "$out/run_ahead_fused_8x512.md" 2>/dev/null; rm -rf "$out/ra" ;;
  s38a)   # session 37's compiles without pad_mm (model.INDUCTOR_OPTIONS): the compiled rounds' tests, then issue 17's figures
    export DDTREE_COMMIT=$commit
    cells05 250
    step run_ahead_8x512 320 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512 --budgets 8,15,16
    cp "$out/ra/run_ahead.md" "$out/run_ahead_8x512.md" 2>/dev/null ;;
  s37c)   # the verify forward's two compiles (session 36): inductor's pad_mm on, then off, each in a fresh process with an empty inductor cache; then s37b
    export TORCH_LOGS=recompiles
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) step diag_pad 150 python benchmarks/diag_compile_layout.py --order ddtree:8,ddtree:16,dflash --max-new 16 --pad --out "$out/diag_pad.json"
    TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) step diag_nopad 150 python benchmarks/diag_compile_layout.py --order ddtree:8,ddtree:16,dflash --max-new 16 --out "$out/diag_nopad.json"
    bash "$0" s37b "$out" ;;
  s37a)   # tree_accept's grid (accept_compact(grid=); ran in session 36 on 5598d82): nbs/04's cuda cells (every grid gives the same walk and rows), then bench_accept_grid at the demo pair's and Kimi's shapes (<= 240 s)
    export DDTREE_COMMIT=$commit
    step accept_tests 120 nbdev_test --flags cuda --do_print --path nbs/04_accept.ipynb
    step bench_accept_grid 110 python benchmarks/bench_accept_grid.py --reps 30 --commit "$commit" --out "$out/bench_accept_grid.md" ;;
  s36c)   # session 36 after s36b: nbs/05's cuda cells (the round with head-major verify rows and tb_small: never run), then the census alone at T = 0 (AR, DFlash, DDTree B = 8, 16; one prompt x 64 tokens), each stage's kernels by family (<= 560 s)
    export DDTREE_COMMIT=$commit
    step decode_tests 260 nbdev_test --flags cuda --do_print --path nbs/05_decode.ipynb
    step census 240 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0 --reps 1 --prompts 1 --max-new 64 --budgets 8,16
    cp "$out/ra/run_ahead.md" "$out/census.md" 2>/dev/null; cp "$out/ra/run_ahead.json" "$out/census.json" 2>/dev/null; rm -rf "$out/ra" ;;
  s36b)   # tb_small's heap as a branch-free max over 64-bit score keys (ran in session 36 on 689b421, then merged): nbs/02, the tree fuzzer, bench_tree at V = 4096 against s35c's, the sanitizer over tb_small, then issue 17 at 8 x 512, B = 8, 15, 16 (<= 600 s)
    export DDTREE_COMMIT=$commit
    step tree_tests 120 nbdev_test --flags cuda --do_print --path nbs/02_tree_builder.ipynb
    fuzz_gpu fuzz_tree 70 tree 45 37
    step bench_tree_v4096 60 python benchmarks/bench_tree.py --iters 60 --vocab 4096 --budgets 8,15,16,32 --scales 1,4 --commit "$commit" --out "$out/bench_tree_v4096.md"
    KERNELS=tb_small_bf16_e4,tb_small_bf16_e8,tb_small_bf16_e16,tb_small_f32_e4,tb_small_f32_e8,tb_small_f32_e16 TIMEOUT_RACECHECK=60 step sanitize_small 120 bash benchmarks/sanitize_kernels.sh "$out/sanitize_small"
    step run_ahead 260 python benchmarks/bench_run_ahead.py --out "$out/ra" --commit "$commit" --compile --merge on --temps 0,1 --reps 2 --prompts 8 --max-new 512 --budgets 8,15,16
    cp "$out/ra/run_ahead.md" "$out/run_ahead_8x512.md" 2>/dev/null; cp "$out/ra/run_ahead.json" "$out/run_ahead_8x512.json" 2>/dev/null
    rm -rf "$out/ra" "$out/fuzz_repro" ;;
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
  cells05)   # nbs/05 alone, cell by cell (about 400 s on a fresh machine: session 23)
    cells05 540 ;;
  splits)   # the verify kernels' split counts at the demo pair's shapes (H = 4, P = 1000, T = 1 / 17 / 65), each checked, then timed (~2 min)
    step sweep_splits 150 python benchmarks/sweep_splits.py --out "$out/splits" ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
