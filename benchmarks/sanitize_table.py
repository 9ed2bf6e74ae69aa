"""Parse compute-sanitizer logs of benchmarks/sanitize_kernels.py and write the errors-per-kernel-per-tool table.

Standard library only (runs anywhere); tested on sample logs by benchmarks/test_sanitize_kernels.py.
A log is the sanitizer's `========= ` lines interleaved with the script's `SANITIZE_*` markers. Each sanitizer record
(a top-level line plus its indented continuation lines) is classified (kernel error, racecheck error/warning, leak,
CUDA API error, note) and a kernel record is attributed to the last of our kernel names it mentions before its host
backtrace (the outermost device frame), else to a `__device__` function of our sources, else to "other".
"""
from __future__ import annotations
import re
from dataclasses import dataclass, field
from pathlib import Path

from sanitize_kernels import kernel_names, device_functions, CANARY, TOOLS

_PFX = re.compile(r'^={9}(?: (.*))?$')
_RACE = re.compile(r'^(error|warning|info): (race reported|potential \w+ hazard)', re.I)
_CONT = re.compile(r'^(and |at |by thread|Address |Write Thread|Read Thread|Current Value|Saved host|Host Frame|Device Frame|in )')
_LEAK = re.compile(r'^Leaked ([\d,]+) bytes at (0x[0-9a-fA-F]+)')
_API = re.compile(r'^(Program hit|Host API)')
_NOTE = re.compile(r'^(COMPUTE-SANITIZER|Target application|Error:|Warning:|Internal|Note|This tool|Saved host)')
_SUMS = {'errors': re.compile(r'ERROR SUMMARY: ([\d,]+) error'),
         'race': re.compile(r'RACECHECK SUMMARY: ([\d,]+) hazards? displayed \(([\d,]+) errors?, ([\d,]+) warnings?\)'),
         'leak': re.compile(r'LEAK SUMMARY: ([\d,]+) bytes leaked in ([\d,]+) allocation')}
OTHER, API, LEAKS = 'other (no kernel of ours named)', 'CUDA API / host errors', 'leaks at exit'

def _int(s): return int(s.replace(',', ''))

@dataclass
class Record:
    kind: str                 # 'kernel', 'race_error', 'race_warning', 'leak', 'api', 'note'
    lines: list
    after_canary: bool = False
    row: str = ''             # the table row it counts in
    nbytes: int = 0
    addr: int = 0

@dataclass
class Log:
    records: list = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    cases: dict = field(default_factory=dict)     # case -> ('ok'|'FAIL'|'skipped', secs, info)
    kernels_of: dict = field(default_factory=dict)  # case -> kernels it launches
    begun: list = field(default_factory=list)
    live: dict = field(default_factory=dict)      # ptr -> (bytes, what)
    canary: list = field(default_factory=list)    # canary marker lines
    done: str = ''

def _attribute(rec: Record, names: dict, helpers: dict):
    body = []
    for l in rec.lines:
        if 'Saved host backtrace' in l or 'Host Frame' in l: break
        body.append(l)
    text = '\n'.join(body)
    pat = r'(?<![\w/])(' + '|'.join(sorted(map(re.escape, names), key=len, reverse=True)) + r')(?!\w|\.cu\b)'   # not a file name
    hits = re.findall(pat, text)
    if hits: return hits[-1]
    for h in re.findall(r'(?<!\w)(\w+)(?=\s*(?:\(|<|\+0x))', text):
        if h in helpers: return f'{helpers[h]}.cu: {h} (no kernel named)'
    return OTHER

def parse_log(text: str, names: dict | None = None, helpers: dict | None = None) -> Log:
    "Records, summaries and the script's markers of one sanitizer (or plain) log."
    names = dict(kernel_names() if names is None else names); names.setdefault(CANARY, 'canary')
    helpers = device_functions() if helpers is None else helpers
    log, cur, in_canary = Log(), None, False
    def close():
        nonlocal cur
        if cur is not None: log.records.append(cur)
        cur = None
    for line in text.splitlines():
        m = _PFX.match(line)
        if not m:
            w = line.split()
            if not w: continue
            if w[0] == 'SANITIZE_CASE' and len(w) >= 4: log.cases[w[1]] = (w[2], float(w[3]), ' '.join(w[4:]))
            elif w[0] == 'SANITIZE_BEGIN' and len(w) >= 2:
                log.begun.append(w[1]); log.kernels_of[w[1]] = tuple(w[2].split(',')) if len(w) > 2 else ()
            elif w[0] == 'SANITIZE_LIVE' and len(w) >= 3: log.live[int(w[1], 16)] = (int(w[2]), ' '.join(w[3:]))
            elif w[0] == 'SANITIZE_CANARY':
                log.canary.append(line.strip()); in_canary = in_canary or w[-1] == 'start'
            elif w[0] == 'SANITIZE_DONE': log.done = ' '.join(w[1:])
            continue
        body = m.group(1) or ''
        for k, rx in _SUMS.items():
            if s := rx.search(body): log.summary[k] = tuple(_int(g) for g in s.groups())
        if not body.strip(): close(); continue
        if body[0].isspace() or (cur is not None and _CONT.match(body)):   # indented, or a known continuation
            if cur is not None: cur.lines.append(body)
            continue
        close()
        if any(rx.search(body) for rx in _SUMS.values()): continue
        if r := _RACE.match(body): kind = 'race_error' if r.group(1).lower() == 'error' else 'race_warning'
        elif _LEAK.match(body): kind = 'leak'
        elif _API.match(body): kind = 'api'
        elif _NOTE.match(body): kind = 'note'
        else: kind = 'kernel'
        cur = Record(kind, [body], in_canary)
        if kind == 'leak':
            lm = _LEAK.match(body); cur.nbytes, cur.addr = _int(lm.group(1)), int(lm.group(2), 16)
    close()
    for r in log.records:
        if r.kind in ('kernel', 'race_error', 'race_warning'): r.row = _attribute(r, names, helpers)
        elif r.kind == 'api': r.row = API if not r.after_canary else 'after canary'
        elif r.kind == 'leak': r.row = LEAKS
        else: r.row = 'note'
    return log

def counts(log: Log) -> dict:
    "row -> [errors, warnings] (leaks: [allocations, held by live tensors]; API errors after the canary are left out)."
    out = {}
    for r in log.records:
        if r.kind == 'note' or r.row == 'after canary': continue
        c = out.setdefault(r.row, [0, 0])
        if r.kind == 'race_warning': c[1] += 1
        elif r.kind == 'leak': c[0] += 1; c[1] += r.addr in log.live
        else: c[0] += 1
    return out

def read_runs(logdir: Path) -> list:
    "runs.txt: one `tool=... rc=... secs=... limit=... filtered=... cmd=...` line per run."
    runs = []
    p = logdir / 'runs.txt'
    if not p.is_file(): return runs
    for line in p.read_text().splitlines():
        if not line.strip(): continue
        head, _, cmd = line.partition(' cmd=')
        d = dict(kv.split('=', 1) for kv in head.split() if '=' in kv)
        d['cmd'] = cmd
        runs.append(d)
    return runs

def _cell(tool, row, c, covered):
    if c is None: return '0' if covered else '–'
    e, w = c
    if row == LEAKS: return f"{e} ({w} live tensors)" if e else '0'
    return f"{e} (+{w} warnings)" if tool == 'racecheck' and w else str(e)

def _fmt_bytes(n): return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"

def table(logdir: Path, names: dict | None = None) -> str:
    "The markdown report of the logs in `logdir` (meta.txt, runs.txt, <tool>.log)."
    names = kernel_names() if names is None else names
    meta = {}
    if (logdir / 'meta.txt').is_file():
        for line in (logdir / 'meta.txt').read_text().splitlines():
            k, _, v = line.partition(':')
            if v: meta[k.strip()] = v.strip()
    runs = {r.get('tool'): r for r in read_runs(logdir)}
    logs = {t: parse_log((logdir / f'{t}.log').read_text(errors='replace'), names)
            for t in ('plain', *TOOLS) if (logdir / f'{t}.log').is_file()}
    tools = [t for t in TOOLS if t in logs]
    cnt = {t: counts(logs[t]) for t in tools}
    def covered(t, k):
        lg = logs[t]
        return any(k in lg.kernels_of.get(c, ()) for c, v in lg.cases.items() if v[0] != 'skipped')   # a skipped case launched nothing
    L = ['# compute-sanitizer over our kernels (benchmarks/sanitize_kernels.py)', '']
    for k in ('date', 'gpu', 'sanitizer', 'torch', 'commit', 'command', 'env', 'kernel filter'):
        if k in meta: L.append(f"- {k}: {meta[k] if k != 'command' else '`' + meta[k] + '`'}")
    for t in tools:
        if runs.get(t, {}).get('cmd'): L.append(f"- {t}: `{runs[t]['cmd']}`")
    L += ['', 'Sanitizer records per kernel and tool (racecheck: errors (+ warnings)); a record counts for the last of our '
          'kernel names it mentions; "–": no case launching that kernel finished in that run.', '',
          '| kernel | file | ' + ' | '.join(tools) + ' |', '|---|---|' + '---|' * len(tools)]
    ours = 0
    for k, f in names.items():
        cells = [_cell(t, k, cnt[t].get(k), covered(t, k)) for t in tools]
        ours += sum(cnt[t].get(k, [0, 0])[0] + cnt[t].get(k, [0, 0])[1] for t in tools)
        L.append(f"| {k} | {f}.cu | " + ' | '.join(cells) + ' |')
    extra = sorted({r for t in tools for r in cnt[t]} - set(names) - {OTHER, API, LEAKS, CANARY})
    for r in extra:                      # device functions of ours with no kernel named
        ours += sum(sum(cnt[t].get(r, [0, 0])) for t in tools)
        L.append(f"| {r} | | " + ' | '.join(_cell(t, r, cnt[t].get(r), True) for t in tools) + ' |')
    for r in (OTHER, API, LEAKS):
        L.append(f"| {r} | | " + ' | '.join(_cell(t, r, cnt[t].get(r), True) for t in tools) + ' |')
    can = []
    for t in tools:
        n = sum(cnt[t].get(CANARY, [0, 0]))
        ran = any(x.endswith('start') for x in logs[t].canary)
        can.append(f"{n} {'(seen)' if n else '(NOT SEEN)'}" if ran else 'not run')
    L.append(f"| {CANARY} (deliberate fault) | inline | " + ' | '.join(can) + ' |')
    L += ['', '| run | exit | seconds | limit | sanitizer summary | cases ok / failed | notes |', '|---|---|---|---|---|---|---|']
    for t in ('plain', *tools):
        if t not in logs: continue
        lg, r = logs[t], runs.get(t, {})
        ok = sum(v[0] == 'ok' for v in lg.cases.values()); bad = [c for c, v in lg.cases.items() if v[0] not in ('ok', 'skipped')]
        skipped = [c for c, v in lg.cases.items() if v[0] == 'skipped']
        notes = []
        if r.get('rc') in ('124', '137'):
            last = lg.begun[-1] if lg.begun else None
            notes.append(f"TIMED OUT in case {last}" if last and last not in lg.cases else
                         'TIMED OUT after the cases (canary or exit)' if last else 'TIMED OUT before the first case')
        elif not lg.done: notes.append('no SANITIZE_DONE line: the script did not finish')
        if bad: notes.append('failed: ' + ', '.join(f"{c} ({lg.cases[c][2][:120]})" for c in bad))
        if skipped: notes.append('skipped: ' + ', '.join(f"{c} ({lg.cases[c][2][:120]})" for c in skipped))
        s = lg.summary
        summ = '; '.join(x for x in (f"{s['errors'][0]} errors" if 'errors' in s else '',
                                       f"race {s['race'][1]} errors, {s['race'][2]} warnings" if 'race' in s else '',
                                       f"leaked {_fmt_bytes(s['leak'][0])} in {s['leak'][1]}" if 'leak' in s else '') if x)
        parsed = sum(1 for x in lg.records if x.kind not in ('note', 'race_warning'))
        if 'errors' in s and s['errors'][0] != parsed: notes.append(f"{parsed} error records parsed vs {s['errors'][0]} in the summary (print limit?)")
        fall = sum(x.row == 'after canary' for x in lg.records)
        if fall: notes.append(f"{fall} API errors after the canary (its fallout, not counted)")
        nl = [x for x in lg.records if x.kind == 'note' and not x.lines[0].startswith(('COMPUTE-SANITIZER', 'Target application'))]
        notes += [x.lines[0][:150] for x in nl[:3]]
        L.append(f"| {t} | {r.get('rc', '?')} | {r.get('secs', '?')} | {r.get('limit', '?')} | {summ or '–'} | "
                 f"{ok} / {len(bad)} | {'; '.join(notes) or '–'} |")
    if 'memcheck' in logs and logs['memcheck'].live:
        L += ['', 'CUDA tensors still alive at exit in the memcheck run (package caches; a leak at one of these addresses '
              'is one of them): ' + ', '.join(f"{d} ({_fmt_bytes(b)})" for p, (b, d) in sorted(logs['memcheck'].live.items()))]
    ran = [t for t in tools if any(x.endswith('start') for x in logs[t].canary)]
    unseen = [t for t in ran if not sum(cnt[t].get(CANARY, [0, 0]))]
    missing = [t for t in tools if t not in ran]
    L += ['', f"**Result: {ours} sanitizer records in our kernels**"
          + (f"; canary NOT SEEN in {', '.join(unseen)}: the filter or the parser missed our kernel there, so its zeros prove nothing" if unseen else '')
          + (f"; canary not reached in {', '.join(missing)} (the run ended before it)" if missing else ''), '']
    return '\n'.join(L)

def write_table(logdir: Path, out: Path | None = None) -> Path:
    out = out or logdir / 'sanitize_kernels.md'
    out.write_text(table(logdir))
    return out
