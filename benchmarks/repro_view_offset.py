"""Does inductor keep the storage offset of a view made inside the graph and handed to a mutating custom op?

Why it matters here: a compiled draft writes cache layers in place through custom ops. Views `K[i]` of one cache tensor
made inside the graph, with the cache's row count dynamic, reached the op at offset 0 on torch 2.13 (CPU build): every
layer's write landed in layer 0 (pytorch/pytorch#198068 describes the same lowering for AOTInductor). `Drafter`'s compiled
draft takes the layers as separate inputs (`DrafterCache.layers()`, first for another reason: such views came back as
whole-layer copies), which keeps it clear of this, and `draft_kv_write_layers` runs outside the graph (given the layers as
separate inputs, inductor hands a mutating op clones of them). Prints eager and compiled results; exits 1 if they differ.

    python benchmarks/repro_view_offset.py [cpu|cuda]
"""
import sys, torch

def _bump(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    k[3].add_(1); return x + k.sum()
torch.library.custom_op('repro_offset::bump', _bump, mutates_args=('k',)).register_fake(lambda x, k: x.new_empty(x.shape))

def f(x, K):
    for i in range(K.shape[0]): x = torch.ops.repro_offset.bump(x * (i + 1), K[i])
    return x

if __name__ == '__main__':
    dev = sys.argv[1] if len(sys.argv) > 1 else 'cpu'
    K_eager, K_comp = torch.zeros(3, 5, 4, device=dev), torch.zeros(3, 5, 4, device=dev)
    f(torch.ones(4, device=dev), K_eager)
    torch._dynamo.mark_dynamic(K_comp, 1)                     # the cache's row count varies between generations
    torch.compile(f, dynamic=False)(torch.ones(4, device=dev), K_comp)
    print(f'torch {torch.__version__} on {dev}: row 3 of each layer, eager {K_eager[:, 3].sum(-1).tolist()}, compiled {K_comp[:, 3].sum(-1).tolist()}')
    sys.exit(0 if torch.equal(K_eager, K_comp) else 1)
