// Guarded mode's overhead, side by side with unguarded mode in the same run.
//
// A thread world of 4 ranks runs the same calls with and without the
// fingerprint guard (the one guarded replays use: every call's fingerprint is
// posted and compared with every other rank's before the call starts), each
// rank with a flight recorder in both modes (as in a replay), in
// alternating rounds, so that both modes see the same machine state. Three
// workloads:
//   small     2,000 all-reduces of 8 bytes (2 float32): the per-call cost
//   large     1 MiB and 16 MiB all-reduces: the relative cost
//   step      a training step: 200 calls of 8 B to 64 KiB and 4 of 8 MiB
// Each workload's time per round is the slowest rank's (every rank waits at a
// barrier first). Each round runs both modes back to back, so a round's ratio
// guarded / unguarded - 1 compares the two under the same machine state; the
// table prints the median of those paired ratios and of the paired
// differences per call, with their quartiles, so that a reader sees how far
// the host's noise reaches. Run it with ci/bench; it is not a test and is not
// timed in CI.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "harness/check/guard.h"
#include "harness/history/flight_recorder.h"
#include "harness/run/communicator.h"
#include "harness/world/thread_world.h"

using namespace collcheck;

namespace {

using Seconds = std::chrono::duration<double>;

struct Workload {
  std::string name;
  std::vector<size_t> counts;  // float32 elements of each call, in order
};

// Runs `w` once on every rank of `world`, guarded or not; returns the wall
// time from the common start (a barrier) to the last rank's end.
double run_once(ThreadWorld& world, const Workload& w, bool guarded) {
  const int p = world.size();
  const auto epoch = Clock::now();
  std::unique_ptr<CallGuard> guard = guarded ? world.call_guard(epoch, std::chrono::milliseconds(60000)) : nullptr;
  std::vector<double> took(static_cast<size_t>(p));
  const WorldRun run = world.run(
      [&](RankContext& ctx) {
        const int r = ctx.rank();
        // Both modes record every call, as scenario replays do (unguarded
        // mode's diagnosis reads the recorders' dumps): the difference is the guard.
        FlightRecorder rec(r, p, epoch);
        CommOptions o;
        o.recorder = &rec;
        o.algorithm = "ring";
        o.timeout = std::chrono::milliseconds(60000);
        if (guard) o.before_call = [&guard, r](const CallFingerprint& fp) { guard->check(r, fp); };
        Communicator comm(ctx.links(), o);
        size_t most = 0;
        for (size_t n : w.counts) most = std::max(most, n);
        std::vector<float> in(most, 1.0f + static_cast<float>(r)), out(most);
        ctx.barrier(Clock::now() + std::chrono::seconds(60));
        const auto t0 = Clock::now();
        for (size_t n : w.counts) comm.all_reduce(in.data(), out.data(), n, DType::Float32, RedOp::Sum);
        ctx.barrier(Clock::now() + std::chrono::seconds(60));
        took[static_cast<size_t>(r)] = Seconds(Clock::now() - t0).count();
      },
      std::chrono::seconds(600));
  if (!run.ok()) {
    fmt::print(stderr, "guard_bench: a rank failed:\n{}\n", run.failures());
    std::exit(1);
  }
  return *std::max_element(took.begin(), took.end());
}

// The q-quantile of v (nearest rank), q in [0, 1].
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}
double median(const std::vector<double>& v) { return quantile(v, 0.5); }

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(3, std::atoi(argv[1])) : 15;
  const int p = 4;
  std::vector<Workload> loads;
  loads.push_back({"small: 2000 x 8 B", std::vector<size_t>(2000, 2)});
  loads.push_back({"large: 20 x 1 MiB", std::vector<size_t>(20, (1u << 20) / 4)});
  loads.push_back({"large: 5 x 16 MiB", std::vector<size_t>(5, (16u << 20) / 4)});
  Workload step{"step: 200 small + 4 x 8 MiB", {}};
  for (int i = 0; i < 200; ++i) step.counts.push_back(size_t{2} << (i % 14));  // 8 B .. 64 KiB
  for (int i = 0; i < 4; ++i) step.counts.push_back((8u << 20) / 4);
  loads.push_back(step);

  // ci/bench's one table: a row per workload, appended to this file when set.
  std::FILE* table = nullptr;
  if (const char* path = std::getenv("COLLCHECK_BENCH_TABLE")) table = std::fopen(path, "a");
  ThreadWorld world(p);
  fmt::print("guarded mode against unguarded, ring, float32 sum, p = {} (ranks as threads), {} rounds, each "
             "running both modes back to back\n\n",
             p, rounds);
  fmt::print("{:<30} {:>7} {:>14} {:>14} {:>16} {:>10}   {}\n", "workload", "calls", "unguarded", "guarded",
             "per call", "overhead", "overhead, quartiles");
  for (const auto& w : loads) {
    run_once(world, w, false);  // warm up: buffers, scratch, the world's threads
    run_once(world, w, true);
    std::vector<double> plain, guarded;
    for (int k = 0; k < rounds; ++k) {
      // Alternate which goes first, so neither always follows the other.
      if (k % 2 == 0) {
        plain.push_back(run_once(world, w, false));
        guarded.push_back(run_once(world, w, true));
      } else {
        guarded.push_back(run_once(world, w, true));
        plain.push_back(run_once(world, w, false));
      }
    }
    std::vector<double> ratio, per_call;  // of each round's pair
    for (size_t k = 0; k < plain.size(); ++k) {
      ratio.push_back((guarded[k] / plain[k] - 1) * 100);
      per_call.push_back((guarded[k] - plain[k]) / static_cast<double>(w.counts.size()) * 1e6);
    }
    const double a = median(plain), b = median(guarded), over = median(ratio), per_call_us = median(per_call);
    fmt::print("{:<30} {:>7} {:>12.2f} ms {:>12.2f} ms {:>13.2f} us {:>+9.1f} %   {:+.1f} % .. {:+.1f} %\n", w.name,
               w.counts.size(), a * 1e3, b * 1e3, per_call_us, over, quantile(ratio, 0.25), quantile(ratio, 0.75));
    if (table) {
      const bool small = w.name.rfind("small", 0) == 0;
      fmt::print(table, "guarded mode\t{}\t{:.2f} us/call\tunguarded {:.2f} ms\t{:+.1f} %\t{}\n", w.name, per_call_us,
                 a * 1e3, over, small ? "<= 10 us/call" : "<= 2 %");
    }
  }
  if (table) std::fclose(table);
  fmt::print("\nunguarded, guarded: the medians of the rounds. per call: the median of the rounds' (guarded - "
             "unguarded) / calls; overhead: the median of the rounds' guarded / unguarded - 1, and its quartiles. "
             "Goals (issue 16): at most 10 us per 8-byte call, at most 2 % at 1 MiB and above.\n");
  return 0;
}
