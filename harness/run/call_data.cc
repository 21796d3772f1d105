#include "harness/run/call_data.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <tuple>

#include "harness/model/data.h"
#include "impl/dtype.h"
#include "impl/float_formats.h"

namespace collcheck {

namespace {

// Above this many elements a call keeps the plain data: A is kept in memory
// (4 bytes an element), and such calls are rare.
constexpr size_t kMaxSplitElements = size_t{1} << 24;

bool splittable(DType t, RedOp op) {
  const bool dtype_ok = t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Uint32 ||
                        t == DType::Int64 || t == DType::Uint64;
  return dtype_ok && (op == RedOp::Sum || op == RedOp::Max || op == RedOp::Min);
}

// The range of A and of B: [lo, hi]. Floats: sums of p values of |k| <=
// 2 * hi stay below 2^(precision - 1), so every partial sum is exact.
// Integers: A + B fits the type, so max and min never wrap (sums wrap as the
// type does, exactly). Empty (lo > hi) when p is too large for the dtype.
std::pair<int64_t, int64_t> range_of(DType t, int p) {
  if (dtype_is_float(t)) {
    const int p_bits = static_cast<int>(std::ceil(std::log2(static_cast<double>(std::max(p, 1)))));
    const int bits = std::min(30, float_info(t).precision - p_bits - 1);
    if (bits < 3) return {1, 0};
    const int64_t k = (int64_t{1} << (bits - 1)) - 1;
    return {-k, k};
  }
  constexpr int64_t k = (int64_t{1} << 29) - 1;
  return dtype_is_signed_int(t) ? std::pair{-k, k} : std::pair{int64_t{0}, k};
}

int64_t draw(uint64_t r, std::pair<int64_t, int64_t> range) {
  const auto span = static_cast<uint64_t>(range.second - range.first + 1);
  return range.first + static_cast<int64_t>(r % span);
}

// A of the last few calls, shared by the ranks of a process (every rank of
// a collective draws the same A).
std::shared_ptr<const std::vector<int32_t>> draw_a(uint64_t seed, size_t n, std::pair<int64_t, int64_t> range) {
  using Key = std::tuple<uint64_t, size_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::vector<std::pair<Key, std::shared_ptr<const std::vector<int32_t>>>> kept;  // newest last
  const Key key{seed, n, range.first, range.second};
  {
    std::lock_guard lock(mu);
    for (auto it = kept.begin(); it != kept.end(); ++it)
      if (it->first == key) {
        auto a = it->second;
        std::rotate(it, it + 1, kept.end());
        return a;
      }
  }
  auto a = std::make_shared<std::vector<int32_t>>(n);
  const uint64_t s = splitmix64(seed ^ 0x243f6a8885a308d3ull);
  for (size_t i = 0; i < n; ++i) (*a)[i] = static_cast<int32_t>(draw(splitmix64(s + splitmix64(i)), range));
  std::lock_guard lock(mu);
  kept.emplace_back(key, a);
  if (kept.size() > 4) kept.erase(kept.begin());
  return a;
}

}  // namespace

CallData::CallData(DType t, RedOp op, int p, uint64_t seed, size_t n) : t_(t), op_(op), p_(p), seed_(seed), n_(n) {
  const auto range = range_of(t, p);
  if (!splittable(t, op) || range.first > range.second || n > kMaxSplitElements) return;
  a_ = draw_a(seed, n, range);
  const uint64_t s = splitmix64(seed ^ 0x13198a2e03707344ull);
  b_.resize(static_cast<size_t>(p));
  for (int q = 0; q < p; ++q) b_[static_cast<size_t>(q)] = draw(splitmix64(s + splitmix64(static_cast<uint64_t>(q))), range);
  if (p > 0) {
    b_max_ = *std::max_element(b_.begin(), b_.end());
    b_min_ = *std::min_element(b_.begin(), b_.end());
    for (int64_t b : b_) b_sum_ += b;
  }
}

uint64_t CallData::bits_of(int64_t k) const {
  if (dtype_is_float(t_)) return to_element_bits(t_, static_cast<double>(k) * 0.25);
  const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t_));
  return static_cast<uint64_t>(k) & (bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1);
}

uint64_t CallData::element(int q, size_t i) const {
  if (!split()) return input_element(t_, op_, p_, q, i, seed_, DataClass::Exact);
  return bits_of(int64_t{(*a_)[i]} + b_[static_cast<size_t>(q)]);
}

namespace {
// A(i) and B(q) are both within +-(2^29 - 1) (range_of), so A + B is an int32,
// and exact in the float dtypes that split: one vector loop per dtype.
template <typename T, bool IsFloat>
void fill_split(T* out, const std::vector<int32_t>& a, int64_t b) {
  const auto* x = a.data();
  const size_t n = a.size();
  const auto bb = static_cast<int32_t>(b);
  for (size_t i = 0; i < n; ++i) {
    const int32_t k = x[i] + bb;
    if constexpr (IsFloat)
      out[i] = static_cast<T>(k) * static_cast<T>(0.25);
    else
      out[i] = static_cast<T>(k);
  }
}
}  // namespace

void CallData::fill(int q, void* out) const {
  if (!split()) {
    fill_input(out, n_, t_, op_, p_, q, seed_, DataClass::Exact);
    return;
  }
  const int64_t b = b_[static_cast<size_t>(q)];
  switch (t_) {
    case DType::Float32: fill_split<float, true>(static_cast<float*>(out), *a_, b); break;
    case DType::Float64: fill_split<double, true>(static_cast<double*>(out), *a_, b); break;
    case DType::Int32: fill_split<int32_t, false>(static_cast<int32_t*>(out), *a_, b); break;
    case DType::Uint32: fill_split<uint32_t, false>(static_cast<uint32_t*>(out), *a_, b); break;
    case DType::Int64: fill_split<int64_t, false>(static_cast<int64_t*>(out), *a_, b); break;
    case DType::Uint64: fill_split<uint64_t, false>(static_cast<uint64_t*>(out), *a_, b); break;
    default:
      for (size_t i = 0; i < n_; ++i) store_element(t_, out, i, element(q, i));
  }
}

uint64_t CallData::reduced(size_t i) const {
  const int64_t a = (*a_)[i];
  switch (op_) {
    case RedOp::Max: return bits_of(a + b_max_);
    case RedOp::Min: return bits_of(a + b_min_);
    default: return bits_of(static_cast<int64_t>(p_) * a + b_sum_);
  }
}

}  // namespace collcheck
