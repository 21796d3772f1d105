// The metrics of a long run, through prometheus-cpp (issue 14): one registry
// of collcheck_* families, named after Prometheus' conventions (base units,
// _total counters, no per-rank label: a straggler is a gauge holding a rank),
// and its three ways out: an HTTP /metrics endpoint for the run's life, a
// Pushgateway push (at the end and every N seconds), and a textfile for
// node_exporter's textfile collector, written atomically.
//
// In the MPI world rank 0 drives and judges every workload, so its registry
// holds the world's metrics: it alone serves, pushes and writes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Registry;
class Exposer;
}  // namespace prometheus

namespace collcheck {

// The label value for a buffer size: a power-of-4 class ("le_4KiB", ...,
// "le_1GiB", "gt_1GiB"), so that series stay few whatever sizes a run draws.
std::string size_class(uint64_t bytes);

class Metrics {
 public:
  // `versions`: collcheck's and each peer library's, the labels of
  // collcheck_build_info ({"collcheck": "0.9.0", "mpi": "...", ...}).
  explicit Metrics(const std::map<std::string, std::string>& versions);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // `n` units of a workload (verify cases, fault scenarios, sweep rows) ran,
  // and failed `property` ("" when they passed).
  void unit(const std::string& impl, const std::string& workload, const std::string& property, uint64_t n = 1);
  void wrong_elements(const std::string& impl, uint64_t n);
  // One all-reduce call, timed.
  void collective(const std::string& impl, const std::string& op, const std::string& dtype, uint64_t bytes,
                  double seconds);
  void busbw(const std::string& impl, const std::string& dtype, uint64_t bytes, double bytes_per_second);
  // A fault scenario: its nemesis ("none" for a clean run) and outcome
  // ("detected", "missed", "misdiagnosed", "clean", "false_alarm", "too_slow").
  void fault(const std::string& nemesis, const std::string& outcome, double seconds_to_diagnosis);
  // The spread of the ranks' arrival at one call, and the last rank to arrive.
  void arrival(double skew_seconds, int straggler);
  // A unit passed: the batch jobs' last-success timestamp.
  void success();
  void elapsed(double seconds, double remaining);

  // The text exposition format (what /metrics serves).
  std::string text() const;
  // --metrics-listen: serves /metrics on ADDR:PORT (port 0: a free one);
  // returns the port bound. Throws std::runtime_error when it cannot bind.
  int listen(const std::string& address);
  // --pushgateway [http://]HOST:PORT: the job's group, replaced by each push
  // (HTTP PUT), through a Pusher (pusher.h): bounded by a connect and a total
  // timeout, on its own thread. Throws std::invalid_argument for a bad address.
  void set_pushgateway(const std::string& gateway, const std::string& job, const std::string& instance);
  // Hands the current values to the pusher; returns at once.
  void push();
  // Waits for the last push (at most its timeouts); "" when every push made
  // worked, else a line saying how many failed and why the last did.
  std::string finish_pushes();
  // --metrics-textfile PATH: writes text() atomically (a rename).
  void write_textfile(const std::string& path) const;

 private:
  struct Families;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Families> f_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<class Pusher> pusher_;
};

// --metrics-listen's IPV4:PORT or [IPV6]:PORT (civetweb read 999.1.1.1 as
// 231.1.1.1), or std::invalid_argument naming the flag and what is allowed.
void check_listen_address(const std::string& address);
// "HOST:PORT" split, or std::invalid_argument naming `flag`.
std::pair<std::string, std::string> split_host_port(const std::string& text, const std::string& flag);

}  // namespace collcheck
