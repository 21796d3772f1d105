// The watchdog: a thread per rank that never calls MPI. It puts a deadline on
// every blocking call (and on the guard's exchange); when one passes it
// leaves a marker file in the dump directory, writes this rank's dump, waits
// a little for the other ranks' dumps, and ends the rank, which makes the
// launcher end the job. Every other rank's watchdog sees the marker and
// writes its dump too, wherever that rank is (stuck in MPI or not). It also
// writes the dump on SIGTERM, SIGINT and SIGABRT (the signal handler only
// raises a flag and waits, a bounded time, for the dump; the signals are
// blocked on this thread, and one that lands on a thread writing a dump lets
// that dump finish first), and at exit. A rank ended by a signal waits, a
// bounded time, for every rank's dump before it dies: Open MPI sends SIGTERM,
// then SIGKILL a second later, and SIGKILL to the ranks left as soon as one
// is gone.
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

std::atomic<int64_t> since_ns{0};   // when the outermost blocking call began (0: none)
std::atomic<uint64_t> blocked_id{0};
std::atomic<int> depth{0};
std::atomic<int> signalled{0};      // the signal to dump for
std::atomic<bool> dumped_for_signal{false};
std::atomic<pid_t> dumping_tid{0};  // the thread writing a dump now (0: none)
std::atomic<int> deferred{0};       // a signal that landed on that thread
std::atomic<bool> stop{false};
std::thread thread;

std::string marker() { return config().dir + "/hang"; }

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

int dumps_in_dir() {
  int n = 0;
  if (DIR* d = ::opendir(config().dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "mpi_trace_rank_", 15) == 0 && std::strstr(e->d_name, ".json") &&
          !std::strstr(e->d_name, ".tmp"))
        ++n;
    ::closedir(d);
  }
  return n;
}

// Waits, at most `max_s`, until every rank's dump is in the directory. A
// rank must not end before the others have written theirs: Open MPI's
// mpirun, ending a job, kills the ranks it has left as soon as one of them
// is gone, dump or not.
void wait_for_every_dump(double max_s) {
  for (double t = 0; t < max_s && dumps_in_dir() < world_size(); t += 0.05) ::usleep(50'000);
}

void die_of(int sig) {
  dumped_for_signal.store(true);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void on_signal(int sig) {
  signalled.store(sig);
  if (dumping_tid.load() == ::gettid()) {  // this thread writes a dump: it dies when the dump is written
    deferred.store(sig);
    return;
  }
  // Wait (bounded: 3 s) for the watchdog's dump, then die of the signal.
  for (int i = 0; i < 300 && !dumped_for_signal.load(); ++i) {
    timespec ts{0, 10'000'000};
    ::nanosleep(&ts, nullptr);
  }
  die_of(sig);
}

void fire(double sat_s) {
  if (FILE* f = std::fopen(marker().c_str(), "wx")) {  // the first rank to fire names itself
    std::fprintf(f, "rank %d\n", world_rank());
    std::fclose(f);
  }
  std::fprintf(stderr,
               "collcheck-mpi: rank %d has sat in one MPI call for %.1f s (deadline %.1f s); every rank's recorder is "
               "being dumped to %s\n",
               world_rank(), sat_s, config().deadline_s, config().dir.c_str());
  std::fflush(stderr);
  dump("hang: this rank's deadline passed in a blocking call");
  wait_for_every_dump(5.0);  // the others see the marker within a poll
  ::_exit(kExitFound);
}

void run() {
  sigset_t mask;  // the signals are the program's threads' to take: this thread must write the dump they wait for
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGABRT}) sigaddset(&mask, sig);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  bool dumped_for_peer = false;
  while (!stop.load()) {
    ::usleep(50'000);
    if (const int sig = signalled.load(); sig && !dumped_for_signal.load()) {
      dump(sig == SIGABRT ? "signal: SIGABRT" : sig == SIGINT ? "signal: SIGINT" : "signal: SIGTERM");
      wait_for_every_dump(2.0);
      dumped_for_signal.store(true);
    }
    const int64_t t0 = since_ns.load();
    if (t0 > 0) {
      const double sat = static_cast<double>(now_ns() - t0) / 1e9;
      if (sat > config().deadline_s) fire(sat);
    }
    if (!dumped_for_peer && exists(marker())) {
      dump("hang: another rank's deadline passed");
      dumped_for_peer = true;
    }
  }
}

}  // namespace

void mark_job_ending(const char* why) {
  if (FILE* f = std::fopen((config().dir + "/ended").c_str(), "a")) {
    std::fprintf(f, "rank %d: %s\n", world_rank(), why);
    std::fclose(f);
  }
}

void dump_begins() { dumping_tid.store(::gettid()); }

void dump_ends() {
  pid_t me = ::gettid();
  dumping_tid.compare_exchange_strong(me, 0);
  if (const int sig = deferred.exchange(0)) {
    wait_for_every_dump(2.0);
    die_of(sig);
  }
}

void blocking_enter(uint64_t id) {
  if (depth.fetch_add(1) == 0) {
    blocked_id.store(id);
    since_ns.store(now_ns());
  }
}

void blocking_leave() {
  if (depth.fetch_sub(1) == 1) since_ns.store(0);
}

void watchdog_start() {
  ::mkdir(config().dir.c_str(), 0755);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGABRT}) {
    struct sigaction old{};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_DFL) ::sigaction(sig, &sa, nullptr);  // the program's own handlers stay
  }
  thread = std::thread(run);
}

void watchdog_stop() {
  stop.store(true);
  if (thread.joinable()) thread.join();
}

}  // namespace collcheck_mpi
