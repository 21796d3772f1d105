#include "impl/sched.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace collcheck {

namespace {
thread_local FiberHost* tl_host = nullptr;
thread_local const LinkModel* tl_model = nullptr;
}  // namespace

namespace sched {

FiberHost* host() { return tl_host; }
HostScope::HostScope(FiberHost* h) : prev_(tl_host) { tl_host = h; }
HostScope::~HostScope() { tl_host = prev_; }

Clock::time_point now() { return tl_host != nullptr ? tl_host->now() : Clock::now(); }
bool in_fiber() { return tl_host != nullptr && tl_host->in_fiber(); }

std::shared_ptr<void>& local_slot(const void* key) {
  if (in_fiber()) return tl_host->local_slot(key);
  thread_local std::map<const void*, std::shared_ptr<void>> slots;
  return slots[key];
}

void notify_all(std::condition_variable& cv) {
  cv.notify_all();
  if (tl_host != nullptr) tl_host->notify(&cv);
}

void sleep_until(Deadline t) {
  if (in_fiber()) {
    while (tl_host->now() < t) tl_host->park(nullptr, t);
    return;
  }
  std::this_thread::sleep_until(t);
}

void sleep_for(Clock::duration d) {
  if (d <= Clock::duration::zero()) return;
  sleep_until(now() + d);
}

void yield() {
  if (in_fiber()) {
    tl_host->park(nullptr, tl_host->now() + std::chrono::microseconds(1));
    return;
  }
  std::this_thread::yield();
}

Task::Task(std::function<void()> fn) {
  if (in_fiber()) {
    fiber_done_ = tl_host->spawn(std::move(fn));
  } else {
    thread_ = std::thread(std::move(fn));
  }
}
Task::Task(Task&& o) noexcept = default;
Task& Task::operator=(Task&& o) noexcept {
  if (this != &o) {
    join();
    thread_ = std::move(o.thread_);
    fiber_done_ = std::move(o.fiber_done_);
  }
  return *this;
}
Task::~Task() { join(); }
bool Task::joinable() const { return thread_.joinable() || fiber_done_ != nullptr; }

void Task::join() {
  if (thread_.joinable()) thread_.join();
  if (fiber_done_ != nullptr) {
    // The fiber notifies on its done flag when it returns.
    while (!*fiber_done_ && in_fiber()) tl_host->park(fiber_done_.get(), Deadline::max());
    fiber_done_.reset();
  }
}

}  // namespace sched

const LinkModel* current_link_model() { return tl_model; }
void set_current_link_model(const LinkModel* m) { tl_model = m; }

void charge_launch() {
  if (tl_model != nullptr && sched::in_fiber())
    sched::sleep_for(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(tl_model->launch_s)));
}

namespace {
Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// "1us", "5e-6", "2ms", "0.5s": seconds.
double parse_time(const std::string& key, const std::string& v) {
  static const std::vector<std::pair<std::string, double>> units = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  for (const auto& [u, scale] : units) {
    if (v.size() > u.size() && v.compare(v.size() - u.size(), u.size(), u) == 0) {
      const std::string num = v.substr(0, v.size() - u.size());
      size_t used = 0;
      double x = -1;
      try {
        x = std::stod(num, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == num.size() && x >= 0 && std::isfinite(x)) return x * scale;
      break;
    }
  }
  throw std::invalid_argument(
      fmt::format("--link-model: {}={} is not a time (a number >= 0 with ns, us, ms or s, as 1us)", key, v));
}

// "20GB/s", "12.5GB/s", "800MB/s": bytes per second, > 0.
double parse_bandwidth(const std::string& key, const std::string& v) {
  static const std::vector<std::pair<std::string, double>> units = {{"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}, {"B/s", 1}};
  for (const auto& [u, scale] : units) {
    if (v.size() > u.size() && v.compare(v.size() - u.size(), u.size(), u) == 0) {
      const std::string num = v.substr(0, v.size() - u.size());
      size_t used = 0;
      double x = 0;
      try {
        x = std::stod(num, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == num.size() && x > 0 && std::isfinite(x)) return x * scale;
      break;
    }
  }
  throw std::invalid_argument(
      fmt::format("--link-model: {}={} is not a bandwidth (a number > 0 with GB/s, MB/s, KB/s or B/s, as 20GB/s)", key, v));
}
}  // namespace

Clock::duration LinkModel::message(int a, int b, size_t bytes) const {
  const bool same = ranks_per_node <= 0 || a / ranks_per_node == b / ranks_per_node;
  const double s = same ? alpha_node_s + static_cast<double>(bytes) * beta_node_s
                        : alpha_net_s + static_cast<double>(bytes) * beta_net_s;
  return seconds(s);
}

Clock::duration LinkModel::reduction(size_t bytes) const {
  return seconds(static_cast<double>(bytes) / reduce_bytes_per_s);
}

LinkModel LinkModel::parse(const std::string& spec) {
  LinkModel m;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "alpha_node") {
      m.alpha_node_s = parse_time(key, val);
    } else if (key == "alpha_net") {
      m.alpha_net_s = parse_time(key, val);
    } else if (key == "beta_node") {
      m.beta_node_s = 1.0 / parse_bandwidth(key, val);
    } else if (key == "beta_net") {
      m.beta_net_s = 1.0 / parse_bandwidth(key, val);
    } else if (key == "reduce") {
      m.reduce_bytes_per_s = parse_bandwidth(key, val);
    } else if (key == "launch") {
      m.launch_s = parse_time(key, val);
    } else {
      throw std::invalid_argument(fmt::format(
          "--link-model: unknown key '{}' (allowed: alpha_node, beta_node, alpha_net, beta_net, reduce, launch; "
          "as alpha_node=1us,beta_node=20GB/s)",
          key));
    }
  }
  return m;
}

std::string LinkModel::describe() const {
  return fmt::format(
      "alpha_node={:g}us,beta_node={:g}GB/s,alpha_net={:g}us,beta_net={:g}GB/s,reduce={:g}GB/s,launch={:g}us",
      alpha_node_s * 1e6, 1e-9 / beta_node_s, alpha_net_s * 1e6, 1e-9 / beta_net_s, reduce_bytes_per_s * 1e-9,
      launch_s * 1e6);
}

}  // namespace collcheck
