// Schedule perturbation: a Links wrapper that makes rare interleavings common.
// Seeded and bounded, it delays (one transfer in eight, each way) when one rank's transfers reach the transport
// (the rank posts a send or a receive up to kMaxPerturbDelay late) and when
// their completion becomes visible (test() reports "not yet" for up to that
// long after the transfer completed; wait() returns that much later), which
// changes the order in which a rank sees its transfers complete.
//
// Everything stays within the links' semantics: FIFO per (peer, tag) holds,
// sizes and buffers are unchanged, and every wait keeps its deadline. A correct all-reduce gives the same bits under any perturbation;
// one that relies on timing (a receive complete once the matching send is, a
// message from one peer before another's) fails where it did not before.
//
// The same seed gives the same decisions, transfer by transfer, on each rank;
// the timing those delays produce is the machine's, so a failure that needs a
// particular interleaving may still need a few runs to show (verify reports
// "fails k of N").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "impl/links.h"

namespace collcheck {

inline constexpr std::chrono::microseconds kMaxPerturbDelay{250};

// `inner` must outlive the wrapper. Decisions come from (seed, inner.rank()).
std::unique_ptr<Links> make_perturbed_links(Links& inner, uint64_t seed);

}  // namespace collcheck
