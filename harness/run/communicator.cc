#include "harness/run/communicator.h"

#include <fmt/format.h>
#include <pthread.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

#include "harness/check/guard.h"
#include "harness/world/crash_handler.h"

namespace collcheck {

struct Work::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  Deadline deadline;
  CallFingerprint call;
  FlightRecorder* recorder = nullptr;
  // poison_async: the call computes into `staging`; wait() copies it to `recv`.
  std::vector<std::byte> staging_in, staging;
  void* recv = nullptr;
  // caller_progress: its communicator's calls that have not moved yet; a
  // wait() or test() enters the library and moves them.
  std::shared_ptr<Deferred> deferred;
};

// Moves every deferred call of a caller-progress communicator (defined below).
void progress_deferred(Deferred& d);

struct Work::Log {
  mutable std::mutex mu;
  std::vector<UnwaitedWork> unwaited;
};

Work::Work(std::shared_ptr<State> state, std::shared_ptr<Log> log)
    : state_(std::move(state)), log_(std::move(log)) {}

Work::~Work() {
  if (waited_) return;
  bool completed;
  {
    std::lock_guard<std::mutex> g(state_->mu);
    completed = state_->done;
  }
  std::lock_guard<std::mutex> g(log_->mu);
  log_->unwaited.push_back(UnwaitedWork{state_->call, completed});
}

bool Work::test() {
  if (state_->deferred) progress_deferred(*state_->deferred);
  std::lock_guard<std::mutex> g(state_->mu);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

void Work::wait() {
  if (state_->deferred) progress_deferred(*state_->deferred);
  std::unique_lock<std::mutex> lk(state_->mu);
  // The worker's own link waits end by the same deadline, so a short grace is
  // enough for it to report its error rather than ours.
  if (!sched::wait_until(state_->cv, lk, state_->deadline + std::chrono::seconds(1), [&] { return state_->done; })) {
    throw std::runtime_error(fmt::format("{}: wait() deadline expired before the call completed",
                                         state_->call.describe()));
  }
  if (state_->error) std::rethrow_exception(state_->error);
  if (!state_->staging.empty()) std::memcpy(state_->recv, state_->staging.data(), state_->staging.size());
  if (state_->recorder) state_->recorder->waited(state_->call.seq);
  waited_ = true;
}

const CallFingerprint& Work::call() const { return state_->call; }

// One async call waiting on its stream.
struct StreamTask {
  CallSpec spec;
  const void* send;
  void* recv;
  Reduction red;
  Links* links;
  const Implementation* impl;
  Tag tag;
  std::shared_ptr<Work::State> state;
};

namespace {
// One call on the caller's thread or the stream's: the all-reduce on the
// implementation under test, anything else on its reference implementation.
void execute_call(const CallSpec& c, const void* send, void* recv, const Reduction& red, Links& links,
                  const Implementation& impl, Tag tag, Deadline deadline) {
  if (c.coll == Collective::AllReduce) {
    impl.all_reduce(AllReduceArgs{send, recv, c.count, red, links, tag, deadline});
    return;
  }
  run_collective(CollectiveArgs{c.coll, send, recv, c.count, red, c.peer, links, tag, deadline});
}
}  // namespace

// The worker that executes async calls in issue order.
class Stream {
 public:
  explicit Stream(int r) : rank(r) {}
  int rank;  // whose calls this thread runs (named if it crashes)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<StreamTask>> queue;
  size_t in_flight = 0;  // queued + running
  bool stopping = false;
  sched::Task thread;  // an OS thread, or a fiber in the simulated world

  static void execute(StreamTask& t) {
    std::exception_ptr err;
    std::string what;
    if (t.state->recorder) t.state->recorder->started(t.state->call.seq);
    try {
      execute_call(t.spec, t.send, t.recv, t.red, *t.links, *t.impl, t.tag, t.state->deadline);
    } catch (const std::exception& e) {
      err = std::current_exception();
      what = e.what();
    } catch (...) {
      err = std::current_exception();
      what = "unknown error";
    }
    if (t.state->recorder) t.state->recorder->completed(t.state->call.seq, what);
    std::lock_guard<std::mutex> g(t.state->mu);
    t.state->error = err;
    t.state->done = true;
    sched::notify_all(t.state->cv);
  }

  void loop() {
    for (;;) {
      std::unique_ptr<StreamTask> t;
      {
        std::unique_lock<std::mutex> lk(mu);
        sched::wait(cv, lk, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping and drained
        t = std::move(queue.front());
        queue.pop_front();
      }
      execute(*t);
      std::lock_guard<std::mutex> g(mu);
      --in_flight;
      sched::notify_all(cv);
    }
  }

  void submit(std::unique_ptr<StreamTask> t) {
    std::lock_guard<std::mutex> g(mu);
    if (!thread.joinable()) {
      thread = sched::Task([this] {
        if (!sched::in_fiber()) pthread_setname_np(pthread_self(), "cc-async");  // visible in gdb, perf and hang dumps
        if (!sched::in_fiber()) set_crash_thread_rank(rank);
        loop();
      });
    }
    queue.push_back(std::move(t));
    ++in_flight;
    sched::notify_all(cv);
  }

  // Waits until every earlier async call has finished; false on deadline.
  bool drain(Deadline deadline) {
    std::unique_lock<std::mutex> lk(mu);
    return sched::wait_until(cv, lk, deadline, [&] { return in_flight == 0; });
  }

  // Runs every queued call (their deadlines bound them), as a stream would,
  // then stops the thread; a later submit starts a new one.
  void close() {
    {
      std::lock_guard<std::mutex> g(mu);
      stopping = true;
      sched::notify_all(cv);
    }
    if (thread.joinable()) thread.join();
    std::lock_guard<std::mutex> g(mu);
    stopping = false;
  }
  ~Stream() { close(); }
};

std::shared_ptr<Stream> make_stream(int rank) { return std::make_shared<Stream>(rank); }
bool synchronize(Stream& s, Deadline deadline) { return s.drain(deadline); }

// The async calls of a caller-progress communicator that have not moved: they
// move when the rank next enters the communicator. Collectives then run in
// issue order on the communicator's thread; each point-to-point call posts on
// a lane of its own (an idle one is reused), so that two pending sends never
// wait on each other, as MPI progresses every pending request at once.
struct Deferred {
  int rank;
  std::shared_ptr<Stream> stream;
  std::mutex mu;
  std::vector<std::unique_ptr<StreamTask>> tasks;
  std::vector<std::shared_ptr<Stream>> lanes;
};

void progress_deferred(Deferred& d) {
  std::lock_guard<std::mutex> g(d.mu);
  for (auto& t : d.tasks) {
    if (!is_p2p(t->spec.coll)) {
      d.stream->submit(std::move(t));
      continue;
    }
    std::shared_ptr<Stream> lane;
    for (const auto& l : d.lanes) {
      std::lock_guard<std::mutex> lg(l->mu);
      if (l->in_flight == 0) {
        lane = l;
        break;
      }
    }
    if (!lane) lane = d.lanes.emplace_back(make_stream(d.rank));
    lane->submit(std::move(t));
  }
  d.tasks.clear();
}

Communicator::Communicator(Links& links, CommOptions options)
    : links_(links), options_(std::move(options)), log_(std::make_shared<Work::Log>()),
      stream_(options_.stream && !options_.caller_progress ? options_.stream : make_stream(links.rank())) {
  impl_ = options_.impl ? options_.impl : make_implementation(options_.algorithm);
  if (options_.caller_progress) {
    deferred_ = std::make_shared<Deferred>();
    deferred_->rank = links.rank();
    deferred_->stream = stream_;
  }
}

void Communicator::finish() {
  if (deferred_) progress_deferred(*deferred_);
}

// The calls queued on the stream use this communicator's links: they run
// before it goes (those of the other communicators sharing the stream too,
// while every communicator of the rank is still alive). Calls that never
// moved (caller_progress, and no finish()) never run: their Works fail.
Communicator::~Communicator() {
  if (deferred_) {
    std::vector<std::shared_ptr<Stream>> lanes;
    {
      std::lock_guard<std::mutex> g(deferred_->mu);
      for (auto& t : deferred_->tasks) {
        std::lock_guard<std::mutex> sg(t->state->mu);
        t->state->error = std::make_exception_ptr(std::runtime_error(fmt::format(
            "{}: never progressed: its communicator moves async calls only inside its rank's calls, and rank {} "
            "entered none before its program ended",
            t->state->call.describe(), rank())));
        t->state->done = true;
        sched::notify_all(t->state->cv);
      }
      deferred_->tasks.clear();
      lanes.swap(deferred_->lanes);
    }
    for (auto& l : lanes) l->close();
  }
  stream_->close();
}

int Communicator::rank() const { return links_.rank(); }
int Communicator::size() const { return links_.size(); }

CallFingerprint Communicator::fingerprint(const CallSpec& c, bool async) {
  if (has_peer(c.coll) && (c.peer < 0 || c.peer >= size()))
    throw std::invalid_argument(fmt::format("{}: {} {} is not a rank of this communicator (0..{})",
                                            collective_name(c.coll), c.coll == Collective::Broadcast ? "root" : "peer",
                                            c.peer, size() - 1));
  if (is_p2p(c.coll) && c.peer == rank())
    throw std::invalid_argument(fmt::format("{}: rank {} cannot {} itself", collective_name(c.coll), rank(),
                                            c.coll == Collective::Send ? "send to" : "receive from"));
  CallFingerprint fp;
  fp.seq = is_p2p(c.coll) ? ++p2p_seq_ : ++seq_;
  fp.coll = c.coll;
  fp.peer = has_peer(c.coll) ? c.peer : -1;
  fp.tag = std::string(c.tag);
  fp.count = c.count;
  fp.dtype = c.dtype;
  fp.op = c.op;
  fp.algorithm = c.coll == Collective::AllReduce ? impl_->name() : "reference";
  fp.async = async;
  fp.blocking_matters = options_.mpi_matching;
  return fp;
}

// A collective's tag is its sequence number in the group; the n-th send from a
// to b and the n-th receive at b from a share theirs.
Tag Communicator::tag_of(const CallFingerprint& fp) {
  if (!is_p2p(fp.coll)) return call_tag(fp.seq, options_.group_id);
  const uint64_t n = ++p2p_ordinal_[{fp.peer, fp.coll == Collective::Send}];
  return call_tag(kP2pCall | n, options_.group_id);
}

FlightRecorder* Communicator::recorder_of(const CallFingerprint& fp) const {
  return is_p2p(fp.coll) ? options_.p2p_recorder : options_.recorder;
}

void Communicator::guard(const CallFingerprint& fp, FlightRecorder* rec, Tag tag) {
  if (!options_.before_call || is_p2p(fp.coll)) return;
  try {
    options_.before_call(fp);
  } catch (const GuardTimeout& e) {
    // It waited in the call for them, as a transfer would have: the dump
    // shows it blocked on the first that never came.
    if (rec && !e.missing.empty()) {
      rec->blocked(e.missing.front(), false, tag);
      rec->wait_failed();  // recorded as blocked; no longer waiting
    }
    throw;
  }
}

void Communicator::call(const CallSpec& c, const void* send, void* recv) {
  charge_launch();
  const Deadline deadline = sched::now() + options_.timeout;
  if (deferred_) progress_deferred(*deferred_);  // the rank is inside the library: what was pending moves
  const CallFingerprint fp = fingerprint(c, false);
  const Tag tag = tag_of(fp);
  FlightRecorder* rec = recorder_of(fp);
  if (rec) rec->scheduled(record_of(fp));
  // A host library's blocking send or receive does not wait for its pending
  // requests; its collectives keep their order.
  const bool in_order = !(deferred_ && is_p2p(c.coll));
  if (in_order && !stream_->drain(deadline)) {
    const std::string err = fmt::format("rank {}: {} #{} could not start: earlier async calls did not "
                                        "finish by its deadline",
                                        rank(), collective_name(c.coll), fp.seq);
    if (rec) rec->completed(fp.seq, err);
    throw std::runtime_error(err);
  }
  try {
    // A rank in guarded mode's fingerprint exchange has entered the call: a
    // peer that keeps it waiting there is late for it, not this rank.
    if (rec) rec->started(fp.seq);
    guard(fp, rec, tag);
    const Reduction red = resolve_reduction(c.dtype, c.op, size(), c.scalar);
    execute_call(c, send, recv, red, links_, *impl_, tag, deadline);
  } catch (const std::exception& e) {
    if (rec) rec->completed(fp.seq, e.what());
    throw;
  }
  if (rec) {
    rec->completed(fp.seq);
    rec->waited(fp.seq);  // a sync call is its own wait
  }
}

std::unique_ptr<Work> Communicator::call_async(const CallSpec& c, const void* send, void* recv) {
  charge_launch();
  // Entering the library moves what was pending, not the call being issued.
  if (deferred_) progress_deferred(*deferred_);
  auto state = std::make_shared<Work::State>();
  state->deferred = deferred_;
  state->deadline = sched::now() + options_.timeout;
  state->call = fingerprint(c, true);
  const Tag tag = tag_of(state->call);
  state->recorder = recorder_of(state->call);
  if (state->recorder) state->recorder->scheduled(record_of(state->call));
  try {
    guard(state->call, state->recorder, tag);
  } catch (const std::exception& e) {
    if (state->recorder) state->recorder->completed(state->call.seq, e.what());
    throw;
  }
  const void* task_send = send;
  void* task_recv = recv;
  const int p = size();
  if (options_.poison_async) {
    const size_t es = dtype_size(c.dtype);
    const size_t in_bytes = send_elements(c.coll, c.count, p) * es;
    const size_t out_bytes = recv_elements(c.coll, c.count, p) * es;
    const auto* in = static_cast<const std::byte*>(send);
    if (in_bytes) state->staging_in.assign(in, in + in_bytes);
    state->staging.resize(out_bytes);
    state->recv = recv;
    if (out_bytes) std::memset(recv, static_cast<int>(kPoisonByte), out_bytes);
    task_send = state->staging_in.data();
    task_recv = state->staging.data();
  }
  auto task = std::make_unique<StreamTask>(StreamTask{c, task_send, task_recv, resolve_reduction(c.dtype, c.op, p, c.scalar),
                                          &links_, impl_.get(), tag, state});
  if (deferred_) {
    std::lock_guard<std::mutex> g(deferred_->mu);
    deferred_->tasks.push_back(std::move(task));
  } else {
    stream_->submit(std::move(task));
  }
  return std::make_unique<Work>(state, log_);
}

void Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, RedOp op, double scalar,
                              std::string_view tag) {
  call(CallSpec{Collective::AllReduce, count, dtype, op, scalar, -1, tag}, send, recv);
}

std::unique_ptr<Work> Communicator::all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                                                     RedOp op, double scalar, std::string_view tag) {
  return call_async(CallSpec{Collective::AllReduce, count, dtype, op, scalar, -1, tag}, send, recv);
}

std::vector<UnwaitedWork> Communicator::unwaited() const {
  std::lock_guard<std::mutex> g(log_->mu);
  return log_->unwaited;
}

uint64_t Communicator::calls_issued() const { return seq_; }
uint64_t Communicator::p2p_calls_issued() const { return p2p_seq_; }

}  // namespace collcheck
