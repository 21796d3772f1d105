#include "tests/mutants/mutant_kit.h"

// Reduce-scatter step s sends chunk (r + s) mod p instead of (r - s) mod p:
// the same at p = 2, wrong from p = 3 on.
MK_PLUGIN("mutant: ring step sends the wrong chunk")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::RingBugs b;
  b.wrong_send_chunk = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, b); });
}
