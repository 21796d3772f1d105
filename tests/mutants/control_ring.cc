#include "tests/mutants/mutant_kit.h"

MK_PLUGIN("control: correct ring")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv); });
}

// The ring declares its order, so the controls also show that the
// matches-declared-order property raises no false alarm.
extern "C" int collcheck_plugin_reduction_order(int p, size_t count, size_t index, int* postfix, size_t capacity) {
  return mk::ring_order(p, count, index, postfix, capacity);
}
