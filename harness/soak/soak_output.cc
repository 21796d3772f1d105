// The soak: what the user sees: the header, the progress line, the summary, the metrics (soak_impl.h).
#include "harness/soak/soak_impl.h"

namespace collcheck::soak_detail {

void Soak::print_header() {
  ev_.print("collcheck soak: {} s, seed {:#x}, {}, plan {}\n", o_.duration_s, o_.seed,
             mpi_ ? fmt::format("MPI world of {} processes", mpi_->size())
             : o_.sim_worlds ? fmt::format("ranks as fibers in virtual time for the verify and fault units, as threads "
                                           "for the rest (p {} to {})", o_.plan.min_ranks, o_.plan.max_ranks)
                  : fmt::format("ranks as threads (p {} to {})", o_.plan.min_ranks, o_.plan.max_ranks),
             o_.plan.file);
  ev_.print("  workloads (weight): verify {} ({} cases a unit), faults {} (random fault scenarios on the "
                   "reference algorithms: collcheck's own diagnosis), perf {} (checked sweep rows, {} to {} B)\n",
             o_.plan.verify.weight, o_.plan.verify.cases, o_.plan.faults.weight, o_.plan.perf.weight,
             o_.plan.perf.min_bytes, o_.plan.perf.max_bytes);
  if (o_.plan.algorithms.weight > 0)
    ev_.print("  algorithms {} ({} cases a unit, each a child collcheck verify of one of: {}){}\n",
               o_.plan.algorithms.weight, o_.plan.algorithms.cases, fmt::join(algorithm_peers_, " "),
               mpi_ ? "; in the MPI world its units run verify instead (an algorithm is fixed for an MPI process's life)"
                    : "");
  for (const auto& l : lanes_) {
    std::string peers;
    for (const auto& p : l.cfg.peers) peers += (peers.empty() ? "" : ",") + p->name();
    ev_.print("  {} against {}{}\n", l.spec.impl, peers.empty() ? "the oracle alone" : peers,
               l.note.empty() ? "" : "; " + l.note);
  }
  ev_.print("  results: {} (one JSON line per unit; --resume continues it)\n", o_.results_path);
}

std::string Soak::progress_line(const Unit& u) const {
  size_t cases = 0;
  for (const auto& [w, n] : totals_.cases_by_workload) cases += n;
  return fmt::format("{} cases, {} failed units ({} signatures), last: {} {}", cases, totals_.failed_units,
                     totals_.groups.size(), u.workload, lanes_[u.impl].spec.impl);
}

json Soak::summary_json(const SoakResult& r) const {
  json s{{"units", totals_.units}, {"failed_units", totals_.failed_units}, {"elapsed_s", totals_.elapsed_s},
         {"seed", fmt::format("{:#x}", o_.seed)}, {"stop_reason", r.stop_reason}, {"exit_code", r.exit_code()}};
  for (const auto& [w, n] : totals_.by_workload) s["units_by_workload"][w] = n;
  for (const auto& [w, n] : totals_.cases_by_workload) s["cases_by_workload"][w] = n;
  for (const auto& [k, v] : totals_.by_workload_impl)
    s["by_workload_impl"].push_back(
        {{"workload", k.first}, {"impl", k.second}, {"units", v.units}, {"cases", v.cases}, {"failed", v.failed}});
  s["failure_groups"] = json::array();
  for (const auto& [sig, g] : totals_.groups)
    s["failure_groups"].push_back({{"signature", sig}, {"count", g.count}, {"first_unit", g.first_unit},
                                   {"last_unit", g.last_unit}, {"replay", g.replay}});
  return s;
}

void Soak::print_summary(const SoakResult& r) {
  ev_.print("\ncollcheck soak: {} after {:.0f} s of {:.0f} s{}\n",
             r.stop_reason == "duration" ? "done" : "stopped by " + r.stop_reason, totals_.elapsed_s, o_.duration_s,
             r.stop_reason == "SIGINT" || r.stop_reason == "SIGTERM"
                 ? fmt::format(" (--resume --results {} goes on)", o_.results_path)
                 : "");
  ev_.print("  {:<8} {:<24} {:>8} {:>10} {:>8}\n", "workload", "impl", "units", "cases", "failed");
  for (const auto& [k, v] : totals_.by_workload_impl)
    ev_.print("  {:<8} {:<24} {:>8} {:>10} {:>8}\n", k.first, k.second, v.units, v.cases, v.failed);
  ev_.print("  {:<8} {:<24} {:>8} {:>10} {:>8}\n", "all", "", totals_.units, [&] {
    size_t n = 0;
    for (const auto& [w, c] : totals_.cases_by_workload) n += c;
    return n;
  }(), totals_.failed_units);
  ev_.print("  (cases: verify cases, fault scenarios, sweep rows)\n");
  if (!write_error().empty())
    ev_.print("ERROR: --results {}: {}; the soak stopped, and the units above are not all in the file (exit {})\n",
               o_.results_path, write_error(), r.exit_code());
  if (totals_.groups.empty() && r.exit_code() != 0) {
    ev_.print("STOPPED: {} units, no failure so far; the run was cut short by {} (exit {}), not a pass\n",
               totals_.units, r.stop_reason, r.exit_code());
  } else if (totals_.groups.empty()) {
    ev_.print("PASS: {} units, no failure\n", totals_.units);
  } else {
    ev_.print("FAIL: {} failed unit(s) in {} signature(s):\n", totals_.failed_units, totals_.groups.size());
    for (const auto& [sig, g] : totals_.groups)
      ev_.print("  {:>6} x {}\n         first unit {}, last {}; replay: {}\n", g.count, sig, g.first_unit,
                 g.last_unit, g.replay.empty() ? "(none)" : g.replay);
  }
}

void Soak::export_metrics() {
  if (!o_.metrics) return;
  if (!o_.metrics_textfile.empty()) {
    try {
      o_.metrics->write_textfile(o_.metrics_textfile);
    } catch (const std::exception& e) {
      ev_.warn("collcheck soak: warning: --metrics-textfile: {}\n", e.what());
    }
  }
  if (o_.push) o_.metrics->push();  // on the pusher's thread, bounded; failures are said when they start and end
}

}  // namespace collcheck::soak_detail
