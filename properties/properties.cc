#include "properties/properties.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>
#include <system_error>

#include "harness/model/data.h"
#include "harness/model/heap.h"
#include "harness/run/communicator.h"
#include "harness/world/crash_handler.h"
#include "impl/element_ops.h"
#include "impl/perturbed_links.h"
#include "properties/call_checker.h"

namespace collcheck {

const char* const kCallNames[kNumCalls] = {"the call", "the same call again", "the other placement",
                                           "all_reduce_async + wait"};


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

namespace {

}  // namespace

CaseRunner::CaseRunner(RunConfig cfg) : cfg_(std::move(cfg)) { keep_buffers_in_the_heap(); }
CaseRunner::~CaseRunner() = default;

World& CaseRunner::world(int p) {
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
  if (!w) w = cfg_.make_world({.ranks = p});
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
  // The simulated world: the case's seed (and which of --schedules) is its schedule's.
  world.set_schedule_seed(c.seed + static_cast<uint64_t>(cfg.schedule) * 0x9e3779b97f4a7c15ULL);
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
  World* w = nullptr;
  const bool shared = shared_threads(c);
  try {
    if (shared) {
      if (!shared_) shared_ = cfg_.make_world({.ranks = kSharedThreadRanks});
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
  CaseOutcome out;
  // Under several schedules (the simulated world only: elsewhere the host
  // schedules), the first that fails is the case's outcome.
  const int schedules = w->fiber_host() != nullptr ? std::max(1, cfg_.schedules) : 1;
  for (int k = 0; k < schedules; ++k) {
    RunConfig one = cfg_;
    one.schedule = k;
    out = run_case(*w, c, one, &ranks_ok);
    if (!out.ok || !ranks_ok || out.world_broken) break;
  }
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
