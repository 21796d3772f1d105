// verify --jobs: cases side by side, each in a simulated world of its own.
// The run must say and find exactly what one case at a time says and finds:
// the same first failing case, the same minimal case, the same text (but for
// the wall-clock times).
// And the shrinking of a flaky failure (VerifyShrink): each step run several
// times, under the schedule that shows it most.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>

#include "harness/world/sim_world.h"
#include "impl/algorithm.h"
#include "properties/executor.h"
#include "properties/case_stream.h"
#include "properties/verify.h"
#include "harness/peers/peer_registry.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

// Ring, with a wrong last element on rank 1 when p >= 3 and the count is 2
// mod 41: no state across cases, so cases may run side by side.
class WrongSometimes final : public Implementation {
 public:
  const std::string& name() const override { return name_; }
  void all_reduce(const AllReduceArgs& a) const override {
    ring_all_reduce(a);
    if (a.links.size() >= 3 && a.count % 41 == 2 && a.links.rank() == 1)
      static_cast<unsigned char*>(a.recv)[a.count * dtype_size(a.red.dtype) - 1] ^= 0x10;
  }

 private:
  std::string name_ = "wrong_sometimes";
};

struct VerifyRun {
  VerifyResult r;
  std::string text;
};

// run_verify with what it prints.
VerifyRun verify_with_text(const VerifyOptions& o, CaseExecutor& exec) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  VerifyRun run;
  {
    Events events;
    events.add(console_sink(out, out));
    run.r = run_verify(o, exec, events);
  }
  std::fclose(out);
  run.text.assign(buf, len);
  std::free(buf);
  return run;
}

VerifyRun verify_in_sim(ImplPtr impl, uint64_t seed, size_t cases, int parallel) {
  RunConfig cfg{impl, default_peers(*reference_implementation("ring")), 10000ms, {}};
  cfg.make_world = sim_worlds(SimOptions{});
  cfg.parallel = parallel;
  InProcessExecutor exec(cfg);
  VerifyOptions o;
  o.impl_spec = impl->name();
  o.cases = cases;
  o.seed = seed;
  o.world_desc = "ranks as fibers in virtual time";
  VerifyRun run = verify_with_text(o, exec);
  // The wall-clock times differ from run to run; nothing else may.
  run.text = std::regex_replace(run.text, std::regex(R"([0-9.]+ s\b|[0-9]+ cases/s)"), "T");
  return run;
}

// 200 cases of at most 16 ranks and 4096 elements, no sequences.
VerifyOptions small_space(const std::string& name, uint64_t seed) {
  VerifyOptions o;
  o.impl_spec = name;
  o.cases = 200;
  o.seed = seed;
  o.space.max_ranks = 16;
  o.space.max_count = 4096;
  o.space.large_bytes = 0;
  o.space.sequences = false;
  return o;
}

uint64_t fresh_seed() { return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}(); }

}  // namespace

TEST(VerifyJobs, SideBySideFindsTheSameFailureAndSaysTheSame) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  auto bad = std::make_shared<WrongSometimes>();
  for (uint64_t seed : {uint64_t{11}, fresh_seed()}) {
    std::printf("[ seed    ] %#llx\n", static_cast<unsigned long long>(seed));
    const VerifyRun one = verify_in_sim(bad, seed, 2000, 1);
    ASSERT_TRUE(one.r.failed) << one.text;
    std::printf("[ first   ] case %zu fails; minimal: %s\n", one.r.failing_case, case_summary(one.r.minimal).c_str());
    for (int jobs : {2, 5}) {
      const VerifyRun many = verify_in_sim(bad, seed, 2000, jobs);
      EXPECT_TRUE(many.r.failed);
      EXPECT_EQ(many.r.failing_case, one.r.failing_case) << jobs << " jobs";
      EXPECT_EQ(encode_case(many.r.minimal), encode_case(one.r.minimal)) << jobs << " jobs";
      EXPECT_EQ(many.r.cases_run, one.r.cases_run) << jobs << " jobs";
      EXPECT_EQ(many.text, one.text) << jobs << " jobs";
    }
  }
}

TEST(VerifyJobs, APassingRunSaysTheSameForAnyNumberOfJobs) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  const uint64_t seed = fresh_seed();
  std::printf("[ seed    ] %#llx\n", static_cast<unsigned long long>(seed));
  const VerifyRun one = verify_in_sim(reference_implementation("ring"), seed, 1500, 1);
  const VerifyRun many = verify_in_sim(reference_implementation("ring"), seed, 1500, 3);
  EXPECT_FALSE(one.r.failed) << one.text;
  EXPECT_EQ(many.r.cases_run, 1500u);
  EXPECT_EQ(many.text, one.text);
}

namespace {
// Two workers; the first case drawn blocks its worker until the other has run
// 20 cases (or 30 s pass).
class FirstCaseWaitsForTwenty final : public CaseExecutor {
 public:
  CaseOutcome run(const Case&) override { return {}; }
  size_t parallel() const override { return 2; }
  CaseOutcome run_on(size_t, const Case&) override {
    std::unique_lock lock(m_);
    if (first_) {
      first_ = false;
      went_on_ = cv_.wait_for(lock, 30s, [&] { return others_ >= 20; });
    } else {
      ++others_;
      cv_.notify_all();
    }
    return {};
  }
  bool went_on() {
    std::lock_guard lock(m_);
    return went_on_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool first_ = true, went_on_ = false;
  size_t others_ = 0;
};
}  // namespace

// A slow case holds up its own worker only: the others run on past it (when
// cases ran in batches, each batch waited for its slowest case, and a 2.5 s
// case left the other core idle for 2 s). The history of cases run (for the
// search for earlier cases a failure needs) keeps the order they are drawn in.
TEST(VerifyJobs, ASlowCaseHoldsUpOnlyItsOwnWorker) {
  VerifyOptions o;
  o.cases = 60;
  o.seed = 5;
  FirstCaseWaitsForTwenty side_by_side;
  RecordingExecutor many(side_by_side, 100);
  {
    CaseStream stream(o, many);
    for (size_t i = 0; i < o.cases; ++i) ASSERT_TRUE(stream.next(i).outcome.has_value()) << i;
  }
  EXPECT_TRUE(side_by_side.went_on()) << "the other worker stopped at the slow case";
  // One at a time: each case drawn, then run (and recorded).
  struct OneAtATime final : CaseExecutor {
    CaseOutcome run(const Case&) override { return {}; }
  } alone;
  RecordingExecutor one(alone, 100);
  CaseStream stream(o, one);
  for (size_t i = 0; i < o.cases; ++i) (void)one.run(stream.next(i).case_.value());
  const auto a = many.history(), b = one.history();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(encode_case(a[i]), encode_case(b[i])) << i;
}

// After the cases run ahead are dropped (a failure), the stream goes on: the
// next case is drawn anew, side by side as one at a time.
TEST(VerifyJobs, AfterADropTheStreamGoesOnAsOneAtATime) {
  VerifyOptions o;
  o.cases = 40;
  o.seed = 6;
  struct Two final : CaseExecutor {
    CaseOutcome run(const Case&) override { return {}; }
    size_t parallel() const override { return 2; }
  } two;
  struct One final : CaseExecutor {
    CaseOutcome run(const Case&) override { return {}; }
  } one;
  RecordingExecutor many(two, 100), alone(one, 100);
  CaseStream side_by_side(o, many), in_turn(o, alone);
  for (size_t i = 0; i < o.cases; ++i) {
    const CaseStream::Next a = side_by_side.next(i);
    ASSERT_TRUE(a.outcome.has_value()) << i;
    const Case b = in_turn.next(i).case_.value();
    (void)alone.run(b);
    EXPECT_EQ(encode_case(a.case_.value()), encode_case(b)) << i;
    if (i % 10 == 3) {
      side_by_side.drop_ahead();
      in_turn.drop_ahead();
    }
  }
  EXPECT_EQ(many.history().size(), alone.history().size());
}

// Where cases may share state, or the world is not the simulated one,
// --jobs is refused with exit 2 and the reason.
TEST(VerifyJobs, RefusedWhereCasesMayShareStateOrTheWorldIsNotSimulated) {
  if (kNoFibers != nullptr) GTEST_SKIP() << kNoFibers;
  for (const std::string& args : {std::string("--world threads --jobs 2"),
                                 fmt::format("--impl plugin:{}/chunk_off_by_one.so --world sim --jobs 2", MUTANT_DIR),
                                 std::string("--jobs -1"), std::string("--jobs 300")}) {
    const auto r = testutil::run_command(fmt::format("{} verify --cases 5 --progress off {} 2>&1", COLLCHECK_BIN, args), 60);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--jobs"), std::string::npos) << args << "\n" << r.out;
  }
  const auto ok = testutil::run_command(fmt::format("{} verify --cases 200 --seed 4 --jobs 2 --progress off 2>&1", COLLCHECK_BIN), 120);
  EXPECT_EQ(ok.code, 0) << ok.out;
}

namespace {
// A race's stand-in, the same on every host. In a case of two ranks or more:
// `always` elements or more fail every run (a wide window); `half` or more
// fail one run in two (with `always` set, only once a case has failed: the
// first case to fail is then a wide one); fewer fail only on every third run
// of the same case in a row, so that one run of each shrink step never shows
// it (nor two: the shrinks can hold the same case twice in a row). Cases of
// one rank or no element pass.
class FlakyRace final : public CaseExecutor {
 public:
  FlakyRace(size_t always, size_t half) : always_(always), half_(half), armed_(always == SIZE_MAX) {}
  CaseOutcome run(const Case& c) override {
    const std::string token = encode_case(c);
    streak_ = token == last_ ? streak_ + 1 : 1;
    last_ = token;
    CaseOutcome o;
    if (c.p < 2 || c.count < 1) return o;
    const bool fails =
        c.count >= always_ || (c.count >= half_ ? armed_ && runs_++ % 2 == 0 : streak_ % 3 == 0);
    armed_ |= fails;
    if (fails) {
      o.ok = false;
      o.failure = Failure{"ranks-identical", "  made up\n"};
    }
    return o;
  }

 private:
  size_t always_, half_;
  std::string last_;
  bool armed_;
  size_t runs_ = 0, streak_ = 0;
};
}  // namespace

// A flaky failure's shrink steps each run up to five times, so that a step
// that passed once by chance does not end the shrinking at a large case (CI
// saw the race mutant's shrink stop at 142 elements after two steps). Flaky
// from the start: the failing case, run twice more, passed once. Flaky only
// when small: the first shrinking (one run a step) stops where steps stop
// failing every time, its minimal case is flaky in the replays, and the
// shrinking goes on from there, each step run up to five times.
TEST(VerifyShrink, AFlakyFailureRunsEachShrinkStepSeveralTimes) {
  struct Kind {
    const char* name;
    size_t always, half;
  };
  for (const Kind k : {Kind{"flaky from the start", SIZE_MAX, 1000}, Kind{"flaky when small", 1000, 2}}) {
    for (uint64_t seed : {uint64_t{2}, fresh_seed()}) {
      std::printf("[ seed    ] %s: %#llx\n", k.name, static_cast<unsigned long long>(seed));
      FlakyRace exec(k.always, k.half);
      const auto [r, text] = verify_with_text(small_space("flaky", seed), exec);
      ASSERT_TRUE(r.failed) << text;
      EXPECT_GE(r.original.count, 1000u) << text;
      EXPECT_TRUE(r.flaky()) << text;
      EXPECT_EQ(r.shrink_tries, 5u) << text;
      EXPECT_NE(text.find("flaky, so each step ran up to 5 times"), std::string::npos) << text;
      // Every step that still fails is taken: the smallest such case is reached.
      EXPECT_EQ(r.minimal.p, 2) << text;
      EXPECT_EQ(r.minimal.count, 1u) << text;
      EXPECT_FALSE(r.shrink_budget_reached) << text;
    }
  }
}

namespace {
// A race that a perturbed schedule shows far more often: in a case of two
// ranks or more and one element or more, it fails one run in twelve on the
// natural schedule (perturb 0) and one in two on any perturbed one.
class RareUnlessPerturbed final : public CaseExecutor {
 public:
  CaseOutcome run(const Case& c) override {
    CaseOutcome o;
    if (c.p < 2 || c.count < 1) return o;
    if (c.perturb == 0 ? natural_++ % 12 == 11 : perturbed_++ % 2 == 0) {
      o.ok = false;
      o.failure = Failure{"ranks-identical", "  made up\n"};
    }
    return o;
  }

 private:
  size_t natural_ = 0, perturbed_ = 0;
};
}  // namespace

// A rare race is shrunk under the schedule that shows it most: of the failing
// case's own and three perturbations, 8 runs each, the one that failed most;
// the minimal case keeps it, and the run says which it was.
TEST(VerifyShrink, ARareRaceIsShrunkUnderTheScheduleThatShowsItMost) {
  for (uint64_t seed : {uint64_t{3}, fresh_seed()}) {
    std::printf("[ seed    ] %#llx\n", static_cast<unsigned long long>(seed));
    RareUnlessPerturbed exec;
    VerifyOptions o = small_space("rare", seed);
    o.space.perturb = false;  // every case drawn has the natural schedule
    const auto [r, text] = verify_with_text(o, exec);
    ASSERT_TRUE(r.failed) << text;
    EXPECT_EQ(r.original.perturb, 0u) << text;
    EXPECT_EQ(r.shrink_tries, 5u) << text;
    EXPECT_NE(r.shrink_schedule, 0u) << text;
    EXPECT_EQ(r.schedule_failures, 4u) << text;
    EXPECT_EQ(r.minimal.perturb, r.shrink_schedule) << text;
    EXPECT_NE(text.find(fmt::format("under perturbation seed {:#x}, which failed 4 of 8 runs", r.shrink_schedule)),
              std::string::npos)
        << text;
    EXPECT_EQ(r.minimal.p, 2) << text;
    EXPECT_EQ(r.minimal.count, 1u) << text;
  }
}

// A failure that never shows again (the case failed once, then passed every
// run) is not shrunk (no step would show it: shrinking would spend its whole
// budget finding nothing) and says so, instead of "fails 0 of 20 replays".
TEST(VerifyShrink, AFailureThatNeverShowsAgainSaysSoAndIsNotShrunk) {
  struct OnceOnly final : CaseExecutor {
    CaseOutcome run(const Case& c) override {
      CaseOutcome o;
      if (c.p >= 2 && !failed_) {
        failed_ = true;
        o.ok = false;
        o.failure = Failure{"ranks-identical", "  made up\n"};
      }
      return o;
    }
    bool failed_ = false;
  } exec;
  const auto [r, text] = verify_with_text(small_space("once", 7), exec);
  ASSERT_TRUE(r.failed) << text;
  EXPECT_EQ(r.shrink_runs, 0u) << text;
  EXPECT_EQ(r.replays, 20u) << text;
  EXPECT_EQ(r.replay_failures, 0u) << text;
  EXPECT_EQ(encode_case(r.minimal), encode_case(r.original)) << text;
  EXPECT_NE(text.find("shrunk in 0 steps (0 runs; flaky, and it failed in none of 32 more runs under four schedules, "
                      "so not shrunk)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("flaky: the case failed once, then passed 20 of 20 replays: it did not show again"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("fails 0 of"), std::string::npos) << text;
}
