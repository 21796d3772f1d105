#include "tests/mutants/mutant_kit.h"

// A rare race. Recursive doubling (p a power of two; the kit's ring
// otherwise): at each step a rank exchanges its partial result with partner
// rank ^ 2^k. It posts the receive and the send, waits for the send, and
// polls the receive for 20 us: the partner posts its receive and its send
// back to back, so the receive is almost always complete by then.
// When it is not (the partner was descheduled between its two posts, or its
// send was slow), a late-arrival path waits for it and then takes the
// partner's partial result as the combined one, dropping its own. The results
// are then wrong, and the ranks disagree.
//
// Without schedule perturbation this needs the partner preempted for 20 us
// between two adjacent posts; with it (verify's default), a delayed post or a
// late completion shows it.
MK_PLUGIN("mutant: recursive doubling whose late-arrival path drops its own partial result")

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) {
    const int p = x.p(), r = x.rank();
    if ((p & (p - 1)) != 0) {
      mk::ring(x, c->recv);
      return;
    }
    const size_t n = c->count;
    std::vector<std::byte> tmp(n * x.es() + 1);
    for (int mask = 1, step = 0; mask < p; mask <<= 1, ++step) {
      const int q = r ^ mask;
      collcheck_request* rr = mk::post(x, false, q, c->tag_base + static_cast<uint64_t>(step), tmp.data(), n);
      collcheck_request* sr = mk::post(x, true, q, c->tag_base + static_cast<uint64_t>(step), c->recv, n);
      mk::wait(x, sr);
      // A poll bounded by 20 us of the world's clock (ABI version 2's
      // now_ns: virtual time in the simulated world, where each test that
      // finds the receive pending moves it by 1 us; the host's clock with
      // threads). A bound in the host's clock made the simulated world's
      // replay of this race depend on how busy the host was: CI saw it fail
      // k of 20. With threads, 200 us made the race too rare for the
      // shrinker on a busy CI host (seed 1 stopped at count 466).
      int done = 0;
      const uint64_t until = l->now_ns(l->ctx) + 20'000;
      while (!done && l->now_ns(l->ctx) < until)
        if (l->test(l->ctx, rr, &done) != 0) throw mk::LinkFailed{};
      mk::wait(x, rr);
      if (!done) {
        // The late-arrival path: the bug.
        std::memcpy(c->recv, tmp.data(), n * x.es());
        continue;
      }
      // Lower rank's partial result first, so that both partners compute the
      // same bits.
      if (r < q) {
        mk::harness_combine(x, c->recv, tmp.data(), n);
      } else {
        mk::harness_combine(x, tmp.data(), c->recv, n);
        std::memcpy(c->recv, tmp.data(), n * x.es());
      }
    }
    l->postdiv(l->ctx, c->recv, n);
  });
}
