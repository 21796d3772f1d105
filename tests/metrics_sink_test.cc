// The metrics sink (harness/metrics/metrics_sink.h): the registry is filled
// from the event stream alone, the way soak, sweep and verify emit it.
#include <gtest/gtest.h>

#include <string>

#include "harness/metrics/metrics.h"
#include "harness/metrics/metrics_sink.h"
#include "harness/report/events.h"

namespace collcheck {
namespace {

using nlohmann::json;

// The value of the first sample line of `text` that starts with `series` ("" when none).
std::string sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series, at)) != std::string::npos) {
    const size_t sp = at + series.size();
    if ((at == 0 || text[at - 1] == '\n') && sp < text.size() && text[sp] == ' ')
      return text.substr(sp + 1, text.find('\n', sp) - sp - 1);
    at += series.size();
  }
  return "";
}

struct Sunk {
  Metrics m{{{"version", "test"}}};
  Events ev;
  Sunk() { ev.add(metrics_sink(m)); }
};

TEST(MetricsSink, AVerifyRunThatFailsAtItsFifthCaseCountsFourPassesAndOneFailure) {
  Sunk s;
  s.ev.emit(UnitEvent{json{{"type", "unit"}, {"workload", "verify"}, {"impl", "ring"}, {"cases", 5}, {"ok", false},
                           {"property", "agrees_with_oracle"}}});
  const std::string t = s.m.text();
  EXPECT_EQ(sample(t, R"(collcheck_cases_total{impl="ring",workload="verify"})"), "5") << t;
  EXPECT_EQ(sample(t, R"(collcheck_case_failures_total{impl="ring",property="agrees_with_oracle",workload="verify"})"), "1")
      << t;
}

TEST(MetricsSink, AFaultUnitCountsItsOutcomeSkewAndTimedCalls) {
  Sunk s;
  s.ev.emit(UnitEvent{json{{"type", "unit"}, {"workload", "faults"}, {"impl", "tree"}, {"ok", true},
                           {"nemesis", "skipped_call"}, {"outcome", "detected"}, {"time_to_diagnosis_s", 0.25},
                           {"skew_s", 0.5}, {"straggler", 3}},
                      json::array({json::array({"tree", "sum", "float32", 4096, 0.001}),
                                   json::array({"tree", "sum", "float32", 4096, 0.002})})});
  const std::string t = s.m.text();
  EXPECT_EQ(sample(t, R"(collcheck_fault_outcomes_total{nemesis="skipped_call",outcome="detected"})"), "1") << t;
  EXPECT_EQ(sample(t, "collcheck_straggler_rank"), "3") << t;
  EXPECT_EQ(sample(t, R"(collcheck_collective_duration_seconds_count{dtype="float32",impl="tree",op="sum",size_class="le_4KiB"})"),
            "2")
      << t;
  EXPECT_EQ(sample(t, R"(collcheck_cases_total{impl="tree",workload="faults"})"), "1") << t;
}

TEST(MetricsSink, SweepRowsCountEachCheckedRowAndSkipTheSkipped) {
  Sunk s;
  const json perf{{"time", 10.0}, {"algbw", 1.0}, {"busbw", 2.0}, {"wrong", 3}};
  s.ev.emit(RowEvent{json{{"size", 1024}, {"type", "int32"}, {"redop", "max"}, {"algo", "ring"},
                          {"out-of-place", perf}, {"skipped", ""}, {"error", ""}}});
  s.ev.emit(RowEvent{json{{"size", 1024}, {"type", "int32"}, {"redop", "max"}, {"algo", "ring"},
                          {"out-of-place", perf}, {"skipped", "not supported"}, {"error", ""}}});
  const std::string t = s.m.text();
  EXPECT_EQ(sample(t, R"(collcheck_cases_total{impl="ring",workload="sweep"})"), "1") << t;
  EXPECT_EQ(sample(t, R"(collcheck_case_failures_total{impl="ring",property="results_match_oracle",workload="sweep"})"),
            "1")
      << t;
  EXPECT_EQ(sample(t, R"(collcheck_wrong_elements_total{impl="ring"})"), "3") << t;
  EXPECT_EQ(sample(t, R"(collcheck_busbw_bytes_per_second{dtype="int32",impl="ring",size_class="le_1KiB"})"),
            "2000000000")
      << t;
}

TEST(MetricsSink, TextEventsCountNothing) {
  Sunk s;
  const std::string before = s.m.text();
  s.ev.print("hello\n");
  s.ev.emit(VerdictEvent{});
  EXPECT_EQ(s.m.text(), before);
}

}  // namespace
}  // namespace collcheck
