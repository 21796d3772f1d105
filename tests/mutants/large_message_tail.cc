#include "tests/mutants/mutant_kit.h"

// A protocol switch at 64 KiB: larger buffers are pipelined through the ring in
// 64 KiB slices, and the slice count is computed with floor division, so the
// last count % slice elements are never reduced. Every buffer up to 64 KiB, and
// every multiple of the slice, is right.
MK_PLUGIN("mutant: above 64 KiB, the tail after the last full slice is not reduced")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) {
    const size_t bytes = c->count * c->dtype_size;
    if (bytes <= (size_t{64} << 10)) {
      mk::ring(x, c->recv);
      return;
    }
    const size_t slice = (size_t{64} << 10) / c->dtype_size;
    for (size_t s = 0; s < c->count / slice; ++s) {
      collcheck_call part = *c;
      part.count = slice;
      part.recv = x.at(c->recv, s * slice);
      part.send = part.recv;
      part.tag_base = c->tag_base + 2 * (s + 1);
      mk::ring(mk::Ctx{&part, l}, part.recv);
    }
  });
}
