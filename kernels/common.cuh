// Limits shared by more than one kernel and by the Python modules that launch them.
// runtime.check_limits compares them with the modules' constants when a kernel module loads
// (tree.MAX_DEPTH, tree.MAX_BUDGET, accept.MAX_PATH, ...), so change them here and in tree.py together.
#pragma once

#define MAX_DEPTH 32                 // rows of draft logits: the deepest draft tree
#define MAX_BUDGET 1024              // drafted nodes per tree (the root not counted)
#define MAX_PATH (MAX_DEPTH + 1)     // longest accepted path: the root plus one node per depth
#define MAX_NODES (MAX_BUDGET + 1)   // tree nodes with the root
