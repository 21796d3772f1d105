// The soak's "algorithms" workload: one peer algorithm verified by a child
// `collcheck verify` (algorithms.h).
#include "harness/soak/algorithms.h"

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <sstream>

#include "harness/model/child_process.h"
#include "harness/peers/gloo_impl.h"

namespace collcheck {

namespace {

constexpr int kMpiAlgorithms = 7;  // coll/tuned's 0 (the default decision) to 6 (Rabenseifner)

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  for (std::string dir; std::getline(ss, dir, ':');)
    if (!dir.empty() && ::access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  return false;
}

std::vector<std::string> child_args(const std::string& self, const AlgorithmUnit& u) {
  std::vector<std::string> a;
  const std::string common = fmt::format("--cases {} --seed {:#x} --timeout {} --progress off", u.cases, u.seed,
                                         u.call_timeout_s);
  if (u.peer.rfind("mpi:", 0) == 0) {
    a = {"mpirun", "--oversubscribe"};
    if (::geteuid() == 0) a.push_back("--allow-run-as-root");
    for (const std::string& s : {std::string("-np"), std::to_string(u.ranks), self, std::string("verify"),
                                 std::string("--world"), std::string("mpi"), std::string("--impl"), std::string("mpi"),
                                 std::string("--mpi-algo"), u.peer.substr(4)})
      a.push_back(s);
  } else {
    a = {self, "verify", "--impl", u.peer, "--max-ranks", std::to_string(u.ranks)};
  }
  std::stringstream ss(common);
  for (std::string w; ss >> w;) a.push_back(w);
  return a;
}

std::string joined(const std::vector<std::string>& a) {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "" : " ") + x;
  return s;
}

// What the child printed, and how it ended: its exit code, or -signal, or
// -1000 when its deadline passed, -1001 when it was stopped.
std::pair<std::string, int> run_child(const std::vector<std::string>& args, double deadline_s,
                                      const std::function<bool()>& should_stop) {
  ChildProcess child;
  try {
    child = start_child(args, {}, true);
  } catch (const std::runtime_error& e) {
    return {e.what(), -2};
  }
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  int ended = 0;  // 0 running; -1000 deadline; -1001 stopped
  char buf[65536];
  for (bool open = true; open;) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      const ssize_t n = ::read(child.out_fd, buf, sizeof buf);
      if (n <= 0) open = false;
      else if (out.size() < (size_t{8} << 20)) out.append(buf, static_cast<size_t>(n));
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (t > deadline_s) ended = -1000;
    else if (should_stop && should_stop()) ended = -1001;
    if (ended != 0) {
      stop_child(child, 5.0);
      ::close(child.out_fd);
      return {out, ended};
    }
  }
  ::close(child.out_fd);
  return {out, wait_child(child)};
}

std::string last_lines(const std::string& s, size_t n) {
  size_t pos = s.size();
  for (size_t k = 0; k <= n && pos > 0; ++k) pos = s.rfind('\n', pos - 1);
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

}  // namespace

std::vector<std::string> default_algorithm_peers() {
  std::vector<std::string> v;
  if (on_path("mpirun"))
    for (int a = 0; a < kMpiAlgorithms; ++a) v.push_back(fmt::format("mpi:{}", a));
  // Not gloo:bcube: its AllreduceBcube drops contributions whenever p is not
  // a power of two; nor gloo:ring: its AllreduceRing gives ranks different
  // bits for float sums from p = 3 and for NaN payloads from p = 2
  // (docs/peers.md, Findings 2 and 3). Every soak that drew one of them
  // failed on that known finding, not on news (CI, December 2026: gloo:ring,
  // p = 2, float32 max, a NaN). A plan that names them in peers soaks them still.
  for (const auto& g : gloo_algorithms())
    if (g != "bcube" && g != "ring") v.push_back("gloo:" + g);
  return v;
}

std::string check_algorithm_peer(const std::string& spec) {
  if (spec.rfind("mpi:", 0) == 0) {
    const std::string n = spec.substr(4);
    if (n.size() == 1 && n[0] >= '0' && n[0] < '0' + kMpiAlgorithms) return "";
    return fmt::format("mpi:N takes coll/tuned's allreduce algorithm N, 0 to {}", kMpiAlgorithms - 1);
  }
  if (spec.rfind("gloo:", 0) == 0) {
    for (const auto& g : gloo_algorithms())
      if (spec.substr(5) == g) return "";
    return "gloo:<algorithm> takes one of " + gloo_algorithm_choices();
  }
  return fmt::format("mpi:0 to mpi:{} or gloo:<algorithm> ({})", kMpiAlgorithms - 1, gloo_algorithm_choices());
}

AlgorithmOutcome run_algorithm_unit(const std::string& self, const AlgorithmUnit& u,
                                    const std::function<bool()>& should_stop) {
  AlgorithmOutcome o;
  const auto args = child_args(self, u);
  o.command = joined(args);
  const auto [out, code] = run_child(args, u.deadline_s, should_stop);
  o.exit_code = code;
  std::smatch m;
  static const std::regex pass(R"(\nPASS: (\d+) cases)"), fail(R"((\d+) cases passed, then case \d+ failed)"),
      property(R"(FAIL: property (\S+) does not hold)"), minimal(R"(\n  minimal case: ([^\n]*))"),
      replay(R"(\n  replay: ([^\n]*))"), deviation(R"(documented deviation (\S+): (\d+) elements)");
  if (std::regex_search(out, m, pass)) o.cases = std::stoul(m[1]);
  if (std::regex_search(out, m, fail)) o.cases = std::stoul(m[1]) + 1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), deviation); it != std::sregex_iterator(); ++it)
    o.deviations.emplace_back((*it)[1], std::stoul((*it)[2]));
  if (code == -1001) {
    o.interrupted = true;
    o.property = "interrupted";
    return o;
  }
  if (code == 0 && o.cases > 0) {
    o.ok = true;
    return o;
  }
  if (code == 1 && std::regex_search(out, m, property)) {
    o.property = m[1];
    if (std::regex_search(out, m, minimal)) o.minimal = m[1];
    if (std::regex_search(out, m, replay)) o.replay = m[1];
    const auto at = out.find("FAIL: property");
    o.detail = out.substr(at, std::min<size_t>(out.size() - at, 16384));
    return o;
  }
  // A hang past the deadline (a finding: the unit fails), or no verdict (a
  // crash, a usage error: the harness's error, not the peer's).
  o.harness_error = code != -1000;
  o.property = code == -1000 ? "hang" : "no verdict";
  o.replay = o.command;
  o.detail = fmt::format("{} (exit {}); its last lines:\n{}",
                         code == -1000 ? fmt::format("the child ran past the unit's deadline of {} s", u.deadline_s)
                                       : "the child gave no verdict",
                         code, last_lines(out, 20));
  return o;
}

}  // namespace collcheck
