#include "properties/fault_table.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "faults/nemesis.h"
#include "harness/report/diagnosis_text.h"
#include "harness/report/timeline.h"
#include "properties/detection.h"
#include "properties/verify.h"

namespace collcheck {

std::vector<FaultRow> run_fault_table(const FaultTableOptions& o, const ScenarioReplayer& replay,
                                      const std::function<void(const FaultRow&)>& each) {
  const Scenario base = fault_table_scenario(o.ranks, o.impl);
  std::vector<FaultRow> rows;
  for (const auto& n : nemeses()) {
    for (bool guarded : {true, false}) {
      if ((guarded && !o.guarded) || (!guarded && !o.unguarded)) continue;
      FaultRow row;
      row.fault = n.name;
      row.guarded = guarded;
      const std::string mode = guarded ? "guarded" : "unguarded";
      if (o.should_stop && o.should_stop()) {
        row.run = false;
        row.why = "not run: the budget ran out";
        if (o.root && each) each(row);
        rows.push_back(std::move(row));
        continue;
      }
      Scenario s = base;
      s.guarded = guarded;
      s.faults = {fault_table_instance(base, std::string(n.name))};
      s.expect = n.expected(base, s.faults.front());
      // Room for the fault's own delays (a slow link over 2(p-1) ring steps), said when it changes the deadline.
      const double delay = n.call_delay ? n.call_delay(base, s.faults.front()) : 0;
      if (2 * delay > s.deadline_s) s.deadline_s = 2 * delay;
      row.deadline_s = s.deadline_s;
      row.own_deadline = s.deadline_s != base.deadline_s;
      // Every row dumps its flight recorders, in a temporary folder removed
      // after the row (every failed row left one in /tmp, and nothing cleaned
      // them), unless keep_dumps names where a row not as injected keeps them.
      ReplayOptions ro;
      const std::string row_dir = fmt::format("{}-{}", n.name, mode);
      ro.dump_dir = o.keep_dumps.empty()
                        ? (std::filesystem::temp_directory_path() / fmt::format("collcheck-faults-{}-{}", ::getpid(), row_dir))
                              .string()
                        : (std::filesystem::path(o.keep_dumps) / row_dir).string();
      if (o.root) {
        std::error_code ec;
        std::filesystem::remove_all(ro.dump_dir, ec);
      }
      const ReplayResult r = replay(s, ro);
      if (!o.root) {
        rows.push_back(std::move(row));
        continue;
      }
      row.ok = expectation_holds(*s.expect, r, &row.why);
      if (row.ok || o.keep_dumps.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(ro.dump_dir, ec);
        if (!row.ok) row.why += "; --keep-dumps DIR keeps this row's dumps";
      } else {
        row.why += fmt::format("; dumps kept: collcheck analyze {}", ro.dump_dir);
      }
      row.diagnosed_at = r.time_to_diagnosis;
      row.seconds = r.seconds;
      row.diagnosis = r.diagnoses.empty() ? "none" : format_diagnosis(r.diagnoses.front());
      row.timeline = timeline_of(fmt::format("{} {}", n.name, mode), r.dumps, r.diagnoses, r.time_to_diagnosis);
      if (each) each(row);
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

void add_fault_rows(Report& rep, const std::vector<FaultRow>& rows) {
  for (const FaultRow& row : rows) {
    const std::string name = fmt::format("{} {}", row.fault, row.guarded ? "guarded" : "unguarded");
    if (!row.run) {
      rep.cases.push_back({name, ReportCase::Status::Error, row.why, "", 0});
      continue;
    }
    ReportCase c{name, row.ok ? ReportCase::Status::Passed : ReportCase::Status::Failed, row.ok ? "" : row.why,
                 row.diagnosis, row.seconds};
    if (row.own_deadline) c.detail += fmt::format("\n(deadline {:.2g} s per call for this fault)", row.deadline_s);
    rep.cases.push_back(std::move(c));
    rep.runs.push_back(row.timeline);
  }
}

int run_fault_table_job(const FaultTableOptions& o, Report& rep, const Session& session, Events& ev) {
  const Scenario base = fault_table_scenario(o.ranks, o.impl);
  const auto start = Clock::now();
  rep.command = "faults";
  rep.suite = fmt::format("collcheck faults {} ({} ranks)", o.impl, o.ranks);
  rep.properties = {{"scenario", base.name}, {"world", session.name()},
                    {"deadline per call (s)", fmt::format("{:.3g}", base.deadline_s)}};
  if (o.root) {
    ev.print("collcheck faults: impl {}, {} ranks {}, deadline {:.3g} s per call\n", o.impl, o.ranks,
               session.how(), base.deadline_s);
    ev.print("scenario: {}\n\n", base.name);
    ev.print("{:<18} {:<10} {:<9} {:>12} {:>9}  {}\n", "fault", "mode", "detected", "diagnosed at", "run took",
               "diagnosis");
  }
  const auto rows = run_fault_table(o, [&](const Scenario& s, const ReplayOptions& ro) { return replay_in_session(s, ro, session); }, [&ev](const FaultRow& row) {
    if (!row.run) return;
    const char* mode = row.guarded ? "guarded" : "unguarded";
    ev.print("{:<18} {:<10} {:<9} {:>11.3f}s {:>8.3f}s  {}\n", row.fault, mode, row.ok ? "yes" : "NO", row.diagnosed_at,
               row.seconds, row.diagnosis.substr(0, 150));
    if (!row.ok) ev.print("{:<18} {:<10} {}\n", "", "", row.why);
    if (row.own_deadline)
      ev.print("{:<18} {:<10} (deadline {:.2g} s per call for this fault: its own delays need it)\n", "", "",
                 row.deadline_s);
  });
  if (!o.root) return 0;
  add_fault_rows(rep, rows);
  bool all = true;
  size_t not_run = 0;
  for (const auto& row : rows) {
    all = all && (row.ok || !row.run);
    not_run += row.run ? 0 : 1;
  }
  // A table cut short is no verdict on the rows it did not run.
  const int code = !all ? 1 : not_run > 0 ? kExitHarnessError : 0;
  if (not_run > 0) ev.print("{} row(s) not run: the budget ran out before them\n", not_run);
  ev.print("\n{}\n", !all          ? "SOME FAULTS WERE NOT DIAGNOSED AS INJECTED"
                        : not_run > 0 ? "NO VERDICT on the rows not run"
                                      : "every fault detected and named");
  rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return code;
}

}  // namespace collcheck
