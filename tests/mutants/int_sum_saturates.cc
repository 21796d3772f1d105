#include "tests/mutants/mutant_kit.h"

// Integer sums computed in 64 bits and clamped to the type's range: they
// saturate where NCCL wraps modulo 2^bits.
#include <cstdint>
#include <limits>

namespace {
template <typename T>
void saturating_add(void* inout, const void* in, size_t n) {
  T* a = static_cast<T*>(inout);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) {
    const __int128 s = static_cast<__int128>(a[i]) + static_cast<__int128>(b[i]);
    a[i] = s > std::numeric_limits<T>::max()   ? std::numeric_limits<T>::max()
           : s < std::numeric_limits<T>::min() ? std::numeric_limits<T>::min()
                                               : static_cast<T>(s);
  }
}
}  // namespace

MK_PLUGIN("mutant: integer sum in a wider type, saturating")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::CombineFn combine = mk::harness_combine;
  if (c->op == COLLCHECK_SUM) {
    switch (c->dtype) {
      case COLLCHECK_INT8: combine = [](const mk::Ctx&, void* a, const void* b, size_t n) { saturating_add<int8_t>(a, b, n); }; break;
      case COLLCHECK_UINT8: combine = [](const mk::Ctx&, void* a, const void* b, size_t n) { saturating_add<uint8_t>(a, b, n); }; break;
      case COLLCHECK_INT32: combine = [](const mk::Ctx&, void* a, const void* b, size_t n) { saturating_add<int32_t>(a, b, n); }; break;
      case COLLCHECK_UINT32: combine = [](const mk::Ctx&, void* a, const void* b, size_t n) { saturating_add<uint32_t>(a, b, n); }; break;
      default: break;
    }
  }
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, {}, combine); });
}
