// A verify job's flags checked and turned into its options (verify_job.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <tuple>

#include "harness/check/oracle.h"
#include "harness/model/user_values.h"
#include "harness/model/yaml_input.h"
#include "harness/model/size.h"
#include "properties/generators.h"
#include "properties/verify_job.h"

namespace collcheck {

namespace {

// The flags of the case space, the budget and the replay line, checked.
VerifyOptions verify_options(const VerifyJob& f, const Session& session) {
  VerifyOptions o;
  o.impl_spec = f.impl;
  o.cases = parse_count(f.cases, "--cases");
  if (o.cases == 0) throw UsageError("--cases must be >= 1, got 0");
  o.seed = f.seed.empty() ? (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()
                         : parse_seed(f.seed, "--seed");
  const int limit = session.max_ranks(kMaxThreadRanks);
  const int max_ranks = f.max_ranks == -1 ? (session.max_ranks(64)) : f.max_ranks;
  if (max_ranks < 1 || max_ranks > limit)
    throw UsageError(fmt::format("--max-ranks must be between 1 and {} for {}, got {}", limit,
                                 session.is_mpi() ? "this MPI world (its process count)" : "the thread world", max_ranks));
  o.space.max_ranks = max_ranks;
  o.space.max_count = parse_count(f.max_count, "--max-count");
  if (o.space.max_count > (size_t{1} << 24))
    throw UsageError(fmt::format("--max-count must be at most 16777216 (use sweep for large buffers), got {}",
                                 o.space.max_count));
  o.space.large_bytes = parse_size(f.large_bytes, "--large-bytes");
  if (o.space.large_bytes > (size_t{1} << 28))
    throw UsageError(fmt::format("--large-bytes must be at most 268435456 (256M), got {}", o.space.large_bytes));
  o.space.dtypes = parse_dtype_list(f.dtypes, "--dtypes");
  o.space.ops = parse_op_list(f.ops, "--ops");
  if (f.data != "all") {
    for (auto c : parse_data_class_list(f.data, "--data")) {
      if (c == DataClass::Mixed) throw UsageError("--data mixed is for sweep; allowed here: exact, random, extreme, special, wrap, or all");
      o.space.data.push_back(c);
    }
  }
  if (!(f.time_budget_s >= 0)) throw UsageError(fmt::format("--time-budget must be >= 0 seconds, got {}", f.time_budget_s));
  o.time_budget_s = f.time_budget_s;
  // Deadlines count in milliseconds: a shorter one would be 0 ms, which no call meets.
  if (!(f.timeout_s >= 0.001) || f.timeout_s > 86400)
    throw UsageError(fmt::format("--timeout must be in [0.001, 86400] seconds, got {}", f.timeout_s));
  // A failure's replay line runs under the same deadline.
  if (f.timeout_s != VerifyJob{}.timeout_s) o.run_flags += fmt::format(" --timeout {}", f.timeout_s);
  if (f.one_of_ranks < kOneOfAlwaysRanks || f.one_of_ranks > kOneOfMaxRanks)
    throw UsageError(fmt::format("--one-of-ranks must be {} to {}, got {}", kOneOfAlwaysRanks, kOneOfMaxRanks,
                                 f.one_of_ranks));
  set_one_of_ranks(f.one_of_ranks);  // before any check, and before the isolated child is forked
  if (f.one_of_ranks != kOneOfDefaultRanks) o.run_flags += fmt::format(" --one-of-ranks {}", f.one_of_ranks);
  if (f.isolate != "auto" && f.isolate != "on" && f.isolate != "off")
    throw UsageError(fmt::format("--isolate must be auto, on or off, got '{}'", f.isolate));
  for (const auto& [flag, value, into] : {std::tuple{"--sequences", &f.sequences, &o.space.sequences},
                                          std::tuple{"--perturb", &f.perturb, &o.space.perturb}}) {
    if (*value != "on" && *value != "off") throw UsageError(fmt::format("{} must be on or off, got '{}'", flag, *value));
    *into = *value == "on";
  }
  if (!f.repeat.empty()) {
    o.repeat = parse_count(f.repeat, "--repeat");
    if (o.repeat < 1 || o.repeat > 100000)
      throw UsageError(fmt::format("--repeat must be in 1..100000, got {}", o.repeat));
  }
  return o;
}

// --replay TOKEN or @FILE (several tokens, one per line: the earlier cases
// run first, once each, and the last is the case).
void read_replay_tokens(const VerifyJob& f, VerifyOptions& o) {
  std::string token = f.replay;
  if (token[0] == '@') {  // a token too long for the command line, in a file (bounded: a token is a few KB)
    token = read_input_file<UsageError>(token.substr(1), size_t{1} << 20, "a file holding a replay token",
                                                   "no flag");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  }
  // A file may hold several tokens, one per line (a failure that depends on
  // earlier cases): those run first, once each, and the last is the case.
  std::vector<std::string> tokens;
  for (size_t at = 0; at <= token.size();) {
    const size_t nl = std::min(token.find('\n', at), token.size());
    std::string t = token.substr(at, nl - at);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    if (!t.empty()) tokens.push_back(std::move(t));
    at = nl + 1;
  }
  if (tokens.empty()) throw UsageError("--replay: no token given");
  if (tokens.size() > 1 && f.replay[0] != '@')
    throw UsageError("--replay: one token on the command line; several (one per line) only in a file, @FILE");
  for (size_t k = 0; k < tokens.size(); ++k) {
    try {
      Case c = decode_case(tokens[k]);
      if (k + 1 < tokens.size()) o.replay_before.push_back(std::move(c));
      else o.replay = std::move(c);
    } catch (const std::invalid_argument& e) {
      throw UsageError(tokens.size() > 1 ? fmt::format("--replay: line {} of {}: {}", k + 1, f.replay.substr(1), e.what())
                                         : fmt::format("--replay: {}", e.what()));
    }
  }
}

}  // namespace

void plan_verify(VerifyJob& job, const Session& session) {
  job.o = verify_options(job, session);
  job.o.should_stop = job.should_stop;
  if (!job.replay.empty()) read_replay_tokens(job, job.o);
  job.max_ranks_given = job.max_ranks != -1;
  if (job.schedules < 1 || job.schedules > 1000)
    throw UsageError(fmt::format("--schedules must be 1 to 1000, got {}", job.schedules));
  if (job.jobs < 0 || job.jobs > 256) throw UsageError(fmt::format("--jobs must be 0 (one per core) to 256, got {}", job.jobs));
  job.planned = true;
}

// What the implementations support, and what a case or a run needs in memory
// (verify.h).
std::map<std::string, std::vector<std::string>> restrict_space(CaseSpace& space, const std::vector<ImplPtr>& impls) {
  std::map<std::string, std::vector<std::string>> skipped;
  for (auto t : space.dtypes)
    for (auto op : space.ops)
      for (const auto& x : impls)
        if (auto why = x->unsupported(t, op)) {
          space.excluded.emplace_back(t, op);
          skipped[fmt::format("{}: {}", x->name(), *why)].push_back(fmt::format("{}/{}", dtype_name(t), op_name(op)));
          break;
        }
  auto excluded = [&](DType t, RedOp op) {
    return std::find(space.excluded.begin(), space.excluded.end(), std::pair{t, op}) != space.excluded.end();
  };
  std::erase_if(space.dtypes, [&](DType t) {
    return std::all_of(space.ops.begin(), space.ops.end(), [&](RedOp op) { return excluded(t, op); });
  });
  std::erase_if(space.ops, [&](RedOp op) {
    return std::all_of(space.dtypes.begin(), space.dtypes.end(), [&](DType t) { return excluded(t, op); });
  });
  return skipped;
}

uint64_t case_memory_needed(const Case& c, int ranks_here, size_t npeers) {
  const uint64_t per_byte = 11 + npeers;
  uint64_t per_rank = checked_mul(checked_mul(c.count, dtype_size(c.dtype)).value_or(~uint64_t{0}), per_byte)
                          .value_or(~uint64_t{0});
  for (const Case& n : c.then)
    per_rank = checked_add(per_rank, checked_mul(n.count, 2 * dtype_size(n.dtype)).value_or(~uint64_t{0}))
                   .value_or(~uint64_t{0});
  return checked_mul(per_rank, static_cast<uint64_t>(std::min(ranks_here, c.p))).value_or(~uint64_t{0});
}

uint64_t verify_memory_needed(const CaseSpace& space, int ranks_here, size_t npeers) {
  uint64_t worst = 0;
  for (DType t : space.dtypes) {
    // The largest single call: a large count, or max_count with a sequence
    // of 3 more calls (p <= 16) behind it.
    Case c;
    c.dtype = t;
    c.p = space.max_ranks;
    c.count = space.max_count;
    for (size_t x : large_counts(t, space.large_bytes)) c.count = std::max(c.count, x);
    worst = std::max(worst, case_memory_needed(c, ranks_here, npeers));
    if (space.sequences) {
      Case s;
      s.dtype = t;
      s.p = std::min(space.max_ranks, 16);
      s.count = space.max_count;
      s.then.assign(3, s);
      worst = std::max(worst, case_memory_needed(s, ranks_here, npeers));
    }
  }
  return worst;
}

}  // namespace collcheck
