#include "tests/mutants/mutant_kit.h"

// A tree whose reduction leaves out the last rank when p is not a power of
// two (both the leaf and its parent think it is outside the tree); the leaf
// still receives the broadcast.
MK_PLUGIN("mutant: tree drops a leaf when p is not a power of two")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::TreeBugs b;
  b.drop_last_leaf = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::tree(x, c->recv, b); });
}
