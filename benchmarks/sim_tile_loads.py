"""CPU models of the sm_90a verify kernel's index arithmetic (kernels/verify_attn_sm90.cu), for changes made without a GPU:
- the tile loads (`load_kv_tile64`, `load_q_tile64`): every (thread, row half, column block) copy's shared-memory offset
  and source element, against the generic loops of verify_attn_common.cuh (`load_kv_tile` / `load_q_tile` with `toff`)
  over all 64 x 72 chunks of a tile: the same chunks land in the same places, each once;
- the wgmma descriptors (`dadd`): gdesc(base + off) == gdesc(base) + (off >> 4) for every base and offset the kernel
  forms (QK's Q and K, PV's P and V at both PV widths, both K/V stages, both warpgroups, any 1024-aligned start of the
  dynamic shared memory below 8 KB).
On a GPU, nbs/03's cuda cells and `fuzz_verify` check the kernel's outputs.

    python benchmarks/sim_tile_loads.py
"""
CBLK, ROWS, CHUNKS = 8192, 64, 72

def toff(row, ch):
    "The kernel's swizzled byte offset of 16-byte chunk `ch` of tile row `row`."
    return (ch >> 3) * CBLK + row * 128 + (((ch & 7) ^ (row & 7)) << 4)

def generic(q: bool):
    "offset -> (row, source, element) as the generic loops copy a tile."
    src = lambda ch: ('kv', ch * 8) if not q else (('q_lat', ch * 8) if ch < 64 else ('q_pe', (ch - 64) * 8))
    return {toff(r, ch): (r, *src(ch)) for r in range(ROWS) for ch in range(CHUNKS)}

def tile64(q: bool):
    "offset -> (row, source, element) as thread t copies chunk t & 7 of each column block of rows t >> 3 and t >> 3 + 32."
    out = {}
    for t in range(256):
        c, r0 = t & 7, t >> 3
        d0 = r0 * 128 + ((c ^ (r0 & 7)) << 4)
        for h in range(2):
            for b in range(9):
                d = d0 + h * 4096 + b * CBLK
                assert d not in out, (t, h, b)
                if not q: out[d] = (r0 + 32 * h, 'kv', b * 64 + c * 8)
                else: out[d] = (r0 + 32 * h, 'q_lat', b * 64 + c * 8) if b < 8 else (r0 + 32 * h, 'q_pe', c * 8)
    return out

TILE = 9 * CBLK
Q_OFF, K_OFF, P_OFF = 0, TILE, 3 * TILE

def gdesc(addr, lbo, sbo):
    "The kernel's wgmma shared-memory descriptor (128-byte swizzle)."
    return ((addr & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16) | (((sbo >> 4) & 0x3FFF) << 32) | (1 << 62)

def descriptor_uses():
    "(base address, lbo, offset) of every descriptor the kernel builds, for each 1024-aligned start below 8 KB."
    for start in range(0, 8192, 1024):
        sQ, sP = start + Q_OFF, start + P_OFF
        for buf in range(2):
            sK = start + K_OFF + buf * TILE
            for wg in range(2):
                for cb in range(9):
                    for kk in range(4):
                        off = cb * CBLK + kk * 32
                        yield sQ, 16, off
                        yield sK + wg * 32 * 128, 16, off
                for ks in range(4):
                    yield sP, 16, ks * 32
                    yield sK + 4 * wg * CBLK, CBLK, ks * 2048                      # PV n256
                    for nb in range(4): yield sK + 4 * wg * CBLK, 1024, nb * CBLK + ks * 2048   # PV n64

if __name__ == '__main__':
    for q in (False, True): assert tile64(q) == generic(q), q
    print('load_kv_tile64 and load_q_tile64: the 4,608 chunks of a tile, each where the generic loads put it')
    n = 0
    for base, lbo, off in descriptor_uses():
        assert gdesc(base + off, lbo, 1024) == gdesc(base, lbo, 1024) + (off >> 4), (base, lbo, off); n += 1
    print(f'dadd: {n} descriptors equal to gdesc of the offset address')
