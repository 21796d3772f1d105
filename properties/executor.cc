#include "properties/executor.h"

#include "harness/world/sim_watch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace collcheck {

std::string outcome_to_json(const CaseOutcome& o) {
  nlohmann::json j = {{"ok", o.ok},
                      {"property", o.failure.property},
                      {"detail", o.failure.detail},
                      {"by_kind", {o.by_kind[0], o.by_kind[1], o.by_kind[2], o.by_kind[3]}},
                      {"max_err_units", o.max_err_units},
                      {"max_peer_diff_units", o.max_peer_diff_units},
                      {"world_broken", o.world_broken},
                      {"deviant", o.deviant},
                      {"order_checked", o.order_checked},
                      {"harness_error", o.harness_error},
                      {"also_failed", o.also_failed}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

CaseOutcome outcome_from_json(const std::string& line) {
  const auto j = nlohmann::json::parse(line);
  CaseOutcome o;
  o.ok = j.at("ok").get<bool>();
  o.failure.property = j.at("property").get<std::string>();
  o.failure.detail = j.at("detail").get<std::string>();
  for (int k = 0; k < 4; ++k) o.by_kind[k] = j.at("by_kind").at(static_cast<size_t>(k)).get<size_t>();
  // JSON has no infinity: nlohmann writes null for it.
  auto num = [&](const char* key) {
    return j.at(key).is_null() ? std::numeric_limits<double>::infinity() : j.at(key).get<double>();
  };
  o.max_err_units = num("max_err_units");
  o.order_checked = j.value("order_checked", size_t{0});
  o.max_peer_diff_units = num("max_peer_diff_units");
  o.world_broken = j.at("world_broken").get<bool>();
  o.deviant = j.at("deviant").get<std::map<std::string, size_t>>();
  o.harness_error = j.value("harness_error", false);
  o.also_failed = j.value("also_failed", std::vector<std::string>{});
  return o;
}

namespace {

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

int child_out = -1;  // the child's pipe to its parent

// A simulated world's thread blocked by the implementation (sim_watch.h):
// the case's calls never complete, as at the parent's backstop (a rank that
// never returned), only sooner and saying why; the child starts afresh.
void answer_stall(const char* message) {
  CaseOutcome o;
  o.ok = false;
  o.world_broken = true;
  o.failure = {"call-completes", fmt::format("  {}\n", message)};
  (void)write_all(child_out, outcome_to_json(o) + "\n");
  _exit(0);
}

[[noreturn]] void child_main(RunConfig cfg, int in, int out) {
  child_out = out;
  set_sim_stall_handler(answer_stall);
  CaseRunner runner(std::move(cfg));
  // Line reads of large explicit cases: read in blocks.
  std::string buf, line;
  char block[1 << 16];
  for (;;) {
    size_t nl;
    while ((nl = buf.find('\n')) == std::string::npos) {
      const ssize_t n = ::read(in, block, sizeof block);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);  // the parent closed the pipe
      buf.append(block, static_cast<size_t>(n));
    }
    line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    CaseOutcome o;
    try {
      o = runner.run(decode_case(line));
    } catch (const std::exception& e) {
      o.ok = false;
      o.failure = {"call-completes", fmt::format("  the case could not run: {}\n", e.what())};
    }
    if (!write_all(out, outcome_to_json(o) + "\n")) _exit(0);
    if (o.world_broken) _exit(0);  // a rank thread is stuck in the implementation: start afresh
  }
}

}  // namespace

IsolatedExecutor::IsolatedExecutor(RunConfig cfg) : cfg_(std::move(cfg)) { ::signal(SIGPIPE, SIG_IGN); }

IsolatedExecutor::~IsolatedExecutor() { stop(false); }

void IsolatedExecutor::start() {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) {
    // Dies with the process that forked it: a child left running a case
    // after its parent was killed (SIGKILL from a scheduler) kept what it
    // inherited, the soak's locked results file among it, and the requeued
    // soak's --resume found the file locked.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(0);  // it died before the line above
    ::close(down[1]);
    ::close(up[0]);
    child_main(cfg_, down[0], up[1]);
  }
  ::close(down[0]);
  ::close(up[1]);
  pid_ = pid;
  to_child_ = down[1];
  from_child_ = up[0];
}

void IsolatedExecutor::stop(bool kill_it) {
  if (pid_ < 0) return;
  ::close(to_child_);
  ::close(from_child_);
  if (kill_it) ::kill(pid_, SIGKILL);
  int status = 0;
  // After EOF on its pipe the child exits at once; do not wait on a stuck one.
  for (int i = 0; i < 200 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) ::usleep(10000);
  if (::waitpid(pid_, &status, WNOHANG) == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

CaseOutcome IsolatedExecutor::run(const Case& c) {
  if (pid_ < 0) start();
  CaseOutcome o;
  auto fail = [&](std::string detail) {
    o.ok = false;
    o.failure = {"call-completes", std::move(detail)};
    return o;
  };
  if (!write_all(to_child_, encode_case(c) + "\n")) {
    stop(true);
    return fail("  the isolated child that runs the implementation died before it took the case\n");
  }
  // Every call of the case (4, one per further call of its sequence, plus one per peer) has its own deadline; the
  // child reports a hang itself after them, this is the backstop.
  const auto budget = case_limit(c, cfg_) + std::chrono::seconds(13);
  const Deadline deadline = Clock::now() + budget;
  std::string line;
  std::string acc;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      stop(true);
      return fail(fmt::format("  no answer within {:.0f} s: the implementation never returned; the child process "
                              "running it was killed\n{}",
                              std::chrono::duration<double>(budget).count(),
                              cfg_.hang_hint.empty() ? "" : "  " + cfg_.hang_hint + "\n"));
    }
    if (stop_asked()) {
      stop(true);
      o.ok = false;
      o.interrupted = true;
      o.failure = {"", "  cut short by the end of the run: the isolated child was killed\n"};
      return o;
    }
    pollfd pfd{from_child_, POLLIN, 0};
    const int n = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 200)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char block[4096];
    const ssize_t got = ::read(from_child_, block, sizeof block);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {  // EOF: the child died
      ::close(to_child_);
      ::close(from_child_);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        return fail(fmt::format("  the implementation crashed the process: signal {} ({}){}\n", sig,
                                sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", std::string(": ") + strsignal(sig)));
      }
      return fail(fmt::format("  the process running the implementation exited with status {} in the middle of "
                              "the call\n",
                              WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    }
    acc.append(block, static_cast<size_t>(got));
    const size_t nl = acc.find('\n');
    if (nl == std::string::npos) continue;
    o = outcome_from_json(acc.substr(0, nl));
    if (o.world_broken) stop(false);
    return o;
  }
}

// A child process of its own, started for this one case: forked from this
// process (its rank threads idle between cases), it builds a fresh runner and
// fresh rank threads, so nothing an earlier case left behind reaches it.
// In process, only where nothing this process ran holds state a fork would
// share (forks_cleanly_after_use: not Gloo, MPI or NCCL); the isolated
// executor's own process never ran a case, so its fork is always clean.
namespace {

// `before`, then `c`, in one new child process; c's outcome.
CaseOutcome run_in_new_child(const RunConfig& cfg, const Case& c, std::span<const Case> before,
                             std::function<bool()> stop) {
  IsolatedExecutor fresh(cfg);
  fresh.set_should_stop(std::move(stop));
  for (const Case& b : before) {
    const CaseOutcome o = fresh.run(b);
    if (o.interrupted) return o;
  }
  return fresh.run(c);
}

}  // namespace

std::optional<CaseOutcome> InProcessExecutor::run_fresh(const Case& c, std::span<const Case> before) {
  const RunConfig& cfg = runner_.config();
  if (!cfg.impl->forks_cleanly_after_use()) return std::nullopt;
  for (const auto& peer : cfg.peers)
    if (!peer->forks_cleanly_after_use()) return std::nullopt;
  return run_in_new_child(cfg, c, before, [this] { return stop_asked(); });
}

InProcessExecutor::InProcessExecutor(RunConfig cfg) : runner_(std::move(cfg)) {
  for (int k = 1; k < runner_.config().parallel; ++k) more_.push_back(std::make_unique<CaseRunner>(runner_.config()));
}

std::string InProcessExecutor::why_no_fresh() const {
  const RunConfig& cfg = runner_.config();
  std::vector<std::string> names;
  if (!cfg.impl->forks_cleanly_after_use()) names.push_back(cfg.impl->name());
  for (const auto& peer : cfg.peers)
    if (!peer->forks_cleanly_after_use()) names.push_back(peer->name());
  return fmt::format("{} cannot be forked cleanly once used here", fmt::join(names, ", "));
}

std::optional<CaseOutcome> IsolatedExecutor::run_fresh(const Case& c, std::span<const Case> before) {
  return run_in_new_child(cfg_, c, before, [this] { return stop_asked(); });
}

std::unique_ptr<CaseExecutor> make_executor(RunConfig cfg, bool isolate) {
  if (isolate) return std::make_unique<IsolatedExecutor>(std::move(cfg));
  return std::make_unique<InProcessExecutor>(std::move(cfg));
}

CaseOutcome WorldExecutor::run(const Case& c) {
  if (c.p > world_.size())
    throw std::logic_error(fmt::format("a case of {} ranks in a world of {}", c.p, world_.size()));
  last_ = c;
  (void)world_.broadcast("C" + encode_case(c), Clock::now() + case_limit(c, cfg_));
  CaseOutcome out = run_case(world_, c, cfg_);
  if (out.world_broken) throw WorldLost("a rank of the world never returned or never answered", out);
  if (!out.ok) {  // a failed case may leave messages in flight: every process drops them
    (void)world_.broadcast("D", Clock::now() + std::chrono::seconds(30));
    world_.drain(Clock::now() + std::chrono::seconds(60));
  }
  return out;
}

void WorldExecutor::stop(int code) { (void)world_.broadcast(fmt::format("S{}", code), Clock::now() + std::chrono::seconds(30)); }

std::optional<int> serve_cases(World& world, const RunConfig& cfg, Events& ev) {
  // Between two cases the root runs its ranks and waits for everyone's (two
  // case limits at most), then checks and shrinks, which is quick.
  const auto idle = 2 * case_limit(cfg) + std::chrono::seconds(60);
  for (;;) {
    const auto cmd = world.broadcast("", Clock::now() + idle);
    if (!cmd) {
      ev.warn("collcheck: no command from rank 0 within {:.0f} s\n", std::chrono::duration<double>(idle).count());
      return std::nullopt;
    }
    if (cmd->starts_with("S")) return std::atoi(cmd->c_str() + 1);
    if (*cmd == "D") {
      world.drain(Clock::now() + std::chrono::seconds(60));
      continue;
    }
    if (!cmd->starts_with("C")) {
      ev.warn("collcheck: malformed command from rank 0\n");
      return std::nullopt;
    }
    (void)run_case(world, decode_case(std::string_view(*cmd).substr(1)), cfg);
  }
}

}  // namespace collcheck
