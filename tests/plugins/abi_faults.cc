// Plugins that break the ABI or its rules, one per COLLCHECK_FAULT value. The
// plugin test checks that each gets a diagnosis (never a hang, never a pass).
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/mutants/mutant_kit.h"

#ifndef COLLCHECK_FAULT
#error "define COLLCHECK_FAULT"
#endif

#define FAULT_bad_version 1
#define FAULT_no_entry 2
#define FAULT_returns_error 3
#define FAULT_crashes 4
#define FAULT_never_returns 5
#define FAULT_leaks_request 6
#define FAULT_ignores_link_error 7
#define FAULT_all_crash 8
#define FAULT_exits_on_load 9
#define FAULT_exits_in_call 10
#define FAULT_order_over_capacity 11
#define FAULT_order_bad_rank 12
#define FAULT_fibers_but_sleeps 13
#define CAT(a, b) a##b
#define FAULT_ID(x) CAT(FAULT_, x)
#define FAULT FAULT_ID(COLLCHECK_FAULT)

extern "C" int collcheck_plugin_abi_version(void) {
  return FAULT == FAULT_bad_version ? 42 : COLLCHECK_PLUGIN_ABI_VERSION;  // newer than any collcheck
}

#if FAULT == FAULT_exits_on_load
// A library's init that ends the process, as a misconfigured runtime's would.
__attribute__((constructor)) static void end_the_process() { _exit(0); }
#endif

#if FAULT == FAULT_order_over_capacity || FAULT == FAULT_order_bad_rank
// A declared order that breaks the ABI: more entries than the capacity, or a
// rank that does not exist; the call itself is a correct ring.
extern "C" int collcheck_plugin_reduction_order(int p, size_t count, size_t index, int* postfix, size_t capacity) {
#if FAULT == FAULT_order_over_capacity
  (void)p, (void)count, (void)index, (void)postfix;
  return static_cast<int>(capacity) + 5;
#else
  const int n = mk::ring_order(p, count, index, postfix, capacity);
  if (n > 0) postfix[0] = 99999;
  return n;
#endif
}
#endif

#if FAULT == FAULT_fibers_but_sleeps
// Declares that its ranks may be fibers of one thread, and then sleeps on the
// host's clock, forever: in the simulated world that blocks the one thread.
extern "C" int collcheck_plugin_fiber_safe(void) { return 1; }
#endif

#if FAULT != FAULT_no_entry
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
#if FAULT == FAULT_returns_error
  if (c->count > 2) {
    l->set_error(l->ctx, "this plugin refuses counts above 2");
    return 7;
  }
#elif FAULT == FAULT_crashes
  if (c->count > 2 && l->rank == 1) std::raise(SIGSEGV);
#elif FAULT == FAULT_exits_in_call
  if (c->count > 2) std::exit(0);
#elif FAULT == FAULT_all_crash
  if (c->count > 2) std::raise(SIGSEGV);  // every rank's thread at about the same time
#elif FAULT == FAULT_never_returns || FAULT == FAULT_fibers_but_sleeps
  if (c->count > 2 && l->rank == 0) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
#elif FAULT == FAULT_leaks_request
  if (c->count > 2 && l->size > 1) {
    collcheck_request* r = nullptr;
    static char byte;
    l->irecv(l->ctx, (l->rank + 1) % l->size, c->tag_base + 9, &byte, 1, &r);  // never waited
  }
#elif FAULT == FAULT_ignores_link_error
  if (c->count > 2) {
    collcheck_request* r = nullptr;
    l->isend(l->ctx, l->rank, c->tag_base, c->send, 1, &r);  // to itself: rejected, and the error is ignored
  }
#endif
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv); });
}
#endif
