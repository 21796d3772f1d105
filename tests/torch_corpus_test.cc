// The corpus of real PyTorch Flight Recorder dumps (tests/fixtures/torch-gloo:
// torch 2.14.1 on Gloo, each set from a real multi-process run of one of
// programs/, with its ground truth in truth.yaml, written from the program's
// design). For every set, as a user runs it:
// - `collcheck analyze` gives the ground truth's outcome (exit 0 clean, 1 a
//   diagnosis, 4 cannot decide), a diagnosis of a kind the truth allows and
//   naming the culprit, and every rank the fault is in named somewhere; no
//   set whose program hangs or fails says clean;
// - without --world-size, a Gloo set says clean only when the dumps hold
//   the world's size;
// - analyze --emit-scenario, then replay in both modes, gives what analyze
//   said: the scenario's expect: holds (a clean set expects none; a set
//   analyze cannot decide expects nothing and replays).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/run_command.h"

namespace {

const std::string kSets = SOURCE_DIR "/tests/fixtures/torch-gloo/sets";

struct Truth {
  std::string outcome, bug;
  int ranks = 0;
  std::vector<int> culprit;
  std::vector<std::string> kinds;
};

std::vector<std::string> list_of(const std::string& v) {  // "[a, b]" -> {a, b}
  std::vector<std::string> out;
  std::stringstream ss(v.substr(v.find('[') + 1, v.find(']') - v.find('[') - 1));
  for (std::string x; std::getline(ss, x, ',');) {
    const auto a = x.find_first_not_of(' ');
    if (a != std::string::npos) out.push_back(x.substr(a));
  }
  return out;
}

Truth truth_of(const std::string& set) {
  std::ifstream in(kSets + "/" + set + "/truth.yaml");
  Truth t;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key == "outcome") t.outcome = value;
    if (key == "bug") t.bug = value.size() >= 2 && value.front() == '"' ? value.substr(1, value.size() - 2) : value;
    if (key == "ranks") t.ranks = std::stoi(value);
    if (key == "culprit")
      for (const auto& r : list_of(value)) t.culprit.push_back(std::stoi(r));
    if (key == "kinds") t.kinds = list_of(value);
  }
  EXPECT_FALSE(t.outcome.empty()) << set;
  EXPECT_GT(t.ranks, 0) << set;
  return t;
}

std::vector<std::string> sets() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(kSets)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

int code_of(const std::string& outcome) { return outcome == "clean" ? 0 : outcome == "diagnosis" ? 1 : 4; }

// The finding lines analyze prints ("  kind [ranks ...] ...").
std::vector<std::string> findings(const std::string& out) {
  std::vector<std::string> f;
  std::istringstream in(out);
  bool on = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("outcome: ")) {
      on = true;
      continue;
    }
    if (on && line.starts_with("  ") && line.find(" [rank") != std::string::npos) f.push_back(line.substr(2));
    else if (on && !line.starts_with("  ")) on = false;
  }
  return f;
}

// Whether `text` names rank r: "rank 3", "ranks 0, 3", "ranks 2-5".
bool names_rank(const std::string& text, int r) {
  const std::string rs = std::to_string(r);
  for (size_t at = text.find("rank"); at != std::string::npos; at = text.find("rank", at + 1)) {
    size_t k = text.find(' ', at);
    if (k == std::string::npos) break;
    // the list after "rank " / "ranks ": digits, commas, spaces and dashes
    size_t end = k + 1;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == ',' ||
                                 text[end] == ' ' || text[end] == '-'))
      ++end;
    std::stringstream ss(text.substr(k + 1, end - k - 1));
    for (std::string part; std::getline(ss, part, ',');) {
      const auto a = part.find_first_not_of(' ');
      if (a == std::string::npos) continue;
      part = part.substr(a);
      const auto dash = part.find('-');
      try {
        if (dash == std::string::npos) {
          if (std::stoi(part) == r) return true;
        } else if (std::stoi(part.substr(0, dash)) <= r && r <= std::stoi(part.substr(dash + 1))) {
          return true;
        }
      } catch (const std::exception&) {
      }
    }
  }
  (void)rs;
  return false;
}

class RealDumps : public testing::TestWithParam<std::string> {};

TEST_P(RealDumps, AnalyzeGivesTheGroundTruth) {
  const std::string set = GetParam();
  const Truth t = truth_of(set);
  const auto r = testutil::collcheck("analyze " + kSets + "/" + set + " --world-size " + std::to_string(t.ranks), 60);
  SCOPED_TRACE(r.out);
  ASSERT_EQ(r.code, code_of(t.outcome)) << set << ": the truth says " << t.outcome << " (" << t.bug << ")";
  if (!t.bug.starts_with("none")) {  // "none", "none (DETAIL on)", "none, but rank 3's dump is gone"
    EXPECT_NE(r.code, 0) << "a set whose program hangs or fails said clean";
  }
  const auto f = findings(r.out);
  if (t.outcome == "diagnosis") {
    ASSERT_FALSE(f.empty());
    const std::string kind = f.front().substr(0, f.front().find(' '));
    EXPECT_NE(std::find(t.kinds.begin(), t.kinds.end(), kind), t.kinds.end()) << "first finding: " << f.front();
  } else {
    EXPECT_TRUE(f.empty());
  }
  // Every rank without a dump is named; so is every rank the fault is in,
  // when the dumps show it (a diagnosis, or a rank that left no dump).
  const std::string verdict = r.out.substr(r.out.find("outcome: "));
  for (int q = 0; q < t.ranks; ++q)
    if (!std::filesystem::exists(kSets + "/" + set + "/gloo_trace_rank_" + std::to_string(q)) &&
        !std::filesystem::exists(kSets + "/" + set + "/gloo_trace_rank_" + std::to_string(q) + ".json")) {
      EXPECT_TRUE(names_rank(verdict, q)) << "rank " << q << " left no dump and is not named";
      EXPECT_NE(verdict.find("left no dump"), std::string::npos);
    }
  for (const int c : t.culprit) {
    if (t.outcome != "diagnosis") continue;
    EXPECT_TRUE(std::any_of(f.begin(), f.end(), [&](const std::string& x) {
      return names_rank(x.substr(0, x.find(']') + 1), c);
    })) << "no finding names rank " << c;
  }
}

TEST_P(RealDumps, WithoutTheWorldSizeCleanNeedsTheDumpsToHoldIt) {
  const std::string set = GetParam();
  const Truth t = truth_of(set);
  const auto r = testutil::collcheck("analyze " + kSets + "/" + set, 60);
  SCOPED_TRACE(r.out);
  if (t.outcome != "clean") {
    EXPECT_EQ(r.code, code_of(t.outcome));
    return;
  }
  const bool holds = r.out.find("world: " + std::to_string(t.ranks) + " ranks\n") != std::string::npos;
  EXPECT_EQ(r.code, holds ? 0 : 4);
  if (!holds) {
    EXPECT_NE(r.out.find("pass --world-size N"), std::string::npos);
  }
}

TEST_P(RealDumps, EmittedScenarioReplaysToWhatAnalyzeSaid) {
  const std::string set = GetParam();
  const Truth t = truth_of(set);
  const std::string out = testing::TempDir() + "/corpus_" + set + ".yaml";
  std::filesystem::remove(out);
  const auto a = testutil::collcheck(
      "analyze " + kSets + "/" + set + " --world-size " + std::to_string(t.ranks) + " --emit-scenario " + out, 60);
  ASSERT_EQ(a.code, code_of(t.outcome)) << a.out;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  const auto f = findings(a.out);
  if (t.outcome == "diagnosis") {
    const std::string kind = f.front().substr(0, f.front().find(' '));
    EXPECT_NE(text.str().find("expect: {diagnosis: " + kind), std::string::npos) << text.str();
  } else if (t.outcome == "clean") {
    EXPECT_NE(text.str().find("expect: {diagnosis: none"), std::string::npos) << text.str();
  } else {
    EXPECT_EQ(text.str().find("\nexpect:"), std::string::npos) << text.str();
  }
  for (const std::string mode : {"guarded", "unguarded"}) {
    const auto r = testutil::collcheck("replay " + out + " --mode " + mode, 120);
    // A set analyze cannot decide expects nothing: its replay is one run the
    // dumps allow, and any verdict of it is fine; it must still run.
    if (t.outcome == "undecided") {
      EXPECT_TRUE(r.code == 0 || r.code == 1) << mode << ": " << r.out;
      EXPECT_NE(r.out.find("diagnosis"), std::string::npos) << r.out;
      continue;
    }
    EXPECT_EQ(r.code, 0) << mode << ": analyze said\n" << a.out << "\nthe replay said\n" << r.out;
    if (t.outcome == "diagnosis") {
      // The replay's first finding is analyze's: the same kind and ranks.
      const std::string head = f.front().substr(0, f.front().find(']') + 1);
      const auto at = r.out.find("diagnosis (");
      ASSERT_NE(at, std::string::npos) << r.out;
      const auto line = r.out.find('\n', at) + 1;
      EXPECT_EQ(r.out.compare(line + 2, head.size(), head), 0)
          << mode << ": the replay's first finding is not analyze's " << head << ":\n" << r.out;
    }
  }
}

std::string name_of(const testing::TestParamInfo<std::string>& i) { return i.param; }
INSTANTIATE_TEST_SUITE_P(Gloo, RealDumps, testing::ValuesIn(sets()), name_of);

}  // namespace
