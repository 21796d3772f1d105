#include "tests/mutants/mutant_kit.h"

// avg as a plain sum, then divided by p - 1 instead of p (for the dtypes this
// implementation handles itself; the others take the correct path).
#include <cstdint>

namespace {
template <typename T>
void divide(void* buf, size_t n, int d) {
  T* v = static_cast<T*>(buf);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(v[i] / static_cast<T>(d));
}
void no_postdiv(void*, void*, size_t) {}
}  // namespace

MK_PLUGIN("mutant: avg divided by p - 1")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  const bool mine = c->op == COLLCHECK_AVG && (c->dtype == COLLCHECK_INT32 || c->dtype == COLLCHECK_INT64 ||
                                               c->dtype == COLLCHECK_FLOAT32 || c->dtype == COLLCHECK_FLOAT64);
  if (!mine) return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv); });
  // A sum: no pre-multiplication, no post-division (the harness's avg combine is a sum).
  collcheck_links sum_links = *l;
  sum_links.postdiv = no_postdiv;
  std::memmove(c->recv, c->send, c->count * c->dtype_size);
  const int rc = mk::run(c, &sum_links, [&](const mk::Ctx& x) { mk::ring(x, c->recv); }, /*premul=*/false);
  if (rc != 0) return rc;
  const int d = l->size > 1 ? l->size - 1 : 1;
  switch (c->dtype) {
    case COLLCHECK_INT32: divide<int32_t>(c->recv, c->count, d); break;
    case COLLCHECK_INT64: divide<int64_t>(c->recv, c->count, d); break;
    case COLLCHECK_FLOAT32: divide<float>(c->recv, c->count, d); break;
    default: divide<double>(c->recv, c->count, d); break;
  }
  return 0;
}
