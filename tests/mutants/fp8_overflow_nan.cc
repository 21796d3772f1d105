#include "tests/mutants/mutant_kit.h"

// fp8 sums that overflow give NaN instead of saturating to the largest
// finite value (conversion without __NV_SATFINITE).
#include <cstdint>

MK_PLUGIN("mutant: fp8 overflow gives NaN instead of saturating")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::CombineFn combine = mk::harness_combine;
  const bool fp8 = c->dtype == COLLCHECK_FP8_E4M3 || c->dtype == COLLCHECK_FP8_E5M2;
  if (fp8 && c->op != COLLCHECK_PROD && c->op != COLLCHECK_MAX && c->op != COLLCHECK_MIN) {
    combine = [](const mk::Ctx& x, void* inout, const void* in, size_t n) {
      const float max = x.c->dtype == COLLCHECK_FP8_E4M3 ? 448.0f : 57344.0f;
      auto* a = static_cast<uint8_t*>(inout);
      const auto* b = static_cast<const uint8_t*>(in);
      for (size_t i = 0; i < n; ++i) {
        const float s = mk::fp8_to_float(x.c->dtype, a[i]) + mk::fp8_to_float(x.c->dtype, b[i]);
        uint8_t one = b[i];
        x.l->combine(x.l->ctx, &a[i], &one, 1);
        if (s > max || s < -max) a[i] = 0x7f;  // NaN in both formats
      }
    };
  }
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, {}, combine); });
}
