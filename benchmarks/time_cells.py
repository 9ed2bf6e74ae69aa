"""Run one notebook's tests as `nbdev_test --flags cuda` does, printing each code cell's wall time as it finishes.

nbdev_test prints nothing until a notebook is done, so a notebook that runs past its timeout says nothing about where
the time went. This runs the same cells (skipping those whose flags are not given, `eval: false` and `nbdev_export()`),
flushes one line per cell (index, seconds, CUDA memory peak, first code line), and stops at the first error with its
traceback. Usage, on the GPU machine:
    python benchmarks/time_cells.py nbs/05_decode.ipynb [--flags cuda] [--out FILE]
"""
import argparse, os, sys, time
from pathlib import Path

from execnb.shell import CaptureShell
from fastcore.xtras import working_directory
from nbdev.process import NBProcessor
from nbdev.frontmatter import FrontmatterProc
from nbdev.config import get_config


def skipped(cell, flags: set) -> bool:
    "Whether nbdev_test with `flags` given skips `cell` (the test flags not given, `eval: false`, nbdev_export)."
    if cell.cell_type != 'code' or 'nbdev_export' + '(' in cell.source: return True
    direc = getattr(cell, 'directives_', {}) or {}
    if direc.get('eval:', [''])[0].lower() == 'false': return True
    return bool(flags & direc.keys())


def first_code_line(src: str) -> str:
    return next((l for l in src.splitlines() if l.strip() and not l.startswith('#|')), '')[:90]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('notebook')
    ap.add_argument('--flags', default='cuda', help='test flags to run (comma separated; the rest of tst_flags are skipped)')
    ap.add_argument('--out', default=None, help='also append the lines to this file')
    a = ap.parse_args()
    fn = Path(a.notebook).resolve()
    skip = set(get_config().tst_flags.split()) - set(f for f in a.flags.split(',') if f)
    os.environ['IN_TEST'] = '1'
    nb = NBProcessor(fn, procs=FrontmatterProc, process=True).nb
    sh, log = CaptureShell(fn), (open(a.out, 'a') if a.out else None)
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError: cuda = False

    def say(line):
        print(line, flush=True)
        if log: log.write(line + '\n'); log.flush()

    say(f'{fn.name}: flags {a.flags or "-"}, skipping {sorted(skip)}')
    t_all = time.time()
    with working_directory(fn.parent):
        for i, cell in enumerate(nb.cells):
            if skipped(cell, skip): continue
            if cuda: torch.cuda.reset_peak_memory_stats()
            t0 = time.time()
            sh.cell(cell)
            dt = time.time() - t0
            peak = f'{torch.cuda.max_memory_allocated() / 2**20:8.0f} MiB' if cuda else ''
            say(f'cell {i:3d} {dt:8.2f} s {peak}  {first_code_line(cell.source)}')
            if sh.exc:
                say(sh.prettytb(fname=fn))
                say(f'FAILED at cell {i} after {time.time() - t_all:.1f} s')
                sys.exit(1)
    say(f'passed in {time.time() - t_all:.1f} s')


if __name__ == '__main__': main()
