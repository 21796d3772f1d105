#include "impl/kernels.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "impl/element_ops.h"
#include "impl/kernels_avx2.h"
#include "impl/sched.h"

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

// fp8 without AVX2, and the tail after the vector loop: every (a, b) pair's
// result in a 64 KiB table per dtype and op, built from the scalar steps on
// first use. One load per element beats the scalar arithmetic (decode,
// operate, round to float16, round to fp8, saturate).
template <typename T, Combine C>
const uint8_t* fp8_results() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    std::unique_ptr<uint8_t[]> t(new uint8_t[65536]);
    for (uint32_t i = 0; i < 65536; ++i)
      t[i] = Step<T, C>::apply(T{static_cast<uint8_t>(i >> 8)}, T{static_cast<uint8_t>(i)}).bits;
    return t;
  }();
  return table.get();
}
template <typename T>
const uint8_t* fp8_results(Combine op) {
  switch (op) {
    case Combine::Sum: return fp8_results<T, Combine::Sum>();
    case Combine::Prod: return fp8_results<T, Combine::Prod>();
    case Combine::Max: return fp8_results<T, Combine::Max>();
    case Combine::Min: return fp8_results<T, Combine::Min>();
  }
  return nullptr;
}
void fp8_by_table(const uint8_t* table, uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = table[static_cast<size_t>(a[i]) << 8 | b[i]];
}

}  // namespace

const uint8_t* fp8_step_table(DType dtype, Combine op) {
  if (dtype == DType::Fp8E4M3) return fp8_results<e4m3_t>(op);
  if (dtype == DType::Fp8E5M2) return fp8_results<e5m2_t>(op);
  return nullptr;
}

void combine_scalar(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op) {
  if (count == 0) return;
  visit_dtype(dtype, [&](auto tag) { combine_typed<decltype(tag)>(dst, a, b, count, op); });
}

namespace {

// combine() without the simulated world's charge.
void combine_uncharged(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op) {
  // The vector loop takes what it can (whole steps), a scalar loop the rest.
  const size_t done = combine_avx2(dst, a, b, count, dtype, op);
  if (done == count) return;
  const size_t off = done * dtype_size(dtype);
  auto* d = static_cast<std::byte*>(dst) + off;
  const auto* x = static_cast<const std::byte*>(a) + off;
  const auto* y = static_cast<const std::byte*>(b) + off;
  if (const uint8_t* table = fp8_step_table(dtype, op)) {
    fp8_by_table(table, reinterpret_cast<uint8_t*>(d), reinterpret_cast<const uint8_t*>(x),
                 reinterpret_cast<const uint8_t*>(y), count - done);
    return;
  }
  combine_scalar(d, x, y, count - done, dtype, op);
}

}  // namespace

void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op) {
  if (count == 0) return;
  // The simulated world charges the reduction its modelled time (the bytes
  // it reduces over the kernel's bandwidth); elsewhere nothing is charged.
  if (const LinkModel* m = current_link_model(); m != nullptr && sched::in_fiber())
    sched::sleep_for(m->reduction(count * dtype_size(dtype)));
  combine_uncharged(dst, a, b, count, dtype, op);
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
  // premul(x, s) is prod(x, s) for every dtype (impl/element_ops.h), so the
  // product kernels do it, a block at a time against a block of the scalar:
  // the same bits as the element steps (tests/kernels_test.cc), at the
  // vector loops' speed. Not charged in the simulated world: what a rank
  // contributes is not a reduction step (and nothing here yields, so the
  // fibers sharing this thread's block cannot interleave). The block is
  // filled again only for another dtype or scalar (the checker calls this
  // per block of 8,192 elements per rank).
  constexpr size_t kBlock = 1024;
  const size_t sz = dtype_size(r.dtype);
  struct Scalars {
    std::vector<std::byte> block = std::vector<std::byte>(kBlock * 8);  // 8: the widest dtype
    DType t{};
    uint64_t bits = 0;
    bool filled = false;
  };
  thread_local Scalars sc;
  if (!sc.filled || sc.t != r.dtype || sc.bits != r.scalar_bits) {
    for (size_t i = 0; i < kBlock; ++i) store_element(r.dtype, sc.block.data(), i, r.scalar_bits);
    sc.t = r.dtype;
    sc.bits = r.scalar_bits;
    sc.filled = true;
  }
  const std::byte* scalars = sc.block.data();
  auto* d = static_cast<std::byte*>(dst);
  const auto* x = static_cast<const std::byte*>(src);
  for (size_t i0 = 0; i0 < count; i0 += kBlock) {
    const size_t n = std::min(kBlock, count - i0);
    combine_uncharged(d + i0 * sz, x + i0 * sz, scalars, n, r.dtype, Combine::Prod);
  }
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
