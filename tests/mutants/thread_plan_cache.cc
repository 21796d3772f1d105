#include <map>
#include <vector>

#include "tests/mutants/mutant_kit.h"

// State that outlives one world size: each rank thread caches the ring's
// chunk layout in a thread_local map keyed on the element count only, as a
// library keeps per-thread scratch plans, but neither on the communicator nor
// on its size. A layout planned for p ranks is reused at a smaller p (a
// larger one finds too few chunks and plans afresh): its chunks then cover
// the buffer for p ranks, and the tail is never reduced. In a world whose
// rank threads live for one size (collcheck's thread world before issue 31)
// it is never caught; in a long-lived MPI rank, or NCCL proxy thread, it is.
// Its state is per thread: it does not declare that its ranks may be fibers
// of one thread (the simulated world, named, still catches it: its fibers
// share the one map).
MK_PLUGIN_THREADS("mutant: the chunk layout is cached per thread keyed on the count, not on the world size")

namespace {
thread_local std::map<size_t, std::vector<mk::Chunk>> plans;  // count -> chunks
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) {
    std::vector<mk::Chunk>& plan = plans[c->count];
    if (plan.size() < static_cast<size_t>(x.p())) {  // too few chunks: plan for this p
      plan.clear();
      for (int i = 0; i < x.p(); ++i) plan.push_back(mk::ring_chunk(c->count, x.p(), i, {}));
    }
    mk::RingBugs b;
    b.layout = &plan;
    mk::ring(x, c->recv, b);
  });
}
