"""A CPU model of the sm_90a verify kernel's tile loads (`load_kv_tile64`, `load_q_tile64` in kernels/verify_attn_sm90.cu):
every (thread, row half, column block) copy's shared-memory offset and source element, checked against the generic loops
of verify_attn_common.cuh (`load_kv_tile` / `load_q_tile` with `toff`) over all 64 x 72 chunks of a tile: the same chunks
land in the same places, each once. On a GPU, nbs/03's cuda cells and `fuzz_verify` check the kernel's outputs.

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

if __name__ == '__main__':
    for q in (False, True): assert tile64(q) == generic(q), q
    print('load_kv_tile64 and load_q_tile64: the 4,608 chunks of a tile, each where the generic loads put it')
