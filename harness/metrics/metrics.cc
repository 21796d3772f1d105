#include "harness/metrics/metrics.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <stdexcept>

#include "harness/metrics/pusher.h"
#include "harness/model/atomic_file.h"

namespace collcheck {

std::string size_class(uint64_t bytes) {
  static const char* const kNames[] = {"1KiB", "4KiB", "16KiB", "64KiB", "256KiB", "1MiB",
                                       "4MiB", "16MiB", "64MiB", "256MiB", "1GiB"};
  uint64_t limit = 1024;
  for (const char* n : kNames) {
    if (bytes <= limit) return fmt::format("le_{}", n);
    limit *= 4;
  }
  return "gt_1GiB";
}

using prometheus::Histogram;

struct Metrics::Families {
  prometheus::Family<prometheus::Gauge>& build_info;
  prometheus::Family<prometheus::Counter>& units;
  prometheus::Family<prometheus::Counter>& failures;
  prometheus::Family<prometheus::Counter>& wrong;
  prometheus::Family<Histogram>& duration;
  prometheus::Family<prometheus::Gauge>& busbw;
  prometheus::Family<prometheus::Counter>& injected;
  prometheus::Family<prometheus::Counter>& outcomes;
  prometheus::Family<Histogram>& diagnosis;
  prometheus::Family<Histogram>& skew;
  prometheus::Family<prometheus::Gauge>& straggler;
  prometheus::Family<prometheus::Gauge>& last_success;
  prometheus::Family<prometheus::Gauge>& start;
  prometheus::Family<prometheus::Gauge>& elapsed;
  prometheus::Family<prometheus::Gauge>& remaining;
};

namespace {

// A gateway that accepted the connection and never answered hung the run.
constexpr std::chrono::milliseconds kPushConnect{3000}, kPushTotal{10000};
double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
// Four per decade-and-a-bit: 1 us to about 4 s for a call, 10 us to 1 s of skew.
Histogram::BucketBoundaries powers_of_4(double from, int n) {
  Histogram::BucketBoundaries b;
  for (int i = 0; i < n; ++i, from *= 4) b.push_back(from);
  return b;
}
}  // namespace

Metrics::Metrics(const std::map<std::string, std::string>& versions)
    : registry_(std::make_shared<prometheus::Registry>()),
      f_(new Families{
          prometheus::BuildGauge()
              .Name("collcheck_build_info")
              .Help("Always 1; its labels are the versions of collcheck and of each peer library")
              .Register(*registry_),
          prometheus::BuildCounter()
              .Name("collcheck_cases_total")
              .Help("Cases run (verify cases, fault scenarios, sweep rows), by implementation and workload")
              .Register(*registry_),
          prometheus::BuildCounter()
              .Name("collcheck_case_failures_total")
              .Help("Cases that failed, by implementation, workload and the property that failed")
              .Register(*registry_),
          prometheus::BuildCounter()
              .Name("collcheck_wrong_elements_total")
              .Help("Result elements outside the oracle's bound, by implementation")
              .Register(*registry_),
          prometheus::BuildHistogram()
              .Name("collcheck_collective_duration_seconds")
              .Help("Duration of one all-reduce call, by implementation, op, dtype and size class")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_busbw_bytes_per_second")
              .Help("Bus bandwidth of the latest sweep row (nccl-tests' busbw), by implementation, dtype and size "
                    "class")
              .Register(*registry_),
          prometheus::BuildCounter()
              .Name("collcheck_faults_injected_total")
              .Help("Fault scenarios run, by nemesis (none: a clean scenario)")
              .Register(*registry_),
          prometheus::BuildCounter()
              .Name("collcheck_fault_outcomes_total")
              .Help("Fault scenarios by nemesis and outcome: detected, missed, misdiagnosed, too_slow; clean or "
                    "false_alarm for nemesis none")
              .Register(*registry_),
          prometheus::BuildHistogram()
              .Name("collcheck_time_to_diagnosis_seconds")
              .Help("From a fault scenario's start to its diagnosis, by nemesis")
              .Register(*registry_),
          prometheus::BuildHistogram()
              .Name("collcheck_rank_arrival_skew_seconds")
              .Help("Spread of the ranks' arrival at one call (latest start minus earliest)")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_straggler_rank")
              .Help("The rank that arrived last at the most skewed call of the latest scenario")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_last_success_timestamp_seconds")
              .Help("Unix time of the latest unit of work that passed")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_start_timestamp_seconds")
              .Help("Unix time the run started")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_elapsed_seconds")
              .Help("Seconds the run has gone on")
              .Register(*registry_),
          prometheus::BuildGauge()
              .Name("collcheck_remaining_seconds")
              .Help("Seconds left of the run's duration")
              .Register(*registry_),
      }) {
  prometheus::Labels l(versions.begin(), versions.end());
  f_->build_info.Add(l).Set(1);
  f_->start.Add({}).Set(now_s());
  f_->elapsed.Add({}).Set(0);
}

Metrics::~Metrics() = default;

void Metrics::unit(const std::string& impl, const std::string& workload, const std::string& property, uint64_t n) {
  f_->units.Add({{"impl", impl}, {"workload", workload}}).Increment(static_cast<double>(n));
  if (!property.empty())
    f_->failures.Add({{"impl", impl}, {"workload", workload}, {"property", property}}).Increment(static_cast<double>(n));
  else if (n > 0)
    success();
}

void Metrics::wrong_elements(const std::string& impl, uint64_t n) {
  f_->wrong.Add({{"impl", impl}}).Increment(static_cast<double>(n));
}

void Metrics::collective(const std::string& impl, const std::string& op, const std::string& dtype, uint64_t bytes,
                         double seconds) {
  f_->duration
      .Add({{"impl", impl}, {"op", op}, {"dtype", dtype}, {"size_class", size_class(bytes)}}, powers_of_4(1e-6, 12))
      .Observe(seconds);
}

void Metrics::busbw(const std::string& impl, const std::string& dtype, uint64_t bytes, double bytes_per_second) {
  f_->busbw.Add({{"impl", impl}, {"dtype", dtype}, {"size_class", size_class(bytes)}}).Set(bytes_per_second);
}

void Metrics::fault(const std::string& nemesis, const std::string& outcome, double seconds_to_diagnosis) {
  f_->injected.Add({{"nemesis", nemesis}}).Increment();
  f_->outcomes.Add({{"nemesis", nemesis}, {"outcome", outcome}}).Increment();
  if (seconds_to_diagnosis >= 0)
    f_->diagnosis.Add({{"nemesis", nemesis}}, Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10})
        .Observe(seconds_to_diagnosis);
}

void Metrics::arrival(double skew_seconds, int straggler) {
  f_->skew.Add({}, powers_of_4(1e-5, 8)).Observe(skew_seconds);
  f_->straggler.Add({}).Set(straggler);
}

void Metrics::success() { f_->last_success.Add({}).Set(now_s()); }

void Metrics::elapsed(double seconds, double remaining) {
  f_->elapsed.Add({}).Set(seconds);
  f_->remaining.Add({}).Set(remaining);
}

std::string Metrics::text() const { return prometheus::TextSerializer().Serialize(registry_->Collect()); }

int Metrics::listen(const std::string& address) {
  check_listen_address(address);
  // Enough workers, and a read timeout, that idle connections cannot starve
  // a scrape: two idle clients held both of 2 workers for 30 s, past
  // Prometheus' 10 s scrape timeout.
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", address, "num_threads", "16", "request_timeout_ms", "2000", "enable_keep_alive", "no"});
  } catch (const std::exception&) {
    // civetweb's own words ("null context when constructing CivetServer") name nothing.
    throw std::runtime_error(fmt::format("cannot listen on {}: the port is in use, or the address is not one of this "
                                         "machine's",
                                         address));
  }
  exposer_->RegisterCollectable(registry_);
  const auto ports = exposer_->GetListeningPorts();
  if (ports.empty()) throw std::runtime_error(fmt::format("cannot listen on {}: no port bound", address));
  return ports.front();
}

void Metrics::set_pushgateway(const std::string& gateway, const std::string& job, const std::string& instance) {
  pusher_ = std::make_unique<Pusher>(push_target(gateway, job, instance), kPushConnect, kPushTotal,
                                     [](const std::string& line) { fmt::print(stderr, "collcheck: warning: {}\n", line); });
}

void Metrics::push() {
  if (pusher_) pusher_->push(text());
}

std::string Metrics::finish_pushes() {
  if (!pusher_) return "";
  if (!pusher_->flush(kPushTotal + std::chrono::seconds(1)))
    return fmt::format("the last push did not end within {} s", std::chrono::duration_cast<std::chrono::seconds>(kPushTotal).count() + 1);
  if (pusher_->failures() == 0) return "";
  return fmt::format("{} of {} push(es) failed{}", pusher_->failures(), pusher_->attempts(),
                     pusher_->last_error().empty() ? "; the last one worked" : "; the last: " + pusher_->last_error());
}

void Metrics::write_textfile(const std::string& path) const { write_file_atomically(path, text()); }

void check_listen_address(const std::string& address) {
  const auto [host, port] = split_host_port(address, "--metrics-listen");
  in_addr v4{};
  in6_addr v6{};
  const bool ok = host.size() > 2 && host.front() == '[' && host.back() == ']'
                      ? inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1
                      : inet_pton(AF_INET, host.c_str(), &v4) == 1;
  if (!ok)
    throw std::invalid_argument(fmt::format("--metrics-listen: '{}' is not an IP address; allowed: PORT, IPV4:PORT "
                                            "(such as 127.0.0.1:9464 or 0.0.0.0:9464), [IPV6]:PORT",
                                            host));
}

std::pair<std::string, std::string> split_host_port(const std::string& text, const std::string& flag) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw std::invalid_argument(fmt::format("{} must be HOST:PORT, got '{}'", flag, text));
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535)
    throw std::invalid_argument(fmt::format("{}: the port must be a number in 0..65535, got '{}'", flag, port));
  return {text.substr(0, colon), port};
}

}  // namespace collcheck
