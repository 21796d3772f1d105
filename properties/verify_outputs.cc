// What verify hands the user besides its printed run: the replay line of a
// case (a token too long for a shell line goes to a file), the report of a
// failure whose world was lost, and the run as a Report for --report/--junit.
#include <fmt/format.h>

#include <cstdlib>
#include <functional>

#include "harness/model/atomic_file.h"
#include "properties/verify.h"

namespace collcheck {

std::string replay_command(const VerifyOptions& o, const Case& c, size_t repeat, const std::vector<Case>& before) {
  std::string token;
  for (const Case& b : before) token += encode_case(b) + "\n";  // run first, one per line
  token += encode_case(c);
  if (token.size() > kMaxInlineToken || !before.empty()) {
    // Too long for a shell line ("Argument list too long" near 128 KiB): the
    // token goes to a file named by its content, written atomically.
    std::string dir = o.token_dir;
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      dir = tmp && *tmp ? tmp : "/tmp";
    }
    if (dir.back() != '/') dir += '/';
    const std::string path = fmt::format("{}collcheck-replay-{:016x}.token", dir, std::hash<std::string>{}(token));
    try {
      write_file_atomically(path, token + "\n");
      token = "@" + path;
    } catch (const std::exception& e) {
      token += fmt::format(" (could not write {}: {})", path, e.what());
    }
  }
  return fmt::format("{}collcheck verify --impl {}{}{} --replay {}{}", o.launcher, o.impl_spec,
                     o.against.empty() ? "" : " --against " + o.against, o.run_flags, token,
                     repeat > 1 ? fmt::format(" --repeat {}", repeat) : "");
}

void print_verify_failure(Events& ev, const VerifyOptions& o, const VerifyResult& r) {
  ev.print("\nFAIL: property {} does not hold\n", r.failure.property);
  ev.print("  minimal case: {}", describe_case(r.minimal, 16).insert(0, ""));
  ev.print("{}", r.failure.detail);
  if (!r.original_property.empty() && r.original_property != r.failure.property)
    ev.print("  note: case {} failed {}; every shrink step failed it too, and this smaller case fails {} first\n",
             r.failing_case, r.original_property, r.failure.property);
  if (r.stepped_back > 0)
    ev.print("  note: the {} smaller case(s) at the end of the shrink path did not fail again in {} replays; "
                    "this is the smallest that did\n",
               r.stepped_back, r.replays);
  if (r.natural_replays > 0)
    ev.print("  on the natural schedule the minimal case failed {} of {} replays; with the schedule perturbed "
                    "(seed {:#x}) {} of {}\n",
               r.natural_failures, r.natural_replays, r.minimal.perturb, r.replay_failures, r.replays);
  if (r.flaky() && r.replay_failures == 0) {
    // Stepped back to the case that failed once and never again.
    ev.print("  flaky: the case failed once, then passed {} of {} replays: it did not show again (a rare race or "
             "timing dependence, or a run stalled by the host); each replay below runs it {} times, fails if any "
             "run fails, and may pass\n",
             r.replays, r.replays, r.replays);
    ev.print("  replay: {}\n", replay_command(o, r.minimal, r.replays));
  } else if (r.flaky()) {
    ev.print("  flaky: the minimal case fails {} of {} replays (a race or a timing dependence); each replay "
                    "below runs it {} times and fails if any run fails\n",
               r.replay_failures, r.replays, r.replays);
    ev.print("  replay: {}\n", replay_command(o, r.minimal, r.replays));
  } else {
    if (r.replays == 0 && r.interrupted)
      ev.print("  not replayed: the run's end came first (steady or flaky is not known)\n");
    else if (r.depends_on_earlier_cases())
      ev.print("  depends on earlier cases: the minimal case failed {} of {} replays in this process, whose rank "
                      "threads had run the cases before it, but passed in a fresh process: state the implementation "
                      "keeps across cases (per thread, per world size, per communicator) is wrong\n",
                 r.replay_failures, r.replays);
    else if (r.fresh_impossible)
      ev.print("  steady here: the minimal case failed {} of {} replays in this process; a fresh process "
                      "cannot be started from it ({}), so if the first replay line passes, the failure "
                      "depends on the cases before it: the second runs the last {} of them first\n",
                 r.replay_failures, r.replays, r.fresh_why, r.history_tail.size());
    else
      ev.print("  steady: the minimal case failed {} of {} replays{}\n", r.replay_failures, r.replays,
                 r.fresh_checked ? ", and in a fresh process" : "");
    ev.print("  replay: {}\n", replay_command(o, r.minimal));
    if (!r.earlier.empty())
      ev.print("  replay with the {} earlier case(s) it needs ({}; found in {} fresh processes): {}\n",
                 r.earlier.size(), r.earlier_minimal ? "none of them can be left out" : "the search ran out of runs",
                 r.earlier_fresh_runs, replay_command(o, r.minimal, 1, r.earlier));
    else if (r.depends_on_earlier_cases())
      ev.print("  (the cases before it, run first in a fresh process, did not make it fail: the state depends on "
                      "timing too, or on cases before the last 4096)\n");
    if (!r.history_tail.empty())
      ev.print("  replay after the {} cases before it: {}\n", r.history_tail.size(),
                 replay_command(o, r.minimal, 1, r.history_tail));
  }
}

int report_unshrunk_failure(const VerifyOptions& o, const Case& c, const Failure& f, Events& ev) {
  ev.print("\nFAIL: property {} does not hold, and the world was lost (a rank never returned or never "
                  "answered): the case is not shrunk\n", f.property);
  ev.print("  case: {}", describe_case(c, 16));
  ev.print("{}", f.detail);
  ev.print("  replay: {}\n", replay_command(o, c));
  return 1;
}

Report verify_report(const VerifyOptions& o, const VerifyResult& r) {
  Report rep;
  rep.command = "verify";
  rep.suite = "collcheck verify " + o.impl_spec;
  rep.properties = {{"seed", fmt::format("{:#x}", o.seed)}, {"cases", std::to_string(r.cases_run)}};
  rep.seconds = r.seconds;
  for (const auto& name : property_names()) {
    ReportCase c;
    c.name = name;
    if (r.failed && r.failure.property == name) {
      c.status = ReportCase::Status::Failed;
      c.message = fmt::format("{} does not hold (case {} of seed {:#x})", name, r.failing_case, o.seed);
      c.detail = fmt::format("minimal case: {}{}{}replay: {}\n", describe_case(r.minimal, 16), r.failure.detail,
                             r.flaky() ? fmt::format("flaky: fails {} of {} replays\n", r.replay_failures, r.replays)
                             : r.depends_on_earlier_cases()
                                 ? "depends on earlier cases: fails where the cases before it ran, passes in a fresh "
                                   "process\n"
                                 : "",
                             replay_command(o, r.minimal, r.flaky() ? r.replays : 1));
    }
    rep.cases.push_back(std::move(c));
  }
  if (r.harness_error)
    rep.cases.push_back({"harness", ReportCase::Status::Error,
                         fmt::format("the harness could not run case {} (no thread or memory): not a verdict", r.failing_case),
                         r.failure.detail, 0});
  else if (r.case_cut && !r.failed)
    rep.cases.push_back({"cut-short", ReportCase::Status::Error,
                         fmt::format("the end of the run cut case {} short: not a verdict", r.cases_run + 1), "", 0});
  return rep;
}

void emit_finding(Events& ev, const VerifyOptions& o, const VerifyResult& r) {
  if (r.failed)
    ev.emit(FindingEvent{r.failure.property,
                         fmt::format("{} does not hold: {}", r.failure.property, case_summary(r.minimal)),
                         replay_command(o, r.minimal, r.flaky() ? r.replays : 1)});
}

}  // namespace collcheck
