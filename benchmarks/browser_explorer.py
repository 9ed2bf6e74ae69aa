"""Browser check of the tree explorer: JupyterLab on loopback + headless Chromium (Playwright) (not run in CI).

Starts JupyterLab on 127.0.0.1 with a random token (its kernels import ddtree_nb from this checkout), opens
nbs/07a_explorer.ipynb, runs all cells (the Run > Run All Cells command, through the app object JupyterLab exposes with
--LabApp.expose_app_in_browser), then checks from the DOM that the explorer's tree widget
rendered -- an <svg class="ddtree-tree"> whose data-nodes equals its number of <g class="ddtree-node"> groups, with
the accepted path marked -- clicks "Step" and checks the next round's tree replaces it, and saves a screenshot of
the widget.

Needs Debian's chromium and the playwright package (never `playwright install`: the browser comes from apt):
  apt-get update && apt-get install -y chromium
  pip install playwright
Run from the repository root:
  python benchmarks/browser_explorer.py --screenshot benchmarks/explorer.png
Exits 0 and prints PASS lines when every check holds.
"""
from __future__ import annotations
import argparse, os, secrets, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

sys.stdout.reconfigure(line_buffering=True)
REPO = Path(__file__).resolve().parent.parent

def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def start_lab(port: int, token: str, log):
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cmd = [sys.executable, '-m', 'jupyter', 'lab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
           f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={REPO}', '--allow-root',
           '--LabApp.expose_app_in_browser=True']
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api/status?token={token}"
    for _ in range(120):
        if p.poll() is not None: raise RuntimeError(f"jupyter lab exited with {p.returncode}; see its log")
        try:
            urllib.request.urlopen(url, timeout=2); return p
        except OSError: time.sleep(0.5)
    p.terminate(); raise RuntimeError("jupyter lab did not answer within 60 s")

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--notebook', default='nbs/07a_explorer.ipynb')
    ap.add_argument('--chromium', default='/usr/bin/chromium')
    ap.add_argument('--screenshot', default='benchmarks/explorer.png')
    ap.add_argument('--timeout', type=float, default=240, help='seconds to wait for the notebook to run')
    args = ap.parse_args(argv)
    if not Path(args.chromium).exists():
        print(f"no browser at {args.chromium}: apt-get update && apt-get install -y chromium", file=sys.stderr); return 2
    from playwright.sync_api import sync_playwright
    port, token = free_port(), secrets.token_hex(16)
    log = tempfile.NamedTemporaryFile('w', prefix='browser_explorer_lab_', suffix='.log', delete=False)
    print(f"jupyter lab log: {log.name}")
    lab = start_lab(port, token, log)
    fails = 0
    def check(ok, what):
        nonlocal fails
        print(('PASS: ' if ok else 'FAIL: ') + what); fails += not ok
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, headless=True, args=['--no-sandbox', '--disable-gpu'])
            page = browser.new_page(viewport=dict(width=1400, height=1000))
            t0 = time.time()
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{args.notebook}?token={token}", wait_until='domcontentloaded')
            page.wait_for_selector('.jp-Notebook .jp-Cell', timeout=90_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget && window.jupyterapp.shell.currentWidget.sessionContext", timeout=90_000)
            has_kernel = "() => !!(window.jupyterapp.shell.currentWidget.sessionContext.session || {}).kernel"
            for _ in range(180):                     # nbdev_clean blanks the kernelspec: accept JupyterLab's kernel chooser (Python 3)
                if page.evaluate(has_kernel): break
                if page.locator('.jp-Dialog .jp-mod-accept').count(): page.locator('.jp-Dialog .jp-mod-accept').first.click()
                time.sleep(0.5)
            else: raise RuntimeError("no kernel started within 90 s")
            print(f"notebook open, kernel ready after {time.time() - t0:.1f} s")
            t1 = time.time()
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")   # = Run > Run All Cells; resolves when done
            svg = page.locator('svg.ddtree-tree').last
            svg.wait_for(state='attached', timeout=args.timeout * 1000)
            print(f"Run All Cells done and tree widget rendered {time.time() - t1:.1f} s after Run All")
            n_attr = int(svg.get_attribute('data-nodes'))
            n_nodes = svg.locator('g.ddtree-node').count()
            n_acc = svg.locator('g.ddtree-node[data-accepted="1"]').count()
            check(n_attr == n_nodes and n_nodes > 1, f"tree SVG has data-nodes={n_attr} and {n_nodes} node groups")
            check(n_acc >= 1 and svg.locator('g.ddtree-node[data-node="0"][data-accepted="1"]').count() == 1,
                  f"accepted path marked ({n_acc} nodes, root included)")
            check(svg.locator('g.ddtree-bonus').count() == 1, "bonus token drawn")
            box = page.locator('.ddtree-box').last
            text0 = box.locator('.ddtree-text').inner_text()
            r0 = svg.get_attribute('data-round')
            box.locator('button', has_text='Step').click()
            page.wait_for_function("r => { const s = [...document.querySelectorAll('svg.ddtree-tree')].pop(); return s && s.getAttribute('data-round') !== r; }",
                                   arg=r0, timeout=60_000)
            svg2 = page.locator('svg.ddtree-tree').last
            text1 = box.locator('.ddtree-text').inner_text()
            check(int(svg2.get_attribute('data-round')) == int(r0) + 1, f"Step: round {r0} -> {svg2.get_attribute('data-round')}")
            check(len(text1) > len(text0) and text1.startswith(text0), f"Step: text grew from {len(text0)} to {len(text1)} characters")
            page.add_style_tag(content='.Toastify { display: none !important; }')   # JupyterLab's news prompt would cover the widget
            box.scroll_into_view_if_needed()
            out = REPO / args.screenshot
            out.parent.mkdir(parents=True, exist_ok=True)
            box.screenshot(path=str(out))
            check(out.stat().st_size > 10_000, f"screenshot {out} ({out.stat().st_size} bytes)")
            browser.close()
    finally:
        lab.terminate()
        try: lab.wait(timeout=20)
        except subprocess.TimeoutExpired: lab.kill()
        log.close()
    print(f"{'all checks passed' if not fails else f'{fails} check(s) failed'}")
    return 1 if fails else 0

if __name__ == '__main__': sys.exit(main())
