#include "harness/world/mpi_world.h"

#include "harness/world/crash_handler.h"
#include "harness/world/mpi_clock.h"
#include "harness/model/usage_error.h"

#include "harness/world/watched.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstring>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace collcheck {

namespace {
MpiWorld* g_world = nullptr;

void poll_sleep(int& spins) {
  if (++spins < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}
}  // namespace

bool complete_by(MPI_Request& req, Deadline by) {
  for (int flag = 0, spins = 0;;) {
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) return true;
    if (Clock::now() >= by) return false;
    poll_sleep(spins);
  }
}

MpiWorld& MpiWorld::init(int* argc, char*** argv) {
  if (g_world) return *g_world;
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI_Init_thread failed: {}", mpi_error_string(rc)));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        fmt::format("the MPI library gives thread level {}, and the MPI world needs MPI_THREAD_MULTIPLE ({})",
                    provided, static_cast<int>(MPI_THREAD_MULTIPLE)));
  }
  auto* w = new MpiWorld();
  MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &w->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  w->host_.assign(name, static_cast<size_t>(len));
  MPI_Comm_dup(MPI_COMM_WORLD, &w->control_);
  MPI_Comm_set_errhandler(w->control_, MPI_ERRORS_RETURN);
  // All ranks are alive at start-up, so these collectives cannot hang on a
  // missing rank; a rank that never starts is mpirun's to report.
  // The nodes: the ranks that share memory (MPI_COMM_TYPE_SHARED) are one
  // node, named by its lowest world rank.
  {
    MPI_Comm node_comm = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank_, MPI_INFO_NULL, &node_comm);
    int leader = w->rank_;
    if (node_comm != MPI_COMM_NULL) {
      MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node_comm);
      MPI_Comm_free(&node_comm);
    }
    w->nodes_.assign(static_cast<size_t>(w->size_), 0);
    MPI_Allgather(&leader, 1, MPI_INT, w->nodes_.data(), 1, MPI_INT, MPI_COMM_WORLD);
  }
  for (int p = 1; p <= w->size_; ++p) {
    MPI_Comm lc = MPI_COMM_NULL, cc = MPI_COMM_NULL;
    const int color = w->rank_ < p ? 0 : MPI_UNDEFINED;
    MPI_Comm_split(MPI_COMM_WORLD, color, w->rank_, &lc);
    MPI_Comm_split(MPI_COMM_WORLD, color, w->rank_, &cc);
    if (cc != MPI_COMM_NULL) MPI_Comm_set_errhandler(cc, MPI_ERRORS_RETURN);
    w->links_comm_.push_back(lc);
    w->coll_comm_.push_back(cc);
    w->links_.push_back(lc != MPI_COMM_NULL ? std::make_unique<MpiLinks>(
                                                  lc, std::vector<int>(w->nodes_.begin(), w->nodes_.begin() + p), cc)
                                            : nullptr);
  }
  g_world = w;
  return *w;
}

MpiWorld* MpiWorld::get() { return g_world; }

bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

MpiLinks& MpiWorld::links(int p) {
  if (p < 1 || p > size_ || !links_[static_cast<size_t>(p - 1)])
    throw std::logic_error(fmt::format("rank {} has no links for a world of {} ranks", rank_, p));
  return *links_[static_cast<size_t>(p - 1)];
}

MPI_Comm MpiWorld::comm(int p) const {
  if (p < 1 || p > size_) return MPI_COMM_NULL;
  return coll_comm_[static_cast<size_t>(p - 1)];
}

void MpiWorld::send(int to, int tag, const std::string& bytes, Deadline deadline) {
  MPI_Request req;
  MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to, tag, control_, &req);
  int flag = 0, spins = 0;
  while (true) {
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) return;
    if (Clock::now() >= deadline) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
      throw std::runtime_error(fmt::format("rank {}: rank {} did not take a control message by the deadline", rank_, to));
    }
    poll_sleep(spins);
  }
}

std::optional<std::string> MpiWorld::recv(int from, int tag, Deadline deadline) {
  int flag = 0, spins = 0;
  MPI_Status st;
  while (true) {
    MPI_Iprobe(from, tag, control_, &flag, &st);
    if (flag) break;
    if (Clock::now() >= deadline) return std::nullopt;
    poll_sleep(spins);
  }
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  std::string out(static_cast<size_t>(n), '\0');
  MPI_Recv(out.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, control_, MPI_STATUS_IGNORE);
  return out;
}

int MpiWorld::processes_on_node(bool counts) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  int mine = counts ? 1 : 0, n = 0;
  MPI_Allreduce(&mine, &n, 1, MPI_INT, MPI_SUM, node);
  MPI_Comm_free(&node);
  return n;
}

bool MpiWorld::any_process(bool mine) {
  int m = mine ? 1 : 0, any = 0;
  MPI_Request req;
  MPI_Iallreduce(&m, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req);
  // Every process asks at the same point of the same job; one that does not
  // come within two minutes is stuck, and waiting longer would hang the job.
  if (!complete_by(req, Clock::now() + std::chrono::minutes(2)))
    throw std::runtime_error(fmt::format("rank {}: not every process came to agree within two minutes", rank_));
  return any != 0;
}

int MpiWorld::agree_exit_code(int code) {
  if (rank_ == 0) {
    for (int q = 1; q < size_; ++q) send(q, control_tag::kExitCode, std::to_string(code), Clock::now() + std::chrono::seconds(30));
    return code;
  }
  auto c = recv(0, control_tag::kExitCode, Clock::now() + std::chrono::seconds(120));
  return c ? std::atoi(c->c_str()) : 1;
}

void MpiWorld::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  exit_is_verdict();  // the abort's code is the verdict, and Open MPI's abort ends in exit()
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

void MpiWorld::finalize() {
  // A body that never returned may still hold its links: they are left to the
  // end of the process.
  if (broken_)
    for (auto& l : links_) (void)l.release();
  links_.clear();
  for (auto& c : links_comm_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  for (auto& c : coll_comm_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  MPI_Comm_free(&control_);
  MPI_Finalize();
}

// ---- World ----

namespace {

// One rank's body in the MPI world: this process's rank of the whole world.
class MpiRankContext final : public RankContext {
 public:
  MpiRankContext(MpiWorld& w, uint64_t run, int size)
      : w_(w), size_(size), over_tag_(control_tag::kRunOverBase + static_cast<int>(run % 1000)) {}
  int rank() const override { return w_.rank(); }
  int size() const override { return size_; }
  Links& links() override { return w_.links(size_); }
  void barrier(Deadline deadline) override {
    MPI_Request req;
    MPI_Ibarrier(w_.comm(size_), &req);
    if (!complete_by(req, deadline))
      throw std::runtime_error(fmt::format("rank {}: barrier not reached by every rank by the deadline", w_.rank()));
  }
  void wait_for_others(Deadline deadline) override { (void)w_.recv(MPI_ANY_SOURCE, over_tag_, deadline); }
  void announce_end() override {
    // Small messages go eagerly; nobody waits for these to be read.
    for (int q = 0; q < size_; ++q) {
      if (q == w_.rank()) continue;
      MPI_Request req;
      MPI_Isend("x", 1, MPI_CHAR, q, over_tag_, w_.control(), &req);
      MPI_Request_free(&req);
    }
  }

 private:
  MpiWorld& w_;
  int size_;
  int over_tag_;
};

// A control message of run `run`: "<run> <body>". Messages of an earlier run
// that came too late for it are dropped here.
std::string stamped(uint64_t run, const std::string& body) { return fmt::format("{} {}", run, body); }
std::optional<std::string> recv_stamped(MpiWorld& w, int from, int tag, uint64_t run, Deadline deadline) {
  const std::string want = fmt::format("{} ", run);
  while (auto m = w.recv(from, tag, deadline)) {
    if (m->compare(0, want.size(), want) == 0) return m->substr(want.size());
  }
  return std::nullopt;
}

}  // namespace

Clock::time_point MpiWorld::start() {
  // Read before anyone meets: a bad value stops every process the same way.
  const char* how = std::getenv("COLLCHECK_MPI_CLOCK");
  const std::string_view clock = how != nullptr ? how : "";
  if (clock != "" && clock != "auto" && clock != "estimate")
    throw UsageError(fmt::format("COLLCHECK_MPI_CLOCK: '{}': allowed: auto (the default: one host's shared clock "
                                 "exactly, ping-pong elsewhere), estimate (ping-pong everywhere)",
                                 clock));
  MPI_Request req;
  MPI_Ibarrier(control_, &req);
  const Deadline by = Clock::now() + std::chrono::minutes(2);
  if (!complete_by(req, by))
    throw std::runtime_error(fmt::format("rank {}: not every process came to the start of the run within two minutes", rank_));
  clock_ = common_epoch(control_, rank_, size_, by, clock == "estimate");
  return clock_.epoch;
}

size_t MpiWorld::drain_links(Deadline deadline) {
  size_t n = 0;
  auto drain_all = [&] {
    for (auto& l : links_)
      if (l) n += l->drain();
  };
  // Round 1 drains while it waits: until every process has come, every
  // process has finished its run, so what it left is sent. Round 2 only
  // waits: a process that has passed it may send the next run's messages,
  // and nobody may drain then (a process still draining would drop them).
  for (int round = 0; round < 2; ++round) {
    MPI_Request req;
    MPI_Ibarrier(control_, &req);
    for (int flag = 0, spins = 0;;) {
      if (round == 0) drain_all();
      MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      if (flag) break;
      if (Clock::now() >= deadline)
        throw std::runtime_error(fmt::format("rank {}: not every process came to drain the links in time", rank_));
      poll_sleep(spins);
    }
    if (round == 0) drain_all();
  }
  return n;
}

WorldRun MpiWorld::run(const RankFn& fn, std::chrono::milliseconds limit, int ranks) {
  const uint64_t run = ++runs_;
  const int n = ranks == 0 ? size_ : ranks;
  if (n < 1 || n > size_) throw std::logic_error(fmt::format("MpiWorld::run: {} ranks in a world of {}", n, size_));
  WorldRun result;
  if (rank_ >= n) return result;  // this process takes no part
  links(n).set_epoch(run);
  RankOutcome mine;
  if (broken_) {
    mine.error = fmt::format("rank {}: an earlier run's body never returned, so this process runs no more", rank_);
  } else {
    // The body runs on a thread of its own under the limit: one that never
    // returns (a plugin stuck in a loop) leaves this thread free to report.
    auto ctx = std::make_shared<MpiRankContext>(*this, run, n);
    auto out = std::make_shared<RankOutcome>();
    // The body, its context and its outcome are the thread's own copies: a
    // body that never returns keeps them, not the caller's.
    const bool returned = body_thread_->run(
        [ctx, out, fn] {
          try {
            fn(*ctx);
            out->ok = true;
          } catch (const std::exception& e) {
            out->error = e.what();
          } catch (...) {
            out->error = "unknown exception";
          }
          out->returned = true;
        },
        limit);
    if (returned) {
      mine = *out;
    } else {
      broken_ = true;  // its thread may never come back: no further body may run
      mine.error = fmt::format("rank {} (pid {} on {}): did not return within the run's limit ({:.1f} s)", rank_,
                               ::getpid(), host_, std::chrono::duration<double>(limit).count());
    }
  }
  // Every rank's outcome to the root, and the root's verdict back: "<ok><returned><error>".
  const Deadline by = Clock::now() + limit;
  result.ranks.assign(static_cast<size_t>(n), RankOutcome{});
  if (root()) {
    result.ranks[0] = mine;
    result.hung = !mine.returned;
    for (int q = 1; q < n; ++q) {
      auto m = recv_stamped(*this, q, control_tag::kRunOutcome, run, by);
      auto& o = result.ranks[static_cast<size_t>(q)];
      if (!m || m->size() < 2) {
        o.error = fmt::format("rank {} sent no outcome by the deadline", q);
        result.hung = true;
        continue;
      }
      o.ok = (*m)[0] == '1';
      o.returned = (*m)[1] == '1';
      o.error = m->substr(2);
      result.hung = result.hung || !o.returned;
    }
    const std::string verdict = stamped(run, result.ok() ? "1" : "0");
    for (int q = 1; q < n; ++q) {
      try {
        send(q, control_tag::kRunVerdict, verdict, by);
      } catch (const std::exception&) {  // that rank is gone; it was reported above
      }
    }
  } else {
    std::optional<std::string> v;
    try {
      send(0, control_tag::kRunOutcome,
           stamped(run, fmt::format("{}{}{}", mine.ok ? '1' : '0', mine.returned ? '1' : '0', mine.error)), by);
      v = recv_stamped(*this, 0, control_tag::kRunVerdict, run, by);
    } catch (const std::exception&) {  // rank 0 does not answer: no verdict
    }
    for (auto& o : result.ranks) o = RankOutcome{true, v && *v == "1", ""};
    result.ranks[static_cast<size_t>(rank_)] = mine;
    if (!v) result.ranks[0] = RankOutcome{false, false, "rank 0 sent no verdict by the deadline"};
    result.hung = !v || !mine.returned;
  }
  return result;
}

std::optional<std::string> MpiWorld::broadcast(const std::string& text, Deadline deadline) {
  const uint64_t cast = ++casts_;
  if (!root()) return recv_stamped(*this, 0, control_tag::kBroadcast, cast, deadline);
  const std::string m = stamped(cast, text);
  for (int q = 1; q < size_; ++q) send(q, control_tag::kBroadcast, m, deadline);
  return text;
}

std::vector<std::optional<std::string>> MpiWorld::gather(const std::vector<std::string>& local, Deadline deadline) {
  const std::string& own = local.at(static_cast<size_t>(rank_));
  if (!root()) {
    try {
      send(0, control_tag::kGatherText, stamped(runs_, own), deadline);
    } catch (const std::exception&) {  // rank 0 does not take it: it reports this rank as missing
    }
    return {};
  }
  std::vector<std::optional<std::string>> all(static_cast<size_t>(size_));
  all[0] = own;
  for (int q = 1; q < size_; ++q) all[static_cast<size_t>(q)] = recv_stamped(*this, q, control_tag::kGatherText, runs_, deadline);
  return all;
}

void MpiWorld::gather_bytes(const std::vector<std::byte*>& buffers, size_t bytes) {
  const Deadline by = Clock::now() + std::chrono::seconds(60);
  if (!root()) {
    try {
      send(0, control_tag::kGatherBytes,
           stamped(runs_, std::string(reinterpret_cast<const char*>(buffers[static_cast<size_t>(rank_)]), bytes)), by);
    } catch (const std::exception&) {  // rank 0 does not take it: it reports the buffer as missing
    }
    return;
  }
  for (int q = 1; q < size_; ++q) {
    auto m = recv_stamped(*this, q, control_tag::kGatherBytes, runs_, by);
    if (!m || m->size() != bytes)
      throw std::runtime_error(fmt::format("rank {}'s buffer did not arrive at rank 0 for checking", q));
    std::memcpy(buffers[static_cast<size_t>(q)], m->data(), bytes);
  }
}

}  // namespace collcheck
