#include <map>
#include <mutex>
#include <utility>

#include "tests/mutants/mutant_kit.h"

// State kept across calls: each rank plans the ring's chunk layout (element
// offsets and lengths) once and caches the plan on its communicator, keyed on
// the world size and the message size in bytes, but not on the element count.
// A later call of the same byte size in a narrower dtype (float16 x 1, then
// int8 x 2) reuses the first call's plan: its chunks cover only the first
// elements, and the rest is never reduced. One call, or the same call
// repeated, is always right: only a sequence of calls shows it.
//
// The plugin ABI has no communicator handle; a call's sequence number on its
// communicator is tag_base >> 8, from 1 (plugin.h), so the cache starts over
// on every new communicator, as a per-communicator cache in a library would.
MK_PLUGIN("mutant: the chunk layout is cached per communicator keyed on bytes, not on the element count")

namespace {
std::mutex mu;
std::map<int, std::map<std::pair<int, size_t>, std::vector<mk::Chunk>>> plans;  // [rank][(p, bytes)]
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  if ((c->tag_base >> 8) == 1) {  // a new communicator (every call counts, count 0 and p 1 too)
    std::lock_guard lock(mu);
    plans[l->rank].clear();
  }
  return mk::run(c, l, [&](const mk::Ctx& x) {
    std::vector<mk::Chunk> plan;
    {
      std::lock_guard lock(mu);
      auto& mine = plans[x.rank()];
      auto [it, fresh] = mine.try_emplace({x.p(), c->count * c->dtype_size});
      if (fresh)
        for (int i = 0; i < x.p(); ++i) it->second.push_back(mk::ring_chunk(c->count, x.p(), i, {}));
      plan = it->second;
    }
    mk::RingBugs b;
    b.layout = &plan;
    mk::ring(x, c->recv, b);
  });
}
