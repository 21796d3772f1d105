#include "impl/kernels.h"

#include <cstring>

#include "impl/element_ops.h"

namespace collcheck {

namespace {

template <typename T, Combine C>
struct Step {
  static T apply(T a, T b) {
    using Ops = ElementOps<T>;
    if constexpr (C == Combine::Sum) return Ops::sum(a, b);
    if constexpr (C == Combine::Prod) return Ops::prod(a, b);
    if constexpr (C == Combine::Max) return Ops::max(a, b);
    if constexpr (C == Combine::Min) return Ops::min(a, b);
  }
};

template <typename T, Combine C>
void combine_loop(T* dst, const T* a, const T* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Step<T, C>::apply(a[i], b[i]);
}

template <typename T>
void combine_typed(void* dst, const void* a, const void* b, size_t n, Combine op) {
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  switch (op) {
    case Combine::Sum: return combine_loop<T, Combine::Sum>(d, x, y, n);
    case Combine::Prod: return combine_loop<T, Combine::Prod>(d, x, y, n);
    case Combine::Max: return combine_loop<T, Combine::Max>(d, x, y, n);
    case Combine::Min: return combine_loop<T, Combine::Min>(d, x, y, n);
  }
}

}  // namespace

void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op) {
  if (count == 0) return;
  visit_dtype(dtype, [&](auto tag) { combine_typed<decltype(tag)>(dst, a, b, count, op); });
}

void reduce(void* dst, const void* src, size_t count, DType dtype, Combine op) {
  combine(dst, dst, src, count, dtype, op);
}

void apply_pre(const Reduction& r, void* dst, const void* src, size_t count) {
  if (count == 0) return;
  if (!r.premul) {
    if (dst != src) std::memcpy(dst, src, count * dtype_size(r.dtype));
    return;
  }
  visit_dtype(r.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Ops = ElementOps<T>;
    const T s = Ops::from_bits(r.scalar_bits);
    auto* d = static_cast<T*>(dst);
    auto* x = static_cast<const T*>(src);
    for (size_t i = 0; i < count; ++i) d[i] = Ops::premul(x[i], s);
  });
}

void apply_post(const Reduction& r, void* buf, size_t count) {
  if (!r.postdiv || count == 0) return;
  visit_dtype(r.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* d = static_cast<T*>(buf);
    for (size_t i = 0; i < count; ++i) d[i] = ElementOps<T>::postdiv(d[i], r.divisor);
  });
}

}  // namespace collcheck
