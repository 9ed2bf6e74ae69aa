"""Held-out acceptance of the embedded demo pair on both held-out sets (stdlib files, held-out packages):
    python benchmarks/eval_demo_pair.py [n_prompts] [max_new_tokens] [threads] > benchmarks/demo_pair.json
and of another drafter of the same target (budgets 16 and 64 only; write it elsewhere, e.g. the session's folder):
    python benchmarks/eval_demo_pair.py 8 128 1 DRAFTER_DIR > benchmarks/sNN_.../eval_drafter.json"""
import sys, json, torch
from ddtree_nb.demo import report_pair
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
n, m = (int(a) for a in (sys.argv[1:3] or (8, 128)))
kw = dict(drafter_dir=sys.argv[4], budgets=(16, 64)) if len(sys.argv) > 4 else {}
print(json.dumps(report_pair(n_prompts=n, max_new_tokens=m, **kw), indent=1))
