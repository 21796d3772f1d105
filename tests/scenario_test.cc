// Scenarios, the flight recorder and diagnosis: bad files get file, line and
// field; every example in examples/bugs/ replays to its expected diagnosis in
// both modes; analyze reaches the same diagnosis from the dumps alone; the
// detection property holds for thread worlds of 2 to 8 ranks.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "faults/nemesis.h"
#include "harness/run/communicator.h"
#include "harness/report/diagnosis_text.h"
#include "harness/run/scenario_runner.h"
#include "harness/world/thread_world.h"
#include "properties/detection.h"
#include "tests/run_command.h"

using namespace collcheck;

// AddressSanitizer as gcc (__SANITIZE_ADDRESS__) and clang (__has_feature) say it.
#if defined(__SANITIZE_ADDRESS__)
#define COLLCHECK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLLCHECK_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define COLLCHECK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLLCHECK_TEST_TSAN 1
#endif
#endif

#if defined(COLLCHECK_TEST_ASAN)
// A small quarantine, so that Replay.KeptOutputsAreBounded... measures the
// replay's memory, not AddressSanitizer's (256 MiB by default).
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }
#endif
using namespace std::chrono_literals;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    const Scenario s = parse_scenario(yaml, "bad.yaml");
    (void)apply_mutators(s);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(accepted)";
}

const char* kGood = R"(
world: {ranks: 3}
program:
  - all_reduce: {tag: a, count: 10}
  - all_reduce: {tag: b, count: 20, async: true}
)";

std::vector<std::string> examples() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SOURCE_DIR) + "/examples/bugs"))
    if (e.path().extension() == ".yaml") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(Scenario, BadFilesNameFileLineAndField) {
  const std::pair<std::string, std::string> bad[] = {
      {"world: {ranks: 0}\nprogram: []\n", "bad.yaml:1: world.ranks: expected an integer in [1, 4096], got 0"},
      {"program: []\n", "bad.yaml:1: world: missing"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {count: -3}\n", "bad.yaml:3: program[0].all_reduce.count: expected a non-negative integer"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {dtype: float128}\n", "bad.yaml:3: program[0].all_reduce.dtype: unknown dtype 'float128'; allowed: int8"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {op: mean}\n", "program[0].all_reduce.op: unknown op 'mean'; allowed: sum"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {wait: end}\n", "program[0].all_reduce.wait: only an async call has a wait"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {async: true, wait: later}\n", "unknown wait 'later'; allowed: next, end, never"},
      {"world: {ranks: 2}\nprogram:\n  - gather: {}\n", "bad.yaml:3: program[0]: unknown step 'gather'; allowed: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all, barrier, send, recv, sleep, stall, synchronize"},
      {"world: {ranks: 2}\nprogram:\n  - all_gather: {op: sum}\n", "bad.yaml:3: program[0].all_gather: unknown key 'op'; allowed: tag, count"},
      {"world: {ranks: 2}\nprogram:\n  - broadcast: {count: 4}\n", "bad.yaml:3: program[0].broadcast.root: missing: the root (a world rank)"},
      {"world: {ranks: 2}\nprogram:\n  - send: {peer: 1}\n", "bad.yaml:3: send.peer: rank 1 would send to itself; give rank 1 its own program"},
      {"world: {ranks: 3}\nprogram:\n  - all_to_all: {count: 10}\n", "program[0].all_to_all.count: all_to_all sends count / p elements to each rank, so count must be a multiple of the 3 ranks of its group; 10 is not"},
      {"world: {ranks: 3}\nprogram:\n  - all_reduce: {shape: [4, -2]}\n", "program[0].all_reduce.shape[1]: expected a non-negative integer, got -2"},
      {"world: {ranks: 3}\nprogram:\n  - all_reduce: {shape: [4], count: 4}\n", "program[0].all_reduce.shape: give count or shape, not both"},
      {"world: {ranks: 3}\ngroups: {tp: [0, 1]}\nprogram:\n  - all_reduce: {group: pp}\n", "bad.yaml:4: program[0].all_reduce.group: unknown group 'pp'; allowed: tp"},
      {"world: {ranks: 3}\ngroups: {tp: [0, 5]}\nprogram: []\n", "bad.yaml:2: groups.tp[1]: expected an integer in [0, 2], got 5"},
      {"world: {ranks: 3}\ngroups: {tp: [0, 0]}\nprogram: []\n", "bad.yaml:2: groups.tp: a rank is listed twice"},
      {"world: {ranks: 3}\ngroups: {world: [0]}\nprogram: []\n", "groups.world: 'world' is every rank already"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {write_before_wait: true}\n", "bad.yaml:3: program[0].all_reduce.write_before_wait: only an async call can be written before its wait"},
      {"world: {ranks: 2}\nprogram:\n  - all_gather: {count: 4, in_place: true}\n", "bad.yaml:3: program[0].all_gather: unknown key 'in_place'; allowed: tag, count"},
      {"world: {ranks: 2}\nprogram:\n  - all_reduce: {in_place: maybe}\n", "bad.yaml:3: program[0].all_reduce.in_place: expected true or false"},
      {"world: {ranks: 3}\ngroups: {mpi: {ranks: [0, 1], progress: eager}}\nprogram: []\n", "bad.yaml:2: groups.mpi.progress: unknown progress rule 'eager'; allowed: stream (the device's, NCCL), caller"},
      {"world: {ranks: 3}\ngroups: {mpi: {progress: caller}}\nprogram: []\n", "bad.yaml:2: groups.mpi.ranks: missing: the group's world ranks"},
      {"world: {ranks: 3}\ngroups: {mpi: {ranks: [0, 4], progress: caller}}\nprogram: []\n", "bad.yaml:2: groups.mpi.ranks[1]: expected an integer in [0, 2], got 4"},
      {"world: {ranks: 3}\ngroups: {mpi: {ranks: [0], thread: true}}\nprogram: []\n", "bad.yaml:2: groups.mpi: unknown key 'thread'; allowed: ranks, progress"},
      {"world: {ranks: 3}\ngroups: {tp: [0, 1]}\nprogram:\n  - broadcast: {group: tp, root: 2}\n", "program[0].broadcast.root: rank 2 is not in group tp; allowed: 0, 1"},
      {"world: {ranks: 2}\nprogram:\n  - synchronize: false\n", "program[0].synchronize: expected true"},
      {"world: {ranks: 2}\nprogram: []\ncolour: red\n", "bad.yaml:3: scenario: unknown key 'colour'; allowed: name, description"},
      {"world: {ranks: 2, kind: slurm}\nprogram: []\n", "world.kind: unknown world 'slurm'; allowed: threads, mpi"},
      {"world: {ranks: 2}\nmode: paranoid\nprogram: []\n", "bad.yaml:2: mode: unknown mode 'paranoid'; allowed: guarded, unguarded"},
      {"world: {ranks: 2}\nprogram: []\nranks: {5: {program: []}}\n", "bad.yaml:3: ranks: expected an integer in [0, 1]"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - gremlin: {ranks: [0]}\n", "bad.yaml:4: faults: unknown fault 'gremlin'; allowed: mismatched_shape"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - mismatched_shape: {ranks: [0], call: 3, count: 5}\n", "bad.yaml:4: faults.mismatched_shape.call: rank 0 has only 1 calls"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - slow_link: {from: 0, to: 7}\n", "faults.slow_link.to: expected a number in [0, 1], got '7'"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - missing_wait: {ranks: [1], call: 0, mode: sometimes}\n", "faults.missing_wait.mode: unknown mode 'sometimes'; allowed: never, read_before_wait"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}\n", "bad.yaml:3: syntax: end of sequence flow not found"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - extra_call: {ranks: [0, 1], call: 0}\n", "bad.yaml:4: faults.extra_call.ranks: at least one rank must not issue the extra call"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - extra_call: {ranks: [0], call: 0, count: 0}\n", "faults.extra_call.count: expected a number in [1, 1048576], got '0'"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - extra_call: {ranks: [0], call: 0, size: 2}\n", "faults.extra_call.size: unknown parameter; allowed: ranks, call, count, tag"},
      {"world: {ranks: 3}\ngroups: {tp: [0, 1]}\nprogram: [{all_reduce: {group: tp}}, {all_reduce: {}}]\nfaults:\n  - skipped_call: {ranks: [0], call: 0}\n", "faults.skipped_call.call: call 0 of rank 0 is in process group tp; pick a call of the world"},
      {"world: {ranks: 2}\nprogram: [{all_reduce: {}}]\nfaults:\n  - skipped_call: {ranks: [1], call: 1}\n", "faults.skipped_call.call: rank 1 has only 1 calls"},
  };
  for (const auto& [yaml, want] : bad) {
    const std::string got = error_of(yaml);
    EXPECT_NE(got.find(want), std::string::npos) << "for:\n" << yaml << "got: " << got << "\nwant: " << want;
  }
  EXPECT_EQ(error_of(kGood), "(accepted)");
}

TEST(Scenario, GroupsCollectivesAndShapesRoundTrip) {
  const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/clean_parallel_step.yaml");
  ASSERT_EQ(s.groups.size(), 3u);
  EXPECT_EQ(s.groups[2].name, "dp");
  EXPECT_EQ(s.groups[2].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(s.group_id("dp"), 3u);
  EXPECT_EQ(s.group_id(""), 0u);
  ASSERT_GE(s.defaults.size(), 1u);
  EXPECT_EQ(s.defaults[0].call.coll, Collective::Broadcast);
  EXPECT_EQ(s.defaults[0].call.count, 1024u);  // shape [256, 4]
  EXPECT_EQ(s.defaults[0].call.shape, (std::vector<size_t>{256, 4}));
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  EXPECT_EQ(scenario_to_yaml(back), scenario_to_yaml(s));
  ASSERT_EQ(back.groups.size(), 3u);
  EXPECT_EQ(back.program(2).back().kind, Step::Synchronize);
  EXPECT_EQ(back.program(2)[6].call.coll, Collective::Recv);
  EXPECT_EQ(back.program(2)[6].call.peer, 0);
}

// The nesting prescan reads '#' and quotes as YAML does: a '#' inside a plain
// scalar (the emitted Flight Recorder tags, all_to_all#20537) starts no
// comment, so a long program of flow maps is not "nested too deep"; and a
// quote inside a plain scalar (rank0's) hides no brackets from the limit.
TEST(Scenario, PrescanReadsCommentsAndQuotesAsYamlDoes) {
  std::string yaml = "world: {ranks: 2}\nprogram:\n";
  for (int i = 0; i < 200; ++i) yaml += fmt::format("  - all_reduce: {{tag: all_to_all#{}, count: 4}}  # call {}\n", i, i);
  const Scenario s = parse_scenario(yaml, "hash.yaml");
  ASSERT_EQ(s.defaults.size(), 200u);
  EXPECT_EQ(s.defaults[7].call.tag, "all_to_all#7");
  const std::string hidden = "world: {ranks: 2}\nname: rank0's\nprogram: " + std::string(100, '[') + std::string(100, ']') + "\n";
  try {
    parse_scenario(hidden, "hidden.yaml");
    ADD_FAILURE() << "100 nested lists after a quote inside a plain scalar were accepted";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden.yaml:3: lists and mappings nested deeper than 64 levels"), std::string::npos)
        << e.what();
  }
}

// Repeat blocks and one rank's edits of the default program (skip a call,
// insert steps after or before one), so a report's 38 identical calls and its
// one diverging rank take a few lines.
TEST(Scenario, RepeatBlocksAndPerRankEdits) {
  const std::string base =
      "world: {ranks: 3}\nprogram:\n"
      "  - all_reduce: {tag: warmup, count: 4}\n"
      "  - repeat: {times: 3, steps: [{all_reduce: {count: 8}}, {barrier: true}]}\n"
      "  - all_reduce: {tag: loss, count: 1}\n";
  const Scenario s = parse_scenario(base +
                                        "ranks:\n  1: {skip: [2]}\n"
                                        "  2: {insert: [{after: 0, steps: [{all_reduce: {tag: metric, count: 1}}]},\n"
                                        "               {before: 7, steps: [{sleep: 5}]}]}\n",
                                    "edits.yaml");
  auto tags = [](const Program& p) {
    std::vector<std::string> t;
    for (const Step& x : p) t.push_back(x.kind == Step::Call ? x.call.tag : "sleep");
    return t;
  };
  EXPECT_EQ(tags(s.program(0)),
            (std::vector<std::string>{"warmup", "call1", "call2", "call3", "call4", "call5", "call6", "loss"}));
  EXPECT_EQ(s.program(0)[2].call.coll, Collective::Barrier);
  EXPECT_EQ(s.program(0)[5].call.count, 8u);
  EXPECT_EQ(tags(s.program(1)), (std::vector<std::string>{"warmup", "call1", "call3", "call4", "call5", "call6", "loss"}));
  EXPECT_EQ(tags(s.program(2)), (std::vector<std::string>{"warmup", "metric", "call1", "call2", "call3", "call4", "call5",
                                                          "call6", "sleep", "loss"}));
  // What it writes out parses to the same programs.
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(tags(back.program(r)), tags(s.program(r)));
  // The skipped barrier on rank 1: it calls call3 where the others call the
  // barrier, and the calls after it show that it skipped one.
  Scenario skip = parse_scenario(base + "ranks:\n  1: {skip: [2]}\nexpect: {diagnosis: skipped_call, ranks: [1], seq: 3}\n",
                                 "skip.yaml");
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    std::string why;
    EXPECT_TRUE(expectations_hold(skip, replay_scenario(skip, o), &why)) << (guarded ? "guarded: " : "unguarded: ") << why;
  }
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {"ranks:\n  1: {skip: [8]}\n", "bad.yaml:7: ranks.1.skip"},
           {"ranks:\n  1: {insert: {after: 1, before: 2, steps: []}}\n",
            "bad.yaml:7: ranks.1.insert: give one of after: <call> or before: <call>"},
           {"ranks:\n  1: {insert: {after: 1}}\n", "bad.yaml:7: ranks.1.insert.steps: missing"},
           {"ranks:\n  1: {}\n", "bad.yaml:7: ranks.1: expected program, skip or insert"},
       }) {
    try {
      parse_scenario(base + bad, "bad.yaml");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {"  - repeat: {steps: [{barrier: true}]}\n", "bad.yaml:3: program[0].repeat.times: missing"},
           {"  - repeat: {times: 1000000, steps: [{barrier: true}]}\n",
            "the programs hold more than 200000 steps in all, the input limit (--max-steps raises it)"},
           {"  - repeat: {times: 2, steps: [{repeat: {times: 3}}]}\n", "program[0].repeat.steps[0].repeat.steps: missing"},
       }) {
    try {
      parse_scenario("world: {ranks: 2}\nprogram:\n" + bad, "bad.yaml");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Scenario, JsonIsAccepted) {
  const Scenario s = parse_scenario(
      R"({"world": {"ranks": 2}, "program": [{"all_reduce": {"tag": "g", "count": 5, "dtype": "int8", "op": "max"}}],
          "faults": [{"missing_wait": {"ranks": [1], "call": 0, "mode": "never"}}],
          "expect": {"diagnosis": "unwaited_work", "ranks": [1], "seq": 1}})",
      "s.json");
  ASSERT_EQ(s.defaults.size(), 1u);
  EXPECT_EQ(s.defaults[0].call.dtype, DType::Int8);
  const ReplayResult r = replay_scenario(s);
  std::string why;
  EXPECT_TRUE(expectation_holds(*s.expect, r, &why)) << why;
}

TEST(Scenario, YamlRoundTrip) {
  Scenario s = parse_scenario(kGood, "good.yaml");
  s.faults.push_back(FaultSpec{"misordered", {1}, {0, 1}, {}, 0});
  s.expect = ExpectSpec{"order_mismatch", {1}, 1, {}, {"tag"}, {}};
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  EXPECT_EQ(back.ranks, 3);
  ASSERT_EQ(back.defaults.size(), 2u);
  EXPECT_EQ(back.defaults[1].call.tag, "b");
  EXPECT_TRUE(back.defaults[1].call.async);
  EXPECT_EQ(back.defaults[1].call.wait, WaitAt::Next);
  ASSERT_EQ(back.faults.size(), 1u);
  EXPECT_EQ(back.faults[0].calls, (std::vector<int>{0, 1}));
  ASSERT_TRUE(back.expect);
  EXPECT_EQ(back.expect->diagnosis, "order_mismatch");
}

class Example : public ::testing::TestWithParam<std::string> {};

TEST_P(Example, ReplaysToItsExpectedDiagnosisInBothModes) {
  const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/" + GetParam());
#if defined(COLLCHECK_TEST_ASAN) || defined(COLLCHECK_TEST_TSAN)
  // 128 rank threads under a sanitizer take minutes on CI's two cores; the
  // default build replays it in both modes.
  if (s.ranks > 16) GTEST_SKIP() << GetParam() << ": " << s.ranks << " ranks in a sanitizer build; the default build replays it";
#endif
  ASSERT_TRUE(s.expect) << "every example states its expected diagnosis";
  for (bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(s, o);
    std::string why;
    EXPECT_TRUE(expectations_hold(s, r, &why))
        << GetParam() << (guarded ? " guarded: " : " unguarded: ") << why << "\n"
        << (r.diagnoses.empty() ? "" : format_diagnosis(r.diagnoses.front())) << "\n"
        << format_timeline(r.dumps);
    std::printf("[ example ] %-32s %-9s diagnosed at %.3f s (run %.3f s): %s\n", GetParam().c_str(),
                guarded ? "guarded" : "unguarded", r.time_to_diagnosis, r.seconds,
                r.diagnoses.empty() ? "none" : std::string(diagnosis_name(r.diagnoses.front().kind)).c_str());
    if (!guarded) {
      // analyze, from the files alone, agrees.
      AnalysisOptions ao;
      ao.run_finished = !r.hung && r.first_failure < 0;
      const auto again = analyze(load_dumps(r.dump_dir), ao);
      if (!r.diagnoses.empty() && r.diagnoses.front().kind != DiagnosisKind::WrongResult) {
        ASSERT_FALSE(again.empty());
        EXPECT_EQ(again.front().kind, r.diagnoses.front().kind);
      }
      std::filesystem::remove_all(r.dump_dir);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bugs, Example, ::testing::ValuesIn(examples()), [](const auto& i) {
  std::string n = i.param.substr(0, i.param.size() - 5);
  return n;
});

// The slow link's diagnosis compares the measured call time with the ring's
// alpha-beta model fitted to the healthy edges, and the slow edge's extra
// latency over 2(p-1) steps must account for most of the difference (at least
// half; on an idle machine it is 98%).
TEST(SlowLink, AlphaBetaModelAccountsForTheSlowdown) {
  const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/slow_nic.yaml");
  const ReplayResult r = replay_scenario(s);
  ASSERT_FALSE(r.diagnoses.empty());
  const std::string& t = r.diagnoses.front().text;
  double took = 0, predicts = 0, accounted = 0;
  const size_t a = t.find(" took "), b = t.find(" predicts "), c = t.find(" account for ");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << t;
  took = std::stod(t.substr(a + 6));
  predicts = std::stod(t.substr(b + 10));
  accounted = std::stod(t.substr(c + 13));
  std::printf("[ slow    ] call took %.2f ms, the model predicts %.2f ms, the slow edge accounts for %.2f ms\n", took,
              predicts, accounted);
  // Wide bounds: this is a diagnosis of timings, and sanitizer builds add
  // their own delays to the call (under TSan the slow edge explained 65%).
  EXPECT_GT(took, 5 * predicts) << t;
  EXPECT_GE(accounted, 0.5 * (took - predicts)) << t;
  EXPECT_LE(accounted, 1.25 * (took - predicts)) << t;
}

TEST(Examples, AtLeastSixBugReports) {
  int bugs = 0;
  for (const auto& e : examples()) {
    const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/" + e);
    bugs += s.expect && s.expect->diagnosis != "none";
  }
  EXPECT_GE(bugs, 6);
}

TEST(FlightRecorder, RingBufferIsBoundedAndDumpRoundTrips) {
  FlightRecorder rec(1, 4, Clock::now(), 8);
  for (uint64_t i = 1; i <= 20; ++i) {
    CallRecord c;
    c.seq = i;
    c.tag = "t" + std::to_string(i);
    rec.scheduled(c);
    rec.started(i);
    rec.completed(i);
  }
  rec.blocked(2, false, 21 << 8);
  const auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 8u);
  EXPECT_EQ(calls.front().seq, 13u);
  const RankDump d = rank_dump_from_json(rec.to_json("test"));
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.calls.size(), 8u);
  EXPECT_EQ(d.calls.back().state, CallState::Completed);
  EXPECT_TRUE(d.blocked_on.blocked);
  EXPECT_EQ(d.blocked_on.peer, 2);
  EXPECT_FALSE(d.crash);
  const CrashNote note{3, "BUS"};
  const RankDump c = rank_dump_from_json(rec.to_json("crash: test", &note));
  ASSERT_TRUE(c.crash);
  EXPECT_EQ(c.crash->rank, 3);
  EXPECT_EQ(c.crash->signal, "BUS");
}

// The thread world hands analyze its recorders' dumps as structs (no JSON in
// between); what a file holds must read back to the same dump, every field.
TEST(FlightRecorder, TheStructDumpIsWhatItsFileReadsBackTo) {
  FlightRecorder rec(2, 4, Clock::now(), 8);
  rec.set_run("run-id", "what-ran");
  rec.set_group("tp", {0, 2}, false, true);
  for (uint64_t i = 1; i <= 3; ++i) {
    CallRecord c;
    c.seq = i;
    c.tag = "t" + std::to_string(i);
    c.count = 10 * i;
    c.async = i == 2;
    rec.scheduled(c);
    rec.started(i);
    if (i < 3) rec.completed(i, i == 2 ? "an error" : "");
    if (i == 1) rec.waited(i);
    if (i == 2) rec.read_output(i);
  }
  rec.transfer(TransferRecord{2, 0, 3 << 8, 1, 40, 0.5, 0.75, 0x1234, true});
  rec.blocked(0, true, 3 << 8);
  CallRecord next;
  next.seq = 4;
  next.tag = "t4";
  rec.ended({next}, false);
  const CrashNote note{2, "SEGV"};
  for (const CrashNote* crash : {static_cast<const CrashNote*>(nullptr), &note}) {
    const RankDump direct = rec.to_dump("why", crash);
    const RankDump back = rank_dump_from_json(nlohmann::json::parse(rank_dump_to_json(direct).dump(1)));
    EXPECT_EQ(rank_dump_to_json(back), rank_dump_to_json(direct));
    EXPECT_EQ(direct.group, "tp");
    EXPECT_TRUE(direct.caller_progress);
    EXPECT_EQ(direct.calls.size(), 3u);
    EXPECT_EQ(direct.transfers.size(), 1u);
    EXPECT_TRUE(direct.ended);
    EXPECT_TRUE(direct.rest_known);
    ASSERT_EQ(direct.not_run.size(), 1u);
    EXPECT_EQ(back.not_run.front().tag, "t4");
    EXPECT_EQ(back.crash.has_value(), crash != nullptr);
    EXPECT_EQ(back.dumped_at, direct.dumped_at);
  }
}

// Real dumps from a CI run (tests/data/descheduled_receiver/README.md): a
// clean run in an oversubscribed MPI world where the receiver of one of the
// two transfers on edge 2 -> 0 was descheduled. A slow link needs a strict
// majority of its edge's transfers to be slow.
// A second CI run (tests/data/descheduled_ranks_tsan/README.md) needed more:
// a transfer's time runs until both sides saw it complete, and an edge with a
// single transfer is never named.
TEST(Analyze, DescheduledRanksNameNoSlowEdge) {
  for (const char* run : {"descheduled_receiver", "descheduled_ranks_tsan"}) {
    const auto dumps = load_dumps(std::string(SOURCE_DIR) + "/tests/data/" + run);
    ASSERT_EQ(dumps.size(), 4u) << run;
    const auto found = analyze(dumps, AnalysisOptions{});
    for (const auto& d : found) EXPECT_NE(d.kind, DiagnosisKind::SlowLink) << run << ": " << format_diagnosis(d);
    ASSERT_FALSE(found.empty()) << run;
    EXPECT_EQ(found.front().kind, DiagnosisKind::ReadBeforeWait) << run << ": " << format_diagnosis(found.front());
  }
}

namespace {

// Three ranks in a ring, each edge r -> r+1 with four transfers one after
// the other (fast_ms each), except the transfers of `slow` on edge 1 -> 2,
// which take slow_ms; `concurrent` makes those slow ones overlap in time.
std::vector<RankDump> ring_dumps(double fast_ms, double slow_ms, int slow, bool concurrent) {
  std::vector<RankDump> d(3);
  for (int r = 0; r < 3; ++r) {
    d[static_cast<size_t>(r)].rank = r;
    d[static_cast<size_t>(r)].size = 3;
    d[static_cast<size_t>(r)].reason = "end of run";
  }
  for (int src = 0; src < 3; ++src) {
    const int dst = (src + 1) % 3;
    double t = 0.001;
    for (int k = 0; k < 4; ++k) {
      const bool is_slow = src == 1 && k < slow;
      const double start = is_slow && concurrent ? 0.001 : t;
      const double lat = (is_slow ? slow_ms : fast_ms) / 1e3;
      TransferRecord x;
      x.src = src;
      x.dst = dst;
      x.tag = (1 << 8) | static_cast<Tag>(k);
      x.bytes = 1024;
      x.t_posted = start;
      x.t_completed = start + lat;
      x.send = true;
      d[static_cast<size_t>(src)].transfers.push_back(x);
      x.send = false;
      d[static_cast<size_t>(dst)].transfers.push_back(x);
      t = std::max(t, start + lat) + 0.0005;
    }
  }
  return d;
}

bool names_slow_edge(const std::vector<RankDump>& dumps, std::string* text = nullptr) {
  for (const auto& f : analyze(dumps, AnalysisOptions{}))
    if (f.kind == DiagnosisKind::SlowLink) {
      if (text) *text = f.text;
      return f.edge == std::make_pair(1, 2);
    }
  return false;
}

}  // namespace

// What counts as evidence of a slow link. The control: every transfer on
// edge 1 -> 2 took 40 ms, the others 0.2 ms.
TEST(Analyze, ASlowEdgeNeedsAMajorityOfItsTimeNotOfItsTransfers) {
  std::string text;
  EXPECT_TRUE(names_slow_edge(ring_dumps(0.2, 40, 4, false), &text));
  EXPECT_NE(text.find("median 40.0 ms from send to arrival over its 4 transfers"), std::string::npos) << text;
  // Three slow transfers in flight at once (one burst) and one fast one: two
  // windows of time, one slow. No majority.
  EXPECT_FALSE(names_slow_edge(ring_dumps(0.2, 40, 3, true)));
  // Three of four slow, one after the other: a majority.
  EXPECT_TRUE(names_slow_edge(ring_dumps(0.2, 40, 3, false)));
  // 12 ms slower is under the 15 ms floor, whatever the ratio.
  EXPECT_FALSE(names_slow_edge(ring_dumps(0.2, 12, 4, false)));
}

// The stall meter's record: time when the sender's process was not running
// is not the link's time.
TEST(Analyze, TimeWhenARankWasNotRunningIsNotTheLinksTime) {
  auto dumps = ring_dumps(0.2, 40, 4, false);
  ASSERT_TRUE(names_slow_edge(dumps));
  // Rank 1 (the sender) stalled through each of its slow transfers.
  for (const auto& x : dumps[1].transfers)
    if (x.send) dumps[1].stalls.push_back(Stall{x.t_posted + 0.0001, x.t_completed - 0.0001});
  std::string text;
  EXPECT_FALSE(names_slow_edge(dumps, &text)) << text;
  // Stalls of a rank that is not on the edge change nothing.
  auto other = ring_dumps(0.2, 40, 4, false);
  other[0].stalls = dumps[1].stalls;
  EXPECT_TRUE(names_slow_edge(other));
  // Half of each slow transfer stalled still leaves ~20 ms: named, and the
  // text says what was left out.
  auto half = ring_dumps(0.2, 40, 4, false);
  for (const auto& x : half[1].transfers)
    if (x.send && x.src == 1) half[2].stalls.push_back(Stall{x.t_posted, x.t_posted + 0.020});
  EXPECT_TRUE(names_slow_edge(half, &text));
  EXPECT_NE(text.find("median 20.0 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("80.0 ms when rank 1 or 2 was not running at all are left out of its transfers, at most 20.0 ms "
                      "of one"),
            std::string::npos)
      << text;
  // Stalls outside the edge's transfers leave nothing out, and the text says nothing of them.
  auto apart = ring_dumps(0.2, 40, 4, false);
  apart[1].stalls.push_back(Stall{10.0, 10.5});
  EXPECT_TRUE(names_slow_edge(apart, &text));
  EXPECT_EQ(text.find("not running"), std::string::npos) << text;
  // The stalls travel in the dump files.
  nlohmann::json j = {{"rank", 1}, {"size", 3}, {"calls", nlohmann::json::array()},
                      {"transfers", nlohmann::json::array()}, {"blocked_on", nullptr},
                      {"stalls", {{0.5, 0.75}, {1.0, 1.25}}}};
  const RankDump back = rank_dump_from_json(j);
  ASSERT_EQ(back.stalls.size(), 2u);
  EXPECT_DOUBLE_EQ(back.stalls[1].begin, 1.0);
  EXPECT_DOUBLE_EQ(back.stalls[1].end, 1.25);
  j.erase("stalls");  // dumps from before the meter: no stalls
  EXPECT_TRUE(rank_dump_from_json(j).stalls.empty());
}

// Dumps the crash handler wrote: the analysis names the rank that died, the
// signal and the call it was in, before the ranks it left waiting.
TEST(Analyze, ACrashIsNamedWithItsRankSignalAndCall) {
  const auto epoch = Clock::now();
  std::vector<RankDump> dumps;
  for (int r = 0; r < 3; ++r) {
    FlightRecorder rec(r, 3, epoch);
    for (uint64_t k = 1; k <= 2; ++k) {
      CallRecord c;
      c.seq = k;
      c.tag = "grads" + std::to_string(k);
      c.count = 100;
      rec.scheduled(c);
      rec.started(k);
      if (k == 1) rec.completed(k);
    }
    if (r != 2) rec.blocked(2, false, 2 << 8);  // the others wait for the dead rank
    const CrashNote note{2, "SEGV"};
    dumps.push_back(rank_dump_from_json(rec.to_json("crash: test", &note)));
  }
  auto found = analyze(dumps, AnalysisOptions{});
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::RankCrashed);
  EXPECT_EQ(found.front().ranks, std::vector<int>{2});
  EXPECT_EQ(found.front().seq, 2u);
  EXPECT_NE(found.front().text.find("rank 2 died of signal SEGV in call #2 (grads2 count=100"), std::string::npos)
      << found.front().text;
  for (const auto& d : found) EXPECT_NE(d.kind, DiagnosisKind::MissingRank) << format_diagnosis(d);
  // A thread that is not a rank's.
  for (auto& d : dumps) d.crash->rank = -1;
  found = analyze(dumps, AnalysisOptions{});
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front().kind, DiagnosisKind::RankCrashed);
  EXPECT_TRUE(found.front().ranks.empty());
  EXPECT_NE(found.front().text.find("not a rank's"), std::string::npos) << found.front().text;
  // Without a crash note the same records name no crash.
  for (auto& d : dumps) d.crash.reset();
  found = analyze(dumps, AnalysisOptions{});
  for (const auto& d : found) EXPECT_NE(d.kind, DiagnosisKind::RankCrashed) << format_diagnosis(d);
}

TEST(MissingWait, PoisonedOutputUntilWait) {
  ThreadWorld w(2);
  auto run = w.run(
      [](RankContext& c) {
        CommOptions o("ring", 5000ms);
        o.poison_async = true;
        Communicator comm(c.links(), o);
        std::vector<float> in(64, 1.0f), out(64, 0.0f);
        auto work = comm.all_reduce_async(in.data(), out.data(), 64, DType::Float32, RedOp::Sum);
        std::vector<unsigned char> seen(64 * 4);
        std::memcpy(seen.data(), out.data(), seen.size());  // a read before the wait
        for (unsigned char b : seen)
          if (b != static_cast<unsigned char>(kPoisonByte)) throw std::runtime_error("output not poisoned before wait");
        work->wait();
        for (float v : out)
          if (v != 2.0f) throw std::runtime_error("wrong result after wait");
      },
      10s);
  EXPECT_TRUE(run.ok()) << run.failures();
}

// Replays `s` n times; returns how many runs missed its expectation (or
// failed `also`, which returns why, or "" when the run is fine). The first
// miss is reported in full.
static int replays_missing_the_expectation(const Scenario& s, int n,
                                           const std::function<std::string(const ReplayResult&)>& also = {}) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    const ReplayResult r = replay_scenario(s);
    std::string why;
    if (!expectation_holds(*s.expect, r, &why) || (also && !(why = also(r)).empty())) {
      if (wrong++ == 0) ADD_FAILURE() << "replay " << i << " of " << n << ": " << why;
    }
  }
  return wrong;
}

// Found by the detection property: with 3 ranks, rank 1 swaps its last two
// async calls. The guard saw ranks 1 and 2 disagree at call #3 before rank 0
// got there, and blamed rank 2 on a 1-vs-1 tie (one replay in five). It now
// waits for a strict majority (or every rank) before naming the odd one out.
TEST(Guard, WaitsForAMajorityBeforeNamingTheOddRankOut) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 3}
impl: tree
deadline: 0.3
program:
  - all_reduce: {tag: t0, count: 1064, dtype: float32, op: avg}
  - all_reduce: {tag: t1, count: 2033, dtype: float32, op: max, async: true, wait: end}
  - all_reduce: {tag: t2, count: 216, dtype: int32, op: max, async: true, wait: next}
  - all_reduce: {tag: t3, count: 113, dtype: bfloat16, op: min, async: true, wait: next}
faults:
  - misordered: {ranks: [1], calls: [2, 3]}
expect: {diagnosis: order_mismatch, ranks: [1], seq: 3}
)",
                                    "race.yaml");
  EXPECT_EQ(replays_missing_the_expectation(s, 200), 0);
}

// Found by the detection property (CI, case 220 of shard 1): in unguarded
// mode, 7 ranks, rank 1 calls t1 with float32 where the others use float16.
// The size mismatch failed ranks 1 and 2 while other ranks were still
// finishing call #1; aborting every call cut their records short, and a 1-vs-1
// tie at call #2 blamed rank 2. Only calls from the failed one on are aborted
// now, so every rank's record of call #2 is in its dump.
TEST(Unguarded, AMismatchKeepsItsMajorityWhenOtherRanksAreStillInTheCallBefore) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 7}
impl: ring
deadline: 0.3
mode: unguarded
program:
  - all_reduce: {tag: t0, count: 1817, dtype: float32, op: avg}
  - all_reduce: {tag: t1, count: 569, dtype: float16, op: min}
  - all_reduce: {tag: t2, count: 1055, dtype: float16, op: max}
faults:
  - mismatched_shape: {ranks: [1], calls: [1], dtype: float32}
expect: {diagnosis: shape_mismatch, ranks: [1], seq: 2, fields: [dtype]}
)",
                                    "case220.yaml");
  // Every rank reached call #2 and says what it called there.
  const int wrong = replays_missing_the_expectation(s, 100, [](const ReplayResult& r) -> std::string {
    for (const auto& d : r.dumps)
      if (std::none_of(d.calls.begin(), d.calls.end(), [](const CallRecord& c) { return c.seq == 2; }))
        return "rank " + std::to_string(d.rank) + " has no record of call #2";
    return "";
  });
  EXPECT_EQ(wrong, 0);
}

// Guarded mode names a rank whose program ended as soon as every other rank
// is in the call it will never join: no deadline is waited out (this one is
// 60 s; the replay takes well under a second). Two ranks end after call #2,
// one rank sleeps before call #3 (the guard waits for it), and one ends
// after call #3 (it joined call #3: not missing there).
TEST(Guard, NamesARankWhoseProgramEndedWithoutWaitingOutTheDeadline) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 6}
deadline: 60
program:
  - all_reduce: {tag: a, count: 64}
  - all_reduce: {tag: b, count: 64}
  - all_reduce: {tag: c, count: 64}
  - all_reduce: {tag: d, count: 64}
ranks:
  1: {skip: [2, 3]}
  4: {skip: [2, 3]}
  3: {skip: [3]}
  5: {program: [{all_reduce: {tag: a, count: 64}}, {all_reduce: {tag: b, count: 64}}, {sleep: 300},
                {all_reduce: {tag: c, count: 64}}, {all_reduce: {tag: d, count: 64}}]}
expect: {diagnosis: missing_rank, ranks: [1, 4], seq: 3}
)",
                                    "ended.yaml");
  for (int i = 0; i < 5; ++i) {
    const ReplayResult r = replay_scenario(s);
    std::string why;
    EXPECT_TRUE(expectation_holds(*s.expect, r, &why)) << why;
    EXPECT_LT(r.seconds, 10.0) << "the replay waited out its 60 s deadline";
    // Not before the sleeping rank 5 arrived at call #3.
    EXPECT_GE(r.time_to_diagnosis, 0.3);
    ASSERT_FALSE(r.diagnoses.empty());
    EXPECT_NE(r.diagnoses.front().text.find("without waiting out the deadline"), std::string::npos)
        << r.diagnoses.front().text;
    EXPECT_NE(r.diagnoses.front().text.find("had ended their program"), std::string::npos) << r.diagnoses.front().text;
  }
  // Unguarded mode is production: the others wait out the deadline (a short
  // one here), and the dumps name the same ranks.
  Scenario u = s;
  u.guarded = false;
  u.deadline_s = 0.5;
  const ReplayResult r = replay_scenario(u);
  std::string why;
  EXPECT_TRUE(expectation_holds(*u.expect, r, &why)) << why;
  EXPECT_GE(r.seconds, 0.5);
}

// With two ranks a mismatch has no majority: the diagnosis says its choice of
// the odd rank out is a guess.
TEST(Unguarded, ATieSaysThereIsNoMajority) {
  const Scenario s = parse_scenario(R"(
world: {ranks: 2}
impl: ring
deadline: 0.3
mode: unguarded
program:
  - all_reduce: {tag: t0, count: 64, dtype: float32, op: sum}
faults:
  - mismatched_shape: {ranks: [1], calls: [0], count: 65}
)",
                                    "tie.yaml");
  const ReplayResult r = replay_scenario(s);
  ASSERT_FALSE(r.diagnoses.empty());
  EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::ShapeMismatch);
  EXPECT_NE(r.diagnoses.front().text.find("no strict majority (2 of the 2 ranks reached call #1)"),
            std::string::npos)
      << r.diagnoses.front().text;
}

// ---- the detection property ----

// 600 cases in two shards of 300 that ctest runs side by side: most of a
// case's time is spent waiting out a stalled rank's deadline or a slow link's
// delay, not computing. Shard 0 has a fixed seed; shard 1 a fresh one every
// run, printed (COLLCHECK_TEST_SEED=S reruns it), so that the claim holds for
// seeds nobody chose. COLLCHECK_DETECTION_CASES=N runs N cases.
class Detection : public ::testing::TestWithParam<int> {};

TEST_P(Detection, RandomFaultsAreNamedAndCleanRunsAreClean) {
  size_t cases = 300;
  if (const char* env = std::getenv("COLLCHECK_DETECTION_CASES")) {
    cases = std::strtoull(env, nullptr, 10) / 2;
    std::printf("[ note    ] COLLCHECK_DETECTION_CASES: %zu cases in this shard (sanitizer builds run fewer; the "
                "default build runs 2 x 300)\n",
                cases);
  }
  const auto gen = gen_detection_case(2, 8);
  uint64_t seed = 5;
  if (GetParam() == 1) {
    const char* again = std::getenv("COLLCHECK_TEST_SEED");
    seed = again ? std::strtoull(again, nullptr, 0)
                 : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  }
  std::printf("[ seed    ] shard %d: seed %#llx%s\n", GetParam(), static_cast<unsigned long long>(seed),
              GetParam() == 1 ? " (fresh; rerun with COLLCHECK_TEST_SEED)" : " (fixed)");
  std::fflush(stdout);
  rc::Random rnd(seed);
  std::map<std::string, std::pair<int, int>> by_kind;  // detected, total
  double worst_margin = 0, worst_guarded = 0;
  size_t failures = 0;
  for (size_t i = 0; i < cases; ++i) {
    const DetectionCase c = gen(rnd.split(), 50).value();
    const DetectionOutcome o = check_detection(c);
    const std::string kind = c.fault ? c.fault->kind : "clean";
    auto& k = by_kind[kind];
    ++k.second;
    if (o.ok) {
      ++k.first;
    } else if (failures++ < 5) {
      ADD_FAILURE() << "seed " << seed << " case " << i << " (" << kind << ", " << (c.guarded ? "guarded" : "unguarded") << "): " << o.why
                    << "\nscenario:\n"
                    << scenario_to_yaml(c.scenario())
                    << (o.result.diagnoses.empty() ? "" : format_diagnosis(o.result.diagnoses.front()));
    }
    worst_margin = std::max(worst_margin, o.margin_s);
    if (c.guarded && c.fault && (c.fault->kind == "mismatched_shape" || c.fault->kind == "misordered"))
      worst_guarded = std::max(worst_guarded, o.result.time_to_diagnosis);
  }
  for (const auto& [kind, k] : by_kind)
    std::printf("[ detect  ] %-18s %4d of %4d named correctly\n", kind.c_str(), k.first, k.second);
  std::printf("[ detect  ] stalled ranks: runs ended at most %.3f s after the deadline; guarded mismatches named at "
              "most %.3f s after the start\n",
              worst_margin, worst_guarded);
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(by_kind.size(), nemeses().size() + 1) << "every nemesis and the clean case were drawn";
}

INSTANTIATE_TEST_SUITE_P(Shards, Detection, ::testing::Values(0, 1));

// A run that is right but outlasts its limit is run once more: a loaded
// machine (CI's two cores under a sanitizer) is not a hang. Slow twice is a
// failure, and an MPI replay (rerun_if_slow = false) is never rerun. The
// replay here is the real one, behind a delay that pushes chosen runs past
// the limit.
TEST(Detection, ASlowRightRunIsRunOnceMoreAndSlowTwiceFails) {
  rc::Random rnd(11);
  DetectionCase c = gen_detection_case(2, 3)(rnd, 10).value();
  c.fault.reset();  // clean: its limit is only the compute margin
  int runs = 0;
  std::vector<bool> slow;
  const auto replay = [&](const Scenario& s) {
    const bool this_slow = slow.at(static_cast<size_t>(runs++));
    ReplayResult r = replay_scenario(s);
    if (this_slow) std::this_thread::sleep_for(2500ms);  // past any margin, sanitizers included
    return r;
  };
  slow = {true, false};
  DetectionOutcome o = check_detection(c, replay);
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(o.ok) << o.why;
  EXPECT_NE(o.slow_once.find("longer than its limit"), std::string::npos) << o.slow_once;

  runs = 0;
  slow = {true, true};
  o = check_detection(c, replay);
  EXPECT_EQ(runs, 2);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.slow);
  EXPECT_NE(o.why.find("longer than its limit"), std::string::npos) << o.why;

  runs = 0;
  slow = {true};
  o = check_detection(c, replay, /*rerun_if_slow=*/false);
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(o.ok);
  EXPECT_TRUE(o.slow_once.empty());

  runs = 0;
  slow = {false};
  o = check_detection(c, replay);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(o.ok) << o.why;
  EXPECT_FALSE(o.slow);
}

// ---- the CLI ----

TEST(ReplayCli, ExitCodes) {
  const std::string dir = ::testing::TempDir();
  auto r = testutil::collcheck("replay " + std::string(SOURCE_DIR) + "/examples/bugs/bucket_off_by_one.yaml");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("-> holds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("timeline"), std::string::npos) << r.out;
  // An expectation that does not hold: exit 1, and the reason.
  {
    std::ofstream f(dir + "/wrong.yaml");
    f << "world: {ranks: 3}\nprogram: [{all_reduce: {count: 8}}]\nexpect: {diagnosis: slow_link, edge: [0, 1]}\n";
  }
  r = testutil::collcheck("replay " + dir + "/wrong.yaml");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("DOES NOT HOLD: expected slow_link, got no diagnosis"), std::string::npos) << r.out;
  // Bad input: exit 2, one line with file, line and field.
  {
    std::ofstream f(dir + "/bad.yaml");
    f << "world: {ranks: 3}\nprogram:\n  - all_reduce: {count: 8, dtype: float99}\n";
  }
  r = testutil::collcheck("replay " + dir + "/bad.yaml");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.yaml:3: program[0].all_reduce.dtype: unknown dtype 'float99'"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  r = testutil::collcheck("replay /nonexistent.yaml");
  EXPECT_EQ(r.code, 2) << r.out;
  r = testutil::collcheck("replay " + std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml --mode sometimes");
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(AnalyzeCli, SameDiagnosisFromTheDumps) {
  const std::string dir = ::testing::TempDir() + "/stuck-dumps";
  std::filesystem::remove_all(dir);
  auto r = testutil::collcheck("replay " + std::string(SOURCE_DIR) +
                               "/examples/bugs/rank_stuck_in_dataloader.yaml --mode unguarded --dump-dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  r = testutil::collcheck("analyze " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing_rank [rank 1] [call #2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("blocked on"), std::string::npos) << r.out;
  r = testutil::collcheck("analyze /nonexistent-dir");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not a directory"), std::string::npos) << r.out;
  // An incomplete set is bad input that names what is missing.
  std::filesystem::remove(dir + "/rank-0.json");
  r = testutil::collcheck("analyze " + dir);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("dumps of a world of 3 ranks, but rank 0 is missing"), std::string::npos) << r.out;
}

TEST(FaultsCli, EveryNemesisDetectedInBothModes) {
  const auto r = testutil::collcheck("faults --ranks 4");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << r.out;
  for (const auto& n : nemeses()) EXPECT_NE(r.out.find(std::string(n.name)), std::string::npos) << n.name;
  const auto bad = testutil::collcheck("faults --ranks 1");
  EXPECT_EQ(bad.code, 2) << bad.out;
}

// In a large world a slow link's own delay (60 ms on each of 2(p-1) ring
// steps) outlasts the table's 1 s deadline: the slow link's row gets a
// deadline that fits, and says so, instead of a "deadlock" diagnosis.
TEST(FaultsCli, ALargeWorldGivesTheSlowLinkRoom) {
  const auto r = testutil::collcheck("faults --ranks 32 --mode guarded", 600);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(deadline 7.4 s per call for this fault: its own delays need it)"), std::string::npos)
      << r.out;
}

// ---- the MPI world: one rank per process, under mpirun ----


class ExampleMpi : public ::testing::TestWithParam<std::string> {};

// Every example, in both modes, replayed with one process per rank.
TEST_P(ExampleMpi, ReplaysToItsDiagnosisInBothModes) {
  const std::string file = std::string(SOURCE_DIR) + "/examples/bugs/" + GetParam();
  const Scenario s = load_scenario(file);
  // One process per rank: a 128-rank example would be 128 processes on this
  // machine's cores; the thread world (Example) replays it.
  if (s.ranks > 16) GTEST_SKIP() << GetParam() << ": " << s.ranks << " ranks are more processes than mpirun runs here (16 at most); the Example test replays it with ranks as threads";
  for (const char* mode : {"guarded", "unguarded"}) {
    const auto r = testutil::run_command(testutil::mpirun(s.ranks) + " replay " + file + " --world mpi --mode " + mode, 120);
    EXPECT_EQ(r.code, 0) << mode << "\n" << r.out;
    EXPECT_NE(r.out.find("ranks as MPI processes"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("-> holds"), std::string::npos) << mode << "\n" << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Bugs, ExampleMpi, ::testing::ValuesIn(examples()), [](const auto& i) {
  std::string n = i.param.substr(0, i.param.size() - 5);
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(ReplayMpi, AnExpectationThatDoesNotHoldExits1OnEveryRank) {
  const std::string dir = testing::TempDir();
  std::string text;
  {
    std::ifstream in(std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto at = text.find("ranks: [2]", text.find("expect:"));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "ranks: [1]");
  const std::string file = dir + "/wrong_expectation.yaml";
  std::ofstream(file) << text;
  const auto r = testutil::run_command(testutil::mpirun(4) + " replay " + file + " --world mpi", 120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("DOES NOT HOLD"), std::string::npos) << r.out;
}

TEST(ReplayMpi, TheWrongProcessCountIsBadInput) {
  const auto r = testutil::run_command(
      testutil::mpirun(2) + " replay " + std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml --world mpi", 120);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("world.ranks is 4, but mpirun started 2 processes; run it with -np 4"), std::string::npos)
      << r.out;
}

TEST(FaultsMpi, EveryNemesisIsNamedInTheMpiWorld) {
  const auto r = testutil::run_command(testutil::mpirun(3) + " faults --world mpi", 300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("3 ranks as MPI processes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every fault detected and named"), std::string::npos) << r.out;
}

// The detection property in a small MPI world: every rank draws the same
// random scenarios from the seed; rank 0 compares each diagnosis with the
// injected fault, and checks that no run outlasted its limit.
TEST(DetectionMpi, HundredCasesInAThreeProcessWorld) {
  const auto r = testutil::run_command(testutil::mpirun(3) + " faults --world mpi --random 100 --seed 11", 600);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("100 of 100 cases diagnosed as injected (no miss, no false alarm: yes)"), std::string::npos)
      << r.out;
}

// A two-rank scenario file over one of the ABI-fault plugins: its path.
std::string plugin_scenario(const std::string& file, const std::string& name, const std::string& plugin, int deadline,
                            const std::string& program) {
  const std::string path = testing::TempDir() + "/" + file + ".yaml";
  std::ofstream(path) << "name: " << name << "\nworld: {ranks: 2}\nimpl: plugin:" PLUGIN_DIR "/" << plugin
                      << ".so\ndeadline: " << deadline << "\nprogram:\n"
                      << program;
  return path;
}

// A crash dumps every rank's flight recorder (issue: "dumps JSON per rank on a
// deadline, on a crash, or on request"), and analyze reads the dumps back.
TEST(FlightRecorder, ACrashDumpsEveryRankAndAnalyzeReadsThem) {
  const std::string dir = testing::TempDir() + "/crash-dumps";
  std::filesystem::remove_all(dir);
  const std::string file = plugin_scenario("crashing", "a plugin that crashes on rank 1", "crashes", 2,
                                            "  - all_reduce: {tag: warmup, count: 2}\n"
                                            "  - all_reduce: {tag: grads, count: 100}\n");
  const auto r = testutil::collcheck("replay " + file + " --dump-dir " + dir, 60);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.code, 124) << r.out;
  EXPECT_NE(r.out.find("died of signal SEGV while replaying " + file), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("flight-recorder dumps written to " + dir), std::string::npos) << r.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/rank-0.json")) << r.out;
  ASSERT_TRUE(std::filesystem::exists(dir + "/rank-1.json")) << r.out;
  EXPECT_NE(r.out.find("on rank 1's thread, died of signal SEGV"), std::string::npos) << r.out;
  const auto a = testutil::collcheck("analyze " + dir, 60);
  // The dumps say which rank's thread died: analyze names it, its signal and
  // the call it was in, wherever rank 0 was at that moment.
  EXPECT_EQ(a.code, 1) << a.out;
  EXPECT_NE(a.out.find("rank_crashed [rank 1] [call #2]: rank 1 died of signal SEGV in call #2 (grads count=100"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("dumped on: crash: replaying"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("warmup"), std::string::npos) << "the completed first call is in the dump\n" << a.out;
}

// A plugin whose rank 0 never returns from its call (a loop, not a wait on a
// transfer): both worlds finish at the run's limit, and the analysis names the
// rank that is stuck inside the implementation, not the peer whose transfer
// timed out. (The MPI world ran its bodies on the calling thread before, and
// rank 1 died of an uncaught exception when rank 0 never answered.)
TEST(Scenario, ACallThatNeverReturnsIsNamedInBothWorlds) {
  const std::string file = plugin_scenario("never_returns", "a plugin that never returns on rank 0", "never_returns", 1,
                                            "  - all_reduce: {tag: grads, count: 16}\n"
                                            "expect: {diagnosis: hung_call, ranks: [0], seq: 1}\n");
  for (const std::string mode : {"guarded", "unguarded"}) {
    const auto t = testutil::collcheck("replay " + file + " --mode " + mode, 120);
    EXPECT_EQ(t.code, 0) << t.out;
    EXPECT_NE(t.out.find("hung_call [rank 0] [call #1]: rank 0 entered call #1 (grads count=16 float32 sum) and never "
                         "returned from it"),
              std::string::npos)
        << t.out;
    const auto m = testutil::run_command(testutil::mpirun(2) + " replay " + file + " --world mpi --mode " + mode, 120);
    EXPECT_EQ(m.code, 0) << m.out;
    EXPECT_NE(m.out.find("hung_call [rank 0] [call #1]"), std::string::npos) << m.out;
    EXPECT_EQ(m.out.find("terminate called"), std::string::npos) << m.out;
  }
}

// A replay's waited outputs are checked and released as it goes once they
// pass the rank's kept budget: memory stays O(budget + one call), not
// O(sum of counts), and every result is still checked.
// unwaited_work names every call left unwaited, with the ranks that left it,
// not only the first.
TEST(Replay, UnwaitedWorkNamesEveryUnwaitedCall) {
  const std::string yaml =
      "world: {ranks: 3}\nprogram:\n"
      "  - all_reduce: {tag: loss, count: 4, async: true, wait: never}\n"
      "  - all_reduce: {tag: grads, count: 8}\n"
      "  - all_reduce: {tag: metrics, count: 2, async: true, wait: never}\n"
      "ranks:\n  1:\n    program:\n"
      "      - all_reduce: {tag: loss, count: 4, async: true, wait: never}\n"
      "      - all_reduce: {tag: grads, count: 8, async: true, wait: never}\n"
      "      - all_reduce: {tag: metrics, count: 2, async: true, wait: never}\n";
  const ReplayResult r = replay_scenario(parse_scenario(yaml, "unwaited.yaml"));
  ASSERT_FALSE(r.diagnoses.empty());
  const Diagnosis& d = r.diagnoses.front();
  EXPECT_EQ(d.kind, DiagnosisKind::UnwaitedWork) << format_diagnosis(d);
  EXPECT_EQ(d.seq, std::optional<uint64_t>(1));
  EXPECT_EQ(d.ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_NE(d.text.find("3 async calls completed but their wait() was never made: #1 (loss"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("#3 (metrics"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("on ranks 0, 1, 2; #2 (grads"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find(") on rank 1"), std::string::npos) << d.text;
}

// Several expectations: the first is the run's first finding, each other one
// some finding of the run; one that no finding matches fails the replay.
TEST(Replay, SeveralExpectationsEachNeedAFinding) {
  const std::string head =
      "world: {ranks: 4}\ndeadline: 1\ngroups: {a: [0, 1], b: [2, 3]}\nprogram:\n"
      "  - all_reduce: {tag: x, group: a, count: 8}\n  - all_reduce: {tag: y, group: b, count: 8}\n"
      "ranks: {1: {program: []}, 3: {program: []}}\n";
  const Scenario s = parse_scenario(head +
                                        "expect:\n  - {diagnosis: missing_rank}\n"
                                        "  - {diagnosis: missing_rank, ranks: [1], group: a, seq: 1}\n"
                                        "  - {diagnosis: missing_rank, ranks: [3], group: b}\n",
                                    "two.yaml");
  ASSERT_EQ(s.also_expect.size(), 2u);
  EXPECT_EQ(scenario_to_yaml(parse_scenario(scenario_to_yaml(s), "again.yaml")), scenario_to_yaml(s));
  const ReplayResult r = replay_scenario(s);
  std::string why;
  EXPECT_TRUE(expectations_hold(s, r, &why)) << why;
  Scenario wrong = s;
  wrong.also_expect[1].ranks = {2};
  EXPECT_FALSE(expectations_hold(wrong, r, &why));
  EXPECT_NE(why.find("expectation 3 (missing_rank) matches none of the 2 findings: closest: expected ranks [2]"),
            std::string::npos)
      << why;
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {"expect: []\n", "two.yaml:8: expect: expected a mapping such as {diagnosis: missing_rank}, or a non-empty list"},
           {"expect: [{diagnosis: none}, {diagnosis: deadlock}]\n",
            "two.yaml:8: expect[0].diagnosis: 'none' cannot be listed with other findings"},
           {"expect: [{diagnosis: deadlock}, {diagnosis: missing_rank, group: c}]\n",
            "two.yaml:8: expect[1].group: unknown group 'c'; allowed: world, a, b"},
       }) {
    try {
      parse_scenario(head + bad, "two.yaml");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Replay, KeptOutputsAreBoundedAndEveryResultIsStillChecked) {
  std::string yaml = "world: {ranks: 2}\ndeadline: 60\nprogram:\n";
  const int calls = 32;
  const uint64_t count = 1 << 20, sum = uint64_t{calls} * count * 4 * 2;  // outputs of both ranks: 256 MiB
  for (int i = 0; i < calls; ++i) yaml += fmt::format("  - all_reduce: {{tag: c{}, count: {}}}\n", i, count);
  const Scenario s = parse_scenario(yaml, "long.yaml");
  ReplayOptions o;
  o.kept_output_bytes = uint64_t{4} << 20;
  const uint64_t estimate = replay_memory_needed(s, 2, o.kept_output_bytes);
  EXPECT_LT(estimate, sum / 4) << "the estimate counts every output";
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const ReplayResult r = replay_scenario(s, o);
  getrusage(RUSAGE_SELF, &after);
  EXPECT_TRUE(r.diagnoses.empty()) << format_diagnosis(r.diagnoses.front());
  EXPECT_EQ(r.results_checked, size_t{2 * calls});
  const uint64_t grew = static_cast<uint64_t>(after.ru_maxrss - before.ru_maxrss) * 1024;
  // Kept to the end, the outputs alone would be `sum`. AddressSanitizer holds
  // freed memory in its quarantine before reuse: 16 MiB in this program.
#if defined(COLLCHECK_TEST_ASAN)
  const uint64_t quarantine = uint64_t{16} << 20;
#else
  const uint64_t quarantine = 0;
#endif
#if defined(COLLCHECK_TEST_TSAN)
  // ThreadSanitizer's allocator and shadow memory grow with fresh 4 MiB
  // blocks (measured: 199 MB here), so its RSS does not measure the replay.
  std::printf("[ note    ] peak memory not checked under ThreadSanitizer (its allocator and shadow grow with each "
              "fresh block); the default and asan builds check it\n");
  (void)quarantine;
#else
  EXPECT_LT(grew, sum / 3 + quarantine) << "peak memory grew by " << grew << " bytes for " << sum << " bytes of outputs";
#endif
  std::printf("replay of %d calls x 2 ranks (%llu bytes of outputs): peak memory grew by %llu bytes; estimate %llu\n",
              calls, static_cast<unsigned long long>(sum), static_cast<unsigned long long>(grew),
              static_cast<unsigned long long>(estimate));
}

// A wrong result in an output checked and released early is still the
// diagnosis, at its call; the same run with every output kept agrees.
TEST(Replay, AWrongResultReleasedEarlyIsStillFoundAtItsCall) {
  std::string yaml = "world: {ranks: 4}\nimpl: plugin:" MUTANT_DIR "/chunk_off_by_one.so\nprogram:\n";
  // Off by one at 4 ranks and 65537 elements: rank 3's last element.
  for (int i = 0; i < 24; ++i) yaml += fmt::format("  - all_reduce: {{tag: c{}, count: 65537}}\n", i);
  const Scenario s = parse_scenario(yaml, "wrong.yaml");
  for (const uint64_t kept : {uint64_t{1} << 20, uint64_t{1} << 30}) {
    ReplayOptions o;
    o.kept_output_bytes = kept;
    const ReplayResult r = replay_scenario(s, o);
    ASSERT_FALSE(r.diagnoses.empty()) << "kept " << kept;
    EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::WrongResult) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.diagnoses.front().seq, std::optional<uint64_t>(1)) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.diagnoses.front().ranks, std::vector<int>{3}) << format_diagnosis(r.diagnoses.front());
    EXPECT_GE(r.time_to_diagnosis, 0) << "a wrong result has its time to diagnosis";
    EXPECT_EQ(r.results_checked, size_t{4 * 24}) << "kept " << kept;
  }
}

// An extra call on one rank, or calls one rank skipped: each rank's dump keeps
// the calls its program would have issued next (never run), and the calls
// after the mismatch settle which side is off by how many; a reorder stays an
// order mismatch. Both modes, and the 2-rank case (no majority) blames the
// rank that made the extra call, whichever rank that is.
TEST(Replay, ExtraAndSkippedCallsAreAlignedAndNamed) {
  const std::string loop = "  - repeat: {times: 5, steps: [{all_reduce: {count: 64}}]}\n";
  struct Case {
    std::string yaml;
    DiagnosisKind kind;
    std::vector<int> ranks;
    uint64_t seq;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"world: {ranks: 2}\nprogram:\n" + loop +
           "ranks: {0: {insert: {after: 1, steps: [{all_reduce: {tag: metric, count: 1}}]}}}\n",
       DiagnosisKind::ExtraCall, {0}, 3, "rank 0 issued an extra call, call #3 (metric count=1"},
      {"world: {ranks: 2}\nprogram:\n" + loop +
           "ranks: {1: {insert: {after: 1, steps: [{all_reduce: {tag: metric, count: 1}}]}}}\n",
       DiagnosisKind::ExtraCall, {1}, 3, "rank 0's call #3 (call2 count=64 float32 sum) is rank 1's call #4"},
      {"world: {ranks: 2}\nprogram:\n" + loop +
           "ranks: {1: {insert: {after: 1, steps: [{all_reduce: {tag: a, count: 1}}, {all_reduce: {tag: b}}]}}}\n",
       DiagnosisKind::ExtraCall, {1}, 3, "rank 1 issued 2 extra calls, calls #3-#4 (a count=1"},
      {"world: {ranks: 4}\nprogram:\n" + loop + "ranks: {3: {skip: [2, 3]}}\n", DiagnosisKind::SkippedCall, {3}, 3,
       "rank 3 skipped calls #3-#4 (call2 count=64 float32 sum; call3 count=64 float32 sum) that ranks 0, 1, 2 made"},
      {"world: {ranks: 4}\nprogram:\n" + loop +
           "ranks: {2: {insert: {before: 0, steps: [{all_reduce: {tag: warmup}}]}}}\n",
       DiagnosisKind::ExtraCall, {2}, 1, "rank 2 issued an extra call, call #1 (warmup"},
      // Swapped last two calls: as many calls on each side, so not an extra call.
      {"world: {ranks: 2}\nprogram:\n" + loop + "faults: [{misordered: {ranks: [1], calls: [3, 4]}}]\n",
       DiagnosisKind::OrderMismatch, {1}, 4, "collectives called in a different order at call #4"},
      // A swap of the first two calls on the odd rank of three.
      {"world: {ranks: 3}\nprogram:\n" + loop + "faults: [{misordered: {ranks: [2], calls: [0, 1]}}]\n",
       DiagnosisKind::OrderMismatch, {2}, 1, "collectives called in a different order at call #1"},
  };
  for (const auto& c : cases) {
    for (const bool guarded : {true, false}) {
      Scenario s = parse_scenario(c.yaml + "deadline: 2\n", "aligned.yaml");
      s.guarded = guarded;
      const ReplayResult r = replay_scenario(s);
      ASSERT_FALSE(r.diagnoses.empty()) << c.yaml;
      const Diagnosis& d = r.diagnoses.front();
      const std::string where = c.yaml + (guarded ? "(guarded)\n" : "(unguarded)\n") + format_diagnosis(d);
      EXPECT_EQ(d.kind, c.kind) << where;
      EXPECT_EQ(d.ranks, c.ranks) << where;
      EXPECT_EQ(d.seq, std::optional<uint64_t>(c.seq)) << where;
      EXPECT_NE(d.text.find(c.says), std::string::npos) << where;
    }
  }
}

// A wait step on a named handle: the async call is waited where the program
// says (after a sleep and another call here), not before the next call.
TEST(Replay, AWaitStepWaitsItsHandleWhereTheProgramSays) {
  const Scenario s = parse_scenario(
      "world: {ranks: 2}\nprogram:\n"
      "  - all_reduce: {tag: grads, count: 4096, async: true, handle: g}\n"
      "  - sleep: 50\n"
      "  - all_reduce: {tag: loss, count: 1}\n"
      "  - wait: g\n",
      "handle.yaml");
  ASSERT_EQ(s.defaults.size(), 4u);
  EXPECT_EQ(s.defaults[0].call.wait, WaitAt::Handle);
  EXPECT_EQ(s.defaults[3].kind, Step::Wait);
  // What it writes out parses to the same program.
  EXPECT_EQ(scenario_to_yaml(parse_scenario(scenario_to_yaml(s), "again.yaml")), scenario_to_yaml(s));
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(s, o);
    EXPECT_TRUE(r.diagnoses.empty()) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.results_checked, 4u);
    size_t seen = 0;
    for (const auto& d : r.dumps) {
      if (d.p2p || d.calls.size() != 2) continue;
      ++seen;
      const CallRecord& grads = d.calls[0];
      const CallRecord& loss = d.calls[1];
      EXPECT_EQ(grads.tag, "grads");
      EXPECT_GE(grads.t_waited, loss.t_completed) << "rank " << d.rank;
      // Issued (scheduled), then the 50 ms sleep, then the wait. (Its start
      // may come later than its issue: the stream runs it.)
      EXPECT_GE(grads.t_waited, grads.t_scheduled + 0.045) << "rank " << d.rank << ": waited before the sleep";
    }
    EXPECT_EQ(seen, 2u);
  }
}

TEST(Scenario, HandlesAreWaitedOnceAndByName) {
  const std::string head = "world: {ranks: 2}\nprogram:\n";
  auto error_in = [&](const std::string& body) {
    try {
      parse_scenario(head + body, "h.yaml");
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {"  - all_reduce: {async: true, handle: g}\n  - wait: h\n",
            "h.yaml:4: wait: rank 0 has no pending async call with handle 'h' here; pending: g"},
           {"  - all_reduce: {async: true, handle: g}\n",
            "h.yaml:3: handle: rank 0 never waits handle 'g'; add a step wait: g (or give the call wait: never"},
           {"  - all_reduce: {async: true, handle: g}\n  - all_reduce: {async: true, handle: g}\n  - wait: g\n",
            "h.yaml:4: all_reduce.handle: rank 0's handle 'g' (the call at line 3) is not waited yet"},
           {"  - all_reduce: {handle: g}\n  - wait: g\n", "program[0].all_reduce.handle: only an async call has a handle"},
           {"  - all_reduce: {async: true, wait: end, handle: g}\n  - wait: g\n",
            "program[0].all_reduce.handle: give either wait or handle, not both"},
           {"  - all_reduce: {async: true, handle: 'a b'}\n  - wait: 'a b'\n",
            "program[0].all_reduce.handle: 'a b' is not a handle name"},
           {"  - all_reduce: {async: true, handle: g}\n  - wait: g\n  - wait: g\n",
            "h.yaml:5: wait: rank 0 has no pending async call with handle 'g' here; pending: none"},
           // A rank's own edit that drops the wait.
           {"  - all_reduce: {async: true, handle: g}\n  - all_reduce: {}\n  - wait: g\nranks: {1: {program: [{all_reduce: {async: true, handle: g}}, {all_reduce: {}}]}}\n",
            "rank 1 never waits handle 'g'"},
       }) {
    const std::string got = error_in(body);
    EXPECT_NE(got.find(want), std::string::npos) << "for:\n" << body << "got: " << got << "\nwant: " << want;
  }
  // wait: {before: k}: a handle and a wait step right before call k.
  const Scenario before = parse_scenario(head + "  - all_reduce: {tag: g, async: true, wait: {before: 2}}\n"
                                                "  - all_reduce: {tag: loss}\n  - all_reduce: {tag: norm}\n",
                                         "before.yaml");
  ASSERT_EQ(before.defaults.size(), 4u);
  EXPECT_EQ(before.defaults[2].kind, Step::Wait);
  EXPECT_EQ(before.defaults[2].handle, before.defaults[0].call.handle);
  EXPECT_EQ(before.defaults[3].call.tag, "norm");
  EXPECT_EQ(scenario_to_yaml(parse_scenario(scenario_to_yaml(before), "again.yaml")), scenario_to_yaml(before));
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {"  - all_reduce: {async: true, wait: {before: 0}}\n  - all_reduce: {}\n",
            "h.yaml:3: program.wait.before: call 0 is not a later call of this list; allowed: 1 to 1"},
           {"  - all_reduce: {async: true, wait: {before: 5}}\n",
            "call 5 is not a later call of this list; allowed: none (it is the last call)"},
           {"  - repeat: {times: 2, steps: [{all_reduce: {async: true, wait: {before: 1}}}, {all_reduce: {}}]}\n",
            "wait: {before: <call>} inside a repeat"},
           {"  - all_reduce: {async: true, wait: {after: 1}}\n  - all_reduce: {}\n", "unknown key 'after'"},
       }) {
    const std::string got = error_in(body);
    EXPECT_NE(got.find(want), std::string::npos) << "for:\n" << body << "got: " << got << "\nwant: " << want;
  }
  // The same handle again once it was waited: a loop body.
  EXPECT_NO_THROW(parse_scenario(head + "  - repeat: {times: 3, steps: [{all_reduce: {async: true, handle: g}}, "
                                        "{all_reduce: {tag: x}}, {wait: g}]}\n",
                                 "loop.yaml"));
}

namespace {

// TensorRT-LLM #10665 (examples/bugs/isend_left_behind_a_blocking_send.yaml):
// an isend in a group with MPI's progress rule, left alone while its rank
// blocks in the world's send, never moves. The cycle's text says so, from the
// live run and from the dump files alone; the same program with the device's
// progress rule, or with the wait before the blocking send (the fix), is clean.
TEST(Replay, AnIsendOfACallerProgressGroupDoesNotMoveWhileItsRankBlocksElsewhere) {
  std::ifstream in(std::string(SOURCE_DIR) + "/examples/bugs/isend_left_behind_a_blocking_send.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NE(text.find("progress: caller"), std::string::npos);
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(parse_scenario(text, "isend.yaml"), o);
    ASSERT_FALSE(r.diagnoses.empty()) << format_timeline(r.dumps);
    const Diagnosis& d = r.diagnoses.front();
    EXPECT_EQ(d.kind, DiagnosisKind::Deadlock) << format_diagnosis(d);
    for (const char* part : {"rank 1 waits in group mpi recv message #1 from rank 0 (new_requests) for rank 0, whose "
                             "group mpi send message #1 to rank 1 (new_requests) (async",
                             "never started: group mpi moves async calls only while rank 0 is inside one of its calls "
                             "(progress: caller), and rank 0 was waiting in the world send message #1 to rank 1"})
      EXPECT_NE(d.text.find(part), std::string::npos) << d.text;
    if (!guarded) {
      const auto again = analyze(load_dumps(r.dump_dir), AnalysisOptions{});
      ASSERT_FALSE(again.empty());
      EXPECT_NE(again.front().text.find("(progress: caller)"), std::string::npos) << again.front().text;
      std::filesystem::remove_all(r.dump_dir);
    }
  }
  const std::string expect = "expect:\n  diagnosis: deadlock\n  ranks: [0, 1]\n";
  ASSERT_NE(text.find(expect), std::string::npos);
  std::string stream = text, fixed = text;
  const std::string group = "mpi: {ranks: [0, 1], progress: caller}";
  ASSERT_NE(stream.find(group), std::string::npos);
  stream.replace(stream.find(group), group.size(), "mpi: {ranks: [0, 1], progress: stream}");
  const std::string late = "  - send: {peer: 1, tag: activations, shape: [8, 4096], dtype: bfloat16}\n  - wait: requests\n";
  ASSERT_NE(fixed.find(late), std::string::npos);
  fixed.replace(fixed.find(late), late.size(),
                "  - wait: requests\n  - send: {peer: 1, tag: activations, shape: [8, 4096], dtype: bfloat16}\n");
  for (const std::string& clean : {stream, fixed}) {
    const ReplayResult r = replay_scenario(parse_scenario(clean, "clean.yaml"), ReplayOptions{});
    EXPECT_TRUE(r.diagnoses.empty()) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.results_checked, 2u);
  }
}

// The progress rule survives the trip to YAML and back.
TEST(Scenario, AGroupsProgressRuleIsWrittenBack) {
  const Scenario s = parse_scenario("world: {ranks: 3}\ngroups: {mpi: {ranks: [0, 2], progress: caller}, tp: [0, 1]}\n"
                                    "program: [{barrier: {group: mpi}}]\n",
                                    "p.yaml");
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_TRUE(s.groups[0].caller_progress);
  EXPECT_FALSE(s.groups[1].caller_progress);
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  ASSERT_EQ(back.groups.size(), 2u);
  EXPECT_TRUE(back.groups[0].caller_progress);
  EXPECT_EQ(back.groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_FALSE(back.groups[1].caller_progress);
}

}  // namespace

namespace {

// In-place calls (the output buffer holds the input and is both), sync and
// async, all_reduce and broadcast, over several dtypes and ops: every result
// is checked by the oracle and the run is clean. A write to an async call's
// buffer before its wait is write_before_wait, on the ranks that wrote it.
TEST(Replay, InPlaceCallsAreCheckedAndAWriteBeforeTheWaitIsNamed) {
  const std::string clean = R"(world: {ranks: 3}
program:
  - all_reduce: {tag: a, count: 1000, dtype: bfloat16, op: sum, in_place: true}
  - all_reduce: {tag: b, count: 333, dtype: int32, op: max, in_place: true, async: true, handle: b}
  - broadcast: {tag: c, root: 2, count: 77, dtype: float16, in_place: true}
  - all_reduce: {tag: d, count: 4096, dtype: float32, op: avg, in_place: true, async: true}
  - wait: b
  - broadcast: {tag: e, root: 0, count: 5, dtype: uint8, in_place: true, async: true, wait: end}
)";
  const Scenario s = parse_scenario(clean, "inplace.yaml");
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(s, o);
    EXPECT_TRUE(r.diagnoses.empty()) << format_diagnosis(r.diagnoses.front()) << format_timeline(r.dumps);
    EXPECT_EQ(r.results_checked, 15u);
    if (!r.dump_dir.empty()) std::filesystem::remove_all(r.dump_dir);
  }
  // Rank 1 writes call #4's buffer (d) before its wait.
  const std::string written = clean + "ranks:\n  1:\n    program:\n" + [] {
    std::string p;
    for (const char* l : {"all_reduce: {tag: a, count: 1000, dtype: bfloat16, op: sum, in_place: true}",
                          "all_reduce: {tag: b, count: 333, dtype: int32, op: max, in_place: true, async: true, handle: b}",
                          "broadcast: {tag: c, root: 2, count: 77, dtype: float16, in_place: true}",
                          "all_reduce: {tag: d, count: 4096, dtype: float32, op: avg, in_place: true, async: true, "
                          "write_before_wait: true}",
                          "wait: b", "broadcast: {tag: e, root: 0, count: 5, dtype: uint8, in_place: true, async: true, wait: end}"})
      p += std::string("      - ") + l + "\n";
    return p;
  }();
  const Scenario w = parse_scenario(written, "written.yaml");
  for (const bool guarded : {true, false}) {
    ReplayOptions o;
    o.guarded = guarded;
    const ReplayResult r = replay_scenario(w, o);
    ASSERT_FALSE(r.diagnoses.empty()) << format_timeline(r.dumps);
    EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::WriteBeforeWait) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.diagnoses.front().ranks, (std::vector<int>{1}));
    EXPECT_EQ(r.diagnoses.front().seq, std::optional<uint64_t>{4});
    EXPECT_NE(r.diagnoses.front().text.find("(d count=4096 float32 avg) was written on rank 1 before its wait()"),
              std::string::npos)
        << r.diagnoses.front().text;
    if (!r.dump_dir.empty()) std::filesystem::remove_all(r.dump_dir);
  }
}

}  // namespace

namespace {

std::vector<std::string> tags_of(const Program& p) {
  std::vector<std::string> t;
  for (const Step& x : p)
    t.push_back(x.kind == Step::Call   ? x.call.tag
                : x.kind == Step::Exit ? "exit"
                : x.kind == Step::Raise ? "raise"
                : x.kind == Step::Wait ? "wait:" + x.handle
                                       : "other");
  return t;
}

void expect_refused(const std::string& yaml, const std::string& message) {
  try {
    parse_scenario(yaml, "bad.yaml");
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

// Events and rank-dependent choices, as each rank's program: `if` takes its
// then-steps on the listed ranks and its else-steps on the others; `raise`
// leaves out the rest of the innermost repeat pass it is in (a nested pass
// leaves the outer one going), or of the program at the top, and a wait it
// leaves out makes its call never waited; `exit` stays in the program.
TEST(Scenario, IfRaiseAndExitMakeEachRanksProgram) {
  const Scenario s = parse_scenario(R"(world: {ranks: 4}
program:
  - all_reduce: {tag: a}
  - if:
      ranks: [1, 3]
      then: [{all_reduce: {tag: only13}}]
      else: [{all_reduce: {tag: others}}, {if: {ranks: [2], then: [{exit: true}]}}]
  - repeat:
      times: 2
      steps:
        - all_reduce: {tag: x}
        - repeat: {times: 2, steps: [{all_reduce: {tag: in}}, {all_reduce: {tag: in2}}]}
        - all_reduce: {tag: y}
ranks:
  3: {insert: {after: 3, steps: [{raise: true}]}}
  0: {insert: {after: 2, steps: [{raise: true}]}}
)",
                                    "events.yaml");
  using V = std::vector<std::string>;
  // Rank 0: raise after its first x (call 2): the rest of that outer pass goes.
  EXPECT_EQ(tags_of(s.program(0)), (V{"a", "others", "x", "raise", "x", "in", "in2", "in", "in2", "y"}));
  EXPECT_EQ(tags_of(s.program(1)), (V{"a", "only13", "x", "in", "in2", "in", "in2", "y", "x", "in", "in2", "in", "in2", "y"}));
  EXPECT_EQ(tags_of(s.program(2)), (V{"a", "others", "exit", "x", "in", "in2", "in", "in2", "y", "x", "in", "in2", "in", "in2", "y"}));
  // Rank 3: raise after the first inner pass's `in` (call 3): only that inner pass's rest goes.
  EXPECT_EQ(tags_of(s.program(3)), (V{"a", "only13", "x", "in", "raise", "in", "in2", "y", "x", "in", "in2", "in", "in2", "y"}));
  // Written back and read again: the same calls (a raise's effect is kept, not its marker).
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  for (int r = 0; r < 4; ++r) {
    V want;
    for (const auto& t : tags_of(s.program(r)))
      if (t != "raise") want.push_back(t);
    EXPECT_EQ(tags_of(back.program(r)), want) << "rank " << r;
  }
  // A raise that leaves out a wait: its call is never waited; one that
  // leaves out a call: its later wait goes too.
  const Scenario w = parse_scenario(R"(world: {ranks: 2}
program:
  - repeat:
      times: 2
      steps:
        - all_reduce: {tag: g, async: true, handle: h}
        - all_reduce: {tag: loss}
        - wait: h
ranks:
  1: {insert: {after: 2, steps: [{raise: true}]}}
)",
                                    "wait.yaml");
  EXPECT_EQ(tags_of(w.program(1)), (V{"g", "loss", "wait:h", "g", "raise"}));
  EXPECT_EQ(w.program(1)[3].call.wait, WaitAt::Never);
  const Scenario w2 = parse_scenario(R"(world: {ranks: 2}
program:
  - raise: true
  - all_reduce: {tag: g, async: true, handle: h}
  - wait: h
  - all_reduce: {tag: z}
)",
                                     "top.yaml");
  EXPECT_EQ(tags_of(w2.program(0)), (V{"raise"}));
  // Both branches number their calls from the same place: the same untagged
  // call in each is the same call (default tag call<i>), on every rank.
  const Scenario same = parse_scenario("world: {ranks: 3}\nprogram:\n  - all_reduce: {count: 4}\n"
                                       "  - if: {ranks: [0], then: [{barrier: true}], else: [{barrier: true}]}\n"
                                       "  - all_reduce: {count: 4}\n",
                                       "same.yaml");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(tags_of(same.program(r)), (V{"call0", "call1", "call2"})) << "rank " << r;
  ReplayOptions so;
  const ReplayResult sr = replay_scenario(same, so);
  EXPECT_TRUE(sr.diagnoses.empty()) << format_diagnosis(sr.diagnoses.front());
  expect_refused("world: {ranks: 2}\nprogram:\n  - if: {ranks: [1]}\n", "bad.yaml:3: program[0].if.then: missing");
  expect_refused("world: {ranks: 2}\nprogram:\n  - if: {then: []}\n", "bad.yaml:3: program[0].if.ranks: missing");
  expect_refused("world: {ranks: 2}\nprogram:\n  - if: {ranks: [2], then: []}\n",
                 "bad.yaml:3: program[0].if.ranks[0]: expected an integer in [0, 1], got 2");
  expect_refused("world: {ranks: 2}\nprogram:\n  - if: {ranks: [0], then: [], when: 3}\n",
                 "bad.yaml:3: program[0].if: unknown key 'when'; allowed: ranks, then, else");
  expect_refused("world: {ranks: 2}\nprogram:\n  - raise: false\n", "bad.yaml:3: program[0].raise: expected true");
  expect_refused("world: {ranks: 2}\nprogram:\n  - exit: 1\n", "program[0].exit");
}

}  // namespace

namespace {

// A missing rank whose program had ended (an exit) is said to have ended; a
// stalled one, still in its program, is not.
TEST(Replay, AMissingRankWhoseProgramEndedIsSaidToHaveEnded) {
  for (const auto& [file, ended] : std::vector<std::pair<std::string, bool>>{{"worker_out_of_data_exits.yaml", true},
                                                                            {"rank_stuck_in_dataloader.yaml", false}}) {
    const Scenario s = load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/" + file);
    for (const bool guarded : {true, false}) {
      ReplayOptions o;
      o.guarded = guarded;
      const ReplayResult r = replay_scenario(s, o);
      ASSERT_FALSE(r.diagnoses.empty()) << file;
      EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::MissingRank) << format_diagnosis(r.diagnoses.front());
      EXPECT_EQ(r.diagnoses.front().text.find("had ended its program with no call left to issue") != std::string::npos,
                ended)
          << file << ": " << r.diagnoses.front().text;
      if (!r.dump_dir.empty()) std::filesystem::remove_all(r.dump_dir);
    }
  }
}

}  // namespace

namespace {

// Unguarded mode is production: a size mismatch is what NCCL makes of it, a
// hang until the deadline with the watchdog's message, and the diagnosis
// still names the mismatch. A flipped bit is corrupted output with every call
// returned; guarded mode and a clean run say nothing of a symptom. The
// command line prints it.
TEST(Replay, UnguardedModeShowsWhatProductionWouldHaveShown) {
  auto run = [](const std::string& file, bool guarded) {
    ReplayOptions o;
    o.guarded = guarded;
    ReplayResult r = replay_scenario(load_scenario(std::string(SOURCE_DIR) + "/examples/bugs/" + file), o);
    if (!r.dump_dir.empty()) std::filesystem::remove_all(r.dump_dir);
    return r;
  };
  const ReplayResult hang = run("bucket_off_by_one.yaml", false);
  ASSERT_FALSE(hang.diagnoses.empty());
  EXPECT_EQ(hang.diagnoses.front().kind, DiagnosisKind::ShapeMismatch);
  EXPECT_EQ(hang.symptom.rfind("a hang until the deadline: [Rank ", 0), 0u) << hang.symptom;
  EXPECT_NE(hang.symptom.find("] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
                              "NumelIn=10"),
            std::string::npos)
      << hang.symptom;
  EXPECT_NE(hang.symptom.find("Timeout(ms)=2000) ran for "), std::string::npos) << hang.symptom;
  EXPECT_GE(hang.first_failure, 1.9) << "the hang lasts until the deadline (2 s)";
  for (const auto& d : hang.diagnoses) EXPECT_NE(d.kind, DiagnosisKind::CorruptedPayload) << format_diagnosis(d);
  const ReplayResult bit = run("flipped_bit.yaml", false);
  EXPECT_EQ(bit.symptom.rfind("corrupted output, and every call returned: rank ", 0), 0u) << bit.symptom;
  EXPECT_TRUE(run("bucket_off_by_one.yaml", true).symptom.empty());
  EXPECT_TRUE(run("clean_training_step.yaml", false).symptom.empty());
  const auto r = testutil::collcheck("replay " + std::string(SOURCE_DIR) +
                                     "/examples/bugs/bucket_off_by_one.yaml --mode unguarded");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("what production would have shown: a hang until the deadline: [Rank"), std::string::npos)
      << r.out;
}

}  // namespace
