// A correct ring that declares its ranks may be fibers of one thread
// (collcheck_plugin_fiber_safe returns 1) and may not: each call first meets
// the call's other ranks at a barrier of its own, a real mutex and condition
// variable, as a library's shared-memory rendezvous would. As threads that
// works; as fibers the first rank to arrive blocks the one thread, and no
// other rank can arrive. collcheck must then stop with exit 3 and say so
// (harness/world/sim_watch.h), not hang (tests/sim_world_test.cc).
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "tests/mutants/mutant_kit.h"

namespace {

std::mutex mu;
std::condition_variable cv;
int arrived = 0;
unsigned long long generation = 0;

// Every rank of the call arrives, or 120 s of wall time pass (false).
bool meet(int size) {
  std::unique_lock lk(mu);
  const unsigned long long gen = generation;
  if (++arrived == size) {
    arrived = 0;
    ++generation;
    cv.notify_all();
    return true;
  }
  return cv.wait_for(lk, std::chrono::seconds(120), [&] { return generation != gen; });
}

}  // namespace

MK_PLUGIN("blocks_its_thread")

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  if (!meet(l->size)) {
    l->set_error(l->ctx, "blocks_its_thread: the other ranks never reached the barrier");
    return 1;
  }
  return mk::run(c, l, [](const mk::Ctx& x) { mk::ring(x, x.c->recv); });
}
