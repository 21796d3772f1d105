#include "tests/mutants/mutant_kit.h"

// The tree's root keeps a result it summed in another order than the one it
// broadcast: every other rank agrees, the root differs in the last bit.
MK_PLUGIN("mutant: result differs on one rank only")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::TreeBugs b;
  b.root_other_order = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::tree(x, c->recv, b); });
}
