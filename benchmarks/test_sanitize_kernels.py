"""CPU tests of the sanitizer harness: kernel names from kernels/*.cu, case selection, the .sh dry run, and the log
parser + table on hand-written compute-sanitizer output (the record layout of its manual's examples: a top-level
`========= ` line, indented continuation lines, a bare `=========` between records, summaries at the end).

  python benchmarks/test_sanitize_kernels.py        (or: python -m pytest benchmarks/test_sanitize_kernels.py)
"""
import os, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import sanitize_kernels as sk
import sanitize_table as st

MEMCHECK = """\
========= COMPUTE-SANITIZER
SANITIZE_START 3 cases, torch 2.11.0+cu130, gpu NVIDIA H200, PYTORCH_NO_CUDA_MEMORY_CACHING=1
SANITIZE_BEGIN tree_bf16 tb_hist_bf16,tb_collect_bf16,tb_rowsort_bf16,tb_tree
========= Invalid __global__ read of size 2 bytes
=========     at hist_body<__nv_bfloat16>(const __nv_bfloat16 *, int, int, int *, float2 *, int *, int *, double *)+0x1f0 in /tmp/ddtree_nvcc_x/tree_build.cu:110
=========     by thread (17,0,0) in block (2,0,0)
=========     Address 0x7f3a4c000a00 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a4c000000 of size 2560 bytes
=========     Device Frame: tb_hist_bf16+0x1f0 in /tmp/ddtree_nvcc_x/tree_build.cu:165
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2dfbef] in libcuda.so.1
=========         Host Frame: [0x1234] in _driver.cpython-312-x86_64-linux-gnu.so
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuCtxSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2e1b5f] in libcuda.so.1
=========
SANITIZE_CASE tree_bf16 FAIL 1.52 RuntimeError: CUDA error: unspecified launch failure
SANITIZE_BEGIN moe_T16 moe_group,moe_gate_up_v4,moe_down_v4,moe_combine
========= Invalid __global__ write of size 4 bytes
=========     at void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>(int, T2, T3)+0x2a0
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a4c200000 is out of bounds
=========
SANITIZE_CASE moe_T16 ok 0.81 versions run: [None]
SANITIZE_BEGIN verify_v1 verify_attn_v1
=========     stray continuation line with no record before it
========= Misaligned Shared or Local Address
=========     at block_scan(int, int *, int *)+0x40 in /tmp/ddtree_nvcc_y/tree_build.cu:55
=========     by thread (0,0,0) in block (0,0,0)
=========
SANITIZE_CASE verify_v1 ok 0.40 rel=1.2e-03 dlse=2.0e-04
SANITIZE_CANARY memcheck start
========= Invalid __global__ read of size 4 bytes
=========     at sanitize_canary+0x90 in /tmp/ddtree_nvcc_z/sanitize_canary.cu:5
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f3a4c400200 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuCtxSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
SANITIZE_CANARY memcheck raised LogicError: cuCtxSynchronize failed: unspecified launch failure
SANITIZE_CANARY memcheck end
SANITIZE_LIVE 0x7f3a4c600000 2112 torch.float64 (264,)
SANITIZE_LIVE 0x7f3a4c400000 512 torch.float32 (128,)
SANITIZE_DONE ok=2 failed=1
========= Leaked 2,112 bytes at 0x7f3a4c600000
=========     Saved host backtrace up to driver entry point at cudaMalloc time
=========         Host Frame: [0x2dfbef] in libcuda.so.1
=========
========= Leaked 8192 bytes at 0x7f3a4c800000
=========     Saved host backtrace up to driver entry point at cudaMalloc time
=========
========= LEAK SUMMARY: 10304 bytes leaked in 2 allocations
========= ERROR SUMMARY: 8 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
SANITIZE_BEGIN verify_tree verify_attn_v2_64x64x2,verify_attn_combine
========= Error: Race reported between Write access at verify_v2<64, 64, 2>(const __nv_bfloat16 *, ...)+0x4410 in /tmp/d/verify_attn.cu:301
=========     and Read access at verify_v2<64, 64, 2>(const __nv_bfloat16 *, ...)+0x4630 in /tmp/d/verify_attn.cu:310 [128 hazards]
=========     in verify_attn_v2_64x64x2
=========
========= Warning: Race reported between Write access at tb_tree+0x800 in /tmp/d/tree_build.cu:450
=========     and Read access at tb_tree+0x900 in /tmp/d/tree_build.cu:452 [2 hazards]
=========
SANITIZE_CASE verify_tree ok 3.10 rel=1.0e-03 dlse=1.0e-04
========= Error: Potential WAR hazard detected at __shared__ 0x4b0 in block (4,19,0) :
=========     Read Thread (31,0,0) at 0x00001a30 in void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(T3)
=========     Write Thread (0,1,0) at 0x00001b00 in void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(T3)
=========     Current Value : 0, Incoming Value : 0
=========
SANITIZE_CANARY racecheck start
========= Error: Race reported between Write access at sanitize_canary+0x70 in /tmp/c/sanitize_canary.cu:6
=========     and Read access at sanitize_canary+0x90 in /tmp/c/sanitize_canary.cu:6 [2 hazards]
=========
SANITIZE_CANARY racecheck end
SANITIZE_DONE ok=1 failed=0
========= RACECHECK SUMMARY: 4 hazards displayed (3 errors, 1 warning)
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
SANITIZE_BEGIN accept_greedy tree_accept
SANITIZE_CASE accept_greedy ok 0.90 n=120 accepted=4
SANITIZE_BEGIN verify_sm90 verify_attn_sm90_n256,verify_attn_sm90_n64,verify_attn_combine
SANITIZE_CASE verify_sm90 skipped 0.01 the sm_90a kernel needs an sm_90 GPU, this one is sm_80
SANITIZE_CANARY synccheck start
========= Barrier error detected. Divergent thread(s) in warp
=========     at sanitize_canary+0x110 in /tmp/c/sanitize_canary.cu:7
=========     by thread (37,0,0) in block (0,0,0)
=========
SANITIZE_CANARY synccheck end
SANITIZE_DONE ok=1 failed=0 skipped=1
========= ERROR SUMMARY: 1 error
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
SANITIZE_BEGIN accept_greedy tree_accept
========= Uninitialized __global__ memory read of size 8 bytes
=========     at score_segment(const float *, int, int, bool, int, double, ...)+0x300 in /tmp/a/tree_accept.cu:90
=========     by thread (5,0,0) in block (3,0,0)
=========     Address 0x7f00aa001000
=========
========= Host API memory access error at host access to 0x7f00aa002000 of size 64 bytes
=========     Uninitialized access at 0x7f00aa002010 on access by cudaMemcopy source.
=========     Saved host backtrace up to driver entry point at error
=========
SANITIZE_CASE accept_greedy ok 0.95 n=120 accepted=4
SANITIZE_BEGIN moe_T1 moe_group,moe_gate_up_v4,moe_down_v4,moe_combine
"""


def test_kernel_names():
    n = sk.kernel_names()
    assert len(n) == 116 and '__launch_bounds__' not in n and '__cluster_dims__' not in n
    assert {k for k, f in n.items() if f == 'verify_attn'} == {
        'verify_attn_combine', 'verify_attn_combine_pdl', 'verify_attn_v2_64x64x2', 'verify_attn_v2_64x32x2', 'verify_attn_v2_32x32x1'}
    assert {k for k, f in n.items() if f == 'verify_attn_sm90'} == {'verify_attn_sm90_n256', 'verify_attn_sm90_n64', 'verify_attn_sm90_c2', 'verify_attn_sm90_c4', 'verify_attn_sm90_c8'}
    assert sum(f == 'tree_build' for f in n.values()) == 27 and n['moe_group'] == n['moe_route_group_e384'] == 'moe_w4a16' and n['axpy'] == 'smoke'
    forms = ('', '_nr', '_nr_tc') + tuple(f'_nr_c{c}{tc}' for c in (2, 4, 8) for tc in ('', '_tc'))   # plain, raw, tensor cores, clusters
    assert {k for k, f in n.items() if f == 'draft_attn'} == {f'draft_attn_r{r}_d{d}{x}' for r in (16, 32, 64) for d in (64, 128) for x in forms} | {
        'draft_kv_write_d64', 'draft_kv_write_d128', 'draft_kv_write_layers_d64', 'draft_kv_write_layers_d128'}
    h = sk.device_functions()
    assert h['hist_body'] == 'tree_build' and h['verify_v2'] == 'verify_attn' and 'tb_tree' not in h


def test_cases_cover_every_kernel_and_select():
    assert {k for c in sk.CASES for k in c.kernels} == set(sk.kernel_names())
    assert len({c.name for c in sk.CASES}) == len(sk.CASES)
    assert {c.group for c in sk.select(['tree'])} == {'tree'}
    assert 'tree_budget0' in {c.name for c in sk.select(['tb_tree'])}
    assert [c.name for c in sk.select(['verify_ar_step'])] == ['verify_ar_step']
    assert len(sk.select([])) == len(sk.CASES)
    first = [c.group for c in sk.select([])[:len(sk.GROUPS)]]
    assert sorted(first) == sorted(sk.GROUPS), first          # round robin: every group's first case comes first
    try: sk.select(['tree', 'nope']); raise AssertionError('unknown token accepted')
    except ValueError as e: assert "'nope'" in str(e)


def test_cli_list_and_names_need_no_gpu():
    r = subprocess.run([sys.executable, str(HERE / 'sanitize_kernels.py'), '--list', '--kernels', 'accept,moe_T1'],
                       capture_output=True, text=True, check=True)
    assert 'accept_root_only' in r.stdout and 'moe_T1' in r.stdout and 'tree_bf16' not in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith('8 cases')
    r = subprocess.run([sys.executable, str(HERE / 'sanitize_kernels.py'), '--names'], capture_output=True, text=True, check=True)
    assert r.stdout.split() == [*sk.kernel_names(), sk.CANARY]


def test_parse_memcheck():
    lg = st.parse_log(MEMCHECK)
    c = st.counts(lg)
    assert c['tb_hist_bf16'] == [1, 0]                    # the outermost frame names the kernel
    assert c[st.OTHER] == [1, 0]                          # torch's fill kernel is not ours
    assert c['tree_build.cu: block_scan (no kernel named)'] == [1, 0]
    assert c[st.API] == [1, 0]                            # the one after the canary is its fallout, not counted
    assert c[sk.CANARY] == [1, 0]
    assert c[st.LEAKS] == [2, 1]                          # 2 leaks, 1 at an address a live tensor holds
    assert sum(r.row == 'after canary' for r in lg.records) == 1
    assert lg.summary['errors'] == (8,) and lg.summary['leak'] == (10304, 2)
    assert lg.cases['tree_bf16'][0] == 'FAIL' and lg.cases['moe_T16'][0] == 'ok' and lg.done == 'ok=2 failed=1'
    assert lg.kernels_of['verify_v1'] == ('verify_attn_v1',) and len(lg.live) == 2
    leak = [r for r in lg.records if r.kind == 'leak']
    assert (leak[0].nbytes, leak[0].addr) == (2112, 0x7f3a4c600000)


DOC_STYLE = """\
========= COMPUTE-SANITIZER
========= WARNING: Race reported between Write access at tb_rowsort_f32():0xf0 in tree_build.cu:40
========= and Read access at tb_rowsort_f32():0x280 in tree_build.cu:46 [4 hazards]
=========
========= ERROR: Potential WAW hazard detected at __shared__ 0x0 in block (0,0,0) :
========= Write Thread (0,0,0) at moe_group()+0x2f0 in moe_w4a16.cu:20
========= Write Thread (1,0,0) at moe_group()+0x2f0 in moe_w4a16.cu:20
========= Current Value : 1, Incoming Value : 2
=========
========= Invalid __global__ write of size 4 bytes
========= at axpy():0x160 in smoke.cu:6
========= by thread (0,0,0) in block (0,0,0)
========= Address 0x7f6510c00001 is misaligned
=========
========= Leaked 64 bytes at 0x400200200
=========
========= ERROR SUMMARY: 3 errors
"""


def test_parse_doc_style():
    "The manual's examples print continuation lines unindented and severities in capitals: same records."
    lg = st.parse_log(DOC_STYLE)
    assert [(r.kind, r.row) for r in lg.records if r.kind != 'note'] == [
        ('race_warning', 'tb_rowsort_f32'), ('race_error', 'moe_group'), ('kernel', 'axpy'), ('leak', st.LEAKS)]


def test_parse_racecheck_synccheck_initcheck():
    c = st.counts(st.parse_log(RACECHECK))
    assert c['verify_attn_v2_64x64x2'] == [1, 0] and c['tb_tree'] == [0, 1] and c[st.OTHER] == [1, 0] and c[sk.CANARY] == [1, 0]
    assert st.parse_log(RACECHECK).summary['race'] == (4, 3, 1)
    c = st.counts(st.parse_log(SYNCCHECK))
    assert c == {sk.CANARY: [1, 0]}
    lg = st.parse_log(INITCHECK)
    c = st.counts(lg)
    assert c == {'tree_accept.cu: score_segment (no kernel named)': [1, 0], st.API: [1, 0]}
    assert lg.begun[-1] == 'moe_T1' and not lg.done


def test_table():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / 'meta.txt').write_text('date: 2026-12-03T09:00Z\ngpu: NVIDIA H200, 580.00, 143771 MiB\ncommit: abc1234\n'
                                    'command: bash benchmarks/sanitize_kernels.sh /out\nkernel filter: yes\n')
        (d / 'runs.txt').write_text('tool=plain rc=0 secs=30 limit=80 cmd=python3 benchmarks/sanitize_kernels.py\n'
                                    'tool=memcheck rc=99 secs=95 limit=110 cmd=compute-sanitizer --tool memcheck ...\n'
                                    'tool=racecheck rc=99 secs=120 limit=130 cmd=compute-sanitizer --tool racecheck ...\n'
                                    'tool=synccheck rc=99 secs=60 limit=80 cmd=compute-sanitizer --tool synccheck ...\n'
                                    'tool=initcheck rc=124 secs=100 limit=100 cmd=compute-sanitizer --tool initcheck ...\n')
        (d / 'plain.log').write_text('SANITIZE_BEGIN smoke_axpy axpy\nSANITIZE_CASE smoke_axpy ok 0.1\nSANITIZE_DONE ok=1 failed=0\n')
        for t, txt in (('memcheck', MEMCHECK), ('racecheck', RACECHECK), ('synccheck', SYNCCHECK), ('initcheck', INITCHECK)):
            (d / f'{t}.log').write_text(txt)
        out = st.write_table(d)
        md = out.read_text()
    rows = {l.split(' | ')[0].lstrip('| '): l for l in md.splitlines() if l.startswith('| ')}
    assert '| tb_hist_bf16 | tree_build.cu | 1 | – | – | – |' in md          # racecheck etc. never launched it
    assert rows['tree_accept'].endswith('| – | – | 0 | 0 |')                  # run in synccheck and initcheck only
    assert rows['verify_attn_sm90_n64'].endswith('| – | – | – | – |')         # its one case skipped in synccheck: not run, not 0
    assert 'skipped: verify_sm90 (the sm_90a kernel needs' in md and 'failed: verify_sm90' not in md
    assert rows['verify_attn_v2_64x64x2'].split(' | ')[3] == '1'
    assert rows['tb_tree'].split(' | ')[3] == '0 (+1 warnings)'
    assert rows[st.LEAKS] == f'| {st.LEAKS} | | 2 (1 live tensors) | 0 | 0 | 0 |', rows[st.LEAKS]   # memcheck: 2 leaks, 1 a live tensor's
    assert rows[f'{sk.CANARY} (deliberate fault)'].endswith('| 1 (seen) | 1 (seen) | 1 (seen) | not run |')
    assert 'TIMED OUT in case moe_T1' in md and 'failed: tree_bf16' in md
    assert '- commit: abc1234' in md and '- memcheck: `compute-sanitizer --tool memcheck ...`' in md
    assert '**Result: 5 sanitizer records in our kernels**; canary not reached in initcheck' in md and 'NOT SEEN in' not in md


def test_sh_dry_run():
    r = subprocess.run(['bash', str(HERE / 'sanitize_kernels.sh'), '/tmp/x', '--dry-run'], capture_output=True, text=True,
                       check=True, env={**os.environ, 'KERNELS': 'tree'})
    lines = r.stdout.strip().splitlines()
    assert lines[1].startswith('timeout 70 ') and lines[1].endswith('sanitize_kernels.py --kernels tree > /tmp/x/plain.log 2>&1')
    for t, l in zip(('memcheck', 'initcheck', 'synccheck', 'racecheck'), lines[2:6]):
        assert f'--tool {t} ' in l and f'--canary {t} ' in l and '--error-exitcode 99' in l, l
        assert ('--kernel-name kns=tb_tree' in l) == (t != 'initcheck'), l
    assert '--leak-check full' in lines[2] and lines[-1].endswith('--table /tmp/x --out /tmp/x/sanitize_kernels.md')


class _OnCpu:
    "Run the cases with their launches swapped for the torch faces (DEV='cpu', BACKEND='torch'), the kernels for stubs."
    def __enter__(self):
        import torch
        import ddtree_nb.runtime as rt, ddtree_nb.tree as tr
        from ddtree_nb.tree import build_tree_ref, load_tree          # test-only: writes a host-built tree in the GPU layout
        class Kernel:                                                 # axpy; the canary's launch does nothing
            def __call__(self, *a, grid, block):
                if len(a) == 4 and isinstance(a[0], torch.Tensor): a[0][:a[3]] += a[2] * a[1][:a[3]]
        def fill_tree(buf, x, B, root_token=None, force_heap=False, phase1=None):
            load_tree(buf, build_tree_ref(x, B), 0 if root_token is None else int(root_token[0])); return buf
        self.saved = (sk.DEV, sk.BACKEND, rt.load_kernel, tr.fill_tree, torch.get_num_threads())
        sk.DEV, sk.BACKEND, rt.load_kernel, tr.fill_tree = 'cpu', 'torch', lambda *a, **k: Kernel(), fill_tree
        torch.set_num_threads(1)
    def __exit__(self, *a):
        import torch
        import ddtree_nb.runtime as rt, ddtree_nb.tree as tr
        sk.DEV, sk.BACKEND, rt.load_kernel, tr.fill_tree, n = self.saved
        torch.set_num_threads(n)


def test_cases_run_on_the_cpu():
    "Every case's calls, shapes and checks, with the torch faces standing in for the kernels."
    with _OnCpu():
        for c in sk.CASES:
            if c.name in ('tree_max_budget', 'moe_T257'): continue   # slow on the CPU and the same code as others
            try: c.fn()
            except Exception as e: raise AssertionError(f"{c.name}: {type(e).__name__}: {e}") from e


def test_run_markers_round_trip():
    "run()'s output, parsed back: cases, their kernels, a failing case, the canary markers, the end line."
    import contextlib, io
    bad = sk.Case('bad_case', 'smoke', ('axpy',), 'fails on purpose', lambda: 1 / 0)
    def _skip(): raise sk.Skipped('not on this GPU')
    skip = sk.Case('skip_case', 'verify', ('verify_attn_sm90_n64',), 'skips on purpose', _skip)
    buf = io.StringIO()
    with _OnCpu(), contextlib.redirect_stdout(buf):
        rc = sk.run(sk.select(['smoke_axpy', 'accept_root_only']) + [bad, skip], tool='synccheck')
    lg = st.parse_log(buf.getvalue())
    assert rc == 1 and lg.done == 'ok=2 failed=1 skipped=1' and lg.cases['bad_case'][0] == 'FAIL'
    assert lg.cases['skip_case'][0] == 'skipped' and lg.cases['skip_case'][2] == 'not on this GPU'
    with _OnCpu(), contextlib.redirect_stdout(io.StringIO()): assert sk.run([skip]) == 0    # a skip alone is no failure
    assert lg.cases['accept_root_only'][0] == 'ok' and lg.kernels_of['accept_root_only'] == ('tree_accept',)
    assert [x.split()[-1] for x in lg.canary] == ['start', 'end'] and lg.records == []


if __name__ == '__main__':
    fails = 0
    for name, fn in list(globals().items()):
        if name.startswith('test_') and callable(fn):
            try: fn(); print(f'ok   {name}')
            except Exception as e: fails += 1; print(f'FAIL {name}: {type(e).__name__}: {e}')
    sys.exit(1 if fails else 0)
