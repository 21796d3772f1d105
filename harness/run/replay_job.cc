// collcheck replay as a job (replay_job.h): a scenario file run to its
// diagnosis, what it says, and its verdict.
#include "harness/run/replay_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "harness/model/exit_codes.h"
#include "harness/model/size.h"
#include "harness/model/user_values.h"
#include "harness/report/diagnosis_text.h"
#include "harness/report/timeline.h"
#include "harness/run/scenario_runner.h"

namespace collcheck {

namespace {

void print_replay(Events& ev, const Scenario& s, const ReplayResult& r, bool temporary,
                  const Session& session) {
  std::string faults;
  for (const auto& f : s.faults) faults += (faults.empty() ? "" : ", ") + f.kind;
  ev.print("collcheck replay: {} ({})\n", s.file, s.name);
  ev.print("  {} ranks {}, impl {}, deadline {} s per call, {} mode; faults: {}\n", s.ranks,
             session.how(), s.impl, s.deadline_s,
             r.guarded ? "guarded" : "unguarded", faults.empty() ? "none" : faults);
  if (!r.dump_error.empty())
    ev.print("  flight-recorder dumps: NOT all written to {}: {} (the diagnosis below is from the dumps in memory)\n",
               r.dump_dir, r.dump_error);
  else if (!r.dump_dir.empty() && temporary)
    ev.print("  flight-recorder dumps: written, read and removed at the end (--dump-dir DIR keeps them)\n");
  else if (!r.dump_dir.empty())
    ev.print("  flight-recorder dumps: {} (collcheck analyze {})\n", r.dump_dir, r.dump_dir);
  if (r.diagnoses.empty()) {
    if (r.unexplained.empty())
      ev.print("diagnosis: none (clean run, {} results checked against the oracle)\n", r.results_checked);
    else
      ev.print("diagnosis: none found, but the run failed (see below)\n");
  } else {
    ev.print("diagnosis ({:.3f} s after the start{}):\n", r.time_to_diagnosis,
               r.first_failure >= 0 && !r.guarded
                   ? fmt::format("; the first call failed at {:.3f} s", r.first_failure)
                   : "");
    for (const auto& d : r.diagnoses) {
      ev.print("  {}\n", format_diagnosis(d));
      ev.emit(FindingEvent{std::string(diagnosis_name(d.kind)), format_diagnosis(d),
                                      "collcheck replay " + s.file});
    }
  }
  if (!r.symptom.empty()) ev.print("what production would have shown: {}\n", r.symptom);
  ev.print("{}", format_timeline(r.dumps));
  for (const auto& u : r.unfired) ev.print("note: {}\n", u);
}


// --dump-dir, before the run: a directory this process can write, holding no
// dumps of another run (a larger world's stale rank-5.json was read as this
// run's). A file there, a read-only directory or one that cannot be made
// aborted the replay (SIGABRT), after the run.
void check_dump_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw UsageError(fmt::format("--dump-dir {}: it is not a directory; give a directory (made if missing)", dir));
  if (!fs::exists(st) && (fs::create_directories(dir, ec), ec))
    throw UsageError(fmt::format("--dump-dir {}: cannot make the directory: {}", dir, ec.message()));
  const std::string probe = (fs::path(dir) / fmt::format(".collcheck-probe-{}", ::getpid())).string();
  if (std::FILE* p = std::fopen(probe.c_str(), "w")) {
    std::fclose(p);
    std::remove(probe.c_str());
  } else {
    throw UsageError(fmt::format("--dump-dir {}: cannot write there: {}", dir, std::strerror(errno)));
  }
  std::vector<std::string> stale;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("rank-") && name.ends_with(".json")) stale.push_back(name);
  }
  if (!stale.empty()) {
    std::sort(stale.begin(), stale.end());
    throw UsageError(fmt::format("--dump-dir {}: it holds {} dump(s) of an earlier run ({}{}); they would be "
                                            "read with this run's: give an empty directory, or remove them",
                                            dir, stale.size(), stale.front(), stale.size() > 1 ? ", ..." : ""));
  }
}

// The scenario file, read within the input limits, and its expectations
// checked against the diagnoses there are.
Scenario load_replay_scenario(const ReplayJob& f) {
  Scenario s;
  try {
    InputLimits limits;
    limits.max_bytes = parse_size(f.max_input_bytes, "--max-input-bytes");
    limits.max_steps = parse_count(f.max_steps, "--max-steps");
    s = load_scenario(f.file, limits);
  } catch (const ScenarioError& e) {
    throw UsageError(e.what());
  }
  if (s.expect && s.expect->diagnosis != "none" && !parse_diagnosis(s.expect->diagnosis))
    throw UsageError(fmt::format("{}: expect{}.diagnosis: unknown diagnosis '{}'; allowed: {}", s.file,
                                            s.also_expect.empty() ? "" : "[0]", s.expect->diagnosis,
                                            diagnosis_choices()));
  for (size_t i = 0; i < s.also_expect.size(); ++i)
    if (!parse_diagnosis(s.also_expect[i].diagnosis))
      throw UsageError(fmt::format("{}: expect[{}].diagnosis: unknown diagnosis '{}'; allowed: {}", s.file,
                                              i + 1, s.also_expect[i].diagnosis, diagnosis_choices()));
  return s;
}

// --dump-dir: rank 0 checks it, and every process agrees, so that none
// starts a run that others refused. The exit code when it is refused.
std::optional<int> refuse_dump_dir(const std::string& dir, const Session& session, Events& ev) {
  std::string err;
  if (session.root()) {
    try {
      check_dump_dir(dir);
    } catch (const UsageError& e) {
      err = e.what();
    }
  }
  if (!session.is_mpi() && !err.empty()) throw UsageError(err);
  if (session.agree_exit_code(err.empty() ? 0 : 2) != 0) {
    if (!err.empty()) ev.warn("collcheck: error: {}\n", err);
    return 2;
  }
  return std::nullopt;
}

// Rank 0's verdict on a replay that ran: what it printed, the expectation,
// the reports; the exit code.
int judge_replay(const ReplayJob& f, const Scenario& s, const ReplayResult& r, const Session& session,
                 Events& ev, const ReplayFinish& finish) {
  // Dumps in a temporary directory nobody named are removed: every
  // unguarded replay left a collcheck-dumps-* folder in /tmp.
  const bool temporary = f.dump_dir.empty() && !r.dump_dir.empty();
  print_replay(ev, s, r, temporary, session);
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(r.dump_dir, ec);
  }
  if (!r.unexplained.empty()) {
    // Never a clean run: a rank failed, and no diagnosis says why.
    const int code = kExitHarnessError;
    ev.print("the run did not complete, and no diagnosis explains why (not a verdict; exit {}):\n", code);
    for (size_t a = 0, b; a < r.unexplained.size(); a = b + 1) {
      b = r.unexplained.find('\n', a);
      if (b == std::string::npos) b = r.unexplained.size();
      ev.print("  {}\n", r.unexplained.substr(a, b - a));
    }
    return session.agree_exit_code(code);
  }
  const ExpectSpec none{"none", {}, {}, {}, {}, {}};
  const ExpectSpec& e = s.expect ? *s.expect : none;
  std::string why;
  const bool ok = expectations_hold(s, r, &why);
  auto text = [](const ExpectSpec& x) {
    return fmt::format("{}{}{}{}{}", x.diagnosis, x.ranks.empty() ? "" : fmt::format(" ranks [{}]", fmt::join(x.ranks, ", ")),
                       x.group ? fmt::format(" in group {}", x.group->empty() ? "world" : *x.group) : "",
                       x.seq ? fmt::format(" call #{}", *x.seq) : "",
                       x.edge ? fmt::format(" edge {} -> {}", x.edge->first, x.edge->second) : "");
  };
  std::string expected = text(e) + (s.also_expect.empty() ? "" : " first");
  for (const auto& x : s.also_expect) expected += "; and " + text(x);
  ev.print("expected: {} -> {}\n", expected,
             ok ? "holds" : "DOES NOT HOLD: " + why + (r.unfired.empty() ? "" : " (a fault never fired: see the note above)"));
  Report rep;
  rep.command = "replay";
  rep.suite = fmt::format("collcheck replay {}", s.file);
  rep.properties = {{"scenario", s.name}, {"mode", r.guarded ? "guarded" : "unguarded"},
                    {"world", session.name()}, {"ranks", std::to_string(s.ranks)}};
  rep.seconds = r.seconds;
  ReportCase c{fmt::format("expected: {}", e.diagnosis), ok ? ReportCase::Status::Passed : ReportCase::Status::Failed,
               ok ? "" : why, "", r.seconds};
  for (const auto& d : r.diagnoses) c.detail += format_diagnosis(d) + "\n";
  if (r.diagnoses.empty()) c.detail = "diagnosis: none\n";
  for (const auto& u : r.unfired) c.detail += "note: " + u + "\n";
  rep.cases.push_back(std::move(c));
  rep.runs.push_back(timeline_of(fmt::format("replay {} ({})", s.name, r.guarded ? "guarded" : "unguarded"),
                                            r.dumps, r.diagnoses, r.time_to_diagnosis));
  // The verdict holds, but the dumps asked for did not land: not a pass.
  const int code = finish(rep, !ok ? 1 : !r.dump_error.empty() && !f.dump_dir.empty() ? kExitOutputLost : 0);
  return session.agree_exit_code(code);
}

}  // namespace

int run_replay_job(const ReplayJob& f, const Session& session, Events& ev, const ReplayFinish& finish) {
  const Scenario s = load_replay_scenario(f);
  ReplayOptions o;
  if (!f.mode.empty()) {
    if (f.mode != "guarded" && f.mode != "unguarded")
      throw UsageError(fmt::format("--mode must be guarded or unguarded, got '{}'", f.mode));
    o.guarded = f.mode == "guarded";
  }
  o.dump_dir = f.dump_dir;
  if (!o.dump_dir.empty())
    if (const auto refused = refuse_dump_dir(o.dump_dir, session, ev)) return *refused;
  // Refuse up front, before any work, what cannot fit this machine's memory.
  const uint64_t need = replay_memory_needed(s, session.ranks_here(s.ranks));
  refuse_unless_fits(session, need, [&](uint64_t have) {
    return fmt::format("{}: the program's calls need about {} in this process ({} rank(s) x the buffers a rank holds "
                       "at once: inputs, outputs, messages in flight and the oracle's inputs); {} is available. Make the counts smaller",
                       s.file, format_bytes(need), session.ranks_here(s.ranks), format_bytes(have));
  });
  ReplayResult r;
  ev.progress({.phase = fmt::format("{} ranks {}, {} mode; the run's limit is {:.0f} s", s.ranks, session.how(),
                                    o.guarded.value_or(s.guarded) ? "guarded" : "unguarded", replay_limit_s(s))});
  try {
    r = replay_in_session(s, o, session);
    ev.progress({.end = true});
  } catch (const ScenarioUnavailable& e) {
    // As verify does: exit 77, which CI reads as a skip.
    if (session.root()) ev.print("collcheck replay: SKIPPED (not a pass): {}\n", e.what());
    return session.agree_exit_code(kExitSkipped);
  } catch (const ScenarioError& e) {
    throw UsageError(e.what());
  }
  if (!session.root()) return session.agree_exit_code(1);  // rank 0 judges; its code wins
  return judge_replay(f, s, r, session, ev, finish);
}

}  // namespace collcheck
