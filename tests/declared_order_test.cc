// The declared-order replay (properties/call_checker.h, matches-declared-order)
// replays the elements that share an order a block at a time. It must judge
// them as one element at a time does: every element counted, and the first
// wrong one named, wherever it sits in its block or chunk. The right result
// here is made one element at a time, independently: each element's declared
// order (ring_reduction_order) folded with the dtype's own steps.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "harness/peers/implementation.h"
#include "impl/algorithm.h"
#include "impl/element_ops.h"
#include "properties/call_checker.h"

using namespace collcheck;
using collcheck::checking::CallChecker;

namespace {

// Rank 0's result as the ring declares it, element by element.
std::vector<std::byte> declared_result(const Case& c, const std::vector<std::vector<std::byte>>& in) {
  const Reduction red = c.reduction();
  std::vector<std::byte> out(c.count * dtype_size(c.dtype));
  std::vector<int> prog;
  for (size_t i = 0; i < c.count; ++i) {
    prog.clear();
    ring_reduction_order(c.p, c.count, i, {}, prog);
    std::vector<uint64_t> stack;
    for (int op : prog) {
      if (op >= 0) {
        stack.push_back(premul_bits(red, load_element(c.dtype, in[static_cast<size_t>(op)].data(), i)));
      } else {
        const uint64_t b = stack.back();
        stack.pop_back();
        stack.back() = combine_bits(c.dtype, red.combine, stack.back(), b);
      }
    }
    store_element(c.dtype, out.data(), i, stack.at(0));
  }
  return out;
}

}  // namespace

TEST(DeclaredOrder, BlocksJudgeAsOneElementAtATimeAndNameTheFirstWrongElement) {
  const uint64_t fresh = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  std::printf("[ seed    ] %#llx\n", static_cast<unsigned long long>(fresh));
  int named = 0, tighter = 0;
  for (DType t : {DType::Float32, DType::Float16, DType::BFloat16, DType::Fp8E4M3}) {
    Case c;
    c.p = 9;  // above the exact one-of sets: a last-bit change stays within the oracle's bound
    c.dtype = t;
    c.op = RedOp::Sum;
    c.count = 1000;  // chunks of about 111 elements; blocks of up to 256
    c.data = DataClass::Random;
    c.seed = fresh;
    const auto inputs = c.input_buffers();
    RunConfig cfg;
    cfg.impl = reference_implementation("ring");
    auto right = declared_result(c, inputs);
    {
      CaseOutcome out;
      CallChecker ch(c, c, inputs, cfg, out, "");
      const auto f = ch.oracle(right.data());
      EXPECT_FALSE(f.has_value()) << dtype_name(t) << ": " << (f ? f->detail : "");
      EXPECT_EQ(out.order_checked, c.count) << dtype_name(t);
    }
    // One element one step off (its last bit), at a block's or a chunk's
    // edge and inside them; a second one later must not be named instead.
    for (size_t k : {size_t{0}, size_t{1}, size_t{110}, size_t{111}, size_t{255}, size_t{256}, size_t{257}, size_t{600},
                     size_t{999}}) {
      auto wrong = right;
      const auto bump = [&](size_t i) {
        store_element(t, wrong.data(), i, load_element(t, wrong.data(), i) ^ 1);
      };
      bump(k);
      if (k + 7 < c.count) bump(k + 7);
      CaseOutcome out;
      CallChecker ch(c, c, inputs, cfg, out, "");
      const auto f = ch.oracle(wrong.data());
      ASSERT_TRUE(f.has_value()) << dtype_name(t) << " element " << k;
      if (f->property == "agrees-with-oracle") {  // this element's bound was tighter than one step
        ++tighter;
        continue;
      }
      ++named;
      EXPECT_EQ(f->property, "matches-declared-order") << f->detail;
      EXPECT_NE(f->detail.find("element [" + std::to_string(k) + "] on rank 0"), std::string::npos)
          << dtype_name(t) << " element " << k << "\n" << f->detail;
      EXPECT_EQ(out.order_checked, k + 1) << dtype_name(t) << " element " << k;
    }
  }
  std::printf("[ judged  ] %d wrong elements named by the replay, %d failed the oracle's bound first\n", named, tighter);
  EXPECT_GE(named, 27);  // of 36: the oracle's bound holds one step for most
}
