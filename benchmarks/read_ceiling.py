"""What one H200 reads per second, against the 4.27 TB/s device-copy ceiling the kernels' goals use (session 15, issue 20):
torch's sum over bf16 (a reduction that streams its input), max over the same bytes as int32, and a device copy (reported
both as (read + write) / time and as read / time), each at 66 / 132 / 198 MB (a Kimi MoE layer's down / gate-up / all
routed weights at T = 1) and at 1 and 4 GB; CUDA events, median of 30, L2 flushed by a 256 MB read before each rep
(bench_moe.py's `gpu_time` and `make_flush`).

    python benchmarks/read_ceiling.py OUT.json [MIB,MIB,...]   (default 66,132,198,1024,4096; 36 MiB = the verify call at T = 1, P = 32k)
"""
import json, os, sys
import torch
sys.path.insert(0, os.path.dirname(__file__))
from bench_moe import gpu_time, make_flush


def main(path, sizes=(66, 132, 198, 1024, 4096)):
    dev = torch.device('cuda')
    flush, res = make_flush(dev, 'read'), {}
    for mb in sizes:
        n = mb * 2**20 // 2
        x = torch.empty(n, dtype=torch.bfloat16, device=dev).normal_()
        xi, y = x.view(torch.int32), torch.empty_like(x)
        us_sum = gpu_time(lambda: x.sum(dtype=torch.float32), 30, flush)
        us_max = gpu_time(lambda: xi.max(), 30, flush)
        us_cp = gpu_time(lambda: y.copy_(x), 30, flush)
        b = n * 2
        res[mb] = dict(sum_TBps=round(b / us_sum / 1e6, 3), max_i32_TBps=round(b / us_max / 1e6, 3), copy_rw_TBps=round(2 * b / us_cp / 1e6, 3),
                       copy_TBps_read_only_counted=round(b / us_cp / 1e6, 3), us_sum=round(us_sum, 1), us_max=round(us_max, 1), us_copy=round(us_cp, 1))
        print(mb, 'MB', res[mb], flush=True)
        del x, y, xi
    json.dump(res, open(path, 'w'), indent=1)


if __name__ == '__main__': main(sys.argv[1], *([tuple(int(x) for x in sys.argv[2].split(','))] if len(sys.argv) > 2 else []))
