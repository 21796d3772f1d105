#include "harness/check/expectation_memo.h"

#include <algorithm>

namespace collcheck {

namespace {
// 4,096 slots, filled to half at most: 2 MiB of keys at p = 64.
constexpr size_t kSlots = 4096, kMaxUsed = kSlots / 2;
// After this many lookups, a memo with fewer hits than a quarter of them
// steps aside: its inputs do not repeat.
constexpr size_t kTrial = 4096;

uint64_t hash_of(std::span<const uint64_t> values) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t v : values) {
    h ^= v + 0x632be59bd9b4e019ull;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}
}  // namespace

ExpectationMemo::ExpectationMemo(const Reduction& red, size_t ranks, size_t count)
    : red_(red), ranks_(ranks), small_(red, ranks) {
  active_ = count >= kMinCount && ranks > 0;
  if (!active_) return;
  slot_mask_ = kSlots - 1;
  keys_.resize(kSlots * ranks_);
  filled_.assign(kSlots, 0);
  expected_.resize(kSlots);
}

// The slot holding `values`, or the empty slot where they would go.
size_t ExpectationMemo::find(std::span<const uint64_t> values, uint64_t hash) const {
  for (size_t s = hash & slot_mask_;; s = (s + 1) & slot_mask_) {
    if (!filled_[s]) return s;
    if (std::equal(values.begin(), values.end(), keys_.begin() + static_cast<std::ptrdiff_t>(s * ranks_))) return s;
  }
}

void ExpectationMemo::derive(std::span<const uint64_t> values) {
  if (!small_.expect(values, derived_)) derived_ = expect_element(red_, values);
}

const Expectation& ExpectationMemo::expect(std::span<const uint64_t> values) {
  if (!active_) {
    derive(values);
    return derived_;
  }
  if (++lookups_ == kTrial && hits_ < kTrial / 4) active_ = false;  // this call's inputs do not repeat
  const uint64_t hash = hash_of(values);
  const size_t s = find(values, hash);
  if (filled_[s]) {
    ++hits_;
    return expected_[s];
  }
  const size_t consulted = enumeration_budget_consults();
  derive(values);
  if (used_ == kMaxUsed || enumeration_budget_consults() != consulted) return derived_;
  std::copy(values.begin(), values.end(), keys_.begin() + static_cast<std::ptrdiff_t>(s * ranks_));
  filled_[s] = 1;
  ++used_;
  expected_[s] = derived_;
  return expected_[s];
}

}  // namespace collcheck
