// A property case: one all-reduce call as pure data. World size, dtype, op (with
// the pre-multiplier of premulsum), count, in-place or not, and every rank's
// input. Inputs come from a data class and a seed (cheap to send and rebuild
// anywhere) or are explicit element bits (what shrinking produces).
//
// A case may go on with more calls on the same communicator (`then`): other
// dtypes, ops, counts and placements, sync and async, several async calls
// outstanding at once. That is where state an implementation keeps across calls
// shows: a cache keyed on part of the call, a buffer sized by the first call.
// And it may perturb the schedule (`perturb`): seeded, bounded delays of the
// implementation's transfers, which make rare interleavings common.
//
// A case round-trips through a one-word replay token, so that a failure prints
// one command line that replays exactly that case:
//   v1:p2:float32:sum:s1:n3:oop:x:3f800000.0.40400000/0.0.3f800000
//   v1:p4:int8:avg:s1:n1000:ip:d:wrap:9e3779b97f4a7c15
// (fields: version, ranks, dtype, op, scalar, count, oop|ip, then either
// x:<rank>/<rank>/... with '.'-separated hex element bits, <bits>*<n> for a
// run of n equal ones, or d:<class>:<seed>, followed by :w<p>:<rank.rank...>:<offset>
// when shrinking kept part of a seeded world.
// The scalar is a decimal or a C99 hex float.) Then, comma-separated, the
// optional parts: z<hex> (the perturbation seed) and each further call as
//   <dtype>:<op>:s<scalar>:n<count>:oop|ip:sync|async<defer>:<inputs>
// e.g. v1:p4:float32:sum:s1:n6:oop:d:exact:1f,z9,float16:sum:s1:n12:ip:async1:d:random:2
// and h<ranks per node> after the first call (and z) when the case sets them:
// v1:p6:float32:sum:s1:n9:oop:d:random:5,h2
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/model/data.h"
#include "impl/semantics.h"

namespace collcheck {

struct Case {
  int p = 1;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  double scalar = 1.0;  // premulsum's multiplier (ignored by other ops)
  size_t count = 0;
  bool inplace = false;
  // Seeded inputs (explicit == false)...
  DataClass data = DataClass::Exact;
  uint64_t seed = 0;
  // ...as shrinking leaves them (fewer ranks, a shorter buffer), which keeps
  // the token short: element i of rank r is element seed_offset + i of rank
  // seed_ranks[r] of the seeded world of seed_p ranks (0: p, empty: 0..p-1).
  int seed_p = 0;
  std::vector<int> seed_ranks;
  size_t seed_offset = 0;
  // ...or explicit ones: values[rank][i], element bits.
  bool explicit_values = false;
  std::vector<std::vector<uint64_t>> values;
  // The calls made after this one on the same communicator, in order: each has
  // this case's p and no `then` of its own.
  std::vector<Case> then;
  // As a call of `then`: issued with all_reduce_async, and waited once `defer`
  // more calls have been issued (or, past the last call, at the end, latest
  // issued first).
  bool async = false;
  int defer = 0;
  // Nonzero: the seed of the schedule perturbation of every call of the case
  // (impl/perturbed_links.h).
  uint64_t perturb = 0;
  // Nonzero: the ranks run as nodes of this many consecutive ranks (rank r on
  // node r / ranks_per_node, impl/links.h: node_links), the topology a
  // hierarchical algorithm follows. 0: the world's own nodes (threads: one).
  int ranks_per_node = 0;

  uint64_t input(int rank, size_t i) const;
  // Turns seeded inputs into explicit ones (a no-op if already explicit).
  void make_explicit();
  // Each rank's input as a byte buffer of the dtype.
  std::vector<std::vector<std::byte>> input_buffers() const;
  Reduction reduction() const { return resolve_reduction(dtype, op, p, scalar); }
  // The number of calls of the sequence (1 + then.size()) and the total
  // number of elements each rank contributes over all of them.
  size_t calls() const { return 1 + then.size(); }
  size_t total_count() const;
};

// The largest p and count a replay token may ask for.
inline constexpr int kMaxCaseRanks = 4096;
inline constexpr size_t kMaxSequenceCalls = 16;

bool operator==(const Case& a, const Case& b);

std::string encode_case(const Case& c);
// Throws std::invalid_argument naming the field that is malformed.
Case decode_case(std::string_view token);

// "p=2 float32 sum count=3 out-of-place, data exact seed 0x..." on one line.
std::string case_summary(const Case& c);
// "call 1", or "call 3 of the sequence (float16 sum count=12 ..., async ...)":
// call k (0-based) of the case, as reports name it.
std::string sequence_call_name(const Case& c, size_t k);
// The summary plus every rank's values in hex and decimal, at most
// `max_elements` per rank.
std::string describe_case(const Case& c, size_t max_elements = 16);

// Shrinking a sequence whose further calls have the first call's byte size
// (the same bytes in another dtype): every such call cut together to a
// prefix of `count` elements of the first call's size, so that the sizes
// stay equal (cutting one alone makes them differ, and a bug keyed on the
// byte size then passes). Nothing when no call has its size, or when
// `count` is not below the first call's count or fits no call's dtype.
std::optional<Case> calls_cut_together(const Case& c, size_t count);

}  // namespace collcheck
