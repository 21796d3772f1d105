// Replays: unwaited work, several expectations, kept outputs, early release,
// extra and skipped calls, wait steps, caller-progress groups, in-place calls,
// ended programs, and what unguarded mode shows.

#include "tests/scenario_test_util.h"

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

// MPI's matching rule survives the trip too, and decides whether a blocking
// and a non-blocking call of one collective are the same call.
TEST(Scenario, AGroupsMatchingRuleIsWrittenBackAndDecidesWhetherBlockingCounts) {
  const std::string text =
      "world: {ranks: 3}\ndeadline: 2\ngroups: {g: {ranks: [0, 1, 2], matching: mpi}}\n"
      "program: [{all_reduce: {group: g, tag: x, count: 8}}]\n"
      "ranks: {1: {program: [{all_reduce: {group: g, tag: x, count: 8, async: true, wait: end}}]}}\n";
  const Scenario s = parse_scenario(text, "m.yaml");
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_TRUE(s.groups[0].mpi_matching);
  EXPECT_FALSE(s.groups[0].caller_progress);
  EXPECT_TRUE(parse_scenario(scenario_to_yaml(s), "back.yaml").groups[0].mpi_matching);
  for (const bool guarded : {true, false}) {
    Scenario run = s;
    run.guarded = guarded;
    const ReplayResult r = replay_scenario(run, ReplayOptions{});
    ASSERT_FALSE(r.diagnoses.empty()) << "guarded " << guarded;
    EXPECT_EQ(r.diagnoses.front().kind, DiagnosisKind::ShapeMismatch) << format_diagnosis(r.diagnoses.front());
    EXPECT_EQ(r.diagnoses.front().ranks, (std::vector<int>{1}));
    EXPECT_EQ(r.diagnoses.front().fields, (std::vector<std::string>{"blocking"}));
  }
  std::string any = text;
  any.replace(any.find("matching: mpi"), 13, "matching: any");
  const ReplayResult clean = replay_scenario(parse_scenario(any, "any.yaml"), ReplayOptions{});
  EXPECT_TRUE(clean.diagnoses.empty()) << format_diagnosis(clean.diagnoses.front());
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

// A missing rank whose program had ended (an exit) is said to have ended; a
// stalled one, still in its program, is not. An ended rank's missing call
// alike to the calls before it may also be a skip of one of them.
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
      const bool skip_said = r.diagnoses.front().text.find("or a skip of any one of calls #1-#4, which are alike") != std::string::npos;
      EXPECT_EQ(skip_said, ended) << file << ": " << r.diagnoses.front().text;
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
