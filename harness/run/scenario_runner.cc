#include "harness/run/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "faults/nemesis.h"
#include "harness/run/communicator.h"
#include "harness/world/crash_handler.h"
#include "harness/model/size.h"
#include "harness/model/data.h"
#include "harness/check/guard.h"
#include "harness/check/oracle.h"
#include "harness/world/thread_world.h"
#include "harness/model/atomic_file.h"

#include <nlohmann/json.hpp>

namespace collcheck {

namespace {

// A call of at most this many elements over all ranks is checked whole on
// every rank; a larger one on each rank's share (check_outs).
constexpr size_t kWholeCheckElements = 16384;

// The waited outputs a rank keeps to check at the end of the run: 512 MiB over
// the ranks of the world, 1 MiB at least (RankResults).
uint64_t kept_output_budget(int p) {
  return std::max<uint64_t>((uint64_t{512} << 20) / static_cast<uint64_t>(std::max(p, 1)), uint64_t{1} << 20);
}

struct CallOut {
  CallStep call;
  uint64_t seq = 0;
  uint64_t seed = 0;
  int p = 1, r = 0;  // the group's size and this rank's place in it (p2p: 2 and 0, the data's generator)
  int root = -1;     // broadcast: the root's place in the group
  std::vector<std::byte> out;
  bool waited = false;
  bool settled = false;  // checked, hashed and its buffer released (RankResults)
  size_t order = 0;      // the rank's n-th call (RankResults)
};

uint64_t call_seed(uint64_t index, const std::string& tag) {
  uint64_t h = splitmix64(index + 1);
  for (char ch : tag) h = splitmix64(h ^ static_cast<unsigned char>(ch));
  return h;
}

// The data of a collective: the same on every rank of its group, from the
// call's number in the group (a world call: its number, as before groups).
uint64_t collective_seed(const std::string& group, uint64_t seq, const std::string& tag) {
  return call_seed(seq - 1, group.empty() ? tag : group + "/" + tag);
}
// The data of the n-th message from one rank to another: both ends compute it.
uint64_t p2p_seed(const std::string& group, int from, int to, uint64_t n, const std::string& tag) {
  return call_seed(n - 1, fmt::format("p2p/{}/{}>{}/{}", group, from, to, tag));
}

std::chrono::milliseconds millis(double s) {
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(s * 1000)));
}

}  // namespace

// The call that failed first on any rank, and its rank's dump (nulls: none).
std::pair<const RankDump*, const CallRecord*> first_failed_call(const std::vector<RankDump>& dumps) {
  std::pair<const RankDump*, const CallRecord*> f{nullptr, nullptr};
  for (const auto& d : dumps)
    for (const auto& c : d.calls)
      if (c.state == CallState::Failed && (!f.second || c.t_completed < f.second->t_completed)) f = {&d, &c};
  return f;
}

// When the first call failed on any rank (seconds from the start; -1: none).
double first_failure(const std::vector<RankDump>& dumps) {
  const auto [d, c] = first_failed_call(dumps);
  return c ? c->t_completed : -1;
}

// PyTorch's name of a collective in a WorkNCCL (its OpType).
std::string_view op_type(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "ALLREDUCE";
    case Collective::Broadcast: return "BROADCAST";
    case Collective::AllGather: return "ALLGATHER";
    case Collective::ReduceScatter: return "_REDUCE_SCATTER_BASE";
    case Collective::AllToAll: return "ALLTOALL_BASE";
    case Collective::Barrier: return "BARRIER";
    case Collective::Send: return "SEND";
    case Collective::Recv: return "RECV";
  }
  return "UNKNOWN";
}

// What an unguarded run showed from outside, the first thing a user would
// have seen: a rank's call timing out (the watchdog's message, as PyTorch's
// ProcessGroupNCCL prints it), another error, or results the oracle rejects
// while every call returned.
std::string symptom_of(const std::vector<RankDump>& dumps, const std::vector<nlohmann::json>& checked,
                       const std::vector<int>& checked_rank, bool hung, double deadline_s) {
  const auto [fd, first] = first_failed_call(dumps);
  if (first && first->error.find("did not complete by its deadline") != std::string::npos) {
    const int p = fd->members.empty() ? fd->size : static_cast<int>(fd->members.size());
    const size_t in = is_p2p(first->coll) ? first->count : send_elements(first->coll, first->count, p);
    const size_t out = is_p2p(first->coll) ? first->count : recv_elements(first->coll, first->count, p);
    return fmt::format("a hang until the deadline: [Rank {}] Watchdog caught collective operation timeout: "
                       "WorkNCCL(SeqNum={}, OpType={}, NumelIn={}, NumelOut={}, Timeout(ms)={}) ran for {} "
                       "milliseconds before timing out.",
                       fd->rank, first->seq, op_type(first->coll), in, out,
                       static_cast<long long>(std::llround(deadline_s * 1000)),
                       static_cast<long long>(std::llround((first->t_completed - first->t_started) * 1000)));
  }
  if (first)
    return fmt::format("an error: rank {}'s call #{} ({}) failed at {:.3f} s: {}", fd->rank, first->seq,
                       collective_name(first->coll), first->t_completed, first->error);
  if (hung) return "a hang: some ranks never returned within the run's limit";
  for (size_t i = 0; i < checked.size(); ++i) {
    const std::string text = checked[i].at("wrong").get<std::string>();
    if (!text.empty())
      return fmt::format("corrupted output, and every call returned: rank {}'s result of call #{} is wrong: {}",
                         checked_rank[i], checked[i].at("wrong_seq").get<uint64_t>(), text);
  }
  return "";
}

bool has_diagnosis(const ReplayResult& r, std::initializer_list<DiagnosisKind> kinds) {
  for (const auto& d : r.diagnoses)
    for (DiagnosisKind k : kinds)
      if (d.kind == k) return true;
  return false;
}

// A result every element of which has one right value (broadcast, gathers,
// all-to-all, receives: data moved, not reduced), bit for bit.
std::optional<Diagnosis> check_moved(const CallOut& c, int world_rank,
                                     const std::function<uint64_t(size_t)>& expected) {
  const DType t = c.call.dtype;
  const size_t n = c.out.size() / dtype_size(t);
  size_t wrong = 0, first = 0;
  uint64_t got0 = 0, want0 = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t got = load_element(t, c.out.data(), i), want = expected(i);
    if (got != want) {
      if (wrong++ == 0) first = i, got0 = got, want0 = want;
    }
  }
  if (!wrong) return std::nullopt;
  Diagnosis d;
  d.kind = DiagnosisKind::WrongResult;
  d.ranks = {world_rank};
  d.seq = c.seq;
  d.group = c.call.group;
  d.text = fmt::format("{} #{} ({}) on rank {}: {} of {} elements wrong; element {}: got {}, expected {}",
                       collective_name(c.call.coll), c.seq, c.call.tag, world_rank, wrong, n, first,
                       format_element(t, got0), format_element(t, want0));
  return d;
}

// One waited result of a rank against the oracle (exact data: compared bit for
// bit). An all-reduce is checked on the rank's share of the elements only:
// every rank holds the same bits when the run is right, which the root checks
// from each result's hash, so together the shares cover every element at O(p)
// work per call, not O(p^2). A wrong share is checked whole, for the full
// detail. The other collectives are checked whole on every rank.
std::optional<Diagnosis> check_out(int world_rank, const CallOut& c) {
  const CallStep& k = c.call;
  const int p = c.p, r = c.r;
  const size_t n = k.count, es = dtype_size(k.dtype);
  auto in = [&](int q, size_t i) { return input_element(k.dtype, k.op, p, q, i, c.seed, DataClass::Exact); };
  switch (k.coll) {
    case Collective::Broadcast: return check_moved(c, world_rank, [&](size_t i) { return in(c.root, i); });
    case Collective::AllGather:
      // Called for the output's elements only: none when n is 0.
      return check_moved(c, world_rank, [&](size_t i) { return in(static_cast<int>(i / n), i % n); });
    case Collective::AllToAll: {
      const size_t m = n / static_cast<size_t>(p);
      return check_moved(c, world_rank, [&](size_t i) { return in(static_cast<int>(i / m), static_cast<size_t>(r) * m + i % m); });
    }
    case Collective::Recv:
      return check_moved(c, world_rank, [&](size_t i) {
        return input_element(k.dtype, RedOp::Sum, 2, 0, i, c.seed, DataClass::Exact);
      });
    case Collective::Send:
    case Collective::Barrier: return std::nullopt;
    case Collective::AllReduce:
    case Collective::ReduceScatter: break;
  }
  // A reduction: element i of the result reduces element base + i of every rank.
  const size_t base = k.coll == Collective::ReduceScatter ? static_cast<size_t>(r) * n : 0;
  const size_t lo = n * static_cast<size_t>(r) / static_cast<size_t>(p);
  const size_t hi = n * static_cast<size_t>(r + 1) / static_cast<size_t>(p);
  const Reduction red = resolve_reduction(k.dtype, k.op, p, k.scalar);
  auto check = [&](size_t from, size_t to) {
    std::vector<std::vector<std::byte>> ins(static_cast<size_t>(p));
    std::vector<const void*> ptrs;
    for (int q = 0; q < p; ++q) {
      auto& v = ins[static_cast<size_t>(q)];
      v.resize((to - from) * es);
      for (size_t i = from; i < to; ++i) store_element(k.dtype, v.data(), i - from, in(q, base + i));
      ptrs.push_back(v.data());
    }
    return check_all_reduce(red, ptrs, c.out.data() + from * es, to - from);
  };
  // A small all-reduce is checked whole on every rank (p * count inputs:
  // cheap); a large one on this rank's share first.
  const bool whole = k.coll == Collective::ReduceScatter || n * static_cast<size_t>(p) <= kWholeCheckElements;
  if (!whole && check(lo, hi).wrong == 0) return std::nullopt;
  const CheckSummary cs = check(0, n);
  if (cs.wrong == 0) return std::nullopt;
  Diagnosis d;
  d.kind = DiagnosisKind::WrongResult;
  d.ranks = {world_rank};
  d.seq = c.seq;
  d.group = k.group;
  d.text = fmt::format("{}call #{} ({}) on rank {}: {} of {} elements wrong; {}",
                       k.coll == Collective::AllReduce ? "" : "reduce_scatter ", c.seq, k.tag, world_rank, cs.wrong,
                       cs.checked, cs.first_wrong_detail);
  return d;
}

// A rank's results: every call's output buffer, each checked against the
// oracle and hashed once its wait has returned, then released. The waited
// outputs are kept while they fit in the rank's budget, and checked at the end
// of the run (a late write into a waited buffer shows); past it, the oldest are
// checked and released as the run goes, so memory stays O(budget + one call),
// not O(sum of counts).
class RankResults {
 public:
  RankResults() = default;
  RankResults(int p, int r, uint64_t budget) : r_(r), budget_(budget ? budget : kept_output_budget(p)) {}

  // A new call's output; its index for waited().
  size_t add(CallOut c) {
    c.order = outs_.size();
    outs_.push_back(std::move(c));
    return outs_.size() - 1;
  }
  CallOut& at(size_t i) { return outs_[i]; }
  // Call i's wait returned: its output is final.
  void waited(size_t i) {
    outs_[i].waited = true;
    kept_ += outs_[i].out.size();
    while (kept_ > budget_ && next_ < outs_.size()) settle_oldest();
  }
  // The end of the rank's program (or its failure): every waited output not
  // yet checked is checked. A call never waited keeps its buffer (the
  // implementation may still write it) and is not judged.
  void finish() {
    for (size_t i = 0; i < outs_.size(); ++i)
      if (outs_[i].waited && !outs_[i].settled) settle(outs_[i]);
  }
  size_t checked() const { return checked_; }
  const std::optional<Diagnosis>& wrong() const { return wrong_; }
  // [group, seq, hash] of each waited all-reduce result, by group and call number.
  nlohmann::json hashes() const {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [key, hash] : hashes_) h.push_back({key.first, key.second, hash});
    return h;
  }

 private:
  void settle_oldest() {
    for (; next_ < outs_.size(); ++next_)
      if (outs_[next_].waited && !outs_[next_].settled) {
        settle(outs_[next_++]);
        return;
      }
  }
  void settle(CallOut& c) {
    if (c.call.coll != Collective::Send && c.call.coll != Collective::Barrier) ++checked_;
    // The first wrong result in call order is the one reported.
    if (!wrong_ || c.order < wrong_order_)
      if (auto d = check_out(r_, c)) {
        wrong_ = std::move(d);
        wrong_order_ = c.order;
      }
    if (c.call.coll == Collective::AllReduce) hashes_[{c.call.group, c.seq}] = fnv1a(c.out.data(), c.out.size());
    kept_ -= c.out.size();
    std::vector<std::byte>().swap(c.out);
    c.settled = true;
  }
  int r_ = 0;
  uint64_t budget_ = 0, kept_ = 0;
  size_t wrong_order_ = 0;
  std::vector<CallOut> outs_;  // a settled one holds no buffer
  size_t next_ = 0;            // no output before it is waited and unsettled
  size_t checked_ = 0;
  std::optional<Diagnosis> wrong_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> hashes_;
};

// The communicators a rank takes part in: the world's and each of its process
// groups', in the scenario's order of groups (index 0: the world). Each has a
// recorder for its collectives and one for its point-to-point calls.
struct RankRecorders {
  std::vector<std::string> groups;  // "" first
  std::vector<std::unique_ptr<FlightRecorder>> coll, p2p;
  int index(const std::string& g) const {
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i] == g) return static_cast<int>(i);
    return -1;
  }
  std::vector<FlightRecorder*> all() const {
    std::vector<FlightRecorder*> v;
    for (size_t i = 0; i < coll.size(); ++i) v.insert(v.end(), {coll[i].get(), p2p[i].get()});
    return v;
  }
};

RankRecorders make_recorders(const Scenario& s, int r, Clock::time_point epoch, const std::string& run_id,
                             const std::string& run_what) {
  RankRecorders rr;
  rr.groups.push_back("");
  for (const auto& g : s.groups)
    if (s.in_group(g.name, r)) rr.groups.push_back(g.name);
  for (const auto& g : rr.groups) {
    for (bool p2p : {false, true}) {
      // The world's transfer records together stay bounded (16 ranks' worth of
      // the default): a 128-rank ring call is 254 transfers per rank, and the
      // dumps' size and the analysis grow with the records kept.
      const size_t transfers = std::clamp<size_t>(size_t{262144} / static_cast<size_t>(s.ranks), 1024, 16384);
      auto rec = std::make_unique<FlightRecorder>(r, s.ranks, epoch, 4096, transfers);
      rec->set_run(run_id, run_what);
      if (!g.empty() || p2p)
        rec->set_group(g, g.empty() ? std::vector<int>{} : s.members(g), p2p, s.group(g) && s.group(g)->caller_progress);
      (p2p ? rr.p2p : rr.coll).push_back(std::move(rec));
    }
  }
  return rr;
}

// What one rank's program needs from the world it runs in.
struct RankEnv {
  const Scenario& s;
  int rank;
  ImplPtr impl;
  std::chrono::milliseconds timeout;
  RankRecorders& recs;
  RankResults& outs;
  // Guarded mode, or empty: the fingerprint check of a call in a group.
  std::function<void(const std::string& group, const CallFingerprint&)> before_call;
  std::function<void()> stall;  // a stalled rank: wait, never entering the remaining calls
  std::function<void()> ended;  // guarded mode, or empty: the program ended (not failed, not stalled)
  std::vector<FaultTally>& tallies;  // what each fault's links saw and changed here, at the end
};

// One rank's program over `base` (the world's links): faults applied, every
// call recorded, every waited output kept for the oracle.
void run_rank_program(RankEnv& env, Links& base) {
  const int r = env.rank;
  const Scenario& s = env.s;
  std::vector<std::unique_ptr<Links>> keep;
  Links& faulty = wrap_links(s, r, base, keep);
  // However the program ends (a failed call throws), the faults' tallies are taken.
  struct TakeTallies {
    RankEnv& env;
    const std::vector<std::unique_ptr<Links>>& keep;
    ~TakeTallies() { env.tallies = fault_tallies(env.s, keep); }
  } take{env, keep};
  // One device stream for every group's communicator: a call of one group
  // waits for what the rank issued before it in another, as kernels do.
  auto stream = make_stream(r);
  struct GroupComm {
    std::string name;
    std::vector<int> members;
    std::unique_ptr<Links> recording, subset;
    std::unique_ptr<Communicator> comm;
    std::map<std::pair<int, bool>, uint64_t> p2p_sent;  // (world peer, send) -> messages so far
  };
  std::vector<GroupComm> comms;
  for (size_t gi = 0; gi < env.recs.groups.size(); ++gi) {
    GroupComm gc;
    gc.name = env.recs.groups[gi];
    gc.members = s.members(gc.name);
    // The recorders see world ranks (what the transfers are between); the
    // communicator sees the group's.
    gc.recording = recording_links(faulty, *env.recs.coll[gi]);
    gc.subset = subset_links(*gc.recording, gc.members);
    CommOptions co(s.impl, env.timeout, env.impl);
    co.recorder = env.recs.coll[gi].get();
    co.p2p_recorder = env.recs.p2p[gi].get();
    co.poison_async = true;
    co.group_id = s.group_id(gc.name);
    co.stream = stream;
    if (const GroupSpec* g = s.group(gc.name)) co.caller_progress = g->caller_progress;
    if (env.before_call) co.before_call = [&env, g = gc.name](const CallFingerprint& fp) { env.before_call(g, fp); };
    gc.comm = std::make_unique<Communicator>(*gc.subset, co);
    comms.push_back(std::move(gc));
  }
  // An async call's Work, with its input (which must outlive the call).
  struct Pending {
    std::unique_ptr<Work> work;
    WaitAt at;
    size_t index;
    std::vector<std::byte> input;
    std::string handle;  // WaitAt::Handle
  };
  std::vector<Pending> pending;
  auto& mine = env.outs;
  // Waits every pending call due at `at` (WaitAt::Handle: the one with that handle).
  auto wait_for = [&](WaitAt at, const std::string& handle = "") {
    for (auto& pw : pending) {
      if (pw.work && pw.at == at && pw.handle == handle) {
        pw.work->wait();
        pw.work.reset();
        std::vector<std::byte>().swap(pw.input);
        mine.waited(pw.index);
      }
    }
    // Waited ones are done with; a never-waited one keeps its input to the end.
    std::erase_if(pending, [](const Pending& pw) { return !pw.work; });
  };
  // However the program ends, each group's recorder is told, with the calls
  // a failed program would have issued next in it (never run): after a
  // mismatch they align the ranks' sequences (an extra or a skipped call).
  const Program& program = s.program(r);
  size_t next_step = 0;  // the first step whose call was not issued
  bool exited = false;   // the program's exit step ended it
  auto record_end = [&](bool failed) {
    std::vector<std::vector<CallRecord>> rest(comms.size());
    std::vector<bool> more(comms.size(), false);
    std::vector<uint64_t> seq(comms.size());
    for (size_t gi = 0; gi < comms.size(); ++gi) seq[gi] = comms[gi].comm->calls_issued();
    for (size_t i = next_step; failed && i < program.size(); ++i) {
      const Step& st = program[i];
      if (st.kind != Step::Call || is_p2p(st.call.coll)) continue;
      const int gi = env.recs.index(st.call.group);
      if (gi < 0) continue;
      const auto g = static_cast<size_t>(gi);
      if (rest[g].size() == kNotRunKept) {
        more[g] = true;
        continue;
      }
      CallRecord c;
      c.seq = ++seq[g];
      c.coll = st.call.coll;
      c.peer = has_peer(st.call.coll) ? st.call.peer : -1;
      c.tag = st.call.tag;
      c.count = st.call.count;
      c.dtype = st.call.dtype;
      c.op = st.call.op;
      c.async = st.call.async;
      c.impl = s.impl;
      rest[g].push_back(std::move(c));
    }
    for (size_t gi = 0; gi < comms.size(); ++gi) env.recs.coll[gi]->ended(std::move(rest[gi]), more[gi]);
  };
  try {
    for (size_t si = 0; si < program.size(); ++si) {
      const Step& st = program[si];
      next_step = si;
      if (st.kind == Step::Sleep) {
        std::this_thread::sleep_for(std::chrono::duration<double>(st.sleep_ms / 1e3));
        continue;
      }
      if (st.kind == Step::Stall) {
        // Never enter the remaining calls: wait until the others give up
        // (their failure aborts this barrier) or the run's limit.
        env.stall();
        return;
      }
      if (st.kind == Step::Raise) continue;  // its block's rest was left out when the file was read
      if (st.kind == Step::Exit) {
        // An early exit: the program ends here, nothing pending is waited
        // (the Works are dropped) and the libraries are not entered again.
        exited = true;
        break;
      }
      if (st.kind == Step::Wait) {
        // The program's wait on a handle (a fault may have made its call
        // never waited: nothing is pending then).
        wait_for(WaitAt::Handle, st.handle);
        continue;
      }
      if (st.kind == Step::Synchronize) {
        // The device-wide sync: every call issued so far, in every group, must
        // finish. It does not wait() any Work: an unwaited one stays unwaited.
        if (!synchronize(*stream, Clock::now() + env.timeout))
          throw std::runtime_error(fmt::format("rank {}: synchronize (line {}): the calls issued before it did not "
                                               "finish within the deadline ({} ms)",
                                               r, st.line, env.timeout.count()));
        continue;
      }
      const CallStep& c = st.call;
      const int gi = env.recs.index(c.group);
      if (gi < 0) continue;  // not a member: the call is a no-op here, as in torch.distributed
      GroupComm& gc = comms[static_cast<size_t>(gi)];
      wait_for(WaitAt::Next);
      Communicator& comm = *gc.comm;
      const int gp = comm.size();
      auto local = [&](int world) {
        return static_cast<int>(std::find(gc.members.begin(), gc.members.end(), world) - gc.members.begin());
      };
      CallOut co_out;
      co_out.call = c;
      co_out.p = gp;
      co_out.r = comm.rank();
      std::vector<std::byte> input(send_elements(c.coll, c.count, gp) * dtype_size(c.dtype));
      if (is_p2p(c.coll)) {
        const bool send = c.coll == Collective::Send;
        const uint64_t n = ++gc.p2p_sent[{c.peer, send}];
        co_out.seq = comm.p2p_calls_issued() + 1;
        co_out.seed = send ? p2p_seed(c.group, r, c.peer, n, c.tag) : p2p_seed(c.group, c.peer, r, n, c.tag);
        if (send) fill_input(input.data(), c.count, c.dtype, RedOp::Sum, 2, 0, co_out.seed, DataClass::Exact);
      } else {
        co_out.seq = comm.calls_issued() + 1;
        co_out.seed = collective_seed(c.group, co_out.seq, c.tag);
        if (c.coll == Collective::Broadcast) co_out.root = local(c.peer);
        // A broadcast's input matters on its root only; every rank fills it alike.
        fill_input(input.data(), input.size() / dtype_size(c.dtype), c.dtype, c.op, gp, comm.rank(), co_out.seed,
                   DataClass::Exact);
      }
      co_out.out.resize(recv_elements(c.coll, c.count, gp) * dtype_size(c.dtype));
      // In place (all_reduce, broadcast: the sizes agree): the output buffer
      // holds the input and is both.
      if (c.in_place && co_out.out.size() == input.size() && !input.empty())
        std::memcpy(co_out.out.data(), input.data(), input.size());
      const size_t at = mine.add(std::move(co_out));
      CallOut& out = mine.at(at);
      const CallSpec spec{c.coll,  c.count, c.dtype, c.op, c.scalar, has_peer(c.coll) ? local(c.peer) : -1,
                          c.tag};
      FlightRecorder& rec = is_p2p(c.coll) ? *env.recs.p2p[static_cast<size_t>(gi)] : *env.recs.coll[static_cast<size_t>(gi)];
      next_step = si + 1;  // the call is recorded from here, even if it fails
      const void* send_buf = c.in_place ? static_cast<const void*>(out.out.data()) : input.data();
      if (c.async) {
        auto w = comm.call_async(spec, send_buf, out.out.data());
        if (c.read_before_wait) {
          rec.read_output(out.seq);
          std::vector<std::byte> seen(out.out);  // the program reads its output here
          (void)seen;
        }
        if (c.write_before_wait) {
          // The program writes the buffer here (OpenNMT-py divided the
          // gradients by the world size). The call works on its own staging
          // copy (poison_async), so the write is recorded and then lost at the
          // wait, as a device would overwrite it.
          rec.wrote_buffer(out.seq);
          std::fill(out.out.begin(), out.out.end(), std::byte{0});
        }
        // The input must outlive the async call: keep it with the Work.
        pending.push_back({std::move(w), c.wait, at, std::move(input), c.handle});
      } else {
        comm.call(spec, send_buf, out.out.data());
        mine.waited(at);
      }
    }
    if (!exited) {
      next_step = program.size();
      wait_for(WaitAt::Next);
      wait_for(WaitAt::End);
      // The rank leaves the libraries (MPI_Finalize): a caller-progress
      // group's calls that never moved (never waited) move now.
      for (auto& gc : comms) gc.comm->finish();
    }
  } catch (...) {
    record_end(true);
    throw;
  }
  record_end(false);
  if (env.ended) env.ended();
  // WaitAt::Never: the Work is dropped here without wait(); the
  // communicator logs it and the recorder shows it completed, not waited.
}

namespace {

// The run's limit: every call may take its deadline twice (in guarded mode a
// rank may first wait a deadline for the others' fingerprints), plus the sleeps.
double run_limit_s(const Scenario& s) {
  double longest = 0;
  for (int r = 0; r < s.ranks; ++r) {
    double t = 0;
    for (const auto& st : s.program(r)) t += st.kind == Step::Sleep ? st.sleep_ms / 1e3 : 2 * s.deadline_s;
    longest = std::max(longest, t);
  }
  return longest + 2 * s.deadline_s + 2;
}

bool stalls(const Scenario& s, int r) {
  for (const auto& st : s.program(r))
    if (st.kind == Step::Stall) return true;
  return false;
}

std::string temp_dir(const char* what, Clock::time_point epoch) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("collcheck-{}-{}-{}", what, ::getpid(), epoch.time_since_epoch().count()))
      .string();
}

// A rank's oracle verdict on its waited results, as the root reads it.
std::string verdict_text(RankResults& outs, const std::vector<FaultTally>& tallies) {
  outs.finish();
  const auto& wrong = outs.wrong();
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& t : tallies) faults.push_back({t.seen, t.fired});
  return nlohmann::json{{"checked", outs.checked()},
                        {"wrong", wrong ? wrong->text : ""},
                        {"wrong_seq", wrong && wrong->seq ? *wrong->seq : 0},
                        {"wrong_group", wrong ? wrong->group : ""},
                        {"faults", faults},
                        {"hashes", outs.hashes()}}
      .dump();
}

}  // namespace

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o) {
  ThreadWorld world(in.ranks);
  // Unguarded mode is production: a size mismatch is not an error at the
  // transfer but what NCCL makes of it, a hang until the deadline or wrong
  // data (the symptom says which). MPI checks sizes itself (MPI_ERR_TRUNCATE).
  world.set_sizes_as_nccl(!o.guarded.value_or(in.guarded));
  return replay_scenario(in, o, world);
}

ReplayResult replay_scenario(const Scenario& in, const ReplayOptions& o, World& world) {
  if (in.world == "mpi" && world.kind() != "mpi")
    throw ScenarioError(fmt::format("{}: world.kind: '{}' runs one rank per process: mpirun -np {} collcheck replay "
                                    "{} --world mpi",
                                    in.file, in.world, in.ranks, in.file));
  const Scenario s = apply_mutators(in);
  if (s.ranks != world.size())
    throw ScenarioError(world.kind() == "mpi"
                            ? fmt::format("{}: world.ranks is {}, but mpirun started {} processes; run it with -np {}",
                                          s.file, s.ranks, world.size(), s.ranks)
                            : fmt::format("{}: world.ranks is {}, but the thread world has {} ranks", s.file, s.ranks,
                                          world.size()));
  ImplPtr impl;
  try {
    impl = make_implementation(s.impl);
  } catch (const ImplementationError& e) {
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, e.what()));
  }
  if (auto why = impl->unsupported_world(world.kind() == "mpi" ? WorldKind::Mpi : WorldKind::Threads))
    throw ScenarioError(fmt::format("{}: impl: {}", s.file, *why));
  if (auto why = impl->unavailable())
    throw ScenarioUnavailable(fmt::format("{}: impl: {} cannot run here: {}", s.file, s.impl, *why));
  ReplayResult res;
  res.guarded = o.guarded.value_or(s.guarded);
  const bool guarded = res.guarded;
  const int p = s.ranks;
  const Clock::time_point epoch = world.start();
  // The run's identity, in every dump: the root's random id, and what ran.
  std::random_device rd;
  const std::string chosen = fmt::format("{:08x}{:08x}", rd(), rd());
  const std::string run_id = world.broadcast(chosen, Clock::now() + std::chrono::seconds(60)).value_or(chosen);
  const std::string yaml = scenario_to_yaml(s);
  const std::string run_what = fmt::format("{:016x}", fnv1a(yaml.data(), yaml.size()));
  // A crash dumps every rank's recorder where the dumps would go anyway.
  set_crash_dump_dir(!o.dump_dir.empty() ? o.dump_dir : temp_dir("crash", epoch));
  set_crash_context(fmt::format("replaying {} ({})", s.file, s.name));
  const double limit_s = run_limit_s(s);
  const auto timeout = millis(s.deadline_s);
  // What the rank bodies touch lives on the heap, owned by the bodies too: a
  // body that never returns (stuck inside the implementation) keeps it alive
  // after this function has returned.
  struct Shared {
    Scenario s;
    ImplPtr impl;
    std::unique_ptr<CallGuard> guard;  // the world's calls
    std::map<std::string, std::unique_ptr<CallGuard>> group_guards;  // each process group's
    std::vector<RankRecorders> recs;
    std::vector<RankResults> outs;
    std::vector<std::string> verdicts;
    std::vector<std::vector<FaultTally>> tallies;
  };
  auto sh = std::make_shared<Shared>();
  sh->s = s;
  sh->impl = impl;
  sh->guard = world.call_guard(epoch, timeout);
  // A process group's guard is shared memory between its ranks' threads.
  for (const auto& g : s.groups)
    sh->group_guards[g.name] = std::make_unique<FingerprintGuard>(static_cast<int>(g.ranks.size()), epoch, timeout);
  sh->recs.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    if (world.holds(r)) sh->recs[static_cast<size_t>(r)] = make_recorders(s, r, epoch, run_id, run_what);
  for (int r = 0; r < p; ++r) sh->outs.emplace_back(p, r, o.kept_output_bytes);
  sh->verdicts.resize(static_cast<size_t>(p));
  sh->tallies.resize(static_cast<size_t>(p));
  auto& recs = sh->recs;
  auto& verdicts = sh->verdicts;
  auto& guard = sh->guard;
  bool some_rank_stalls = false;
  for (int r = 0; r < p; ++r) some_rank_stalls |= stalls(s, r);

  const WorldRun run = world.run(
      [sh, p, timeout, guarded, epoch, limit_s, some_rank_stalls](RankContext& ctx) {
        const int r = ctx.rank();
        const auto ri = static_cast<size_t>(r);
        RankEnv env{sh->s, r, sh->impl, timeout, sh->recs[ri], sh->outs[ri], {}, {}, {}, sh->tallies[ri]};
        if (guarded) {
          env.before_call = [sh, r](const std::string& g, const CallFingerprint& fp) {
            (g.empty() ? *sh->guard : *sh->group_guards.at(g)).check(r, fp);
          };
          // A rank whose program ended: the guards name a call it will never
          // join once every other rank is in it (no deadline waited out).
          env.ended = [sh, r] {
            sh->guard->ended(r);
            for (const auto& g : sh->s.groups)
              if (std::find(g.ranks.begin(), g.ranks.end(), r) != g.ranks.end()) sh->group_guards.at(g.name)->ended(r);
          };
        }
        // Never enter the remaining calls: wait until the others give up or
        // end, or the run's limit.
        env.stall = [&ctx, epoch, limit_s] { ctx.wait_for_others(epoch + millis(limit_s - 1)); };
        const auto finish = [&] {
          sh->verdicts[ri] = verdict_text(sh->outs[ri], sh->tallies[ri]);
          if (some_rank_stalls && !stalls(sh->s, r)) ctx.announce_end();
        };
        try {
          run_rank_program(env, ctx.links());
        } catch (...) {
          finish();
          throw;
        }
        finish();
      },
      millis(limit_s));
  res.hung = run.hung;

  // Every rank's dump and verdict to the root, which judges.
  const std::string reason = run.hung ? "run limit" : (run.ok() ? "end of run" : "call failed or deadline");
  // A world that holds every rank (threads) hands the root its recorders'
  // dumps as they are; a world of processes sends them as JSON text.
  bool all_here = true;
  for (int r = 0; r < p; ++r) all_here = all_here && world.holds(r);
  std::vector<std::string> texts(static_cast<size_t>(p));
  if (!all_here)
    for (int r = 0; r < p; ++r)
      if (world.holds(r)) {
        // Every communicator's dump of the rank, in one text.
        nlohmann::json all = nlohmann::json::array();
        for (const FlightRecorder* rec : recs[static_cast<size_t>(r)].all()) all.push_back(rec->to_json(reason));
        texts[static_cast<size_t>(r)] = all.dump(1);
      }
  const Deadline gather_by = std::max(epoch + millis(limit_s + 5), Clock::now() + std::chrono::seconds(5));
  const auto dump_texts = all_here ? std::vector<std::optional<std::string>>(static_cast<size_t>(p))
                                   : world.gather(texts, gather_by);
  const auto verdict_texts = world.gather(verdicts, gather_by);
  res.seconds = std::chrono::duration<double>(Clock::now() - epoch).count();
  if (!world.root()) return res;  // rank 0 reports

  std::vector<RankDump> dumps;  // every communicator's, of every rank
  std::vector<size_t> to_file;  // the dumps worth a file, by index
  std::vector<nlohmann::json> checked;
  std::vector<int> checked_rank;
  for (int q = 0; q < p; ++q) {
    // A rank whose body never returned has a dump (what it recorded so far)
    // but no verdict; a rank whose process is gone has neither.
    const auto& d = dump_texts[static_cast<size_t>(q)];
    const auto& v = verdict_texts[static_cast<size_t>(q)];
    if ((!all_here && !d) || !v || v->empty()) res.hung = true;
    if (!all_here && !d) continue;
    std::vector<RankDump> mine;
    if (all_here) {
      for (const FlightRecorder* rec : recs[static_cast<size_t>(q)].all()) mine.push_back(rec->to_dump(reason));
    } else {
      for (const auto& one : nlohmann::json::parse(*d)) mine.push_back(rank_dump_from_json(one));
    }
    for (auto& one_dump : mine) {
      // Point-to-point calls the rank never made are not worth a file; a
      // group's collectives are, empty (a member that never joined shows).
      if (!one_dump.p2p || !one_dump.calls.empty() || one_dump.crash) to_file.push_back(dumps.size());
      dumps.push_back(std::move(one_dump));
    }
    checked.push_back(v && !v->empty() ? nlohmann::json::parse(*v)
                                        : nlohmann::json{{"checked", 0}, {"wrong", ""}, {"wrong_seq", 0}});
    checked_rank.push_back(q);
  }
  res.first_failure = first_failure(dumps);

  AnalysisOptions ao;
  ao.run_finished = run.ok() && !res.hung;
  // Unguarded mode is production: dumps on the deadline, and the diagnosis
  // from the files alone. Guarded mode writes them when asked to.
  if (!guarded || !o.dump_dir.empty()) {
    res.dump_dir = !o.dump_dir.empty() ? o.dump_dir : temp_dir("dumps", epoch);
    std::filesystem::create_directories(res.dump_dir);
    for (const size_t i : to_file) {
      const RankDump& d = dumps[i];
      write_file_atomically((std::filesystem::path(res.dump_dir) / dump_file_name(d.rank, d.group, d.p2p)).string(),
                            rank_dump_to_json(d).dump(1));
    }
  }
  if (guarded) {
    res.diagnoses = analyze(dumps, ao);
    // The first guard to fire, of the world's and the groups'.
    std::optional<Diagnosis> v = guard->violation();
    double when = v ? guard->violation_time() : -1;
    for (const auto& [name, g] : sh->group_guards) {
      auto gv = g->violation();
      if (gv && (!v || g->violation_time() < when)) {
        v = gv;
        v->group = name;
        v->text = group_prefix(name) + v->text;
        when = g->violation_time();
      }
    }
    if (v) {
      // The guard's finding is the same classification, made before the call
      // from that call's fingerprints alone. The analysis saw more: the calls
      // each rank would have issued next, which tell an extra or a skipped
      // call from a reorder; its finding at that call wins then.
      // A missing rank named early: the analysis's finding at that call says
      // more (the last call each rank completed, how the program ended).
      // Ranks missing from several groups' calls: which guard fires first
      // depends on when the last of the others reached each call (a busy
      // host reorders them); the analysis orders those findings by blame
      // and by the call entered first, as analyze does, so its first one
      // for these ranks is taken, in whichever group.
      const auto realigned = std::find_if(res.diagnoses.begin(), res.diagnoses.end(), [&](const Diagnosis& d) {
        if (v->kind == DiagnosisKind::MissingRank) return d.kind == DiagnosisKind::MissingRank && d.ranks == v->ranks;
        return (d.kind == DiagnosisKind::ExtraCall || d.kind == DiagnosisKind::SkippedCall) && d.group == v->group &&
               d.seq == v->seq;
      });
      if (realigned != res.diagnoses.end()) {
        Diagnosis first = *realigned;
        first.text += v->kind == DiagnosisKind::MissingRank
                          ? " (caught by guarded mode when the last of the other ranks reached the call, without "
                            "waiting out the deadline)"
                          : " (caught before the call by guarded mode)";
        res.diagnoses.erase(realigned);
        v = first;
      }
      std::erase_if(res.diagnoses, [&](const Diagnosis& d) { return d.kind == v->kind && d.group == v->group; });
      res.diagnoses.insert(res.diagnoses.begin(), *v);
      res.time_to_diagnosis = when;
    }
  } else {
    dumps = load_dumps(res.dump_dir);
    res.diagnoses = analyze(dumps, ao);
  }

  // Every waited result against the oracle (exact data: compared bit for bit),
  // each rank's counted; the first wrong one is a diagnosis unless the calls
  // disagreed or a payload was corrupted on purpose.
  const bool corrupted = has_diagnosis(res, {DiagnosisKind::CorruptedPayload});
  const bool mismatch = has_diagnosis(res, {DiagnosisKind::ShapeMismatch, DiagnosisKind::OrderMismatch,
                                            DiagnosisKind::ExtraCall, DiagnosisKind::SkippedCall});
  for (const auto& v : checked) res.results_checked += v.at("checked").get<size_t>();
  // A link fault that changed nothing: said, so the run does not read like a missed diagnosis.
  std::vector<FaultTally> total(s.faults.size());
  for (const auto& v : checked) {
    const auto& f = v.contains("faults") ? v["faults"] : nlohmann::json::array();
    for (size_t i = 0; i < f.size() && i < total.size(); ++i) {
      total[i].seen += f[i].at(0).get<uint64_t>();
      total[i].fired += f[i].at(1).get<uint64_t>();
    }
  }
  res.unfired = unfired_faults(s, total);
  bool wrong = false;
  for (size_t i = 0; i < checked.size() && !mismatch && !corrupted; ++i) {
    const std::string text = checked[i].at("wrong").get<std::string>();
    if (text.empty()) continue;
    Diagnosis d;
    d.kind = DiagnosisKind::WrongResult;
    d.ranks = {checked_rank[i]};
    d.seq = checked[i].at("wrong_seq").get<uint64_t>();
    d.group = checked[i].value("wrong_group", "");
    d.text = group_prefix(d.group) + text;
    res.diagnoses.push_back(d);
    wrong = true;
    break;
  }
  // Each rank checked its share of every result; the shares cover the whole
  // only if every rank holds the same bits. At the first call where they do
  // not, the ranks outside the largest group of equal results are named.
  if (!wrong && !mismatch && !corrupted && !checked.empty()) {
    // (group, seq) -> hash -> ranks
    std::map<std::pair<std::string, uint64_t>, std::map<uint64_t, std::vector<int>>> by_seq;
    for (size_t i = 0; i < checked.size(); ++i)
      for (const auto& h : checked[i].value("hashes", nlohmann::json::array()))
        by_seq[{h.at(0).get<std::string>(), h.at(1).get<uint64_t>()}][h.at(2).get<uint64_t>()].push_back(
            checked_rank[i]);
    for (const auto& [key, groups] : by_seq) {
      const auto& [group, seq] = key;
      if (groups.size() < 2) continue;
      auto largest = groups.begin();
      for (auto it = groups.begin(); it != groups.end(); ++it)
        if (it->second.size() > largest->second.size()) largest = it;
      Diagnosis d;
      d.kind = DiagnosisKind::WrongResult;
      d.seq = seq;
      // No strict majority: every rank is named.
      size_t ties = 0;
      for (const auto& [hash, ranks] : groups) ties += ranks.size() == largest->second.size() ? 1 : 0;
      std::string held;
      for (const auto& [hash, ranks] : groups) {
        held += fmt::format("{}{} one result", held.empty() ? "" : "; ", ranks_text(ranks));
        if (ties > 1 || &ranks != &largest->second) d.ranks.insert(d.ranks.end(), ranks.begin(), ranks.end());
      }
      std::sort(d.ranks.begin(), d.ranks.end());
      d.group = group;
      const CallRecord* rec = nullptr;
      for (const auto& dump : dumps)
        if (dump.group == group && !dump.p2p)
          for (const auto& cr : dump.calls)
            if (cr.seq == seq) rec = &cr;
      d.text = fmt::format("{}call #{} ({}): the ranks hold different results ({}); each rank's share of the {} "
                           "elements matched the oracle, so a result is wrong outside its rank's share",
                           group_prefix(group), seq, rec ? rec->tag : "?", held,
                           rec ? rec->count : 0);
      res.diagnoses.push_back(d);
      break;
    }
  }
  if (!guarded) {
    res.symptom = symptom_of(dumps, checked, checked_rank, res.hung, s.deadline_s);
    if (res.symptom.empty() && !res.diagnoses.empty())
      res.symptom = "nothing: every call returned and every result the oracle checked was right (a silent bug)";
  }
  if (res.diagnoses.empty() && !run.ok()) res.unexplained = run.failures();
  if (!res.diagnoses.empty() && res.time_to_diagnosis < 0)
    res.time_to_diagnosis = std::chrono::duration<double>(Clock::now() - epoch).count();
  res.dumps = std::move(dumps);
  return res;
}

uint64_t replay_memory_needed(const Scenario& s, int ranks, uint64_t kept_output_bytes) {
  const uint64_t saturated = ~uint64_t{0};
  const uint64_t budget = kept_output_bytes ? kept_output_bytes : kept_output_budget(s.ranks);
  uint64_t worst_rank = 0;
  for (int r = 0; r < s.ranks; ++r) {
    // Bytes of every call, of async calls waited only at the end (or never:
    // input and output held to the end), the largest call, the oracle's scratch.
    uint64_t all = 0, held = 0, largest = 0, pending = 0, check = 0;
    for (const auto& st : s.program(r)) {
      if (st.kind != Step::Call) continue;
      if (!s.in_group(st.call.group, r)) continue;  // not its call
      const uint64_t p = static_cast<uint64_t>(s.group_size(st.call.group)), es = dtype_size(st.call.dtype);
      const Collective k = st.call.coll;
      // The larger buffer of the call (a gather's output, a reduce-scatter's input).
      const auto elements = checked_mul(st.call.count, p);  // bounds the gathers' buffers first
      if (!elements) return saturated;
      const int gp = static_cast<int>(p);
      const auto bytes =
          checked_mul(std::max(send_elements(k, st.call.count, gp), recv_elements(k, st.call.count, gp)), es);
      if (!bytes) return saturated;
      // The oracle's inputs: for an all-reduce p whole buffers when small, p
      // shares (about one buffer) when large, as check_out does; a
      // reduce-scatter's p inputs of count (one input's size).
      if (k == Collective::AllReduce)
        check = std::max(check, st.call.count * p <= kWholeCheckElements ? *bytes * p : *bytes + p * es);
      if (k == Collective::ReduceScatter) check = std::max(check, *bytes);
      largest = std::max(largest, *bytes);
      const auto a = checked_add(all, *bytes);
      if (!a) return saturated;
      all = *a;
      if (st.call.async && st.call.wait != WaitAt::Next) held += *bytes;  // held <= all
      if (st.call.async && st.call.wait == WaitAt::Next) pending = std::max(pending, *bytes);
    }
    // Outputs: those held to the end, the rest up to the kept budget and one
    // call; inputs: those held, the current call's and one pending; the
    // messages in flight on the links (a call's bytes, about); the scratch.
    // Each term but `all` is at most 2^50 or so (2^48 bytes a buffer).
    auto rank = checked_add(std::min(all - held, budget + largest), 2 * largest + pending + check);
    if (rank) rank = checked_add(*rank, held);
    if (rank) rank = checked_add(*rank, held);
    if (!rank) return saturated;
    worst_rank = std::max(worst_rank, *rank);
  }
  const auto n = checked_mul(worst_rank, static_cast<uint64_t>(ranks));
  return n ? *n : saturated;
}

bool diagnosis_matches(const ExpectSpec& e, const Diagnosis& d, std::string* why) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (diagnosis_name(d.kind) != e.diagnosis)
    return say(fmt::format("expected {}, got {}", e.diagnosis, diagnosis_name(d.kind)));
  if (!e.ranks.empty()) {
    auto a = e.ranks, b = d.ranks;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return say(fmt::format("expected ranks [{}], the diagnosis names [{}]", fmt::join(a, ", "), fmt::join(b, ", ")));
  }
  if (e.seq && d.seq != e.seq)
    return say(fmt::format("expected call #{}, the diagnosis names #{}", *e.seq, d.seq ? std::to_string(*d.seq) : "none"));
  if (e.group && d.group != *e.group)
    return say(fmt::format("expected process group {}, the diagnosis names {}", e.group->empty() ? "world" : *e.group,
                           d.group.empty() ? "world" : d.group));
  if (e.edge && d.edge != e.edge)
    return say(fmt::format("expected edge {} -> {}, the diagnosis names {}", e.edge->first, e.edge->second,
                           d.edge ? fmt::format("{} -> {}", d.edge->first, d.edge->second) : "none"));
  for (const auto& f : e.fields)
    if (std::find(d.fields.begin(), d.fields.end(), f) == d.fields.end())
      return say(fmt::format("expected field '{}' among the differing fields [{}]", f, fmt::join(d.fields, ", ")));
  return true;
}

bool expectation_holds(const ExpectSpec& e, const ReplayResult& r, std::string* why) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (e.diagnosis == "none") {
    if (r.diagnoses.empty()) return true;
    return say(fmt::format("expected no diagnosis, got {}", diagnosis_name(r.diagnoses.front().kind)));
  }
  if (r.diagnoses.empty()) return say(fmt::format("expected {}, got no diagnosis", e.diagnosis));
  const Diagnosis& d = r.diagnoses.front();
  if (diagnosis_name(d.kind) != e.diagnosis)
    return say(fmt::format("expected {}, got {} first", e.diagnosis, diagnosis_name(d.kind)));
  return diagnosis_matches(e, d, why);
}

bool expectations_hold(const Scenario& s, const ReplayResult& r, std::string* why) {
  const ExpectSpec none{"none", {}, {}, {}, {}, {}};
  if (!expectation_holds(s.expect ? *s.expect : none, r, why)) return false;
  for (size_t i = 0; i < s.also_expect.size(); ++i) {
    const ExpectSpec& e = s.also_expect[i];
    std::string closest;
    const bool found = std::any_of(r.diagnoses.begin(), r.diagnoses.end(), [&](const Diagnosis& d) {
      std::string w;
      if (diagnosis_matches(e, d, &w)) return true;
      if (closest.empty() || diagnosis_name(d.kind) == e.diagnosis) closest = w;
      return false;
    });
    if (!found) {
      if (why)
        *why = fmt::format("expectation {} ({}) matches none of the {} findings{}", i + 2, e.diagnosis,
                           r.diagnoses.size(), closest.empty() ? "" : ": closest: " + closest);
      return false;
    }
  }
  return true;
}

}  // namespace collcheck
