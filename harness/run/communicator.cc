#include "harness/run/communicator.h"

#include <fmt/format.h>
#include <pthread.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <thread>

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
};

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
  std::lock_guard<std::mutex> g(state_->mu);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

void Work::wait() {
  std::unique_lock<std::mutex> lk(state_->mu);
  // The worker's own link waits end by the same deadline, so a short grace is
  // enough for it to report its error rather than ours.
  if (!state_->cv.wait_until(lk, state_->deadline + std::chrono::seconds(1), [&] { return state_->done; })) {
    throw std::runtime_error(fmt::format("{}: wait() deadline expired before the call completed",
                                         state_->call.describe()));
  }
  if (state_->error) std::rethrow_exception(state_->error);
  if (!state_->staging.empty()) std::memcpy(state_->recv, state_->staging.data(), state_->staging.size());
  if (state_->recorder) state_->recorder->waited(state_->call.seq);
  waited_ = true;
}

const CallFingerprint& Work::call() const { return state_->call; }

namespace {
struct Task {
  const void* send;
  void* recv;
  size_t count;
  Reduction red;
  Links* links;
  const Implementation* impl;
  std::shared_ptr<Work::State> state;
};
}  // namespace

// The worker that executes async calls in issue order.
struct Communicator::Engine {
  explicit Engine(int r) : rank(r) {}
  int rank;  // whose calls this thread runs (named if it crashes)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Task>> queue;
  size_t in_flight = 0;  // queued + running
  bool stopping = false;
  std::thread thread;

  static void execute(Task& t) {
    std::exception_ptr err;
    std::string what;
    if (t.state->recorder) t.state->recorder->started(t.state->call.seq);
    try {
      t.impl->all_reduce(AllReduceArgs{t.send, t.recv, t.count, t.red, *t.links, call_tag(t.state->call.seq),
                                t.state->deadline});
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
    t.state->cv.notify_all();
  }

  void loop() {
    for (;;) {
      std::unique_ptr<Task> t;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping and drained
        t = std::move(queue.front());
        queue.pop_front();
      }
      execute(*t);
      std::lock_guard<std::mutex> g(mu);
      --in_flight;
      cv.notify_all();
    }
  }

  void submit(std::unique_ptr<Task> t) {
    std::lock_guard<std::mutex> g(mu);
    if (!thread.joinable()) {
      thread = std::thread([this] {
        pthread_setname_np(pthread_self(), "cc-async");  // visible in gdb, perf and hang dumps
        set_crash_thread_rank(rank);
        loop();
      });
    }
    queue.push_back(std::move(t));
    ++in_flight;
    cv.notify_all();
  }

  // Waits until every earlier async call has finished; false on deadline.
  bool drain(Deadline deadline) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_until(lk, deadline, [&] { return in_flight == 0; });
  }

  ~Engine() {
    {
      std::lock_guard<std::mutex> g(mu);
      stopping = true;
      cv.notify_all();
    }
    // Queued calls still run (their deadlines bound them), as a stream would.
    if (thread.joinable()) thread.join();
  }
};

Communicator::Communicator(Links& links, CommOptions options)
    : links_(links), options_(std::move(options)), log_(std::make_shared<Work::Log>()),
      engine_(std::make_unique<Engine>(links.rank())) {
  impl_ = options_.impl ? options_.impl : make_implementation(options_.algorithm);
}

Communicator::~Communicator() = default;

int Communicator::rank() const { return links_.rank(); }
int Communicator::size() const { return links_.size(); }

void Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, RedOp op, double scalar,
                              std::string_view tag) {
  const Deadline deadline = Clock::now() + options_.timeout;
  const CallFingerprint fp{++seq_, std::string(tag), count, dtype, op, impl_->name(), false};
  if (options_.recorder) options_.recorder->scheduled(record_of(fp));
  if (!engine_->drain(deadline)) {
    const std::string err = fmt::format("rank {}: all_reduce #{} could not start: earlier async calls did not "
                                        "finish by its deadline",
                                        rank(), fp.seq);
    if (options_.recorder) options_.recorder->completed(fp.seq, err);
    throw std::runtime_error(err);
  }
  try {
    if (options_.before_call) options_.before_call(fp);
    if (options_.recorder) options_.recorder->started(fp.seq);
    const Reduction red = resolve_reduction(dtype, op, size(), scalar);
    impl_->all_reduce(AllReduceArgs{send, recv, count, red, links_, call_tag(fp.seq), deadline});
  } catch (const std::exception& e) {
    if (options_.recorder) options_.recorder->completed(fp.seq, e.what());
    throw;
  }
  if (options_.recorder) {
    options_.recorder->completed(fp.seq);
    options_.recorder->waited(fp.seq);  // a sync call is its own wait
  }
}

std::unique_ptr<Work> Communicator::all_reduce_async(const void* send, void* recv, size_t count, DType dtype,
                                                     RedOp op, double scalar, std::string_view tag) {
  auto state = std::make_shared<Work::State>();
  state->deadline = Clock::now() + options_.timeout;
  state->call = CallFingerprint{++seq_, std::string(tag), count, dtype, op, impl_->name(), true};
  state->recorder = options_.recorder;
  if (options_.recorder) options_.recorder->scheduled(record_of(state->call));
  try {
    if (options_.before_call) options_.before_call(state->call);
  } catch (const std::exception& e) {
    if (options_.recorder) options_.recorder->completed(state->call.seq, e.what());
    throw;
  }
  const void* task_send = send;
  void* task_recv = recv;
  if (options_.poison_async) {
    const size_t bytes = count * dtype_size(dtype);
    const auto* in = static_cast<const std::byte*>(send);
    state->staging_in.assign(in, in + bytes);
    state->staging.resize(bytes);
    state->recv = recv;
    std::memset(recv, static_cast<int>(kPoisonByte), bytes);
    task_send = state->staging_in.data();
    task_recv = state->staging.data();
  }
  auto task = std::make_unique<Task>(Task{task_send, task_recv, count, resolve_reduction(dtype, op, size(), scalar),
                                          &links_, impl_.get(), state});
  engine_->submit(std::move(task));
  return std::make_unique<Work>(state, log_);
}

std::vector<UnwaitedWork> Communicator::unwaited() const {
  std::lock_guard<std::mutex> g(log_->mu);
  return log_->unwaited;
}

uint64_t Communicator::calls_issued() const { return seq_; }

}  // namespace collcheck
