"""Issue 20, T <= 8: the MoE's four launches with programmatic dependent launch (PDL) against the shipped ones (v13's), in one
run. gate/up, down and the combine come from kernels/dev/moe_w4a16_pdl.cu and are launched through the driver's
cuLaunchKernelEx (ctypes; PyCUDA has no such call) with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so each may
start while the launch before it drains: down's blocks request their first weights during gate/up's tail. First the
check (the output must equal v13's bit for bit, plain and PDL launches, eager and in a CUDA graph), then both as CUDA
graphs with bench_moe.py's L2 flush (a 256 MB read) ahead of each rep: median µs, % of 4.27 TB/s.

    python benchmarks/try_moe_pdl.py [--reps 20] [--tokens 1 2 4 8] [--out DIR]
"""
import argparse, ctypes, json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import H, I, CEIL, rand_packed, routing, make_flush, graph_time
from ddtree_nb.moe import MoEWorkspace, moe_cuda_launch, moe_group_launch, _SIG_GU, _SIG_DOWN, _SIG_COMB, _combine_grid, BLOCKS_PER_SM
from ddtree_nb.runtime import Kernel, nvcc_compile, kernels_dir, device_arch, device_limits, engine_stream, cuda_context

SRC = 'dev/moe_w4a16_pdl.cu'
class _Driver:   # libcuda, opened on first use (so the module imports on a machine without a GPU)
    def __getattr__(self, name):
        lib = self.__dict__.setdefault('lib', ctypes.CDLL('libcuda.so.1'))
        return getattr(lib, name)
_cu = _Driver()
PROGRAMMATIC_STREAM_SERIALIZATION = 6   # CUlaunchAttributeID


class AttrValue(ctypes.Union): _fields_ = [('pad', ctypes.c_char * 64), ('i', ctypes.c_int)]
class Attr(ctypes.Structure): _fields_ = [('id', ctypes.c_int), ('pad', ctypes.c_char * 4), ('value', AttrValue)]
class Config(ctypes.Structure):
    _fields_ = [('gx', ctypes.c_uint), ('gy', ctypes.c_uint), ('gz', ctypes.c_uint), ('bx', ctypes.c_uint), ('by', ctypes.c_uint),
                ('bz', ctypes.c_uint), ('smem', ctypes.c_uint), ('stream', ctypes.c_void_p), ('attrs', ctypes.POINTER(Attr)),
                ('n_attrs', ctypes.c_uint)]


def check(r, what):
    if r != 0:
        s = ctypes.c_char_p()
        _cu.cuGetErrorString(r, ctypes.byref(s))
        raise RuntimeError(f"{what}: CUDA driver error {r} ({s.value.decode() if s.value else '?'})")


_CTYPES = {'P': ctypes.c_uint64, 'i': ctypes.c_int32, 'I': ctypes.c_uint32, 'q': ctypes.c_int64, 'Q': ctypes.c_uint64,
           'f': ctypes.c_float, 'd': ctypes.c_double}


class DrvKernel:
    "A kernel of `SRC` loaded with the driver API (cuModuleLoadData in torch's primary context), launched by cuLaunchKernelEx."
    _mods = {}
    def __init__(self, name, sig, device):
        cuda_context(device)
        if device not in self._mods:
            data = nvcc_compile(kernels_dir() / SRC, device_arch(device), name='moe_w4a16_pdl')
            mod = ctypes.c_void_p()
            check(_cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)), 'cuModuleLoadData')
            self._mods[device] = mod
        self.fn = ctypes.c_void_p()
        check(_cu.cuModuleGetFunction(ctypes.byref(self.fn), self._mods[device], name.encode()), f'cuModuleGetFunction {name}')
        self.sig, self.name = sig, name
    def __call__(self, *args, grid, block, stream, pdl):
        # runtime.Kernel's own argument checks and conversion (CUDA, contiguous; the signature's scalar types), as ctypes values
        vals = [_CTYPES[k](Kernel._arg(self, i, a, k)) for i, (a, k) in enumerate(zip(args, self.sig))]
        params = (ctypes.c_void_p * len(vals))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])
        attr = Attr(id=PROGRAMMATIC_STREAM_SERIALIZATION); attr.value.i = 1
        g = tuple(grid) + (1,) * (3 - len(grid)); b = (block, 1, 1)
        cfg = Config(g[0], g[1], g[2], b[0], b[1], b[2], 0, ctypes.c_void_p(stream), ctypes.pointer(attr), 1 if pdl else 0)
        check(_cu.cuLaunchKernelEx(ctypes.byref(cfg), self.fn, params, None), f'cuLaunchKernelEx {self.name}')


_kernels = {}
def drv_kernel(name, sig, device) -> DrvKernel:
    "Cached: the module and function handles are made outside any capture."
    if (name, device) not in _kernels: _kernels[name, device] = DrvKernel(name, sig, device)
    return _kernels[name, device]


PDL_ON = {'gu', 'dn', 'comb'}   # which launches carry the PDL attribute (--pdl-on narrows it, to find a racing edge)

def launches_pdl(x, idx, w, ex, ws, out, n_sm, es, pdl=True):
    "moe_cuda_launch's four launches at T <= 8; gate/up, down and the combine as PDL dependents of the launch before."
    E, k, d = ex.n_experts, idx.shape[1], x.device.index
    h = es.pycuda.handle
    moe_group_launch(x, idx, w, E, ws)
    drv_kernel('moe_gate_up_v13_pdl', _SIG_GU, d)(x, H, I, k, ws.sorted_pair, ws.offsets, ws.hit, ws.n_hit, ex.gate_packed, ex.gate_scale,
        ex.up_packed, ex.up_scale, ws.act, grid=(BLOCKS_PER_SM * n_sm,), block=128, stream=h, pdl=pdl and 'gu' in PDL_ON)
    drv_kernel('moe_down_v13_pdl', _SIG_DOWN, d)(ws.act, I, H, ws.sorted_pair, w, ws.offsets, ws.hit, ws.n_hit, ex.down_packed,
        ex.down_scale, ws.ybuf, grid=(BLOCKS_PER_SM * n_sm,), block=128, stream=h, pdl=pdl and 'dn' in PDL_ON)
    drv_kernel('moe_combine_pdl', _SIG_COMB, d)(ws.ybuf, ws.pos, idx.shape[0], k, H, 2.827, out, grid=_combine_grid(idx.shape[0], H),
        block=256, stream=h, pdl=pdl and 'comb' in PDL_ON)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--tokens', type=int, nargs='+', default=[1, 2, 4, 8])
    ap.add_argument('--out', default=None)
    ap.add_argument('--stress', type=int, default=0, help='only the checks, this many eager and graph-replayed PDL runs per T')
    ap.add_argument('--vary', action='store_true', help='with --stress: a new routing every run (v13 recomputed each time, plain launches)')
    ap.add_argument('--pdl-on', default='gu,dn,comb', help='the launches that get the PDL attribute (comma list of gu, dn, comb)')
    a = ap.parse_args()
    PDL_ON.clear(); PDL_ON.update(a.pdl_on.split(','))
    dev, k, E = torch.device('cuda'), 8, 384
    n_sm = device_limits(dev.index or 0)['sms']
    es, flush = engine_stream(dev.index or 0), make_flush(dev, 'read')
    ex = rand_packed(E, dev)
    res = dict(gpu=torch.cuda.get_device_name(), commit=os.environ.get('DDTREE_COMMIT', '?'), checks=[], bench=[])
    if a.stress:
        for T in a.tokens:
            x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
            idx, w = routing(T, E, k, 'spread', dev, seed=1)
            ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
            with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13)
            torch.cuda.synchronize()
            refs = []
            for _ in range(4):   # is v13 itself the same every time?
                r2 = torch.empty_like(x)
                with es: moe_cuda_launch(x, idx, w, ex, 2.827, r2, ws, 13)
                torch.cuda.synchronize(); refs.append(torch.equal(r2, ref))
            bad_e = bad_g = 0
            for i in range(a.stress):
                if a.vary:   # new picks and weights in the same buffers, then v13's answer for them
                    i2, w2 = routing(T, E, k, 'spread', dev, seed=100 + i)
                    idx.copy_(i2); w.copy_(w2)
                    with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13)
                    torch.cuda.synchronize()
                with es:
                    out.fill_(float('nan')); launches_pdl(x, idx, w, ex, ws, out, n_sm, es)
                torch.cuda.synchronize()
                if not torch.equal(out, ref):
                    bad_e += 1
                    d = (out.float() - ref.float()).abs()
                    if bad_e <= 3: print(f"  eager T={T} run {i}: {int(d.isnan().sum())} NaN, {int((d > 0).sum())} differ, max {d.nan_to_num().max().item():.3e}", flush=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=es.torch): launches_pdl(x, idx, w, ex, ws, out, n_sm, es)
            for i in range(a.stress):
                if a.vary:
                    i2, w2 = routing(T, E, k, 'spread', dev, seed=1000 + i)
                    idx.copy_(i2); w.copy_(w2)
                    with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13)
                    torch.cuda.synchronize()
                with es:
                    out.fill_(float('nan')); g.replay()
                torch.cuda.synchronize()
                if not torch.equal(out, ref):
                    bad_g += 1
                    d = (out.float() - ref.float()).abs()
                    if bad_g <= 3: print(f"  graph T={T} run {i}: {int(d.isnan().sum())} NaN, {int((d > 0).sum())} differ, max {d.nan_to_num().max().item():.3e}", flush=True)
            print(f"stress T={T} PDL on {sorted(PDL_ON)}: v13 repeatable {refs}; PDL eager {bad_e}/{a.stress} differ, graph {bad_g}/{a.stress} differ", flush=True)
        return
    for T in a.tokens:
        x = torch.randn(T, H, device=dev, generator=torch.Generator(device=dev).manual_seed(1)).bfloat16()
        idx, w = routing(T, E, k, 'spread', dev, seed=1)
        ws, out, ref = MoEWorkspace(T, k, E, H, I, dev), torch.empty_like(x), torch.empty_like(x)
        with es: moe_cuda_launch(x, idx, w, ex, 2.827, ref, ws, 13)
        for pdl in (False, True):
            with es:   # the poison on the launches' stream, or nothing orders it before them
                out.fill_(float('nan'))
                launches_pdl(x, idx, w, ex, ws, out, n_sm, es, pdl)
            torch.cuda.synchronize()
            res['checks'].append(dict(T=T, pdl=pdl, graph=False, same_bits=torch.equal(out, ref)))
        t13 = graph_time(lambda: moe_cuda_launch(x, idx, w, ex, 2.827, out, ws, 13), a.reps, flush, es)
        with es: out.fill_(float('nan'))
        tp = graph_time(lambda: launches_pdl(x, idx, w, ex, ws, out, n_sm, es), a.reps, flush, es)
        torch.cuda.synchronize()
        res['checks'].append(dict(T=T, pdl=True, graph=True, same_bits=torch.equal(out, ref)))
        hit = idx.unique().numel(); mb = hit * ex.bytes_per_expert / 1e6
        row = dict(T=T, hit=hit, MB=round(mb, 1), v13_us=round(t13, 1), pdl_us=round(tp, 1),
                   v13_pct=round(100 * mb * 1e6 / (t13 * 1e-6) / CEIL, 1), pdl_pct=round(100 * mb * 1e6 / (tp * 1e-6) / CEIL, 1))
        res['bench'].append(row)
        print([c for c in res['checks'] if c['T'] == T], row, flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump(res, open(os.path.join(a.out, 'try_moe_pdl.json'), 'w'), indent=1)


if __name__ == '__main__': main()
