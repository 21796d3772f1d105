#include "tests/mutants/mutant_kit.h"

// The ring's chunk index is kept in a 3-bit field (a packed descriptor sized
// for 8 GPUs per node): with 9 or more ranks, chunk 8 aliases chunk 0, so some
// chunks are reduced twice and others never. Invisible at p <= 8.
MK_PLUGIN("mutant: chunk index in 3 bits (p >= 9)")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::RingBugs b;
  b.index_in_3_bits = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, b); });
}
