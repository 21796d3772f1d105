#include "properties/detection_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/report/diagnosis_text.h"
#include "properties/detection.h"

namespace collcheck {

namespace {

std::string fault_name(const DetectionCase& c) { return c.fault ? c.fault->kind : "none (clean)"; }

ReportCase detection_verdict(size_t i, const DetectionCase& c, const DetectionOutcome& o) {
  ReportCase v{fmt::format("case {}: {} ({})", i + 1, fault_name(c), c.guarded ? "guarded" : "unguarded"),
               o.ok ? ReportCase::Status::Passed : ReportCase::Status::Failed, o.ok ? "" : o.why, "", o.seconds};
  if (!o.ok) {
    for (const auto& d : o.result.diagnoses) v.detail += format_diagnosis(d) + "\n";
    v.detail += "the case as a scenario (replay it with collcheck replay):\n" + scenario_to_yaml(c.scenario());
  }
  return v;
}

// A case whose diagnosis was not the fault injected: what was found, and the
// case as a scenario file that `collcheck replay` reruns.
void say_missed_case(Events& ev, size_t i, const DetectionCase& c, const DetectionOutcome& o) {
  std::string text = fmt::format("case {}: {} ({}): {}\n", i + 1, fault_name(c), c.guarded ? "guarded" : "unguarded", o.why);
  for (const auto& d : o.result.diagnoses) text += fmt::format("  {}\n", format_diagnosis(d));
  if (!o.result.dump_dir.empty()) text += fmt::format("  dumps kept: collcheck analyze {}\n", o.result.dump_dir);
  text += "  the case as a scenario (replay it with collcheck replay):\n";
  const std::string yaml = scenario_to_yaml(c.scenario());
  for (size_t a = 0; a < yaml.size();) {
    const size_t b = std::min(yaml.find('\n', a), yaml.size());
    text += fmt::format("    {}\n", std::string_view(yaml).substr(a, b - a));
    a = b + 1;
  }
  ev.print("{}", text);
  // The replay is the scenario above, in a file: `collcheck replay FILE`.
  ev.emit(FindingEvent{fault_name(c), fmt::format("case {}: {}", i + 1, o.why), ""});
}

}  // namespace

Report run_detection_job(const DetectionJob& job, const Session& session, Events& ev, int& code) {
  const bool root = session.root();
  if (root)
    ev.print("collcheck faults --random {}: the detection property, {} ranks {}, seed {:#x}\n", job.cases, job.ranks,
             session.how(), job.seed);
  const auto start = Clock::now();
  Report rep;
  rep.command = "faults";
  rep.suite = fmt::format("collcheck faults --random {} ({} ranks)", job.cases, job.ranks);
  rep.properties = {{"seed", fmt::format("{:#x}", job.seed)}, {"world", session.name()}};
  rc::Random base(job.seed);
  const auto gen = gen_detection_case(job.ranks, job.ranks);
  size_t missed = 0;
  double worst_over = 0;
  std::map<std::string, std::pair<size_t, size_t>> by_fault;  // fault -> (diagnosed as injected, drawn)
  // With --keep-dumps, the root writes every case's dumps to a folder of
  // its own, kept when the case is missed.
  ReplayOptions ro;
  const auto replay = [&](const Scenario& s) { return replay_in_session(s, ro, session); };
  for (size_t i = 0; i < job.cases; ++i) {
    ev.progress({.count = std::pair{i, job.cases}});
    ev.emit(CaseStartedEvent{i + 1, job.cases, job.seed, {}});
    const rc::Random ri = base.split();
    const DetectionCase c = gen(ri, static_cast<int>(i % (rc::kNominalSize + 1))).value();
    const bool keep = root && !job.keep_dumps.empty();
    ro.dump_dir = keep ? (std::filesystem::path(job.keep_dumps) / fmt::format("case-{}", i + 1)).string() : "";
    const DetectionOutcome o = check_detection(c, replay, /*rerun_if_slow=*/true, keep, [&](bool slow) {
      return session.any_process(slow);
    });
    if (!root) continue;
    worst_over = std::max(worst_over, o.seconds - o.limit_s);
    auto& tally = by_fault[fault_name(c)];
    tally.first += o.ok ? 1 : 0;
    ++tally.second;
    rep.cases.push_back(detection_verdict(i, c, o));
    if (!o.ok) {
      ++missed;
      say_missed_case(ev, i, c, o);
    }
  }
  ev.progress({.end = true});
  code = missed ? 1 : 0;
  if (root) {
    ev.print("{} of {} cases diagnosed as injected (no miss, no false alarm: {}); worst time beyond the limit: {:.3f} s\n",
             job.cases - missed, job.cases, missed ? "NO" : "yes", worst_over);
    std::vector<std::string> tallies;
    for (const auto& [fault, t] : by_fault) tallies.push_back(fmt::format("{} {}/{}", fault, t.first, t.second));
    ev.print("by fault (diagnosed as injected/drawn): {}\n", fmt::join(tallies, ", "));
    rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return rep;
}

}  // namespace collcheck
