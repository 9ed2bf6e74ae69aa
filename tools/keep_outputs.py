"""Run notebooks' CPU cells (as `nbdev_test` does: cells with a `tst_flags` flag such as `#| cuda` skipped) and keep the small outputs
in the notebooks, so a reader sees each result under the cell that made it. Then run `nbdev_clean`.

    python tools/keep_outputs.py nbs/05c_budget.ipynb [more notebooks]   # from the repo root

Kept: stdout text and plain/HTML/PNG results of at most `--max-kb` KB per cell (default 8 KB of text, 120 KB for an
image); errors and larger outputs are dropped (a cell that fails stops the notebook, which is left unchanged)."""
import argparse, json, os, sys, time
from pathlib import Path
from execnb.shell import CaptureShell
from nbdev.process import NBProcessor
from nbdev.frontmatter import FrontmatterProc
from fastcore.xtras import working_directory

from nbdev.config import get_config
SKIP = set(str(get_config().get('tst_flags', 'notest')).split())   # the cells nbdev_test skips (cuda, notest, train, ...)

def _small(out: dict, max_kb: float, img_kb: float) -> bool:
    if out.get('output_type') == 'error' or out.get('name') == 'stderr': return False   # errors; warnings and progress bars
    data = out.get('data', {})
    if 'image/png' in data: return len(data['image/png']) <= img_kb * 1024
    text = ''.join(out.get('text', '')) + ''.join(data.get('text/plain', '')) + ''.join(data.get('text/html', ''))
    return len(text) <= max_kb * 1024 and not any(k.startswith('application/vnd.jupyter.widget') for k in data)

def run(path: Path, max_kb: float, img_kb: float) -> int:
    os.environ['IN_TEST'] = '1'
    nb = NBProcessor(path, procs=FrontmatterProc, process=True).nb
    def skip(cell):
        if cell.cell_type != 'code' or 'nbdev_export' + '(' in cell.source: return True
        d = getattr(cell, 'directives_', {}) or {}
        return d.get('eval:', [''])[0].lower() == 'false' or bool(SKIP & set(d.keys()))
    sh = CaptureShell(path)
    t0 = time.time()
    with working_directory(path.parent): sh.run_all(nb, exc_stop=True, preproc=skip)
    raw = json.loads(path.read_text())
    code = [c for c in raw['cells'] if c['cell_type'] == 'code']
    ran = [c for c in nb.cells if c.cell_type == 'code']
    assert len(code) == len(ran), (len(code), len(ran))
    kept = 0
    for c, r in zip(code, ran):
        outs = [o for o in (r.get('outputs') or []) if _small(dict(o), max_kb, img_kb)]
        c['outputs'] = [json.loads(json.dumps(o)) for o in outs]
        for o in c['outputs']:
            if 'execution_count' in o: o['execution_count'] = None
        kept += bool(outs)
    path.write_text(json.dumps(raw, indent=1, ensure_ascii=False) + '\n')
    print(f"{path}: {kept} cells with outputs kept ({time.time() - t0:.0f} s)")
    return kept

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('notebooks', nargs='+')
    ap.add_argument('--max-kb', type=float, default=8)
    ap.add_argument('--img-kb', type=float, default=120)
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo's package, as nbdev_test does
    for p in a.notebooks: run(Path(p).resolve(), a.max_kb, a.img_kb)
