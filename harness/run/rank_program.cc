#include "harness/run/rank_program.h"

namespace collcheck {

namespace {



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

}  // namespace

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
  const CallData data(k.dtype, k.op, p, c.seed, send_elements(k.coll, n, p));
  auto in = [&](int q, size_t i) { return data.element(q, i); };
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
  if (data.split()) {
    // The closed form: O(1) an element. Only a wrong result is checked the
    // full way below, for its detail.
    const size_t from = whole ? 0 : lo, to = whole ? n : hi;
    bool right = true;
    for (size_t i = from; i < to && right; ++i) right = load_element(k.dtype, c.out.data(), i) == data.reduced(base + i);
    if (right) return std::nullopt;
  } else if (!whole && check(lo, hi).wrong == 0) {
    return std::nullopt;
  }
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

RankRecorders make_recorders(const Scenario& s, int r, Clock::time_point epoch, const FiberHost* host, const std::string& run_id,
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
      auto rec = std::make_unique<FlightRecorder>(r, s.ranks, epoch, 4096, transfers, host);
      rec->set_run(run_id, run_what);
      if (!g.empty() || p2p)
        rec->set_group(g, g.empty() ? std::vector<int>{} : s.members(g), p2p, s.group(g) && s.group(g)->caller_progress);
      (p2p ? rr.p2p : rr.coll).push_back(std::move(rec));
    }
  }
  return rr;
}

// What one rank's program needs from the world it runs in.

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
    if (const GroupSpec* g = s.group(gc.name)) {
      co.caller_progress = g->caller_progress;
      co.mpi_matching = g->mpi_matching;
    }
    if (env.before_call) co.before_call = [&env, g = gc.name](const CallFingerprint& fp) { env.before_call(g, fp); };
    gc.comm = std::make_unique<Communicator>(*gc.subset, co);
    comms.push_back(std::move(gc));
  }
  // An async call's Work, with its input (which must outlive the call).
  struct Pending {
    std::unique_ptr<Work> work;
    WaitAt at;
    size_t index;
    Bytes input;
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
        Bytes().swap(pw.input);
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
        sched::sleep_for(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(st.sleep_ms / 1e3)));
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
        if (!synchronize(*stream, sched::now() + env.timeout))
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
      const size_t in_bytes = send_elements(c.coll, c.count, gp) * dtype_size(c.dtype);
      const size_t out_bytes = recv_elements(c.coll, c.count, gp) * dtype_size(c.dtype);
      // In place (all_reduce, broadcast: the sizes agree): the output buffer
      // holds the input and is both, filled where it is, with no input buffer.
      // Out of place, the output starts zeroed, so that what an implementation
      // leaves unwritten reads the same in every run.
      const bool in_place = c.in_place && in_bytes == out_bytes && in_bytes > 0;
      Bytes input(in_place ? 0 : in_bytes);  // filled whole before the call: not zeroed first
      co_out.out.resize(out_bytes);
      if (!in_place) std::memset(co_out.out.data(), 0, out_bytes);
      std::byte* in_data = in_place ? co_out.out.data() : input.data();
      if (is_p2p(c.coll)) {
        const bool send = c.coll == Collective::Send;
        const uint64_t n = ++gc.p2p_sent[{c.peer, send}];
        co_out.seq = comm.p2p_calls_issued() + 1;
        co_out.seed = send ? p2p_seed(c.group, r, c.peer, n, c.tag) : p2p_seed(c.group, c.peer, r, n, c.tag);
        if (send) fill_input(in_data, c.count, c.dtype, RedOp::Sum, 2, 0, co_out.seed, DataClass::Exact);
      } else {
        co_out.seq = comm.calls_issued() + 1;
        co_out.seed = collective_seed(c.group, co_out.seq, c.tag);
        if (c.coll == Collective::Broadcast) co_out.root = local(c.peer);
        // A broadcast's input matters on its root only; every rank fills it alike.
        CallData(c.dtype, c.op, gp, co_out.seed, in_bytes / dtype_size(c.dtype)).fill(comm.rank(), in_data);
      }
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
          std::vector<std::byte> seen(out.out.begin(), out.out.end());  // the program reads its output here
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

}  // namespace collcheck
