#include "tests/mutants/mutant_kit.h"

// The final pass over the result runs to i <= count: one element past the
// end of the output is written.
MK_PLUGIN("mutant: writes one element past the end")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  const int rc = mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv); });
  if (rc == 0 && c->count > 0) {
    auto* out = static_cast<unsigned char*>(c->recv);
    for (size_t b = 0; b < c->dtype_size; ++b) out[c->count * c->dtype_size + b] = static_cast<unsigned char>(~out[(c->count - 1) * c->dtype_size + b]);
  }
  return rc;
}
