#include "tests/mutants/mutant_kit.h"

// Chunks of count / p elements: when count % p != 0 the last elements belong
// to no chunk and are never reduced (a classic integer-division bug).
MK_PLUGIN("mutant: chunk off-by-one when count % p != 0")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::RingBugs b;
  b.floor_chunks = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, b); });
}
