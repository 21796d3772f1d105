#include "tests/mutants/mutant_kit.h"

// max that lets a NaN operand win (NCCL's fmax drops it).
MK_PLUGIN("mutant: max lets NaN win")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::CombineFn combine = mk::harness_combine;
  if (c->op == COLLCHECK_MAX) {
    combine = [](const mk::Ctx& x, void* inout, const void* in, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        std::byte* a = x.at(inout, i);
        const std::byte* b = static_cast<const std::byte*>(in) + i * x.es();
        if (mk::is_nan(x.c->dtype, a)) continue;
        if (mk::is_nan(x.c->dtype, b)) {
          std::memcpy(a, b, x.es());
          continue;
        }
        x.l->combine(x.l->ctx, a, b, 1);
      }
    };
  }
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, {}, combine); });
}
