#include <bit>

#include "tests/mutants/mutant_kit.h"

// A ring whose bfloat16 addition stores the float sum by dropping its low 16
// bits (truncation toward zero) instead of rounding to nearest even: a classic
// hand-written kernel shortcut. The error per step is below one ulp, so from
// p = 8 on every result sits inside the all-orders error bound; the order the
// ring declares (collcheck_plugin_reduction_order) gives the exact bits.
MK_PLUGIN("mutant: bfloat16 sums truncated instead of rounded")

namespace {
float bf16(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

void truncating_combine(const mk::Ctx& x, void* inout, const void* in, size_t n) {
  const int op = x.c->op;
  const bool sum = op == COLLCHECK_SUM || op == COLLCHECK_AVG || op == COLLCHECK_PREMULSUM;
  if (x.c->dtype != COLLCHECK_BFLOAT16 || !sum) return mk::harness_combine(x, inout, in, n);
  auto* a = static_cast<uint16_t*>(inout);
  const auto* b = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i) {
    const float s = bf16(a[i]) + bf16(b[i]);
    a[i] = s != s ? uint16_t{0x7fc0} : static_cast<uint16_t>(std::bit_cast<uint32_t>(s) >> 16);
  }
}
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, {}, truncating_combine); });
}

extern "C" int collcheck_plugin_reduction_order(int p, size_t count, size_t index, int* postfix, size_t capacity) {
  return mk::ring_order(p, count, index, postfix, capacity);
}
