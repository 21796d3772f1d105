// The event stream (harness/report/events.h): what the rooms below the CLI
// emit instead of printing, and its sinks. The console shows exactly the text
// events; the JSON-lines format (--report jsonl=PATH) holds every event as it
// happens; a sink that cannot write makes the run's exit 5 (issue 32).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/report/events.h"
#include "tests/run_command.h"

using namespace collcheck;
using nlohmann::json;

namespace {

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  const std::string dir = d && *d ? d : "/tmp";
  return dir + "/events_test_" + std::to_string(::getpid()) + "_" + name;
}

std::vector<json> read_lines(const std::string& path) {
  std::vector<json> v;
  std::istringstream in(testutil::slurp(path));
  for (std::string line; std::getline(in, line);) v.push_back(json::parse(line));
  return v;
}

std::string file_text(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
  return s;
}

}  // namespace

TEST(Events, TheConsoleShowsTheTextEventsOnTheirStreamsAndNothingElse) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Events ev;
  ev.add(console_sink(out, err));
  ev.print("a {}\n", 1);
  ev.warn("careful\n");
  ev.emit(RowEvent{json{{"size", 4}}});
  ev.progress({.count = std::pair{size_t{1}, size_t{2}}});
  ev.print("b\n");
  ev.close();
  EXPECT_EQ(file_text(out), "a 1\nb\n");
  EXPECT_EQ(file_text(err), "careful\n");
  std::fclose(out);
  std::fclose(err);
}

TEST(Events, EveryEventKindHasItsNameAndFieldsInJson) {
  const std::vector<std::pair<Event, std::string>> all{
      {TextEvent{TextEvent::To::Err, "x"}, "text"},
      {CaseStartedEvent{3, 10, 7, "v1:p2:x"}, "case"},
      {VerdictEvent{ReportCase{"p", ReportCase::Status::Failed, "m", "d", 1.5}}, "verdict"},
      {FindingEvent{"skipped_call", "rank 2 skipped", "collcheck replay x"}, "finding"},
      {RowEvent{json{{"size", 8}}}, "row"},
      {UnitEvent{json{{"i", 4}}}, "unit"},
      {ProgressEvent{.phase = "shrinking"}, "progress"},
  };
  for (const auto& [e, name] : all) {
    const json j = event_json(e);
    EXPECT_EQ(j.at("event"), name);
    EXPECT_STREQ(event_name(e), name.c_str());
  }
  EXPECT_EQ(event_json(all[2].first).at("status"), "failed");
  EXPECT_EQ(event_json(all[1].first).at("index"), 3);
  EXPECT_EQ(event_json(all[1].first).at("replay"), "v1:p2:x");
  EXPECT_FALSE(event_json(CaseStartedEvent{3, 10, 7, {}}).contains("replay"));  // none: no empty field
  EXPECT_EQ(event_json(all[4].first).at("row").at("size"), 8);
  EXPECT_EQ(event_json(all[6].first).at("phase"), "shrinking");
  EXPECT_FALSE(event_json(all[6].first).contains("done"));  // only what is news
}

TEST(Events, TheJsonLinesSinkWritesEachEventAsItHappens) {
  const std::string path = tmp_path("stream.jsonl");
  const auto sinks = open_report_streams({{"jsonl", path}});
  ASSERT_EQ(sinks.size(), 1u);
  Events ev;
  ev.add(sinks[0]);
  ev.print("one\n");
  // Written already, before the run ends (a run cut short keeps it).
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("text"), "one\n");
  EXPECT_GE(lines[0].at("t").get<double>(), 0.0);
  ev.emit(UnitEvent{json{{"i", 1}}});
  ev.close();
  lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].at("event"), "unit");
  // A stream has no end-of-run rendering, and write_reports leaves its file alone.
  EXPECT_THROW(render_report("jsonl", Report{}), std::invalid_argument);
  write_reports({{"jsonl", path}}, Report{});
  EXPECT_EQ(read_lines(path).size(), 2u);
  std::filesystem::remove(path);
}

TEST(Events, ASinkThatCannotWriteIsAnErrorAtTheEnd) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine to make a write fail";
  const auto sinks = open_report_streams({{"jsonl", "/dev/full"}});
  Events ev;
  ev.add(sinks.at(0));
  ev.print("lost\n");
  EXPECT_THROW(ev.close(), std::runtime_error);
  // And the command says so with exit 5, although the verdict passed.
  const auto r = testutil::collcheck("verify --cases 5 --seed 1 --report jsonl=/dev/full", 120);
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_NE(r.out.find("--report jsonl=/dev/full"), std::string::npos) << r.out;
}

TEST(Events, TheProgressSinkDrawsProgressEventsAndEndsWithThem) {
  ::setenv("COLLCHECK_PROGRESS_EVERY", "0.05", 1);  // a line every 50 ms
  std::FILE* f = std::tmpfile();
  {
    Events ev;
    ev.add(progress_sink("verify", "cases", ProgressStyle::Lines, f));
    ev.progress({.count = std::pair{size_t{3}, size_t{10}}});
    std::this_thread::sleep_for(std::chrono::seconds(1));  // 20 ticks: a busy host still draws one
    ev.progress({.end = true});  // the bar goes here, with its last line
    ev.progress({.count = std::pair{size_t{4}, size_t{10}}});  // a new bar
    std::this_thread::sleep_for(std::chrono::seconds(1));  // 20 ticks: a busy host still draws one
    ev.close();
  }
  ::unsetenv("COLLCHECK_PROGRESS_EVERY");
  const std::string s = file_text(f);
  EXPECT_NE(s.find("3/10 cases"), std::string::npos) << s;
  EXPECT_NE(s.find("4/10 cases"), std::string::npos) << s;
  std::fclose(f);
  std::FILE* g = std::tmpfile();
  {
    Events ev;
    ev.add(progress_sink("verify", "cases", ProgressStyle::Off, g));
    ev.progress({.count = std::pair{size_t{3}, size_t{10}}});
    ev.close();
  }
  EXPECT_EQ(file_text(g), "");
  std::fclose(g);
}

// verify's console output is exactly the text events of its stream, and the
// stream holds one case event per case, a verdict per property, and the
// finding with its replay when a property fails.
TEST(Events, VerifysStreamHoldsItsTextCasesAndVerdicts) {
  const std::string path = tmp_path("verify.jsonl");
  const auto r = testutil::run_command(std::string(COLLCHECK_BIN) + " verify --cases 40 --seed 3 --progress off --report jsonl=" +
                                           path + " 2>/dev/null",
                                       300);
  ASSERT_EQ(r.code, 0) << r.out;
  std::string text;
  std::map<std::string, int> kinds;
  std::set<std::string> tokens;
  std::string seventh;
  for (const json& j : read_lines(path)) {
    ++kinds[j.at("event")];
    if (j["event"] == "text" && j["to"] == "out") text += j["text"].get<std::string>();
    if (j["event"] == "case") {
      tokens.insert(j.at("replay").get<std::string>());
      if (j.at("index") == 7) seventh = j.at("replay");
    }
  }
  EXPECT_EQ(text, r.out);
  EXPECT_EQ(kinds["case"], 40);
  // Each case event carries its case's replay token: 40 cases, 40 tokens, and
  // one of them replays as one case that passes.
  EXPECT_EQ(tokens.size(), 40u);
  ASSERT_EQ(seventh.rfind("v1:", 0), 0u) << seventh;
  const auto one = testutil::collcheck("verify --progress off --replay " + seventh, 120);
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("PASS: every property holds"), std::string::npos) << one.out;
  EXPECT_GE(kinds["verdict"], 5);
  EXPECT_EQ(kinds["finding"], 0);
  std::filesystem::remove(path);

  const auto bad = testutil::collcheck(std::string("verify --impl plugin:") + MUTANT_DIR +
                                           "/double_contribution.so --cases 200 --seed 1 --progress off --report jsonl=" + path,
                                       300);
  ASSERT_EQ(bad.code, 1) << bad.out;
  int findings = 0;
  std::string last_case;  // the case that failed: verify stops there
  for (const json& j : read_lines(path)) {
    if (j.at("event") == "case") last_case = j.at("replay");
    if (j.at("event") == "finding") {
      ++findings;
      EXPECT_NE(j.at("replay").get<std::string>().find("--replay"), std::string::npos) << j.dump();
    }
  }
  EXPECT_EQ(findings, 1);
  // The failing case's own token (before shrinking) fails again.
  const auto again = testutil::collcheck(std::string("verify --impl plugin:") + MUTANT_DIR +
                                             "/double_contribution.so --progress off --replay " + last_case,
                                         120);
  EXPECT_EQ(again.code, 1) << last_case << "\n" << again.out;
  std::filesystem::remove(path);
}

// The sweep's stream holds one row event per row, the same rows its --json has.
TEST(Events, SweepsRowsAreRowEvents) {
  const std::string path = tmp_path("sweep.jsonl"), js = tmp_path("sweep.json");
  const auto r = testutil::collcheck("sweep -b 1K -e 4K -f 2 -n 2 --ranks 2 --json " + js + " --report jsonl=" + path, 300);
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<json> rows;
  for (const json& j : read_lines(path))
    if (j.at("event") == "row") rows.push_back(j.at("row"));
  const json doc = json::parse(testutil::slurp(js));
  ASSERT_EQ(rows.size(), doc.at("results").size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("size"), doc["results"][i].at("size"));
    EXPECT_EQ(rows[i].at("algo"), doc["results"][i].at("algo"));
  }
  std::filesystem::remove(path);
  std::filesystem::remove(js);
}

// Every command's stream ends with its verdicts, as its other formats list
// them: a replay's stream has the same verdicts as its JUnit report.
TEST(Events, EveryCommandsStreamEndsWithItsVerdicts) {
  const std::string path = tmp_path("replay.jsonl"), xml = tmp_path("replay.xml");
  const auto r = testutil::collcheck(std::string("replay ") + SOURCE_DIR +
                                         "/examples/bugs/late_rank_after_checkpoint.yaml --progress off --report jsonl=" +
                                         path + " --report junit=" + xml,
                                     300);
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<std::string> names;
  for (const json& j : read_lines(path))
    if (j.at("event") == "verdict") names.push_back(j.at("name"));
  ASSERT_FALSE(names.empty());
  const std::string junit = testutil::slurp(xml);
  size_t testcases = 0;
  for (size_t at = junit.find("<testcase "); at != std::string::npos; at = junit.find("<testcase ", at + 1)) ++testcases;
  EXPECT_EQ(names.size(), testcases) << junit;
  for (const auto& n : names) EXPECT_NE(junit.find(n), std::string::npos) << n;
  std::filesystem::remove(path);
  std::filesystem::remove(xml);
}

// What a command prints on stdout is its stream's text, for every command
// that prints: the JSON-lines file holds the whole run, not a part of it.
TEST(Events, EachCommandsStdoutIsItsStreamsText) {
  const std::string path = tmp_path("cmd.jsonl");
  const std::string dumps = std::string(SOURCE_DIR) + "/tests/fixtures/torch-gloo/sets/rank_crashes";
  std::vector<std::string> commands{
      std::string("replay ") + SOURCE_DIR + "/examples/bugs/late_rank_after_checkpoint.yaml --progress off",
      "faults --mode guarded --progress off",
      "faults --random 4 --seed 2 --progress off",
      "sweep -b 1K -e 1K -n 2 --ranks 2",
  };
  ASSERT_TRUE(std::filesystem::is_directory(dumps)) << dumps;
  commands.push_back("analyze " + dumps);
  for (const auto& c : commands) {
    SCOPED_TRACE(c);
    const auto r = testutil::run_command(std::string(COLLCHECK_BIN) + " " + c + " --report jsonl=" + path + " 2>/dev/null", 300);
    ASSERT_LE(r.code, 1) << r.out;
    std::string text;
    for (const json& j : read_lines(path))
      if (j.at("event") == "text" && j.at("to") == "out") text += j.at("text").get<std::string>();
    EXPECT_EQ(text, r.out);
    std::filesystem::remove(path);
  }
}
