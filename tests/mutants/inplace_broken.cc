#include "tests/mutants/mutant_kit.h"

// Clears the output before accumulating into it. Out-of-place that is fine;
// in place it destroys the input first.
MK_PLUGIN("mutant: in-place broken, out-of-place fine")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  std::memset(c->recv, 0, c->count * c->dtype_size);
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv); });
}
