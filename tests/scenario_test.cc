// Scenarios, the flight recorder and diagnosis: bad files get file, line and
// field; every example in examples/bugs/ replays to its expected diagnosis in
// both modes; analyze reaches the same diagnosis from the dumps alone; the
// detection property holds for thread worlds of 2 to 8 ranks.
// (The other scenario_*_test.cc files are the same executable.)

#include "tests/scenario_test_util.h"

#if defined(COLLCHECK_TEST_ASAN)
// A small quarantine, so that Replay.KeptOutputsAreBounded... measures the
// replay's memory, not AddressSanitizer's (256 MiB by default).
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }
#endif
using namespace std::chrono_literals;

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
      {"world: {ranks: 3}\ngroups: {mpi: {ranks: [0], thread: true}}\nprogram: []\n", "bad.yaml:2: groups.mpi: unknown key 'thread'; allowed: ranks, progress, matching"},
      {"world: {ranks: 3}\ngroups: {mpi: {ranks: [0, 1], matching: strict}}\nprogram: []\n", "bad.yaml:2: groups.mpi.matching: unknown matching rule 'strict'; allowed: any (a sync and an async call match, NCCL), mpi"},
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

// A key that is not UTF-8 is refused with its file, line and field: its bytes
// would be written back as they are and read again as U+FFFD, and the YAML
// round trip would change the scenario (scenario_fuzz found it in CI; the
// input is in tests/fuzz/corpus/scenario/).
TEST(Scenario, AKeyThatIsNotUtf8IsRefused) {
  const std::string yaml = "world: {ranks: 4}\nprogram:\n  - all_reduce: {tag: a, count: 4}\nfaults:\n"
                           "  - slow_link: {from: 2, to: 3, latenc\xef" "bop: 30}\n";
  try {
    parse_scenario(yaml, "bytes.yaml");
    ADD_FAILURE() << "a key with a truncated UTF-8 sequence was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes.yaml:5: faults[0].slow_link: a key is not valid UTF-8 text"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(parse_scenario("name: r\xc3\xa9seau\nworld: {ranks: 2}\nprogram:\n  - all_reduce: {tag: \xc3\xa9, count: 4}\n",
                                 "utf8.yaml"));
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
