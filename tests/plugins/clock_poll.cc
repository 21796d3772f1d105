// A correct ring (tests/mutants/mutant_kit.h) whose waits first poll test()
// for up to 50 us of the world's clock (links->now_ns), as a latency-tuned
// library spins before it blocks, and which checks that the world's two
// clocks agree: now_ns() + ns_left() is the call's deadline at every read
// (exactly in the simulated world, where time stands still between waits;
// within 5 ms in the thread world, where the two reads are moments apart).
// Built as ABI version 2 (clock_poll.so) and as version 1 (CLOCK_POLL_V1:
// clock_poll_v1.so, which never reads now_ns and polls 100 times): collcheck
// runs both.
#include <cstdio>

#include "tests/mutants/mutant_kit.h"

namespace {

struct Wrapped {
  const collcheck_links* inner;
  uint64_t deadline = 0;  // now_ns() + ns_left() at the call's start
  bool clocks_disagree = false;
};

Wrapped& self(void* ctx) { return *static_cast<Wrapped*>(ctx); }

#ifndef CLOCK_POLL_V1
void check_clocks(Wrapped& w) {
  const uint64_t left = w.inner->ns_left(w.inner->ctx);
  if (left == 0) return;  // past the deadline: nothing to compare
  const uint64_t d = w.inner->now_ns(w.inner->ctx) + left;
  const uint64_t diff = d > w.deadline ? d - w.deadline : w.deadline - d;
  if (diff > 5'000'000 && !w.clocks_disagree) {
    w.clocks_disagree = true;
    char msg[200];
    std::snprintf(msg, sizeof msg, "now_ns() + ns_left() moved by %llu ns within one call: the world's two clocks disagree",
                  static_cast<unsigned long long>(diff));
    w.inner->set_error(w.inner->ctx, msg);
  }
}
#endif

int poll_then_wait(void* ctx, collcheck_request* r) {
  Wrapped& w = self(ctx);
  int done = 0;
#ifdef CLOCK_POLL_V1
  for (int i = 0; i < 100 && !done; ++i)
    if (w.inner->test(w.inner->ctx, r, &done) != 0) break;
#else
  const uint64_t until = w.inner->now_ns(w.inner->ctx) + 50'000;
  while (!done && w.inner->now_ns(w.inner->ctx) < until) {
    check_clocks(w);
    if (w.inner->test(w.inner->ctx, r, &done) != 0) break;
  }
#endif
  return w.inner->wait(w.inner->ctx, r);  // frees the request, done or not
}

// The other link functions, passed through.
int isend(void* ctx, int peer, uint64_t tag, const void* b, size_t n, collcheck_request** r) {
  return self(ctx).inner->isend(self(ctx).inner->ctx, peer, tag, b, n, r);
}
int irecv(void* ctx, int peer, uint64_t tag, void* b, size_t n, collcheck_request** r) {
  return self(ctx).inner->irecv(self(ctx).inner->ctx, peer, tag, b, n, r);
}
int test(void* ctx, collcheck_request* r, int* done) { return self(ctx).inner->test(self(ctx).inner->ctx, r, done); }
void cancel(void* ctx, collcheck_request* r) { self(ctx).inner->cancel(self(ctx).inner->ctx, r); }
void set_error(void* ctx, const char* m) { self(ctx).inner->set_error(self(ctx).inner->ctx, m); }
void combine(void* ctx, void* io, const void* in, size_t n) { self(ctx).inner->combine(self(ctx).inner->ctx, io, in, n); }
void premul(void* ctx, void* o, const void* in, size_t n) { self(ctx).inner->premul(self(ctx).inner->ctx, o, in, n); }
void postdiv(void* ctx, void* b, size_t n) { self(ctx).inner->postdiv(self(ctx).inner->ctx, b, n); }
uint64_t ns_left(void* ctx) { return self(ctx).inner->ns_left(self(ctx).inner->ctx); }

}  // namespace

extern "C" int collcheck_plugin_abi_version(void) {
#ifdef CLOCK_POLL_V1
  return 1;
#else
  return COLLCHECK_PLUGIN_ABI_VERSION;
#endif
}

extern "C" const char* collcheck_plugin_name(void) { return "clock_poll"; }

// Its ranks may be fibers of one thread; the v1 build exports the function
// but answers 0 (only 1 declares it), so it runs as threads unless named.
extern "C" int collcheck_plugin_fiber_safe(void) {
#ifdef CLOCK_POLL_V1
  return 0;
#else
  return 1;
#endif
}

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  Wrapped w{l};
#ifndef CLOCK_POLL_V1
  w.deadline = l->now_ns(l->ctx) + l->ns_left(l->ctx);
#endif
  collcheck_links mine{&w,     l->rank,   l->size, isend,   irecv,   test,    poll_then_wait,
                       cancel, set_error, combine, premul,  postdiv, ns_left, nullptr};
  const int rc = mk::run(c, &mine, [](const mk::Ctx& x) { mk::ring(x, x.c->recv); });
  return w.clocks_disagree ? 1 : rc;
}
