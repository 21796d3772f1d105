// The expectations of one call's elements, remembered by their inputs. An
// element's expectation is a function of its p inputs alone (expect_element),
// so an element whose inputs repeat an earlier element's, rank for rank, gets
// the earlier expectation instead of a second derivation. Inputs repeat where
// a data class draws from a few values: exact fp8 sums (three values a rank),
// extremes and special values; there a large call's check was most of a
// verify run's time. Where they do not repeat (random data) the memo notices
// within its first lookups and steps aside for the rest of the call.
//
// The one thing besides the inputs that an expectation can depend on is the
// thread's EnumerationBudget (what earlier elements left of it): an
// expectation that consulted the budget is never remembered, so every
// element's expectation, and the budget's use, are what they were without
// the memo.
//
// Each expectation it derives comes from the SmallSumOracle where that
// answers (float sums over 2 to 5 ranks: the same expectation, without the
// full way's general enumeration), else from expect_element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "harness/check/oracle.h"
#include "harness/check/small_sum.h"

namespace collcheck {

class ExpectationMemo {
 public:
  // For calls of `count` elements over `ranks` ranks; a call too small to
  // repay the table gets none (every lookup derives).
  ExpectationMemo(const Reduction& red, size_t ranks, size_t count);
  // expect_element(red, values), from memory where these values came before.
  // The reference stays valid until the next call.
  const Expectation& expect(std::span<const uint64_t> values);
  size_t hits() const { return hits_; }
  size_t lookups() const { return lookups_; }
  bool active() const { return active_; }

  // Calls below this many elements take no memo.
  static constexpr size_t kMinCount = 16384;

 private:
  size_t find(std::span<const uint64_t> values, uint64_t hash) const;
  // expect_element's answer into derived_: by the small sum's way where it
  // answers (a float sum over 2 to 5 ranks), else the full way.
  void derive(std::span<const uint64_t> values);

  const Reduction& red_;
  size_t ranks_;
  SmallSumOracle small_;
  bool active_ = false;
  size_t lookups_ = 0, hits_ = 0, used_ = 0;
  size_t slot_mask_ = 0;
  std::vector<uint64_t> keys_;          // slot s's inputs at [s * ranks_, (s + 1) * ranks_)
  std::vector<uint8_t> filled_;         // per slot
  std::vector<Expectation> expected_;   // per slot
  Expectation derived_;                 // the last one not remembered
};

}  // namespace collcheck
