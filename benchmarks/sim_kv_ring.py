"""A CPU model of the sm_90a verify kernel's key/value ring (kernels/verify_attn_sm90.cu, `verify_sm90`'s key loop):
the cp.async commit groups and waits of one thread, for the schedule before session 24 (a stage refilled after the wait
for the previous tile: one tile in flight) and after it (a stage refilled right after its PV: two in flight while the
loop waits). Checks, for every split of 0-9 tiles, that each tile is computed once, in order, from a stage whose load
has completed and was not overwritten, and that no stage is refilled before its tile's PV. Then the napkin figure per
tile by Little's law over the chip (bytes in flight / latency, capped at the device-copy ceiling).

    python benchmarks/sim_kv_ring.py
"""

def run(n, early):
    "Program order of one thread over `n` tiles: ('load', tile, stage), ('commit',), ('wait', pending), ('compute', tile, stage)."
    ev = [('load', 0, 0)] if n > 0 else []
    ev.append(('commit',))
    if early:
        if n > 1: ev.append(('load', 1, 1))
        ev.append(('commit',))
    for i in range(n):
        buf = i & 1
        ev.append(('wait', 1 if early else 0))
        if not early:
            if i + 1 < n: ev.append(('load', i + 1, buf ^ 1))
            ev.append(('commit',))
        ev.append(('compute', i, buf))
        if early:
            if i + 2 < n: ev.append(('load', i + 2, buf))
            ev.append(('commit',))
    ev.append(('wait', 0))
    return ev

def check(n, early):
    "Replays `run` under cp.async's rules (wait_group N: every group but the newest N complete) and asserts the invariants."
    groups, open_loads, done = [], [], set()   # committed groups (lists of (tile, stage)), loads not yet committed, landed tiles
    stage, read, order = {}, set(), []         # stage -> tile last loaded there; tiles whose PV is done; computed tiles in order
    for e in run(n, early):
        if e[0] == 'load':
            _, t, b = e
            assert b not in stage or stage[b] in read, f"n={n}: stage {b} refilled before tile {stage[b]}'s PV"
            stage[b] = t; open_loads.append((t, b))
        elif e[0] == 'commit':
            groups.append(open_loads); open_loads = []
        elif e[0] == 'wait':
            for g in groups[:len(groups) - e[1]]: done.update(t for t, _ in g)
        else:
            _, t, b = e
            assert t in done and stage[b] == t, f"n={n}: tile {t} computed before it landed in stage {b}"
            order.append(t); read.add(t)
    assert order == list(range(n)) and not open_loads, (n, order)

def per_tile_us(tiles_in_flight, tbs, latency_us, blocks=130, tile=64 * 576 * 2):
    "Little's law over the chip: `blocks` SMs with `tiles_in_flight` tiles each requested, at `latency_us` per request, capped at `tbs` TB/s."
    return blocks * tile / min(tbs * 1e12, blocks * tile * tiles_in_flight / (latency_us * 1e-6)) * 1e6

if __name__ == '__main__':
    for early in (False, True):
        for n in range(10): check(n, early)
    print("ring schedules: every tile computed once, in order, landed, its stage not refilled before its PV (0-9 tiles, both schedules)")
    # the steady state measured before (one tile in flight per block): 3.2 µs a tile at T = 1 on both kinds (P = 128k minus
    # 32k over 12 tiles: H100 session 24, H200 session 15), so a request's loaded latency is at most 3.2 µs
    for gpu, tbs in (('H100', 3.0), ('H200', 4.27)):   # device-copy ceilings seen on each kind
        print(f"{gpu} (ceiling {tbs} TB/s), µs a tile at a 3.2 µs latency: one tile in flight {per_tile_us(1, tbs, 3.2):.2f}, "
              f"1.5 {per_tile_us(1.5, tbs, 3.2):.2f}, two {per_tile_us(2, tbs, 3.2):.2f}")
