#include "harness/run/perf_gate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "harness/model/yaml_input.h"

namespace collcheck {

size_t GateResult::regressed() const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const GateRow& r) { return r.regressed; }));
}

size_t GateResult::unusable() const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const GateRow& r) { return !r.unusable.empty(); }));
}

size_t GateResult::failed() const { return regressed() + unusable(); }

namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Rows by "algo type redop size placement"; when the file holds one algo only,
// by "type redop size placement" (a candidate implementation against a
// baseline one: plugin:new.so against ring, or the same plugin rebuilt).
struct Samples {
  std::vector<double> busbw;
  std::vector<double> memcpy;  // same length, or empty
  std::string unusable;        // why the row is no measurement: wrong, failed or skipped
};

std::map<std::string, Samples> load(const std::string& path, size_t min_samples) {
  // A directory, a FIFO or a device is refused by name; a sweep file is a few MB.
  const std::string text = read_input_file<GateInputError>(path, size_t{1} << 30, "a sweep --json file", "no flag");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("results") || !j["results"].is_array())
    throw GateInputError(fmt::format("{}: not a sweep --json file (no results list)", path));
  std::map<std::string, Samples> rows;
  std::set<std::string> algos;
  for (const auto& r : j["results"])
    if (r.is_object() && r.contains("algo") && r["algo"].is_string()) algos.insert(r["algo"].get<std::string>());
  const bool one_algo = algos.size() <= 1;
  size_t i = 0;
  for (const auto& r : j["results"]) {
    const auto field = [&](const char* f) { return fmt::format("{}: results[{}].{}", path, i, f); };
    try {
      const std::string place = r.contains("in-place") ? "in-place" : "out-of-place";
      const std::string key = fmt::format("{}{} {} {} B {}", one_algo ? "" : r.at("algo").get<std::string>() + " ",
                                          r.at("type").get<std::string>(), r.at("redop").get<std::string>(),
                                          r.at("size").get<uint64_t>(), place);
      // A row the sweep itself marks as not a measurement of a correct run.
      std::string unusable;
      const nlohmann::json& perf = r.at(place);
      if (perf.is_object() && perf.contains("wrong") && !(perf.at("wrong").is_number_unsigned() && perf.at("wrong").get<uint64_t>() == 0))
        unusable = fmt::format("wrong (\"wrong\": {} elements out of bounds)", perf.at("wrong").dump());
      else if (r.contains("error") && !(r.at("error").is_string() && r.at("error").get<std::string>().empty()))
        unusable = fmt::format("failed (\"error\": {})", r.at("error").dump());
      else if (r.contains("skipped") && !(r.at("skipped").is_string() && r.at("skipped").get<std::string>().empty()))
        unusable = fmt::format("skipped (\"skipped\": {})", r.at("skipped").dump());
      if (!unusable.empty()) {
        if (!rows.emplace(key, Samples{{}, {}, unusable}).second)
          throw GateInputError(fmt::format("{}: the row {} appears twice", path, key));
        ++i;
        continue;
      }
      if (!r.contains("busbw_samples")) throw GateInputError(field("busbw_samples") + ": missing (sweep --json writes it)");
      auto v = r.at("busbw_samples").get<std::vector<double>>();
      if (v.size() < min_samples)
        throw GateInputError(fmt::format("{}: {} sample(s); the gate needs at least {} (sweep --reps {})",
                                         field("busbw_samples"), v.size(), min_samples, min_samples));
      for (double x : v)
        if (!std::isfinite(x) || x < 0) throw GateInputError(field("busbw_samples") + ": not a bandwidth");
      Samples sm;
      sm.busbw = std::move(v);
      if (r.contains("memcpy_samples")) {
        sm.memcpy = r.at("memcpy_samples").get<std::vector<double>>();
        for (double x : sm.memcpy)
          if (!std::isfinite(x) || x <= 0) throw GateInputError(field("memcpy_samples") + ": not a bandwidth");
        if (sm.memcpy.size() != sm.busbw.size()) sm.memcpy.clear();  // not one per sample: not used
      }
      if (!rows.emplace(key, std::move(sm)).second) throw GateInputError(fmt::format("{}: the row {} appears twice", path, key));
    } catch (const nlohmann::json::exception& e) {
      throw GateInputError(fmt::format("{}: results[{}]: {}", path, i, e.what()));
    }
    ++i;
  }
  if (rows.empty()) throw GateInputError(fmt::format("{}: no rows", path));
  return rows;
}

}  // namespace

double mann_whitney_less(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t nx = x.size(), ny = y.size(), n = nx + ny;
  std::vector<std::pair<double, int>> all;
  for (double v : x) all.emplace_back(v, 0);
  for (double v : y) all.emplace_back(v, 1);
  std::sort(all.begin(), all.end());
  double rank_y = 0, ties = 0;
  for (size_t i = 0; i < n;) {
    size_t k = i;
    while (k < n && all[k].first == all[i].first) ++k;
    const double mid = (static_cast<double>(i + 1) + static_cast<double>(k)) / 2;  // 1-based midrank
    for (size_t m = i; m < k; ++m)
      if (all[m].second == 1) rank_y += mid;
    const double t = static_cast<double>(k - i);
    ties += t * t * t - t;
    i = k;
  }
  const double u = rank_y - static_cast<double>(ny) * static_cast<double>(ny + 1) / 2;
  const double mean = static_cast<double>(nx) * static_cast<double>(ny) / 2;
  const double dn = static_cast<double>(n);
  const double var = static_cast<double>(nx) * static_cast<double>(ny) / 12 * ((dn + 1) - ties / (dn * (dn - 1)));
  if (var <= 0) return 1;
  const double z = (u - mean + 0.5) / std::sqrt(var);  // small U: y ranks low, y smaller
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

GateResult compare_sweeps(const std::string& baseline_path, const std::string& candidate_path, double max_regression,
                          double alpha, size_t min_samples) {
  const auto base = load(baseline_path, min_samples), cand = load(candidate_path, min_samples);
  GateResult r;
  for (const auto& [k, v] : base)
    if (!cand.count(k)) r.only_in_baseline.push_back(k);
  for (const auto& [k, v] : cand)
    if (!base.count(k)) r.only_in_candidate.push_back(k);
  size_t common = 0;
  for (const auto& [k, v] : base) common += cand.count(k);
  if (common == 0)
    throw GateInputError(fmt::format("{} and {} have no row in common (rows are matched by algo, type, redop, size "
                                     "and placement)", baseline_path, candidate_path));
  r.alpha_per_row = alpha / static_cast<double>(common);
  for (const auto& [k, bs] : base) {
    const auto it = cand.find(k);
    if (it == cand.end()) continue;
    if (!bs.unusable.empty())
      throw GateInputError(fmt::format("{}: the baseline row {} is {}: a baseline must be a correct, measured run",
                                       baseline_path, k, bs.unusable));
    const auto& cs = it->second;
    GateRow row;
    row.key = k;
    if (!cs.unusable.empty()) {
      // Never compared, never passed: the candidate did not measure this row.
      row.unusable = cs.unusable;
      r.rows.push_back(row);
      continue;
    }
    row.n_base = bs.busbw.size();
    row.n_cand = cs.busbw.size();
    row.base_median = quantile(bs.busbw, 0.5);
    row.cand_median = quantile(cs.busbw, 0.5);
    // The samples the test reads: busbw, or, when both files measured a
    // memcpy after each sample, busbw relative to it (the same load slows
    // both, so a machine busier during one run than the other cancels out).
    row.relative = !bs.memcpy.empty() && !cs.memcpy.empty();
    auto samples = [&](const Samples& s) {
      if (!row.relative) return s.busbw;
      std::vector<double> v;
      for (size_t i = 0; i < s.busbw.size(); ++i) v.push_back(s.busbw[i] / s.memcpy[i]);
      return v;
    };
    const auto b = samples(bs), c = samples(cs);
    const double bm = quantile(b, 0.5), cm = quantile(c, 0.5);
    for (const auto* v : {&b, &c})
      for (double x : *v)
        if (!std::isfinite(x))
          throw GateInputError(fmt::format("row {}: busbw over memcpy is not a finite number (a bandwidth of {} or {} "
                                           "is not one a sweep measures)",
                                           k, quantile(bs.busbw, 0.5), quantile(cs.busbw, 0.5)));
    if (!(bm > 0))
      throw GateInputError(fmt::format("{}: the baseline row {} has a median busbw of 0: nothing to compare against",
                                       baseline_path, k));
    row.change = cm / bm - 1;
    if (!std::isfinite(row.change))
      throw GateInputError(fmt::format("row {}: the change from a busbw of {} to {} is not a finite number", k,
                                       row.base_median, row.cand_median));
    row.p_value = mann_whitney_less(b, c);
    row.regressed = -row.change > max_regression && row.p_value < r.alpha_per_row && quantile(c, 0.75) < quantile(b, 0.25);
    r.rows.push_back(row);
  }
  return r;
}

std::string gate_verdict(const GateResult& r) {
  if (!r.failed()) return "no regression";
  std::string v;
  if (r.regressed()) v = fmt::format("{} row(s) regressed", r.regressed());
  if (r.unusable()) v += fmt::format("{}{} candidate row(s) wrong, failed or skipped", v.empty() ? "" : "; ", r.unusable());
  return v;
}

std::string gate_markdown(const GateResult& r, double max_regression) {
  std::string md = fmt::format("### collcheck gate: performance — {}\n\n", gate_verdict(r));
  md += fmt::format("Rows compared: {}; a row regresses when its median busbw drops by more than {:.1f} %, a one-sided "
                    "Mann-Whitney U test gives p < {:.2g} (0.05 over the rows), and the samples are apart.\n\n",
                    r.rows.size(), max_regression * 100, r.alpha_per_row);
  md += "| row | baseline busbw (GB/s, median) | candidate | change | p | verdict |\n|---|---:|---:|---:|---:|---|\n";
  // change: of busbw relative to a memcpy measured after each sample, where both files have one
  for (const auto& x : r.rows)
    if (!x.unusable.empty())
      md += fmt::format("| {} | {:.4g} | — | — | — | **FAILED**: the candidate row is {} |\n", x.key, x.base_median, x.unusable);
    else
      md += fmt::format("| {} | {:.4g} | {:.4g} | {:+.1f} %{} | {:.2g} | {} |\n", x.key, x.base_median, x.cand_median,
                      x.change * 100, x.relative ? " (vs memcpy)" : "", x.p_value, x.regressed ? "**REGRESSED**" : "ok");
  for (const auto& k : r.only_in_baseline) md += fmt::format("\nOnly in the baseline (not compared): {}", k);
  for (const auto& k : r.only_in_candidate) md += fmt::format("\nOnly in the candidate (not compared): {}", k);
  return md + "\n";
}

}  // namespace collcheck
