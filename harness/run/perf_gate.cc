#include "harness/run/perf_gate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "harness/model/yaml_input.h"
#include "harness/run/sweep.h"

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

double wilcoxon_signed_rank_less(const std::vector<double>& d) {
  std::vector<double> m;
  for (double x : d)
    if (x != 0) m.push_back(x);
  const size_t n = m.size();
  if (n == 0) return 1;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::fabs(m[a]) < std::fabs(m[b]); });
  // Doubled mid-ranks: integers even where magnitudes tie.
  std::vector<size_t> rank2(n);
  double ties = 0;
  for (size_t i = 0; i < n;) {
    size_t k = i;
    while (k < n && std::fabs(m[order[k]]) == std::fabs(m[order[i]])) ++k;
    for (size_t j = i; j < k; ++j) rank2[order[j]] = i + 1 + k;  // 2 * (i+1 + k)/2
    const double t = static_cast<double>(k - i);
    ties += t * t * t - t;
    i = k;
  }
  size_t w2 = 0, total2 = 0;  // doubled W+ and the doubled sum of all ranks
  for (size_t i = 0; i < n; ++i) {
    total2 += rank2[i];
    if (m[i] > 0) w2 += rank2[i];
  }
  if (n > 40) {
    const double dn = static_cast<double>(n);
    const double mean = dn * (dn + 1) / 4, var = dn * (dn + 1) * (2 * dn + 1) / 24 - ties / 48;
    if (var <= 0) return 1;
    const double z = (static_cast<double>(w2) / 2 - mean + 0.5) / std::sqrt(var);
    return 0.5 * std::erfc(-z / std::sqrt(2.0));
  }
  // Exact: how many of the 2^n sign patterns give a W+ at most the one seen.
  std::vector<double> ways(total2 + 1, 0);
  ways[0] = 1;
  for (size_t i = 0; i < n; ++i)
    for (size_t s = total2; s + 1 > rank2[i]; --s) ways[s] += ways[s - rank2[i]];
  double at_most = 0;
  for (size_t s = 0; s <= w2; ++s) at_most += ways[s];
  return at_most / std::ldexp(1.0, static_cast<int>(n));
}

GateResult compare_side_by_side(const SweepResult& r, size_t n, double max_regression, double alpha,
                                size_t min_samples) {
  if (n == 0 || r.rows.size() != 2 * n)
    throw GateInputError(fmt::format("side by side: {} row(s) for 2 x {} (the baseline's, then the candidate's)",
                                     r.rows.size(), n));
  auto unusable = [](const SweepRow& x) -> std::string {
    if (!x.skipped.empty()) return "skipped (" + x.skipped + ")";
    if (!x.error.empty()) return "failed (" + x.error + ")";
    if (x.wrong) return fmt::format("wrong ({} elements out of bounds)", x.wrong);
    return "";
  };
  GateResult g;
  g.alpha_per_row = alpha / static_cast<double>(n);
  // k rounds all slower give the smallest p there is, 2^-k: fewer rounds than
  // that could never fail a row (a gate that always passes).
  const size_t rounds = r.rows.front().busbw_samples.size();
  if (rounds > 0 && rounds < 64 && std::ldexp(1.0, -static_cast<int>(rounds)) >= g.alpha_per_row)
    throw GateInputError(fmt::format("{} rounds cannot show a regression at p < {:.2g} ({} over {} rows): even every "
                                     "round slower gives p = 2^-{}; give --reps {} or more",
                                     rounds, g.alpha_per_row, alpha, n, rounds,
                                     static_cast<int>(std::floor(std::log2(1 / g.alpha_per_row))) + 1));
  for (size_t i = 0; i < n; ++i) {
    const SweepRow &b = r.rows[i], &c = r.rows[n + i];
    GateRow row;
    row.key = fmt::format("{} {} {} B", dtype_name(b.dtype), op_name(b.op), b.bytes);
    row.paired = true;
    if (const auto why = unusable(b); !why.empty())
      throw GateInputError(fmt::format("the baseline row {} is {}: a baseline must be a correct, measured run", row.key, why));
    if (const auto why = unusable(c); !why.empty()) {
      row.unusable = why;
      g.rows.push_back(row);
      continue;
    }
    const size_t k = std::min(b.busbw_samples.size(), c.busbw_samples.size());
    if (k < min_samples)
      throw GateInputError(fmt::format("row {}: {} round(s); the gate needs at least {} (--reps {})", row.key, k,
                                       min_samples, min_samples));
    std::vector<double> ratio, logs;
    for (size_t j = 0; j < k; ++j) {
      const double x = b.busbw_samples[j], y = c.busbw_samples[j];
      if (!(x > 0 && y > 0 && std::isfinite(x) && std::isfinite(y)))
        throw GateInputError(fmt::format("row {}: round {} measured a busbw of {} and {}: not a bandwidth", row.key, j, x, y));
      ratio.push_back(y / x);
      logs.push_back(std::log(y / x));
    }
    row.n_base = row.n_cand = k;
    row.base_median = quantile(b.busbw_samples, 0.5);
    row.cand_median = quantile(c.busbw_samples, 0.5);
    row.change = quantile(ratio, 0.5) - 1;
    row.p_value = wilcoxon_signed_rank_less(logs);
    row.regressed = -row.change > max_regression && row.p_value < g.alpha_per_row && quantile(ratio, 0.75) < 1;
    g.rows.push_back(row);
  }
  return g;
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
  const bool paired = !r.rows.empty() && r.rows.front().paired;
  if (paired)
    md += fmt::format("Rows compared side by side (one sweep, each round timing both): {}; a row regresses when its "
                      "median per-round busbw ratio drops by more than {:.1f} %, a one-sided Wilcoxon signed-rank test "
                      "gives p < {:.2g}, and the candidate was slower in three rounds of four.\n\n",
                      r.rows.size(), max_regression * 100, r.alpha_per_row);
  else
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


void say_perf_gate(Events& ev, const GateResult& r, const std::string& base, const std::string& cand, double limit,
                   bool side) {
  ev.print("collcheck gate: performance, {} row(s) of {} against {}; max regression {:.1f} %\n", r.rows.size(), cand,
             base, limit * 100);
  ev.print("  {:<44} {:>12} {:>12} {:>8} {:>9}  {}\n", "row", "base GB/s", "cand GB/s", "change", "p", "verdict");
  for (const auto& x : r.rows)
    if (!x.unusable.empty())
      ev.print("  {:<44} {:>12.4g} {:>12} {:>8} {:>9}  FAILED: the candidate row is {}\n", x.key, x.base_median, "-", "-",
                 "-", x.unusable);
    else
      ev.print("  {:<44} {:>12.4g} {:>12.4g} {:>+7.1f}% {:>9.2g}  {}\n", x.key, x.base_median, x.cand_median,
                 x.change * 100, x.p_value, x.regressed ? "REGRESSED" : "ok");
  if (side)
    ev.print("  (change: the median of the per-round busbw ratios; p: Wilcoxon signed-rank over the rounds)\n");
  if (!r.rows.empty() && r.rows.front().relative)
    ev.print("  (change and p: busbw relative to a memcpy measured in the same process after each sample)\n");
  for (const auto& k : r.only_in_baseline) ev.print("  note: only in the baseline, not compared: {}\n", k);
  for (const auto& k : r.only_in_candidate) ev.print("  note: only in the candidate, not compared: {}\n", k);
  ev.print("{}\n", r.failed() ? "FAIL: " + gate_verdict(r) : "PASS: no row regressed");
}

Report perf_gate_report(const GateResult& r, const std::string& base, const std::string& cand, const std::string& limit) {
  Report rep;
  rep.command = "gate";
  rep.suite = "collcheck gate performance";
  rep.properties = {{"baseline", base}, {"candidate", cand}, {"max_regression", limit}};
  for (const auto& x : r.rows)
    rep.cases.push_back({x.key, x.regressed || !x.unusable.empty() ? ReportCase::Status::Failed : ReportCase::Status::Passed,
                         !x.unusable.empty() ? "the candidate row is " + x.unusable
                                             : fmt::format("busbw {:.4g} -> {:.4g} GB/s ({:+.1f} %), p = {:.2g}",
                                                           x.base_median, x.cand_median, x.change * 100, x.p_value),
                         "", 0});
  return rep;
}

}  // namespace collcheck
