// Plugins that break the ABI or its rules, one per COLLCHECK_FAULT value. The
// plugin test checks that each gets a diagnosis (never a hang, never a pass).
#include <csignal>
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
#define CAT(a, b) a##b
#define FAULT_ID(x) CAT(FAULT_, x)
#define FAULT FAULT_ID(COLLCHECK_FAULT)

extern "C" int collcheck_plugin_abi_version(void) {
  return FAULT == FAULT_bad_version ? COLLCHECK_PLUGIN_ABI_VERSION + 41 : COLLCHECK_PLUGIN_ABI_VERSION;
}

#if FAULT != FAULT_no_entry
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
#if FAULT == FAULT_returns_error
  if (c->count > 2) {
    l->set_error(l->ctx, "this plugin refuses counts above 2");
    return 7;
  }
#elif FAULT == FAULT_crashes
  if (c->count > 2 && l->rank == 1) std::raise(SIGSEGV);
#elif FAULT == FAULT_all_crash
  if (c->count > 2) std::raise(SIGSEGV);  // every rank's thread at about the same time
#elif FAULT == FAULT_never_returns
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
