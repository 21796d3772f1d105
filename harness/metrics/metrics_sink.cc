// The metrics as a sink of the event stream (metrics_sink.h).
#include "harness/metrics/metrics_sink.h"

#include <string>

namespace collcheck {
namespace {

using nlohmann::json;

// A timed call: [impl, op, dtype, bytes, seconds].
void count_calls(Metrics& m, const json& calls) {
  if (!calls.is_array()) return;
  for (const auto& c : calls)
    if (c.is_array() && c.size() == 5)
      m.collective(c[0].get<std::string>(), c[1].get<std::string>(), c[2].get<std::string>(), c[3].get<uint64_t>(),
                   c[4].get<double>());
}

// A soak unit (soak_units.cc), or a verify run as one unit (its workload "verify").
void count_unit(Metrics& m, const UnitEvent& e) {
  const json& u = e.unit;
  const std::string workload = u.value("workload", ""), impl = u.value("impl", "");
  const bool ok = u.value("ok", false);
  const std::string property = ok ? "" : u.value("property", "unknown");
  if (workload == "verify") {
    // Every case before the failing one passed.
    const uint64_t cases = u.value("cases", uint64_t{0});
    m.unit(impl, workload, "", ok ? cases : (cases > 0 ? cases - 1 : 0));
    if (!ok) m.unit(impl, workload, property, 1);
  } else {
    m.unit(impl, workload, property);
  }
  if (workload == "faults") {
    const std::string nemesis = u.value("nemesis", "none");
    m.fault(nemesis, u.value("outcome", ""), nemesis == "none" ? -1 : u.value("time_to_diagnosis_s", -1.0));
    if (u.contains("skew_s")) m.arrival(u.at("skew_s").get<double>(), u.value("straggler", -1));
  }
  if (workload == "perf" && u.contains("time_us")) {
    const std::string dtype = u.value("dtype", "");
    const uint64_t bytes = u.value("bytes", uint64_t{0});
    m.wrong_elements(impl, u.value("wrong", uint64_t{0}));
    m.collective(impl, "sum", dtype, bytes, u.at("time_us").get<double>() / 1e6);
    m.busbw(impl, dtype, bytes, u.value("busbw_gbps", 0.0) * 1e9);
  }
  count_calls(m, e.calls);
}

// A sweep row (sweep_row_json): skipped rows count nothing.
void count_row(Metrics& m, const json& r) {
  if (!r.value("skipped", "").empty() || !r.contains("algo")) return;
  const json& perf = r.contains("in-place") ? r.at("in-place") : r.at("out-of-place");
  const std::string algo = r.at("algo"), dtype = r.at("type");
  const uint64_t wrong = perf.value("wrong", uint64_t{0}), bytes = r.at("size");
  m.unit(algo, "sweep", wrong == 0 && r.value("error", "").empty() ? "" : "results_match_oracle");
  m.wrong_elements(algo, wrong);
  m.collective(algo, r.at("redop"), dtype, bytes, perf.at("time").get<double>() / 1e6);
  m.busbw(algo, dtype, bytes, perf.at("busbw").get<double>() * 1e9);
}

class MetricsSink : public EventSink {
 public:
  explicit MetricsSink(Metrics& m) : m_(m) {}
  void on(const Event& e) override {
    if (const auto* u = std::get_if<UnitEvent>(&e)) count_unit(m_, *u);
    if (const auto* r = std::get_if<RowEvent>(&e)) count_row(m_, r->row);
  }

 private:
  Metrics& m_;
};

}  // namespace

std::shared_ptr<EventSink> metrics_sink(Metrics& m) { return std::make_shared<MetricsSink>(m); }

}  // namespace collcheck
