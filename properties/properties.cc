#include "properties/properties.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <new>
#include <system_error>

#include "harness/model/data.h"
#include "harness/run/communicator.h"
#include "harness/world/crash_handler.h"
#include "impl/element_ops.h"
#include "impl/perturbed_links.h"

namespace collcheck {


std::vector<ImplPtr> default_peers(const Implementation& impl) {
  std::vector<ImplPtr> peers;
  const bool reference = find_algorithm(impl.name()) != nullptr;
  for (const auto& a : algorithms()) {
    if (a.name == impl.name()) continue;
    // One that follows the nodes is the tree on the one node cases of other
    // implementations run on: a peer only where it is under test itself.
    if (a.follows_nodes) continue;
    peers.push_back(reference_implementation(a.name));
    if (!reference) break;  // ring only, for an implementation from outside
  }
  return peers;
}

namespace {

const char* const kCallNames[kNumCalls] = {"the call", "the same call again", "the other placement",
                                           "all_reduce_async + wait"};

std::string first_diff_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                              const std::byte* want, const std::byte* got, std::string_view want_name,
                              std::string_view got_name) {
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t a = load_element(c.dtype, want, i), b = load_element(c.dtype, got, i);
    if (a == b) continue;
    std::vector<uint64_t> vals;
    for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
    const Expectation e = expect_element(red, vals);
    return fmt::format("  first difference at element [{}]:\n    {}: {}\n    {}: {}\n    oracle: {}\n", i, want_name,
                       format_element(c.dtype, a), got_name, format_element(c.dtype, b), e.describe(c.dtype));
  }
  return "";
}

std::string oracle_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                          const std::byte* result, size_t i, std::string_view who) {
  std::vector<uint64_t> vals;
  for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
  const Expectation e = expect_element(red, vals);
  const uint64_t got = load_element(c.dtype, result, i);
  const Verdict v = judge(red, e, got);
  std::string bound;
  switch (e.kind) {
    case CheckKind::Bitwise: bound = "0 (bitwise: the result does not depend on the reduction order)"; break;
    case CheckKind::OneOf: bound = "exactly one of the outcomes some reduction order gives"; break;
    case CheckKind::Interval:
      bound = "the range or the special values that some reduction order can reach (overflow, underflow or "
              "saturation on the way)";
      break;
    case CheckKind::Bound:
      bound = fmt::format("{:.3g} [{}]; the error is {:.3g} bounds", e.bound, check_kind_name(e.kind), v.err_units);
  }
  std::string ins;
  for (size_t r = 0; r < vals.size(); ++r) ins += fmt::format("      rank {}: {}\n", r, format_element(c.dtype, vals[r]));
  return fmt::format("  first wrong element: [{}] on {}\n    expected: {}\n    got:      {}\n    bound:    {}\n"
                     "    inputs at [{}]:\n{}",
                     i, who, e.describe(c.dtype), format_element(c.dtype, got), bound, i, ins);
}

// Each line of `text` indented by `pad`.
std::string indent(const std::string& text, std::string_view pad = "    ") {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out += fmt::format("{}{}\n", pad, std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace


std::chrono::milliseconds case_limit(const RunConfig& cfg) {
  return cfg.timeout * static_cast<int>(kNumCalls + kMaxSequenceCalls - 1 + cfg.peers.size()) + std::chrono::seconds(2);
}

std::chrono::milliseconds case_limit(const Case& c, const RunConfig& cfg) {
  return cfg.timeout * static_cast<int>(kNumCalls + c.then.size() + cfg.peers.size()) + std::chrono::seconds(2);
}

std::shared_ptr<CaseExecution> prepare_execution(const Case& c, size_t npeers) {
  const auto P = static_cast<size_t>(c.p);
  auto st = std::make_shared<CaseExecution>();
  st->inputs.reserve(1 + c.then.size());
  st->inputs.push_back(c.input_buffers());
  const auto& inputs = st->inputs[0];
  st->bufs.resize(P);
  auto add = [](std::vector<CallBuffers>& to, bool inplace, const std::vector<std::byte>& input) {
    CallBuffers b;
    b.inplace = inplace;
    if (b.inplace) {
      b.recv = framed(input, false);
    } else {
      b.send = framed(input, false);
      b.recv = framed(input, true);
    }
    to.push_back(std::move(b));
  };
  for (size_t r = 0; r < P; ++r)
    for (int k = 0; k < kNumCalls; ++k) add(st->bufs[r], (k == kOtherPlacement) ? !c.inplace : c.inplace, inputs[r]);
  for (const Case& n : c.then) {
    const auto& in = st->inputs.emplace_back(n.input_buffers());
    for (size_t r = 0; r < P; ++r) add(st->bufs[r], n.inplace, in[r]);
  }
  st->peer_out.assign(npeers, inputs);
  st->ranks.assign(P, RankOutcome{});
  st->failed_phase.assign(P, -1);
  return st;
}

namespace {
void execute_rank_calls(const Case& c, CaseExecution& st, const RunConfig& cfg, Links& world_links);

// Whether `e` (what a rank threw) says the harness ran out of threads or
// memory, rather than that the implementation failed.
bool resource_exhausted(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  if (const auto* se = dynamic_cast<const std::system_error*>(&e))
    return se->code() == std::errc::resource_unavailable_try_again || se->code() == std::errc::not_enough_memory;
  return false;
}
}  // namespace

std::vector<int> case_nodes(const Case& c, const RunConfig& cfg) {
  std::vector<int> ids;
  if (c.ranks_per_node > 0) {
    for (int r = 0; r < c.p; ++r) ids.push_back(r / c.ranks_per_node);
  } else if (static_cast<int>(cfg.world_nodes.size()) >= c.p) {
    ids = number_nodes(std::span<const int>(cfg.world_nodes).first(static_cast<size_t>(c.p)));
  }
  return ids;
}

void execute_rank(const Case& c, CaseExecution& st, const RunConfig& cfg, Links& world_links) {
  const auto r = static_cast<size_t>(world_links.rank());
  try {
    execute_rank_calls(c, st, cfg, world_links);
  } catch (const std::exception& e) {
    if (!resource_exhausted(e)) throw;
    st.failed_phase[r] = kHarnessFailed;
    throw std::runtime_error(fmt::format("the harness ran out of a resource (a thread could not start, or memory "
                                         "could not be had): {}", e.what()));
  }
}

namespace {
void execute_rank_calls(const Case& c, CaseExecution& st, const RunConfig& cfg, Links& world_links) {
  const auto r = static_cast<size_t>(world_links.rank());
  st.failed_phase[r] = 0;
  // The implementation's calls run on perturbed links when the case says so;
  // the peers' calls never do (they are the reference the case compares with).
  // Simulated nodes, when the case has them, for the implementation and peers alike.
  std::unique_ptr<Links> noded;
  if (c.ranks_per_node) noded = node_links(world_links, c.ranks_per_node);
  Links& base = noded ? *noded : world_links;
  std::unique_ptr<Links> perturbed;
  if (c.perturb) perturbed = make_perturbed_links(base, c.perturb);
  Links& links = perturbed ? *perturbed : base;
  {
    Communicator comm(links, CommOptions{"", cfg.timeout, cfg.impl});
    auto& mine = st.bufs[r];
    for (int k = 0; k < kNumCalls; ++k) {
      CallBuffers& b = mine[static_cast<size_t>(k)];
      const void* send = b.inplace ? b.recv_data() : b.send_data();
      try {
        if (k == kAsync) {
          auto w = comm.all_reduce_async(send, b.recv_data(), c.count, c.dtype, c.op, c.scalar);
          w->wait();
        } else {
          comm.all_reduce(send, b.recv_data(), c.count, c.dtype, c.op, c.scalar);
        }
      } catch (const std::exception& e) {
        if (resource_exhausted(e)) throw;
        throw std::runtime_error(fmt::format("in {} ({}): {}", kCallNames[k], b.inplace ? "in-place" : "out-of-place",
                                             e.what()));
      }
    }
    // The rest of the sequence, on the same communicator. An async call is
    // waited once `defer` more calls have been issued; those still pending at
    // the end are waited latest first.
    struct Pending {
      std::unique_ptr<Work> work;
      size_t due;  // waited once this many calls of `then` have been issued
      size_t k;
    };
    std::vector<Pending> pending;
    auto wait_one = [&](Pending& w) {
      try {
        w.work->wait();
      } catch (const std::exception& e) {
        if (resource_exhausted(e)) throw;
        throw std::runtime_error(fmt::format("in {}: wait(): {}", sequence_call_name(c, w.k + 1), e.what()));
      }
    };
    for (size_t k = 0; k < c.then.size(); ++k) {
      const Case& n = c.then[k];
      CallBuffers& b = mine[kNumCalls + k];
      const void* send = b.inplace ? b.recv_data() : b.send_data();
      try {
        if (n.async) {
          pending.push_back({comm.all_reduce_async(send, b.recv_data(), n.count, n.dtype, n.op, n.scalar),
                             k + 1 + static_cast<size_t>(n.defer), k});
        } else {
          comm.all_reduce(send, b.recv_data(), n.count, n.dtype, n.op, n.scalar);
        }
      } catch (const std::exception& e) {
        if (resource_exhausted(e)) throw;
        throw std::runtime_error(fmt::format("in {}: {}", sequence_call_name(c, k + 1), e.what()));
      }
      for (auto& w : pending)
        if (w.work && w.due <= k + 1) {  // in issue order; defer 0 is waited right away
          wait_one(w);
          w.work.reset();
        }
    }
    for (auto it = pending.rbegin(); it != pending.rend(); ++it)
      if (it->work) wait_one(*it);
  }
  for (size_t i = 0; i < cfg.peers.size(); ++i) {
    st.failed_phase[r] = static_cast<int>(1 + i);
    Communicator comm(base, CommOptions{"", cfg.timeout, cfg.peers[i]});
    auto& b = st.peer_out[i][r];
    try {
      comm.all_reduce(b.data(), b.data(), c.count, c.dtype, c.op, c.scalar);
    } catch (const std::exception& e) {
      if (resource_exhausted(e)) throw;
      throw std::runtime_error(fmt::format("peer {}: {}", cfg.peers[i]->name(), e.what()));
    }
  }
  st.failed_phase[r] = -1;
}
}  // namespace

CaseRunner::CaseRunner(RunConfig cfg) : cfg_(std::move(cfg)) {}
CaseRunner::~CaseRunner() = default;

ThreadWorld& CaseRunner::world(int p) {
  last_used_[p] = ++clock_;
  if (!worlds_.count(p)) {
    // Make room: drop the least recently used worlds first.
    int threads = 0;
    for (const auto& [n, w] : worlds_) threads += n;
    while (!worlds_.empty() && threads + p > kMaxCachedWorldThreads) {
      int oldest = worlds_.begin()->first;
      for (const auto& [n, w] : worlds_)
        if (last_used_[n] < last_used_[oldest]) oldest = n;
      worlds_.erase(oldest);
      threads -= oldest;
    }
  }
  auto& w = worlds_[p];
  if (!w) w = std::make_unique<ThreadWorld>(p);
  return *w;
}

CaseOutcome run_case(World& world, const Case& c, const RunConfig& cfg, bool* ranks_ok) {
  set_crash_context(fmt::format("running verify case {} on {} (replay it with --replay {})", case_summary(c),
                                cfg.impl->name(), encode_case(c)));
  auto st = prepare_execution(c, cfg.peers.size());
  st->limit = case_limit(c, cfg);
  CaseExecution* s = st.get();
  // The rank body captures by value and lives in st: a hung rank may outlive
  // this call, and st is then never freed.
  st->fn = [s, c, cfg](RankContext& ctx) { execute_rank(c, *s, cfg, ctx.links()); };
  const WorldRun run = world.run(st->fn, st->limit, c.p);
  if (ranks_ok) *ranks_ok = run.ok();
  if (run.hung) new std::shared_ptr<CaseExecution>(st);
  // The ranks held elsewhere send their buffers and outcome to the root.
  std::vector<std::string> local(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    if (!world.holds(static_cast<int>(r))) continue;
    st->ranks[r] = run.ranks[r];
    if (!world.root()) local[r] = pack_rank(*st, static_cast<int>(r));
  }
  const auto all = world.gather(local, Clock::now() + st->limit + std::chrono::seconds(5));
  if (!world.root()) return CaseOutcome{};
  for (int r = 0; r < c.p; ++r) {
    if (world.holds(r)) continue;
    const auto q = static_cast<size_t>(r);
    st->ranks[q] = run.ranks[q];
    if (all[q]) {
      unpack_rank(*st, r, *all[q]);
    } else {
      st->ranks[q].returned = false;
      st->ranks[q].ok = false;
      st->ranks[q].error = fmt::format("rank {}: sent no result within {:.1f} s of the case's deadline (it hangs, or "
                                       "its process died)",
                                       r, std::chrono::duration<double>(st->limit).count() + 5);
    }
  }
  st->hung = run.hung;
  for (const auto& o : st->ranks) st->hung |= !o.returned;
  if (st->hung && !run.hung) new std::shared_ptr<CaseExecution>(st);
  return check_execution(c, *st, cfg);
}

bool shared_threads(const Case& c) {
  if (c.p < 1 || c.p > kSharedThreadRanks) return false;
  return (splitmix64(c.seed ^ (static_cast<uint64_t>(c.p) << 32) ^ c.count ^ 0x5a17ed) & 3) == 0;
}

CaseOutcome CaseRunner::run(const Case& c) {
  ThreadWorld* w = nullptr;
  const bool shared = shared_threads(c);
  try {
    if (shared) {
      if (!shared_) shared_ = std::make_unique<ThreadWorld>(kSharedThreadRanks);
      w = shared_.get();
    } else {
      w = &world(c.p);
    }
  } catch (const std::exception& e) {
    if (shared) shared_.reset();
    else worlds_.erase(c.p);
    CaseOutcome out;
    out.ok = false;
    out.harness_error = true;
    out.failure = Failure{"harness", fmt::format("  the harness could not start a world of {} rank threads: {}\n", c.p,
                                                 e.what())};
    return out;
  }
  bool ranks_ok = false;
  CaseOutcome out = run_case(*w, c, cfg_, &ranks_ok);
  if (!ranks_ok) {
    // A failed call can leave a native backend's per-world state (Gloo pairs,
    // NCCL communicators) unusable: start the next case from scratch.
    cfg_.impl->reset(c.p);
    for (const auto& peer : cfg_.peers) peer->reset(c.p);
  }
  if (out.world_broken) {  // its hung thread is abandoned
    if (shared) shared_.reset();
    else worlds_.erase(c.p);
  }
  return out;
}

namespace {

// Whether `got`, which the oracle rejects, is one of the outcomes the
// implementation's documented deviation from NCCL semantics allows (counted,
// never silently).
bool deviation_accepts(const Implementation& impl, const Reduction& red, std::span<const uint64_t> vals, uint64_t got,
                       size_t& deviant, std::string& deviation) {
  const Deviation* d = impl.deviation(red.dtype, red.op);
  if (!d || !d->allows(red, vals, got)) return false;
  ++deviant;
  deviation = d->name;
  return true;
}
bool deviation_accepts(const Implementation& impl, const Reduction& red, std::span<const uint64_t> vals, uint64_t got,
                       std::map<std::string, size_t>& deviant) {
  const Deviation* d = impl.deviation(red.dtype, red.op);
  if (!d || !d->allows(red, vals, got)) return false;
  ++deviant[d->name];
  return true;
}

// The peers' results on the first call, judged element by element under the
// expectation the implementation's result at that element was judged by (so
// that each element's expectation is computed once, not once per peer).
class PeerPass {
 public:
  explicit PeerPass(CheckContext& x) : x_(x) { x_.peers.assign(x.cfg.peers.size(), PeerJudgement{}); }
  // `a`: the implementation's result at element i; a_ok: the oracle accepts it as it is.
  void element(size_t i, const Expectation& e, std::span<const uint64_t> vals, uint64_t a, bool a_ok) {
    const DType t = x_.c.dtype;
    for (size_t pi = 0; pi < x_.peers.size(); ++pi) {
      PeerJudgement& j = x_.peers[pi];
      if (j.first_rejected) continue;
      const uint64_t b = load_element(t, x_.st.peer_out[pi][0].data(), i);
      const bool b_ok = judge(x_.red, e, b).ok;
      if (!b_ok && !deviation_accepts(*x_.cfg.peers[pi], x_.red, vals, b, j.deviant_elements, j.deviation)) {
        j.first_rejected = i;
        j.expected_there = e.describe(t);
        continue;
      }
      // The difference in units of the bound, between results the oracle
      // accepts as they are (an element accepted only under a documented
      // deviation is counted there, not here).
      if (e.kind == CheckKind::Bound && e.bound > 0 && a_ok && b_ok) {
        const double da = element_to_double(t, a), db = element_to_double(t, b);
        if (std::isfinite(da) && std::isfinite(db))
          j.max_diff_units =
              std::max(j.max_diff_units, static_cast<double>(std::fabs(static_cast<long double>(da) - db) / e.bound));
      }
    }
  }

  // Whether the oracle's fast check (check_all_reduce) finds every peer's
  // result (rank 0's) right.
  bool all_right(const Reduction& red, std::span<const void* const> inputs, size_t count) const {
    for (size_t pi = 0; pi < x_.peers.size(); ++pi)
      if (check_all_reduce(red, inputs, x_.st.peer_out[pi][0].data(), count).wrong != 0) return false;
    return true;
  }

 private:
  CheckContext& x_;
};

}  // namespace

namespace {

// The checks of one call of a case's sequence, over every rank's buffers. Each
// returns the failure (property, detail) or nothing; `where` names the call in
// the detail when the case is a sequence.
class CallChecker {
 public:
  // `call` is the case itself or one of its further calls; `whole` the case
  // (its nodes hold for every call).
  CallChecker(const Case& whole, const Case& call, const std::vector<std::vector<std::byte>>& inputs,
              const RunConfig& cfg, CaseOutcome& out, std::string where)
      : c_(call), cfg_(cfg), out_(out), inputs_(inputs), red_(call.reduction()),
        bytes_(call.count * dtype_size(call.dtype)), where_(std::move(where)), nodes_(case_nodes(whole, cfg)) {}

  // Canaries intact, and out-of-place inputs left alone, in bufs[r][slot].
  std::optional<Failure> buffers(const CaseExecution& st, size_t slot, const char* call_name) const {
    for (size_t r = 0; r < st.bufs.size(); ++r) {
      const CallBuffers& b = st.bufs[r][slot];
      if (auto w = stray_write(b.recv, bytes_))
        return failure(c_.count == 0 ? "count-zero-is-noop" : "no-write-outside-count",
                       fmt::format("  rank {} wrote {} in {} ({}): byte is {:#04x}, canary was {:#04x}\n", r,
                                   w->where(bytes_, c_.dtype), call_name, b.inplace ? "in-place" : "out-of-place",
                                   static_cast<unsigned>(w->is), static_cast<unsigned>(w->was)));
      if (b.inplace) continue;
      if (auto d = difference(c_.dtype, inputs_[r].data(), b.send_data(), c_.count)) {
        const size_t i = d.first;
        return failure("input-untouched",
                       fmt::format("  rank {} modified its send buffer in {} (out-of-place): element [{}] was {}, is {}\n",
                                   r, call_name, i, format_element(c_.dtype, load_element(c_.dtype, inputs_[r].data(), i)),
                                   format_element(c_.dtype, load_element(c_.dtype, b.send_data(), i))));
      }
    }
    return std::nullopt;
  }

  // `result` (rank 0's) against the oracle, then in the implementation's
  // declared reduction order.
  // `peers`, when given, judges the peers' results at each element too.
  std::optional<Failure> oracle(const std::byte* result, PeerPass* peers = nullptr) {
    const size_t P = inputs_.size();
    // Integers, max and min: every element's expectation is the rank-order
    // fold, bit for bit (expect_element's Bitwise case). When the oracle's
    // fast check (the fold by the reduce kernels) finds this result and every
    // peer's right, the pass below would find the same and add only the
    // counts, so they are taken from it. Anything wrong takes the pass below,
    // for its report. (The declared-order replay is for float sums and
    // products only: not these.)
    if (order_free(red_)) {
      std::vector<const void*> ptrs(P);
      for (size_t r = 0; r < P; ++r) ptrs[r] = inputs_[r].data();
      const CheckSummary s = check_all_reduce(red_, ptrs, result, c_.count);
      if (s.wrong == 0 && (!peers || peers->all_right(red_, ptrs, c_.count))) {
        for (size_t k = 0; k < kCheckKinds; ++k) out_.by_kind[k] += s.by_kind[k];
        return std::nullopt;
      }
    }
    std::vector<uint64_t> vals(P);
    size_t wrong = 0;
    std::optional<size_t> first_wrong;
    for (size_t i = 0; i < c_.count; ++i) {
      for (size_t r = 0; r < P; ++r) vals[r] = load_element(c_.dtype, inputs_[r].data(), i);
      const Expectation e = expect_element(red_, vals);
      const uint64_t got = load_element(c_.dtype, result, i);
      ++out_.by_kind[static_cast<int>(e.kind)];
      const Verdict v = judge(red_, e, got);
      if (peers) peers->element(i, e, vals, got, v.ok);
      if (v.ok) {
        if (e.kind == CheckKind::Bound) out_.max_err_units = std::max(out_.max_err_units, v.err_units);
        continue;
      }
      if (deviation_accepts(*cfg_.impl, red_, vals, got, out_.deviant)) continue;
      ++wrong;
      if (!first_wrong) first_wrong = i;
    }
    if (wrong > 0)
      return failure("agrees-with-oracle", fmt::format("  {} of {} elements wrong\n", wrong, c_.count) +
                                               oracle_detail(c_, red_, inputs_, result, *first_wrong, "rank 0"));
    // The declared reduction order, replayed with NCCL's semantics: float sums
    // and products bit for bit, where the all-orders bound is too loose to see
    // a rounding bug.
    if (!dtype_is_float(c_.dtype) || (red_.combine != Combine::Sum && red_.combine != Combine::Prod))
      return std::nullopt;
    std::vector<int> prog;
    std::vector<uint64_t> stack;
    std::vector<bool> used(P);  // reused: this loop runs once per element
    for (size_t i = 0; i < c_.count; ++i) {
      prog.clear();
      try {
        if (!cfg_.impl->reduction_order(c_.p, c_.count, i, nodes_, prog)) break;
      } catch (const std::exception& e) {  // an order that breaks the ABI is a failure, never "none declared"
        return failure("matches-declared-order", fmt::format("  {}\n", e.what()));
      }
      stack.clear();
      std::fill(used.begin(), used.end(), false);
      bool valid = true;
      for (int op : prog) {
        if (op >= 0 && static_cast<size_t>(op) < P && !used[static_cast<size_t>(op)]) {
          used[static_cast<size_t>(op)] = true;
          stack.push_back(premul_bits(red_, load_element(c_.dtype, inputs_[static_cast<size_t>(op)].data(), i)));
        } else if (op == -1 && stack.size() >= 2) {
          const uint64_t b = stack.back();
          stack.pop_back();
          stack.back() = combine_bits(c_.dtype, red_.combine, stack.back(), b);
        } else {
          valid = false;
          break;
        }
      }
      valid = valid && stack.size() == 1 && std::count(used.begin(), used.end(), true) == static_cast<long>(P);
      if (!valid)
        return failure("matches-declared-order",
                       fmt::format("  {} declares an order for element [{}] that is not a reduction tree over ranks "
                                   "0..{}: {}\n",
                                   cfg_.impl->name(), i, P - 1, fmt::join(prog, " ")));
      ++out_.order_checked;
      const uint64_t want = stack[0], got = load_element(c_.dtype, result, i);
      const bool same = want == got || (std::isnan(element_to_double(c_.dtype, want)) &&
                                        std::isnan(element_to_double(c_.dtype, got)));
      if (!same)
        return failure("matches-declared-order",
                       fmt::format("  element [{}] on rank 0: the declared order (postfix: {}) gives {} with NCCL's "
                                   "rounding, the implementation returned {}\n",
                                   i, fmt::join(prog, " "), format_element(c_.dtype, want),
                                   format_element(c_.dtype, got)) +
                           oracle_detail(c_, red_, inputs_, result, i, "rank 0"));
    }
    return std::nullopt;
  }

  // Every rank's bufs[r][slot] holds rank 0's bits.
  std::optional<Failure> identical(const CaseExecution& st, size_t slot) const {
    const std::byte* result = st.bufs[0][slot].recv_data();
    for (size_t r = 1; r < st.bufs.size(); ++r) {
      const std::byte* other = st.bufs[r][slot].recv_data();
      if (std::memcmp(other, result, bytes_) != 0)
        return failure("ranks-identical", fmt::format("  rank {} differs from rank 0\n", r) +
                                              first_diff_detail(c_, red_, inputs_, result, other, "rank 0",
                                                                fmt::format("rank {}", r)));
    }
    return std::nullopt;
  }

  const std::vector<std::vector<std::byte>>& inputs() const { return inputs_; }
  const Reduction& red() const { return red_; }
  size_t bytes() const { return bytes_; }

 private:
  Failure failure(std::string_view property, std::string detail) const {
    if (!where_.empty()) detail = fmt::format("  in {}:\n", where_) + detail;
    return Failure{std::string(property), std::move(detail)};
  }
  const Case& c_;
  const RunConfig& cfg_;
  CaseOutcome& out_;
  const std::vector<std::vector<std::byte>>& inputs_;
  Reduction red_;
  size_t bytes_;
  std::string where_;
  std::vector<int> nodes_;  // case_nodes() of the whole case
};

}  // namespace

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

  CheckContext ctx{c, st, cfg, out, st.inputs.at(0), c.reduction(), nullptr, {}};
  for (const auto& row : property_checks()) {
    ctx.call = &c;
    if (auto f = row.check(ctx)) return fail_with(*f, *ctx.call);
  }
  return out;
}

namespace {

std::string first_call_name(const Case& c) { return c.then.empty() ? std::string() : sequence_call_name(c, 0); }

// The first call's buffers (and its repeat, other placement and async twin's).
std::optional<Failure> check_first_buffers(CheckContext& x) {
  CallChecker first(x.c, x.c, x.inputs, x.cfg, x.out, first_call_name(x.c));
  for (int k = 0; k < kNumCalls; ++k)
    if (auto f = first.buffers(x.st, static_cast<size_t>(k), kCallNames[k])) return f;
  return std::nullopt;
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
  for (const auto& s : same) {
    for (size_t r = 0; r < static_cast<size_t>(c.p); ++r) {
      const std::byte* other = x.st.bufs[r][s.k].recv_data();
      if (std::memcmp(other, result, bytes) != 0 && !(s.k == kOtherPlacement && placements_differ_as_documented(x, other))) {
        const auto& b = x.st.bufs[r][s.k];
        return Failure{s.property, fmt::format("  rank {}: {} ({}) differs from the call ({})\n", r, kCallNames[s.k],
                                               b.inplace ? "in-place" : "out-of-place",
                                               c.inplace ? "in-place" : "out-of-place") +
                                       first_diff_detail(c, x.red, x.inputs, result, other, "the call", kCallNames[s.k])};
      }
    }
  }
  return std::nullopt;
}

// The rest of the sequence: each call on its own inputs, with the checks of
// the first call's own buffers, result and ranks.
std::optional<Failure> check_later_calls(CheckContext& x) {
  for (size_t k = 0; k < x.c.then.size(); ++k) {
    const Case& n = x.c.then[k];
    CallChecker check(x.c, n, x.st.inputs.at(k + 1), x.cfg, x.out, sequence_call_name(x.c, k + 1));
    const size_t slot = kNumCalls + k;
    x.call = &n;
    if (auto f = check.buffers(x.st, slot, "the call")) return f;
    if (auto f = check.oracle(x.st.bufs[0][slot].recv_data())) return f;
    if (auto f = check.identical(x.st, slot)) return f;
  }
  return std::nullopt;
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
    if (j.deviant_elements) {
      x.out.deviant[j.deviation] += j.deviant_elements;
    }
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

bool shrink_keeps(const Failure& now, const Failure& was) {
  return now.property == was.property ||
         (was.property == "matches-declared-order" && now.property == "agrees-with-oracle");
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

namespace {

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put_bytes(std::string& s, const std::vector<std::byte>& b) {
  put_u64(s, b.size());
  s.append(reinterpret_cast<const char*>(b.data()), b.size());
}

struct Reader {
  std::string_view s;
  uint64_t u64() {
    if (s.size() < 8) throw std::runtime_error("rank result truncated");
    uint64_t v;
    std::memcpy(&v, s.data(), 8);
    s.remove_prefix(8);
    return v;
  }
  void bytes(std::vector<std::byte>& into) {
    const uint64_t n = u64();
    if (n != into.size() || s.size() < n)
      throw std::runtime_error(fmt::format("rank result has a buffer of {} bytes where {} were expected", n, into.size()));
    if (n) std::memcpy(into.data(), s.data(), n);
    s.remove_prefix(n);
  }
  std::string str() {
    const uint64_t n = u64();
    if (s.size() < n) throw std::runtime_error("rank result truncated");
    std::string v(s.substr(0, n));
    s.remove_prefix(n);
    return v;
  }
};

}  // namespace

std::string pack_rank(const CaseExecution& st, int rank) {
  const auto r = static_cast<size_t>(rank);
  std::string s;
  const RankOutcome& o = st.ranks[r];
  put_u64(s, (o.returned ? 1u : 0u) | (o.ok ? 2u : 0u));
  put_u64(s, static_cast<uint64_t>(static_cast<int64_t>(st.failed_phase[r])));
  put_u64(s, o.error.size());
  s += o.error;
  for (const auto& b : st.bufs[r]) {
    put_bytes(s, b.send);
    put_bytes(s, b.recv);
  }
  for (const auto& p : st.peer_out) put_bytes(s, p[r]);
  return s;
}

void unpack_rank(CaseExecution& st, int rank, std::string_view bytes) {
  const auto r = static_cast<size_t>(rank);
  Reader in{bytes};
  const uint64_t flags = in.u64();
  st.ranks[r].returned = flags & 1u;
  st.ranks[r].ok = flags & 2u;
  st.failed_phase[r] = static_cast<int>(static_cast<int64_t>(in.u64()));
  st.ranks[r].error = in.str();
  for (auto& b : st.bufs[r]) {
    in.bytes(b.send);
    in.bytes(b.recv);
  }
  for (auto& p : st.peer_out) in.bytes(p[r]);
  if (!in.s.empty()) throw std::runtime_error("rank result has trailing bytes");
}

}  // namespace collcheck
