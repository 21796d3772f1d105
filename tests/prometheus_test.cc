// collcheck's metrics against the real programs (issue 14), all on 127.0.0.1,
// each started by the test and stopped after it: promtool checks the
// exposition; a real Prometheus scrapes a running soak's /metrics and a real
// Pushgateway the soak pushes to, and the values it serves must equal the
// counts the soak itself reported; every PromQL expression of the Grafana
// dashboard must parse and return data there. A second push to the same job
// replaces the group (HTTP PUT: prometheus-cpp's PushAdd()).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/net_util.h"
#include "tests/run_command.h"

namespace {

using json = nlohmann::json;
using namespace testutil::net;

// An instant query: the result vector, or a json null when it did not parse.
json query(int port, const std::string& promql) {
  const auto body = http_get(port, "/api/v1/query?query=" + url_encode(promql));
  if (!body) return nullptr;
  const json j = json::parse(*body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return nullptr;
  return j.at("data").at("result");
}

// {workload, impl} -> cases, from a soak's results file (its end line).
std::map<std::pair<std::string, std::string>, double> reported(const std::string& results) {
  std::map<std::pair<std::string, std::string>, double> m;
  std::ifstream in(results);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const json end = json::parse(last);  // kept: a range-for over a temporary's member dangles
  for (const auto& r : end.at("summary").at("by_workload_impl"))
    m[std::pair(r.at("workload").get<std::string>(), r.at("impl").get<std::string>())] = r.at("cases").get<double>();
  return m;
}

std::map<std::pair<std::string, std::string>, double> scraped(const json& result) {
  std::map<std::pair<std::string, std::string>, double> m;
  for (const auto& s : result)
    m[std::pair(s.at("metric").at("workload").get<std::string>(), s.at("metric").at("impl").get<std::string>())] =
        std::stod(s.at("value").at(1).get<std::string>());
  return m;
}

const std::string kDir = testing::TempDir() + "/prom-it";

TEST(Metrics, PromtoolAcceptsTheExposition) {
  if (!have("promtool")) GTEST_SKIP() << "promtool is not installed (ci/install-deps installs the prometheus package)";
  std::filesystem::remove_all(kDir);
  std::filesystem::create_directories(kDir);
  // A plan of tiny units and a fixed seed: its first two units are a fault
  // scenario and a sweep row, so every family below has a sample however
  // slow the machine (the default plan's random units once left only a
  // verify unit in 4 s under ASan next to other tests).
  std::ofstream(kDir + "/plan.yaml") << "implementations: [ring]\ndtypes: [float32]\nops: [sum]\n"
                                        "ranks: {min: 2, max: 3}\ntimeout: 10\nworkloads:\n"
                                        "  verify: {weight: 1, cases: 2, max_count: 64}\n  faults: {weight: 1}\n"
                                        "  perf: {weight: 1, min_bytes: 1K, max_bytes: 4K, dtypes: [float32], iters: 1, "
                                        "warmup: 0}\n";
  const auto r = testutil::collcheck("soak --plan " + kDir + "/plan.yaml --seed 1 --duration 4 --results " + kDir +
                                         "/p.jsonl --metrics-textfile " + kDir + "/p.prom",
                                     120);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto check = testutil::run_command("promtool check metrics < " + kDir + "/p.prom", 60);
  EXPECT_EQ(check.code, 0) << check.out;
  const std::string text = slurp(kDir + "/p.prom");
  for (const char* name : {"collcheck_build_info", "collcheck_cases_total", "collcheck_collective_duration_seconds_bucket",
                           "collcheck_fault_outcomes_total", "collcheck_last_success_timestamp_seconds"})
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
}

// sweep and verify export at their end: their rows and cases, checked by promtool.
TEST(Metrics, SweepAndVerifyWriteTheirMetricsAtTheEnd) {
  if (!have("promtool")) GTEST_SKIP() << "promtool is not installed (ci/install-deps installs the prometheus package)";
  std::filesystem::create_directories(kDir);
  // 1K, 4K, 16K, 64K: four rows.
  auto r = testutil::collcheck("sweep -b 1K -e 64K -f 4 --metrics-textfile " + kDir + "/s.prom", 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(testutil::run_command("promtool check metrics < " + kDir + "/s.prom", 60).code, 0);
  EXPECT_NE(slurp(kDir + "/s.prom").find("collcheck_cases_total{impl=\"ring\",workload=\"sweep\"} 4"), std::string::npos)
      << slurp(kDir + "/s.prom");
  r = testutil::collcheck("verify --cases 40 --metrics-textfile " + kDir + "/v.prom", 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(testutil::run_command("promtool check metrics < " + kDir + "/v.prom", 60).code, 0);
  EXPECT_NE(slurp(kDir + "/v.prom").find("collcheck_cases_total{impl=\"ring\",workload=\"verify\"} 40"), std::string::npos)
      << slurp(kDir + "/v.prom");
}

TEST(Metrics, PrometheusAndPushgatewaySeeWhatTheSoakReported) {
  if (!have("prometheus") || !have("prometheus-pushgateway"))
    GTEST_SKIP() << "prometheus or prometheus-pushgateway is not installed (ci/install-deps installs them)";
  std::filesystem::remove_all(kDir + "/it");
  std::filesystem::create_directories(kDir + "/it");
  const std::string d = kDir + "/it";
  const int pg = free_port(), prom = free_port();
  Process gateway("prometheus-pushgateway --web.listen-address=127.0.0.1:" + std::to_string(pg) +
                      " --persistence.file=" + d + "/pushgateway.data --persistence.interval=1s",
                  d + "/pushgateway.log");
  ASSERT_TRUE(wait_until(20, [&] { return http_get(pg, "/metrics").has_value(); })) << slurp(d + "/pushgateway.log");

  std::ofstream(d + "/plan.yaml") << "implementations: [ring]\nranks: {min: 2, max: 4}\n"
                                     "workloads:\n  verify: {weight: 3, cases: 5}\n  faults: {weight: 3}\n"
                                     "  perf: {weight: 2, min_bytes: 1K, max_bytes: 1M}\n";
  Process soak(std::string(COLLCHECK_BIN) + " soak --plan " + d + "/plan.yaml --duration 10 --results " + d +
                   "/soak.jsonl --metrics-listen 0 --metrics-linger 90 --metrics-interval 1 --pushgateway 127.0.0.1:" +
                   std::to_string(pg) + " --push-job collcheck_it",
               d + "/soak.log");
  int port = 0;
  ASSERT_TRUE(wait_until(30, [&] {
    // std::regex is avoided: GCC 12's <regex> trips -Wmaybe-uninitialized under the sanitizers.
    const std::string log = slurp(d + "/soak.log"), key = "metrics: http://127.0.0.1:";
    const auto at = log.find(key);
    if (at == std::string::npos) return false;
    const auto end = log.find("/metrics", at + key.size());
    if (end == std::string::npos) return false;
    port = std::stoi(log.substr(at + key.size(), end - at - key.size()));
    return port > 0;
  })) << slurp(d + "/soak.log");

  std::ofstream(d + "/prometheus.yml") << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                                          "scrape_configs:\n"
                                          "  - job_name: soak\n    static_configs: [{targets: ['127.0.0.1:"
                                       << port << "']}]\n"
                                                  "  - job_name: pushgateway\n    honor_labels: true\n"
                                                  "    static_configs: [{targets: ['127.0.0.1:"
                                       << pg << "']}]\n";
  Process prometheus("prometheus --config.file=" + d + "/prometheus.yml --storage.tsdb.path=" + d +
                         "/data --web.listen-address=127.0.0.1:" + std::to_string(prom),
                     d + "/prometheus.log");
  ASSERT_TRUE(wait_until(60, [&] { return !query(prom, "up").is_null() && !query(prom, "up").empty(); }))
      << slurp(d + "/prometheus.log");

  // The soak ends (its summary is written), then lingers for a last scrape.
  ASSERT_TRUE(wait_until(120, [&] { return slurp(d + "/soak.log").find("serving the final values") != std::string::npos; }))
      << slurp(d + "/soak.log");
  const auto want = reported(d + "/soak.jsonl");
  ASSERT_FALSE(want.empty()) << slurp(d + "/soak.log");
  std::map<std::pair<std::string, std::string>, double> got, pushed;
  EXPECT_TRUE(wait_until(30, [&] {
    got = scraped(query(prom, "collcheck_cases_total{job=\"soak\"}"));
    return got == want;
  })) << "Prometheus scraped other counts than the soak reported\n" << slurp(d + "/soak.log");
  EXPECT_TRUE(wait_until(30, [&] {
    pushed = scraped(query(prom, "collcheck_cases_total{job=\"collcheck_it\"}"));
    return pushed == want;
  })) << "the Pushgateway holds other counts than the soak reported";
  // Failures: the soak reported none, and there are none.
  EXPECT_TRUE(query(prom, "collcheck_case_failures_total").empty());

  // Every panel of the dashboard: its PromQL parses and returns data.
  const json dash = json::parse(slurp(SOURCE_DIR "/dashboards/collcheck-grafana.json"));
  size_t exprs = 0;
  // rate() needs two samples in its window: wait until the histograms have them.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (const auto& panel : dash.at("panels"))
    for (const auto& t : panel.at("targets")) {
      std::string e = t.at("expr");
      for (size_t at; (at = e.find("$__rate_interval")) != std::string::npos;)
        e.replace(at, std::string("$__rate_interval").size(), "1m");
      ++exprs;
      json res;
      EXPECT_TRUE(wait_until(20, [&] {
        res = query(prom, e);
        return !res.is_null() && !res.empty();
      })) << panel.at("title") << ": " << e << " -> " << (res.is_null() ? "did not parse" : "no data");
    }
  EXPECT_GE(exprs, 10u);

  // A second soak pushing to the same job replaces its group: the first
  // soak's series (ring, fault scenarios) are gone, not merged.
  std::ofstream(d + "/plan2.yaml") << "implementations: [tree]\nranks: {min: 2, max: 3}\n"
                                      "workloads:\n  verify: {weight: 1, cases: 3}\n  faults: {weight: 0}\n"
                                      "  perf: {weight: 0}\n";
  const auto r = testutil::collcheck("soak --plan " + d + "/plan2.yaml --duration 2 --results " + d +
                                         "/soak2.jsonl --pushgateway 127.0.0.1:" + std::to_string(pg) +
                                         " --push-job collcheck_it",
                                     120);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto body = http_get(pg, "/metrics");
  ASSERT_TRUE(body);
  std::string ours;
  std::istringstream lines(*body);
  for (std::string l; std::getline(lines, l);)
    if (l.rfind("collcheck_cases_total{", 0) == 0 && l.find("job=\"collcheck_it\"") != std::string::npos) ours += l + "\n";
  EXPECT_NE(ours.find("impl=\"tree\""), std::string::npos) << ours;
  EXPECT_EQ(ours.find("impl=\"ring\""), std::string::npos) << "the first soak's series survived the second push:\n" << ours;
  EXPECT_EQ(ours.find("workload=\"faults\""), std::string::npos) << ours;
}

}  // namespace
