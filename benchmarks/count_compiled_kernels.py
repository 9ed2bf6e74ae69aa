"""What inductor makes of the demo target's compiled forward, graph by graph: its generated kernels and its extern GEMM calls.

Not a test, and not a timing. Runs anywhere (on a CPU inductor writes C++ kernels, whose fusions are a proxy for the GPU's
triton ones: where the GPU census is out of reach, it tells whether a change to the layers adds or removes launches). One
forward of T tokens (a one-level tree under the root, the prefix length on the device, the dense MoE dispatch, merged
projections, as the decode round runs it) through `compile_layers`, with inductor's output code read back from TORCH_LOGS.
The graphs: the forward's first steps, a layer before its attention (one graph for every layer), after it (dense and MoE
layers), the forward's last steps.

    python benchmarks/count_compiled_kernels.py --tokens 9 [--fold] [--device cpu]
"""
import argparse, contextlib, io, re
import torch


def count(tokens: int, fold: bool, device: str='cpu') -> list[dict]:
    from ddtree_nb.demo import load_demo_pair
    from ddtree_nb.model import fold_projections, merge_projections
    from ddtree_nb.reference import ancestor_mask
    from ddtree_nb.verify import vis_to_bits
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf): torch._logging.set_logs(output_code=True)   # torch's handler keeps the stream it was made with: this buffer, not stderr
    try:
        t, _, _ = load_demo_pair(device, torch.bfloat16)
        merge_projections(t); t.moe_dispatch = 'dense'
        if fold: fold_projections(t)
        vis = vis_to_bits(ancestor_mask(torch.tensor([-1] + [0] * (tokens - 1))))
        cache = t.new_cache(128)
        t(torch.arange(3, 40, device=device), torch.arange(37, device=device), cache, 0)   # a prompt of 37 tokens, eager
        t.use_compiled = True; t.compile_layers()
        pos = 37 + torch.tensor([0] + [1] * (tokens - 1), device=device)
        t(torch.arange(5, 5 + tokens, device=device), pos, cache, torch.tensor([37], dtype=torch.int32, device=device), vis)
    finally:
        torch._logging.set_logs()
    graphs = []
    code = re.sub(r'^.*?\[__output_code\] ?', '', buf.getvalue(), flags=re.M)   # each line without torch's log prefix
    for body in code.split('def call(')[1:]:
        body = body.split('def benchmark_compiled_module')[0]
        kernels = re.findall(r'\n\s+((?:cpp|triton)_\w+?)(?:\.run)?\(', body)
        graphs.append(dict(kernels=[k for k in kernels if not k.startswith('triton_helpers')], extern=re.findall(r'extern_kernels\.(\w+)\(', body)))
    return graphs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--tokens', type=int, default=9); ap.add_argument('--fold', action='store_true'); ap.add_argument('--device', default='cpu')
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    for i, g in enumerate(count(a.tokens, a.fold, a.device)):
        print(f"graph {i}: {len(g['kernels'])} generated + {len(g['extern'])} extern ({', '.join(g['extern']) or '-'}): {', '.join(g['kernels'])}")


if __name__ == '__main__':
    main()
