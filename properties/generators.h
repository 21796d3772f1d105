// RapidCheck generators of property cases. The gtest suites (RC_GTEST_PROP)
// and `collcheck verify` draw from the same generator.
//
// A case is driven by RapidCheck's size (0..100): world size and count grow
// with it, and counts are weighted toward the edges where all-reduce bugs live
// (0, 1, below p, multiples of p and one either side, powers of two and chunk
// boundaries). Its shrinks, in the order they are tried: fewer ranks (one, half, every
// prefix of the ranks, then each rank left out, then smaller nodes), fewer
// elements (short prefixes and suffixes, then halves and smaller blocks), out-of-place instead of in-place,
// scalar 1, then each value made simpler (0, then 1, then fewer significant
// bits). Dtype and op never shrink: the minimal case keeps the failing pair.
// A sequence shrinks first: to its first call alone, without one call, async
// calls made sync; later the further calls' counts (0, 1, half) and values;
// last, the schedule unperturbed (verify steps back if that only fails by chance).
#pragma once

#include <rapidcheck.h>

#include <vector>

#include "harness/model/data.h"
#include "properties/case.h"

namespace collcheck {

struct CaseSpace {
  // World size: up to 8 in most cases (growing with RapidCheck's size), from 9
  // to 16 in 15 % of them and from 17 to max_ranks in 3 % (bugs that need
  // p >= 9: a block index in three bits, a table sized 8), each where
  // max_ranks reaches it.
  int max_ranks = 64;
  // Count: up to max_count, except one case in 100 that draws a large count
  // near a power-of-two byte size from 64 KiB to large_bytes, +-1 element
  // (protocol switches, slicing and pipelining thresholds). 0 turns that off.
  size_t max_count = 4096;
  size_t large_bytes = size_t{1} << 20;
  std::vector<DType> dtypes{kAllDTypes.begin(), kAllDTypes.end()};
  std::vector<RedOp> ops{kAllOps.begin(), kAllOps.end()};
  // Pairs never drawn (an implementation cannot reduce them). Every dtype must
  // keep at least one op.
  std::vector<std::pair<DType, RedOp>> excluded;
  // Input distributions to draw from; empty means all that fit the dtype
  // (wrap only for integers).
  std::vector<DataClass> data;
  // One case in six (p <= 16) is a sequence of 2 to 4 calls on one
  // communicator, each the previous one with one thing changed (Case::then).
  bool sequences = true;
  // One case in ten (2 <= p <= 16) perturbs the schedule (Case::perturb).
  bool perturb = true;
  // Each case (p >= 2) runs on nodes of 1 to p ranks (Case::ranks_per_node),
  // or on the world's own nodes (0),
  // for an implementation that follows the nodes (hierarchical). Drawn last,
  // so the other cases of a seed stay as they are without it.
  bool nodes = false;
};

rc::Gen<Case> gen_case(const CaseSpace& space);

// The shrink candidates of `c`, lazily, in the order described above
// (shrink.cc).
rc::Seq<Case> case_shrinks(const Case& c);
// `c` with its shrinks, and theirs: a candidate that simplified one value
// resumes the value stage where it was (shrink.cc, Resume).
rc::Shrinkable<Case> shrinkable_case(Case c);
// How complicated element bits are (0 for zero, 1 for one, then more
// significant bits or a larger exponent, or a larger magnitude), and the
// simpler values shrinking tries for them, simplest first.
double simplicity_key(DType t, uint64_t v);
std::vector<uint64_t> simpler_values(DType t, uint64_t v);

// The counts generation favours for world size p, up to `max_count`.
std::vector<size_t> edge_counts(int p, size_t max_count);
// The large counts it draws now and then: 2^k bytes of the dtype +-1 element,
// for 2^k from 64 KiB to `large_bytes`.
std::vector<size_t> large_counts(DType t, size_t large_bytes);

}  // namespace collcheck
