// The flight recorder and analyze: dumps round-trip, a slow edge needs a
// majority of its time, a descheduled rank is not a slow link, a crash is named.

#include "tests/scenario_test_util.h"

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

// A slow link is slow in every call that crosses it: an edge whose slow
// transfers all fall in one of several calls (the host was busy then) is not
// named, though they are a majority of its transfers.
TEST(Analyze, ASlowEdgeMustBeSlowInMoreThanOneCall) {
  auto with_calls = [](const std::vector<int>& slow_calls) {
    auto d = ring_dumps(0.2, 40, 0, false);
    for (auto& rd : d) rd.transfers.clear();
    for (int src = 0; src < 3; ++src) {
      const int dst = (src + 1) % 3;
      double t = 0.001;
      for (int k = 0; k < 5; ++k) {
        const int call = k < 3 ? 1 : 2;  // three transfers in call #1, two in call #2
        const bool slow = src == 1 && std::count(slow_calls.begin(), slow_calls.end(), call) > 0;
        TransferRecord x;
        x.src = src;
        x.dst = dst;
        x.tag = call_tag(static_cast<uint64_t>(call)) | static_cast<Tag>(k);
        x.bytes = 1024;
        x.t_posted = t;
        x.t_completed = t + (slow ? 0.040 : 0.0002);
        x.send = true;
        d[static_cast<size_t>(src)].transfers.push_back(x);
        x.send = false;
        d[static_cast<size_t>(dst)].transfers.push_back(x);
        t = x.t_completed + 0.0005;
      }
    }
    return d;
  };
  std::string text;
  EXPECT_FALSE(names_slow_edge(with_calls({1}), &text)) << "3 of 5 transfers slow, all in call #1: " << text;
  EXPECT_TRUE(names_slow_edge(with_calls({1, 2}), &text)) << "slow in both calls";
}

// Two ranks' times are compared: an edge whose ranks' clocks may be off from
// rank 0's by more than its excess (MPI processes on other nodes, aligned by
// ping-pong: harness/world/mpi_clock.h) is not named. 40 ms against 0.2 ms,
// with the 15 ms floor: named up to 24.8 ms of uncertainty between the two.
TEST(Analyze, ASlowEdgeMustBeSlowerThanItsRanksClocksMayBeOff) {
  auto dumps = ring_dumps(0.2, 40, 4, false);
  std::string text;
  ASSERT_TRUE(names_slow_edge(dumps, &text));
  EXPECT_EQ(text.find("origin"), std::string::npos) << text;
  dumps[1].clock_uncertainty_s = dumps[2].clock_uncertainty_s = 0.010;
  EXPECT_TRUE(names_slow_edge(dumps, &text));
  EXPECT_NE(text.find("to within 20.000 ms together"), std::string::npos) << text;
  dumps[2].clock_uncertainty_s = 0.015;
  EXPECT_FALSE(names_slow_edge(dumps, &text)) << text;
  // A rank off the edge changes nothing.
  auto other = ring_dumps(0.2, 40, 4, false);
  other[0].clock_uncertainty_s = 1.0;
  EXPECT_TRUE(names_slow_edge(other));
  // The note travels in the dump files, checked.
  nlohmann::json j = {{"rank", 1}, {"size", 3}, {"calls", nlohmann::json::array()},
                      {"transfers", nlohmann::json::array()}, {"blocked_on", nullptr},
                      {"clock", {{"aligned", "ping-pong"}, {"uncertainty_s", 0.004}}}};
  const RankDump back = rank_dump_from_json(j);
  EXPECT_EQ(back.clock_aligned, "ping-pong");
  EXPECT_DOUBLE_EQ(back.clock_uncertainty_s, 0.004);
  EXPECT_EQ(rank_dump_to_json(back)["clock"], j["clock"]);
  j["clock"]["uncertainty_s"] = -1;
  EXPECT_THROW(rank_dump_from_json(j), std::runtime_error);
  j.erase("clock");  // one process, or older dumps: no note, no uncertainty
  EXPECT_EQ(rank_dump_from_json(j).clock_uncertainty_s, 0.0);
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
