// The property rows: check_execution runs them over a case's execution, in
// order, and the first failure is the case's (properties.h: PropertyCheck).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "harness/run/communicator.h"
#include "properties/call_checker.h"
#include "properties/properties.h"

namespace collcheck {

using namespace checking;

CaseOutcome check_execution(const Case& c, const CaseExecution& st, const RunConfig& cfg) {
  CaseOutcome out;
  auto fail_with = [&](Failure f, const Case& call) {
    out.ok = false;
    // A documented deviation of this (dtype, op) is named, so that a reader
    // (and ci/gpu-check) can tell a known library bug from a new one.
    if (const Deviation* d = cfg.impl->deviation(call.dtype, call.op))
      f.detail += fmt::format("  note: {} has a documented deviation for {} {}: {}: {}\n", cfg.impl->name(),
                              dtype_name(call.dtype), op_name(call.op), d->name, d->doc);
    out.failure = std::move(f);
    return out;
  };
  auto fail = [&](std::string_view property, std::string detail) {
    return fail_with(Failure{std::string(property), std::move(detail)}, c);
  };
  const auto P = static_cast<size_t>(c.p);

  WorldRun run;
  run.ranks = st.ranks;
  run.hung = st.hung;
  if (st.hung) {
    out.world_broken = true;
    return fail("call-completes",
                fmt::format("  ranks did not return within {:.1f} s ({} calls of deadline {} ms each):\n{}",
                            std::chrono::duration<double>(st.limit).count(),
                            static_cast<int>(kNumCalls + c.then.size() + cfg.peers.size()), cfg.timeout.count(),
                            indent(run.failures())));
  }
  if (!run.ok()) {
    for (size_t r = 0; r < P; ++r) {
      if (!st.ranks[r].ok && st.failed_phase[r] == kHarnessFailed) {
        out.ok = false;
        out.harness_error = true;
        out.failure = Failure{"harness", fmt::format("  not a verdict on the implementation:\n{}", indent(run.failures()))};
        return out;
      }
    }
    // The implementation's own calls come first; a peer's failure is the peer's.
    int phase = 0;
    for (size_t r = 0; r < P; ++r)
      if (!st.ranks[r].ok && st.failed_phase[r] >= 0) phase = std::max(phase, st.failed_phase[r]);
    bool impl_failed = false;
    for (size_t r = 0; r < P; ++r) impl_failed |= !st.ranks[r].ok && st.failed_phase[r] == 0;
    if (impl_failed || phase == 0) return fail("call-completes", indent(run.failures(), "  "));
    return fail("peers-agree", fmt::format("  peer {} failed:\n{}", cfg.peers[static_cast<size_t>(phase - 1)]->name(),
                                           indent(run.failures())));
  }

  CheckContext ctx{c, st, cfg, out, st.inputs.at(0), c.reduction(), nullptr, {}, {}};
  const auto& rows = property_checks();
  for (size_t k = 0; k < rows.size(); ++k) {
    ctx.call = &c;
    auto f = rows[k].check(ctx);
    if (!f) continue;
    // The rows after the first failure, for the properties they find too
    // (shrink_keeps). Their counters go to a scratch outcome: a failing
    // case's counts are its first failure's, as before.
    CaseOutcome scratch;
    CheckContext rest{c, st, cfg, scratch, ctx.inputs, ctx.red, nullptr, ctx.peers, std::move(ctx.also)};
    for (size_t j = k + 1; j < rows.size(); ++j) {
      rest.call = &c;
      if (auto g = rows[j].check(rest)) rest.also.push_back(g->property);
    }
    for (auto& p : rest.also)
      if (p != f->property && std::find(out.also_failed.begin(), out.also_failed.end(), p) == out.also_failed.end())
        out.also_failed.push_back(std::move(p));
    return fail_with(*f, *ctx.call);
  }
  return out;
}

namespace {

std::string first_call_name(const Case& c) { return c.then.empty() ? std::string() : sequence_call_name(c, 0); }

// A row's first failure, and the call it is about; the properties its later
// checks fail go to x.also (shrink_keeps reads them).
class FirstFailure {
 public:
  explicit FirstFailure(CheckContext& x) : x_(x) {}
  void add(std::optional<Failure> f) {
    if (!f) return;
    if (first_) {
      x_.also.push_back(std::move(f->property));
      return;
    }
    first_ = std::move(f);
    call_ = x_.call;
  }
  std::optional<Failure> take() {
    if (first_) x_.call = call_;
    return std::move(first_);
  }

 private:
  CheckContext& x_;
  std::optional<Failure> first_;
  const Case* call_ = nullptr;
};

// The first call's buffers (and its repeat, other placement and async twin's).
std::optional<Failure> check_first_buffers(CheckContext& x) {
  CallChecker first(x.c, x.c, x.inputs, x.cfg, x.out, first_call_name(x.c));
  FirstFailure f(x);
  for (int k = 0; k < kNumCalls; ++k) f.add(first.buffers(x.st, static_cast<size_t>(k), kCallNames[k]));
  return f.take();
}

std::optional<Failure> check_first_result(CheckContext& x) {
  CallChecker first(x.c, x.c, x.inputs, x.cfg, x.out, first_call_name(x.c));
  PeerPass peers(x);
  return first.oracle(x.st.bufs[0][kPrimary].recv_data(), &peers);
}

std::optional<Failure> check_first_identical(CheckContext& x) {
  CallChecker first(x.c, x.c, x.inputs, x.cfg, x.out, first_call_name(x.c));
  return first.identical(x.st, kPrimary);
}

// An implementation that documents that it reduces in another order in place
// (Implementation::placement_reorders: Open MPI's nonoverlapping algorithm)
// may give the two placements different bits, but only where each result is
// one that NCCL's semantics (in any order) or its documented deviation allows.
// Those elements are counted under the placement's name, never silently
// accepted.
bool placements_differ_as_documented(CheckContext& x, const std::byte* other) {
  const Case& c = x.c;
  const auto placement = x.cfg.impl->placement_reorders();
  if (!placement) return false;
  const Deviation* d = x.cfg.impl->deviation(c.dtype, c.op);
  const std::byte* result = x.st.bufs[0][kPrimary].recv_data();
  const size_t P = static_cast<size_t>(c.p);
  std::vector<uint64_t> vals(P);
  size_t differing = 0;
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t a = load_element(c.dtype, result, i), b = load_element(c.dtype, other, i);
    if (a == b) continue;
    for (size_t r = 0; r < P; ++r) vals[r] = load_element(c.dtype, x.inputs[r].data(), i);
    const Expectation e = expect_element(x.red, vals);
    for (uint64_t v : {a, b})
      if (!judge(x.red, e, v).ok && !(d && d->allows(x.red, vals, v))) return false;
    ++differing;
  }
  x.out.deviant[*placement] += differing;
  return true;
}

// The repeat, the other placement and the async twin give the call's bits.
std::optional<Failure> check_twins(CheckContext& x) {
  const Case& c = x.c;
  const std::byte* result = x.st.bufs[0][kPrimary].recv_data();
  const size_t bytes = c.count * dtype_size(c.dtype);
  const struct {
    CallKind k;
    const char* property;
  } same[] = {{kRepeat, "deterministic"}, {kOtherPlacement, "inplace-equals-out-of-place"}, {kAsync, "async-wait-equals-sync"}};
  FirstFailure first(x);
  for (const auto& s : same) {
    for (size_t r = 0; r < static_cast<size_t>(c.p); ++r) {
      const std::byte* other = x.st.bufs[r][s.k].recv_data();
      if (std::memcmp(other, result, bytes) != 0 && !(s.k == kOtherPlacement && placements_differ_as_documented(x, other))) {
        const auto& b = x.st.bufs[r][s.k];
        first.add(Failure{s.property, fmt::format("  rank {}: {} ({}) differs from the call ({})\n", r, kCallNames[s.k],
                                               b.inplace ? "in-place" : "out-of-place",
                                               c.inplace ? "in-place" : "out-of-place") +
                                          first_diff_detail(c, x.red, x.inputs, result, other, "the call", kCallNames[s.k])});
        break;  // the next property
      }
    }
  }
  return first.take();
}

// The rest of the sequence: each call on its own inputs, with the checks of
// the first call's own buffers, result and ranks.
std::optional<Failure> check_later_calls(CheckContext& x) {
  FirstFailure first(x);
  for (size_t k = 0; k < x.c.then.size(); ++k) {
    const Case& n = x.c.then[k];
    CallChecker check(x.c, n, x.st.inputs.at(k + 1), x.cfg, x.out, sequence_call_name(x.c, k + 1));
    const size_t slot = kNumCalls + k;
    x.call = &n;
    first.add(check.buffers(x.st, slot, "the call"));
    first.add(check.oracle(x.st.bufs[0][slot].recv_data()));
    first.add(check.identical(x.st, slot));
  }
  return first.take();
}

// Peers (on the first call): each must pass the oracle too (or its own
// documented deviation), agree across its ranks, and match bitwise where the
// oracle is bitwise.
std::optional<Failure> check_peers(CheckContext& x) {
  const Case& c = x.c;
  const size_t P = static_cast<size_t>(c.p), bytes = c.count * dtype_size(c.dtype);
  const std::byte* result = x.st.bufs[0][kPrimary].recv_data();
  if (x.peers.size() != x.cfg.peers.size()) {
    // The oracle's pass did not run (its row was removed): judge here.
    PeerPass pass(x);
    std::vector<uint64_t> vals(P);
    for (size_t i = 0; i < c.count; ++i) {
      for (size_t r = 0; r < P; ++r) vals[r] = load_element(c.dtype, x.inputs[r].data(), i);
      const Expectation e = expect_element(x.red, vals);
      const uint64_t a = load_element(c.dtype, result, i);
      pass.element(i, e, vals, a, judge(x.red, e, a).ok);
    }
  }
  for (size_t pi = 0; pi < x.cfg.peers.size(); ++pi) {
    const auto& peer = x.cfg.peers[pi];
    const std::byte* pres = x.st.peer_out[pi][0].data();
    for (size_t r = 1; r < P; ++r) {
      if (bytes > 0 && std::memcmp(x.st.peer_out[pi][r].data(), pres, bytes) != 0)
        return Failure{"peers-agree", fmt::format("  peer {}: rank {} differs from rank 0\n", peer->name(), r) +
                                          first_diff_detail(c, x.red, x.inputs, pres, x.st.peer_out[pi][r].data(),
                                                            "rank 0", fmt::format("rank {}", r))};
    }
    const PeerJudgement& j = x.peers[pi];
    for (const auto& [name, n] : j.deviant) x.out.deviant[name] += n;
    if (j.first_rejected) {
      const size_t i = *j.first_rejected;
      return Failure{"peers-agree", fmt::format("  peer {} disagrees at element [{}]: {} has {}, {} has {}; oracle: {}\n",
                                                peer->name(), i, x.cfg.impl->name(),
                                                format_element(c.dtype, load_element(c.dtype, result, i)), peer->name(),
                                                format_element(c.dtype, load_element(c.dtype, pres, i)),
                                                j.expected_there)};
    }
    x.out.max_peer_diff_units = std::max(x.out.max_peer_diff_units, j.max_diff_units);
  }
  return std::nullopt;
}

std::vector<PropertyCheck>& check_table() {
  static std::vector<PropertyCheck> t = {
      {{"count-zero-is-noop", "no-write-outside-count", "input-untouched"}, check_first_buffers},
      {{"agrees-with-oracle", "matches-declared-order"}, check_first_result},
      {{"ranks-identical"}, check_first_identical},
      {{"deterministic", "inplace-equals-out-of-place", "async-wait-equals-sync"}, check_twins},
      {{}, check_later_calls},  // the first call's properties, on every later call of a sequence
      {{"peers-agree"}, check_peers},
  };
  return t;
}

}  // namespace

const std::vector<PropertyCheck>& property_checks() { return check_table(); }

void register_property_check(PropertyCheck row) { check_table().push_back(std::move(row)); }

bool unregister_property_check(std::string_view property) {
  return std::erase_if(check_table(), [&](const PropertyCheck& r) {
           return std::find(r.properties.begin(), r.properties.end(), property) != r.properties.end();
         }) > 0;
}

bool shrink_keeps(const CaseOutcome& now, const Failure& was) {
  auto fails = [&](std::string_view p) {
    return now.failure.property == p || std::find(now.also_failed.begin(), now.also_failed.end(), p) != now.also_failed.end();
  };
  return fails(was.property) || (was.property == "matches-declared-order" && fails("agrees-with-oracle"));
}

std::vector<std::string> property_names() {
  // call-completes is judged before the table (did the calls finish at all);
  // peers-agree also names a peer whose own call failed.
  std::vector<std::string> v{"call-completes"};
  for (const auto& row : property_checks())
    for (const auto& p : row.properties)
      if (std::find(v.begin(), v.end(), p) == v.end()) v.push_back(p);
  return v;
}

// ---- packing one rank's part (MPI world) ----

}  // namespace collcheck
