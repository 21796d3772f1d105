#include "harness/soak/soak.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "harness/metrics/metrics.h"
#include "harness/model/data.h"
#include "harness/peers/peer_registry.h"
#include "harness/run/scenario_runner.h"
#include "harness/run/sweep.h"
#include "harness/soak/algorithms.h"
#include "harness/soak/results_file.h"
#include "harness/world/mpi_world.h"
#include "properties/detection.h"
#include "properties/executor.h"
#include "properties/verify.h"

namespace collcheck {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {  // the second one: end now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

// The workloads, in the order of their weights.
const char* const kWorkloads[] = {"verify", "faults", "perf", "algorithms"};

// What one unit is, drawn by the root from the master seed and the unit's index.
struct Unit {
  size_t index = 0;
  std::string workload;
  size_t impl = 0;
  uint64_t seed = 0;
};

Unit draw_unit(const Plan& p, uint64_t master, size_t index) {
  Unit u;
  u.index = index;
  u.seed = splitmix64(master ^ splitmix64(index + 1));
  const double w[] = {p.verify.weight, p.faults.weight, p.perf.weight, p.algorithms.weight};
  const double total = w[0] + w[1] + w[2] + w[3];
  const double x = static_cast<double>(splitmix64(u.seed ^ 0x5bd1e995) >> 11) / 9007199254740992.0 * total;
  double acc = 0;
  u.workload = kWorkloads[3];
  for (int k = 0; k < 4; ++k) {
    acc += w[k];
    if (w[k] > 0 && x < acc) {
      u.workload = kWorkloads[k];
      break;
    }
  }
  u.impl = static_cast<size_t>(splitmix64(u.seed ^ 0x27d4eb2f) % p.impls.size());
  return u;
}

bool is_reference(const std::string& impl) { return impl == "ring" || impl == "tree" || impl == "dbtree"; }

// One implementation of the plan, ready to run.
struct Lane {
  PlanImpl spec;
  RunConfig cfg;
  CaseSpace space;
  std::unique_ptr<CaseExecutor> exec;  // the thread world's (made before any thread starts)
  std::string note;                    // what this lane leaves out, said once in the header
};

std::string shape_of(const Case& c) {
  return fmt::format("p={} count={} {}", c.p, c.count, c.inplace ? "in-place" : "out-of-place");
}

class Soak {
 public:
  Soak(const SoakOptions& o, std::FILE* out) : o_(o), out_(out), mpi_(MpiWorld::get()) {}
  Soak(const Soak&) = delete;
  Soak& operator=(const Soak&) = delete;

  void prepare_lanes(bool executors) {
    algorithm_peers_ = o_.plan.algorithms.peers.empty() ? default_algorithm_peers() : o_.plan.algorithms.peers;
    if (o_.plan.algorithms.weight > 0 && algorithm_peers_.empty())
      throw PlanError(fmt::format("{}: workloads.algorithms: no peer algorithm to run", o_.plan.file));
    const WorldKind kind = mpi_ ? WorldKind::Mpi : WorldKind::Threads;
    const int max_ranks = mpi_ ? mpi_->size() : o_.plan.max_ranks;
    for (const auto& x : o_.plan.impls) {
      Lane l;
      l.spec = x;
      auto bad = [&](const std::string& what) {
        return PlanError(fmt::format("{}:{}: implementations: {}", o_.plan.file, x.line, what));
      };
      try {
        l.cfg.impl = make_implementation(x.impl);
        l.cfg.peers = x.against.empty() ? default_peers(*l.cfg.impl) : make_implementations(x.against);
      } catch (const ImplementationError& e) {
        throw bad(e.what());
      }
      l.cfg.timeout = std::chrono::milliseconds(static_cast<long long>(o_.plan.timeout_s * 1000));
      std::vector<ImplPtr> all{l.cfg.impl};
      all.insert(all.end(), l.cfg.peers.begin(), l.cfg.peers.end());
      for (const auto& i : all) {
        if (auto why = i->unavailable()) throw bad(fmt::format("{} cannot run here: {}", i->name(), *why));
        if (auto why = i->unsupported_world(kind)) throw bad(fmt::format("{}: {}", i->name(), *why));
      }
      l.space.max_ranks = max_ranks;
      for (const auto& i : all) {
        try {
          i->fit_world(kind, l.space.max_ranks, [](const std::string&) {});
        } catch (const ImplementationError& e) {
          throw bad(e.what());
        }
      }
      l.space.max_count = o_.plan.verify.max_count;
      l.space.large_bytes = o_.plan.verify.large_bytes;
      l.space.dtypes = o_.plan.dtypes;
      l.space.ops = o_.plan.ops;
      const auto skipped = restrict_space(l.space, all);
      if (l.space.dtypes.empty() || l.space.ops.empty())
        throw bad(fmt::format("{} can reduce none of the plan's dtype/op pairs", x.impl));
      size_t n = 0;
      for (const auto& [why, pairs] : skipped) n += pairs.size();
      if (n) l.note = fmt::format("{} dtype/op pair(s) left out ({})", n, skipped.begin()->first);
      if (!is_reference(x.impl) && o_.plan.perf.weight > 0)
        l.note += fmt::format("{}perf rows run the reference algorithms only; {} takes verify and faults units",
                              l.note.empty() ? "" : "; ", x.impl);
      if (!mpi_ && executors) l.exec = make_executor(l.cfg, l.cfg.impl->untrusted());
      lanes_.push_back(std::move(l));
    }
  }

  uint64_t memory_needed() const {
    uint64_t need = 0;
    for (const auto& l : lanes_)
      need = std::max(need, verify_memory_needed(l.space, mpi_ ? 1 : l.space.max_ranks, l.cfg.peers.size()));
    if (o_.plan.perf.weight > 0) {
      const uint64_t ranks = mpi_ ? 1 : static_cast<uint64_t>(o_.plan.max_ranks);
      need = std::max<uint64_t>(need, 4 * ranks * o_.plan.perf.max_bytes);
    }
    return need;
  }

  SoakResult run() {
    // The stop signals first: a SIGTERM while --resume reads a long file back
    // ends the soak with its summary, not by the default action.
    install_signals();
    open_results();
    const auto t0 = t0_ = Clock::now();
    auto last_progress = t0, last_metrics = t0;
    print_header();
    SoakResult res;
    size_t index = next_index_;
    for (;; ++index) {
      const double elapsed = elapsed_before_ + seconds_since(t0);
      if (g_signal) {
        res.stop_reason = g_signal == SIGINT ? "SIGINT" : "SIGTERM";
        break;
      }
      if (elapsed >= o_.duration_s) {
        res.stop_reason = "duration";
        break;
      }
      if (!write_error().empty()) {
        res.stop_reason = "results unwritable";
        break;
      }
      const Unit u = draw_unit(o_.plan, o_.seed, index);
      remaining_s_ = o_.duration_s - elapsed;
      if (!lanes_[u.impl].cfg.impl || (u.workload == "perf" && !is_reference(lanes_[u.impl].spec.impl)) ||
          (u.workload == "algorithms" && mpi_)) {
        // perf on a peer library, or algorithms in the MPI world: the unit goes
        // to verify instead (said in the header)
        Unit v = u;
        v.workload = "verify";
        if (!run_unit(v, elapsed)) { res.stop_reason = "world lost"; break; }
      } else if (!run_unit(u, elapsed)) {
        res.stop_reason = "world lost";
        break;
      }
      const auto now = Clock::now();
      totals_.elapsed_s = elapsed_before_ + seconds_since(t0);
      if (o_.metrics) o_.metrics->elapsed(totals_.elapsed_s, std::max(0.0, o_.duration_s - totals_.elapsed_s));
      if (o_.progress_tty && now - last_progress > std::chrono::milliseconds(500)) {
        last_progress = now;
        std::fprintf(stderr, "\r%s ", progress_line(u).c_str());
        std::fflush(stderr);
      } else if (!o_.progress_tty && seconds_since(last_progress) >= o_.progress_interval_s) {
        last_progress = now;
        fmt::print(out_, "{}\n", progress_line(u));
        std::fflush(out_);
      }
      if (seconds_since(last_metrics) >= o_.metrics_interval_s) {
        last_metrics = now;
        export_metrics();
      }
    }
    if (o_.progress_tty) std::fprintf(stderr, "\r%100s\r", "");
    if (mpi_) (void)mpi_->broadcast(fmt::format("E{}", res.exit_code()), Clock::now() + std::chrono::seconds(30));
    totals_.elapsed_s = elapsed_before_ + seconds_since(t0);
    res.totals = totals_;
    if (o_.metrics) o_.metrics->elapsed(totals_.elapsed_s, std::max(0.0, o_.duration_s - totals_.elapsed_s));
    append({{"type", "end"}, {"t", totals_.elapsed_s}, {"reason", res.stop_reason}, {"summary", summary_json(res)}});
    export_metrics();
    print_summary(res);
    if (o_.metrics && o_.push)
      if (const std::string why = o_.metrics->finish_pushes(); !why.empty())
        fmt::print(stderr, "collcheck soak: warning: --pushgateway: {}\n", why);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    return res;
  }

  // Every process but the root's: what rank 0 says, until it says stop.
  int serve(World& world) {
    install_signals();  // a signal ends the soak through rank 0, never here
    const auto idle = std::chrono::seconds(600) + 8 * std::chrono::milliseconds(static_cast<long long>(o_.plan.timeout_s * 1000));
    for (;;) {
      const auto cmd = world.broadcast("", Clock::now() + idle);
      if (!cmd) {
        std::fprintf(stderr, "collcheck soak: rank %d: no word from rank 0 within %.0f s; ending\n",
                     mpi_ ? mpi_->rank() : -1, std::chrono::duration<double>(idle).count());
        return 1;
      }
      if (cmd->starts_with("E")) return std::atoi(cmd->c_str() + 1);
      const json j = json::parse(cmd->substr(1));
      const std::string w = j.at("w");
      Lane& l = lanes_.at(j.at("x").get<size_t>());
      if (w == "verify") {
        const auto code = serve_cases(world, l.cfg);
        if (!code) return 1;
      } else if (w == "faults") {
        const Scenario s = parse_scenario(j.at("scenario").get<std::string>(), "soak scenario");
        ReplayOptions ro;
        (void)replay_scenario(s, ro, world);
      } else if (w == "perf") {
        std::FILE* sink = std::fopen("/dev/null", "w");
        (void)run_sweep(perf_options(l, j), sink ? sink : stdout);
        if (sink) std::fclose(sink);
      }
      world.drain(Clock::now() + std::chrono::seconds(120));
    }
  }

 private:
  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

  static void install_signals() {
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  }

  // ---- the results file (results_file.h: the lock, one world, checked writes)
  void open_results() {
    const std::string world = mpi_ ? fmt::format("mpi:{}", mpi_->size()) : "threads";
    results_ = std::make_unique<ResultsFile>(o_.results_path, o_.resume, world);
    if (o_.resume) restore();
    if (!o_.resume)
      append({{"type", "start"},
              {"version", o_.version},
              {"seed", fmt::format("{:#x}", o_.seed)},
              {"duration_s", o_.duration_s},
              {"world", world},
              {"plan", plan_to_yaml(o_.plan)},
              {"plan_file", o_.plan.file}});
    if (!results_->error().empty()) throw PlanError(fmt::format("--results {}: {}", o_.results_path, results_->error()));
  }

  void restore() {
    results_->read_back(
        [&](const json& j, size_t line) {
          const std::string type = j.value("type", "");
          if (type == "unit") {
            try {
              count_unit(j);
              next_index_ = std::max(next_index_, j.at("i").get<size_t>() + 1);
              elapsed_before_ = std::max(elapsed_before_, j.at("t").get<double>());
            } catch (const json::exception& e) {
              throw PlanError(fmt::format("--resume: {}:{}: a unit line without its fields ({})", o_.results_path,
                                          line, e.what()));
            }
          } else if (type == "end") {
            elapsed_before_ = std::max(elapsed_before_, j.value("t", 0.0));
          }
        },
        out_);
    totals_.elapsed_s = elapsed_before_;
    fmt::print(out_, "resuming {}: {} units done in {:.0f} s, {} failed; going on from unit {}\n", o_.results_path,
               totals_.units, elapsed_before_, totals_.failed_units, next_index_);
  }

  // A full disk stops the soak (exit 5), never a PASS over a cut file.
  void append(const json& j) {
    if (results_) results_->append(j);
  }
  std::string write_error() const { return results_ ? results_->error() : std::string(); }

  // ---- totals and groups: one place, for live units and for --resume
  void count_unit(const json& j) {
    const std::string w = j.at("workload"), impl = j.at("impl");
    ++totals_.units;
    ++totals_.by_workload[w];
    totals_.cases_by_workload[w] += j.value("cases", size_t{1});
    auto& wi = totals_.by_workload_impl[{w, impl}];
    ++wi.units;
    wi.cases += j.value("cases", size_t{1});
    if (j.at("ok").get<bool>()) return;
    ++wi.failed;
    ++totals_.failed_units;
    const std::string sig = j.at("signature");
    auto& g = totals_.groups[sig];
    const size_t i = j.at("i");
    if (g.count++ == 0) {
      g.signature = sig;
      g.workload = w;
      g.impl = impl;
      g.property = j.value("property", "");
      g.first_unit = i;
      g.replay = j.value("replay", "");
      g.detail = j.value("detail", "");
    }
    g.last_unit = i;
  }

  // ---- one unit
  bool run_unit(const Unit& u, double t) {
    Lane& l = lanes_[u.impl];
    json j{{"type", "unit"}, {"i", u.index}, {"workload", u.workload}, {"impl", l.spec.impl},
           {"seed", fmt::format("{:#x}", u.seed)}};
    bool world_ok = true;
    const auto t0 = Clock::now();
    if (u.workload == "verify") world_ok = verify_unit(l, u, j);
    else if (u.workload == "faults") faults_unit(u, j);
    else if (u.workload == "algorithms") algorithms_unit(u, j);
    else perf_unit(l, u, j);
    // What a failed unit left in flight must not reach a later one.
    if (mpi_ && world_ok) mpi_->drain(Clock::now() + std::chrono::seconds(120));
    j["seconds"] = seconds_since(t0);
    j["t"] = t + seconds_since(t0);
    count_unit(j);
    append(j);
    return world_ok;
  }

  bool verify_unit(Lane& l, const Unit& u, json& j) {
    VerifyOptions vo;
    vo.impl_spec = l.spec.impl;
    vo.against = l.spec.against;
    vo.launcher = o_.launcher;
    vo.run_flags = o_.run_flags;
    if (o_.plan.timeout_s != 10) vo.run_flags += fmt::format(" --timeout {}", o_.plan.timeout_s);
    vo.space = l.space;
    vo.cases = o_.plan.verify.cases;
    vo.seed = u.seed;
    vo.token_dir = std::filesystem::absolute(o_.results_path).parent_path().string();  // next to the results
    vo.first_size = static_cast<size_t>(splitmix64(u.seed ^ 0x85ebca6b) % (rc::kNominalSize + 1));
    vo.shrink_budget_s = 60;
    vo.repeat = 5;
    // The duration and SIGTERM bound the unit too: a unit shrinking a hang
    // kept a 20 s soak running for 126 s. It stops at its next case and is
    // written as interrupted, with what it found.
    vo.should_stop = [this] { return g_signal != 0 || elapsed_before_ + seconds_since(t0_) >= o_.duration_s; };
    // A signal cuts the case in flight short too (an isolated plugin's child is
    // killed): a scheduler's SIGKILL follows its SIGTERM by about 30 s, and one
    // large case took 30.6 s. The duration waits for the case.
    vo.cut_case = [] { return g_signal != 0; };
    char* buf = nullptr;
    size_t len = 0;
    std::FILE* report = open_memstream(&buf, &len);
    VerifyResult r;
    bool world_ok = true;
    std::unique_ptr<WorldExecutor> wexec;
    if (mpi_) {
      (void)mpi_->broadcast("U" + json{{"w", "verify"}, {"x", u.impl}}.dump(), Clock::now() + std::chrono::seconds(60));
      wexec = std::make_unique<WorldExecutor>(*mpi_, l.cfg);
    }
    CaseExecutor& exec = mpi_ ? static_cast<CaseExecutor&>(*wexec) : *l.exec;
    try {
      r = run_verify(vo, exec, report);
    } catch (const WorldLost& lost) {
      r.failed = true;
      r.failure = lost.outcome.failure;
      r.minimal = r.original = wexec->last_case();
      r.cases_run = std::max<size_t>(r.cases_run, 1);
      world_ok = false;
    }
    if (wexec && world_ok) wexec->stop(0);
    std::fclose(report);
    const std::string text(buf ? buf : "", len);
    std::free(buf);
    j["cases"] = r.cases_run;
    j["ok"] = !r.failed && !r.harness_error;
    if (r.interrupted) j["interrupted"] = true;
    const std::string property = r.harness_error ? "harness" : r.failure.property;
    if (o_.metrics) {
      const size_t passed = r.failed || r.harness_error ? r.cases_run - 1 : r.cases_run;
      o_.metrics->unit(l.spec.impl, "verify", "", passed);
      if (r.failed || r.harness_error) o_.metrics->unit(l.spec.impl, "verify", property, 1);
    }
    if (r.failed || r.harness_error) {
      j["property"] = property;
      j["signature"] = fmt::format("verify | {} | {} | {}/{} | {}", l.spec.impl, property, dtype_name(r.minimal.dtype),
                                   op_name(r.minimal.op), shape_of(r.minimal));
      j["minimal"] = encode_case(r.minimal);
      j["replay"] = replay_command(vo, r.minimal);
      j["detail"] = r.failure.detail.empty() ? text : r.failure.detail;
    }
    return world_ok;
  }

  void faults_unit(const Unit& u, json& j) {
    const int lo = mpi_ ? mpi_->size() : std::max(2, o_.plan.min_ranks);
    const int hi = mpi_ ? mpi_->size() : std::max(lo, std::min(o_.plan.max_ranks, 16));
    const rc::Random rnd(u.seed);
    DetectionCase dc = gen_detection_case(lo, hi)(rnd, rc::kNominalSize).value();
    // The scenario keeps the algorithm it was generated for: its fault is
    // placed where that algorithm sends (an edge it uses, a transfer it makes).
    if (mpi_) dc.clean.world = "mpi";
    const Scenario s = dc.scenario();
    const std::string nemesis = dc.fault ? dc.fault->kind : "none";
    DetectionOutcome out;
    if (mpi_) {
      (void)mpi_->broadcast("U" + json{{"w", "faults"}, {"x", u.impl}, {"scenario", scenario_to_yaml(s)}}.dump(),
                            Clock::now() + std::chrono::seconds(60));
      out = check_detection(
          dc, [&](const Scenario& sc) { return replay_scenario(sc, ReplayOptions{}, *mpi_); }, false);
    } else {
      out = check_detection(dc);
    }
    if (!out.slow_once.empty()) j["slow_once"] = out.slow_once;
    std::string outcome;
    if (out.ok) outcome = dc.fault ? "detected" : "clean";
    else if (out.slow) outcome = "too_slow";
    else if (!dc.fault) outcome = "false_alarm";
    else if (out.result.diagnoses.empty()) outcome = "missed";
    else outcome = "misdiagnosed";
    j["impl"] = s.impl;
    j["cases"] = 1;
    j["ok"] = out.ok;
    j["nemesis"] = nemesis;
    j["outcome"] = outcome;
    j["ranks"] = s.ranks;
    if (!out.result.diagnoses.empty()) j["diagnosis"] = diagnosis_name(out.result.diagnoses.front().kind);
    if (out.result.time_to_diagnosis >= 0) j["time_to_diagnosis_s"] = out.result.time_to_diagnosis;
    // Arrival skew: the most skewed call of the run, and who came last.
    double skew = -1;
    int straggler = -1;
    std::map<uint64_t, std::vector<std::pair<double, int>>> starts;
    for (const auto& d : out.result.dumps)
      for (const auto& c : d.calls)
        if (c.t_started >= 0) starts[c.seq].emplace_back(c.t_started, d.rank);
    for (const auto& [seq, v] : starts) {
      if (v.size() < 2) continue;
      const auto [lo_it, hi_it] = std::minmax_element(v.begin(), v.end());
      if (hi_it->first - lo_it->first > skew) {
        skew = hi_it->first - lo_it->first;
        straggler = hi_it->second;
      }
    }
    if (skew >= 0) {
      j["skew_s"] = skew;
      j["straggler"] = straggler;
    }
    if (o_.metrics) {
      o_.metrics->unit(s.impl, "faults", out.ok ? "" : "detection_" + outcome);
      o_.metrics->fault(nemesis, outcome, dc.fault ? out.result.time_to_diagnosis : -1);
      if (skew >= 0) o_.metrics->arrival(skew, straggler);
      for (const auto& d : out.result.dumps)
        if (d.rank == 0)
          for (const auto& c : d.calls)
            if (c.t_started >= 0 && c.t_completed >= c.t_started)
              o_.metrics->collective(c.impl.empty() ? s.impl : c.impl, std::string(op_name(c.op)),
                                     std::string(dtype_name(c.dtype)), c.count * dtype_size(c.dtype),
                                     c.t_completed - c.t_started);
    }
    if (!out.ok) {
      j["property"] = "detection_" + outcome;
      j["signature"] = fmt::format("faults | {} | {} | {} | {}", s.impl, nemesis, outcome,
                                   out.result.diagnoses.empty() ? "no diagnosis"
                                                                : std::string(diagnosis_name(out.result.diagnoses.front().kind)));
      // The scenario, kept where `collcheck replay` reads it.
      const std::string file = fmt::format("{}.unit-{}.yaml", o_.results_path, u.index);
      std::ofstream(file) << "# soak unit " << u.index << ": " << out.why << "\n" << scenario_to_yaml(s);
      j["replay"] = fmt::format("{}collcheck replay {}{}", o_.launcher, file, mpi_ ? " --world mpi" : "");
      j["detail"] = out.why;
    }
  }

  SweepOptions perf_options(const Lane& l, const json& j) const {
    SweepOptions so;
    so.min_bytes = so.max_bytes = j.at("bytes").get<size_t>();
    so.factor = 2;
    so.dtypes = {*parse_dtype(j.at("dtype").get<std::string>())};
    so.ops = {RedOp::Sum};
    so.algos = {l.spec.impl};
    so.iters = o_.plan.perf.iters;
    so.warmup = o_.plan.perf.warmup;
    so.check = true;
    so.ranks = j.at("p").get<int>();
    so.seed = j.at("seed").get<uint64_t>();
    so.timeout = l.cfg.timeout;
    so.memcpy_peer = false;
    return so;
  }

  void perf_unit(Lane& l, const Unit& u, json& j) {
    // A power of two between the plan's sizes, a dtype of its perf list.
    std::vector<size_t> sizes;
    for (size_t b = o_.plan.perf.min_bytes; b <= o_.plan.perf.max_bytes; b *= 2) sizes.push_back(b);
    const uint64_t h = splitmix64(u.seed ^ 0x9e3779b9);
    size_t bytes = sizes[h % sizes.size()];
    // A row must not run far past the soak's end: halve it while 4 times the
    // slowest rate seen so far (larger rows run slower per byte, and an MPI
    // world on few cores much slower) says it would not end in the time left.
    // Until a row of 1 MiB or more has been timed, rows stay at 1 MiB.
    if (perf_s_per_byte_ == 0) bytes = std::min(bytes, std::max(o_.plan.perf.min_bytes, size_t{1} << 20));
    while (bytes > o_.plan.perf.min_bytes && 4 * perf_s_per_byte_ * static_cast<double>(bytes) > remaining_s_) bytes /= 2;
    const DType t = o_.plan.perf.dtypes[(h >> 20) % o_.plan.perf.dtypes.size()];
    const int lo = std::min(std::max(2, o_.plan.min_ranks), o_.plan.max_ranks);
    const int p = mpi_ ? mpi_->size() : lo + static_cast<int>((h >> 40) % static_cast<uint64_t>(o_.plan.max_ranks - lo + 1));
    const json desc{{"w", "perf"}, {"x", u.impl}, {"bytes", bytes}, {"dtype", std::string(dtype_name(t))}, {"p", p},
                    {"seed", u.seed & 0xffffffff}};
    if (mpi_) (void)mpi_->broadcast("U" + desc.dump(), Clock::now() + std::chrono::seconds(60));
    std::FILE* sink = std::fopen("/dev/null", "w");
    const auto perf_t0 = Clock::now();
    const SweepResult r = run_sweep(perf_options(l, desc), sink ? sink : stdout);
    if (sink) std::fclose(sink);
    j["cases"] = 1;
    if (r.rows.empty()) {
      j["ok"] = false;
      j["property"] = "perf_row";
      j["signature"] = fmt::format("perf | {} | no row | {}", l.spec.impl, dtype_name(t));
      j["detail"] = "the sweep produced no row";
      if (o_.metrics) o_.metrics->unit(l.spec.impl, "perf", "perf_row");
      return;
    }
    const SweepRow& row = r.rows.front();
    if (row.bytes >= (size_t{1} << 20))
      perf_s_per_byte_ = std::max(perf_s_per_byte_, seconds_since(perf_t0) / static_cast<double>(row.bytes));
    j["bytes"] = row.bytes;
    j["dtype"] = dtype_name(row.dtype);
    j["p"] = desc.at("p");
    j["time_us"] = row.time_us;
    j["busbw_gbps"] = row.busbw;
    j["wrong"] = row.wrong;
    const bool ok = row.wrong == 0 && row.error.empty();
    j["ok"] = ok;
    if (o_.metrics) {
      o_.metrics->unit(l.spec.impl, "perf", ok ? "" : "results_match_oracle");
      o_.metrics->wrong_elements(l.spec.impl, row.wrong);
      o_.metrics->collective(l.spec.impl, "sum", std::string(dtype_name(row.dtype)), row.bytes, row.time_us / 1e6);
      o_.metrics->busbw(l.spec.impl, std::string(dtype_name(row.dtype)), row.bytes, row.busbw * 1e9);
    }
    if (!ok) {
      j["property"] = "results_match_oracle";
      j["signature"] = fmt::format("perf | {} | results_match_oracle | {}/sum | {} B", l.spec.impl, dtype_name(row.dtype),
                                   row.bytes);
      // Everything the row ran under: its iterations and its deadline too (a
      // row that failed by its deadline passed when replayed without it).
      j["replay"] = fmt::format("{}collcheck sweep -b {} -e {} -d {} -o sum --algo {} --ranks {} --seed {} -n {} -w {} "
                                "--timeout {}{}",
                                o_.launcher, row.bytes, row.bytes, dtype_name(row.dtype), l.spec.impl,
                                desc.at("p").get<int>(), desc.at("seed").get<uint64_t>(), o_.plan.perf.iters,
                                o_.plan.perf.warmup, std::chrono::duration<double>(l.cfg.timeout).count(),
                                mpi_ ? " --world mpi" : "");
      j["detail"] = fmt::format("{} wrong element(s), max error {:.3g} units{}{}", row.wrong, row.max_err_units,
                                row.error.empty() ? "" : ": ", row.error);
    }
  }

  void algorithms_unit(const Unit& u, json& j) {
    const auto& peers = algorithm_peers_;
    const uint64_t h = splitmix64(u.seed ^ 0x2545f491);
    AlgorithmUnit a;
    a.peer = peers[h % peers.size()];
    const int lo = std::min(std::max(2, o_.plan.min_ranks), o_.plan.max_ranks);
    a.ranks = lo + static_cast<int>((h >> 32) % static_cast<uint64_t>(o_.plan.max_ranks - lo + 1));
    a.cases = o_.plan.algorithms.cases;
    a.seed = u.seed;
    a.call_timeout_s = o_.plan.timeout_s;
    a.deadline_s = o_.plan.algorithms.deadline_s;
    // Signals and the duration end the child: a unit can take a minute.
    const AlgorithmOutcome r = run_algorithm_unit(self_exe(), a, [this] {
      return g_signal != 0 || elapsed_before_ + seconds_since(t0_) >= o_.duration_s;
    });
    j["impl"] = a.peer;
    j["p"] = a.ranks;
    j["cases"] = r.cases;
    // As a verify unit's: a unit cut short that found nothing is not a
    // failure, and says it was interrupted.
    j["ok"] = r.ok || r.interrupted;
    for (const auto& [name, n] : r.deviations) j["deviations"][name] = n;
    if (r.interrupted) j["interrupted"] = true;
    if (o_.metrics) o_.metrics->unit(a.peer, "algorithms", r.ok || r.interrupted ? "" : r.property);
    if (r.ok || r.interrupted) return;
    j["property"] = r.harness_error ? "harness" : r.property;
    j["signature"] = fmt::format("algorithms | {} | {} | {}", a.peer, r.property,
                                 r.minimal.empty() ? fmt::format("np {}", a.ranks) : r.minimal);
    j["replay"] = r.replay.empty() ? r.command : r.replay;
    j["command"] = r.command;
    j["detail"] = r.detail;
  }

  static std::string self_exe() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string("collcheck") : p.string();
  }

  // ---- what the user sees
  void print_header() {
    fmt::print(out_, "collcheck soak: {} s, seed {:#x}, {}, plan {}\n", o_.duration_s, o_.seed,
               mpi_ ? fmt::format("MPI world of {} processes", mpi_->size())
                    : fmt::format("ranks as threads (p {} to {})", o_.plan.min_ranks, o_.plan.max_ranks),
               o_.plan.file);
    fmt::print(out_, "  workloads (weight): verify {} ({} cases a unit), faults {} (random fault scenarios on the "
                     "reference algorithms: collcheck's own diagnosis), perf {} (checked sweep rows, {} to {} B)\n",
               o_.plan.verify.weight, o_.plan.verify.cases, o_.plan.faults.weight, o_.plan.perf.weight,
               o_.plan.perf.min_bytes, o_.plan.perf.max_bytes);
    if (o_.plan.algorithms.weight > 0)
      fmt::print(out_, "  algorithms {} ({} cases a unit, each a child collcheck verify of one of: {}){}\n",
                 o_.plan.algorithms.weight, o_.plan.algorithms.cases, fmt::join(algorithm_peers_, " "),
                 mpi_ ? "; in the MPI world its units run verify instead (an algorithm is fixed for an MPI process's life)"
                      : "");
    for (const auto& l : lanes_) {
      std::string peers;
      for (const auto& p : l.cfg.peers) peers += (peers.empty() ? "" : ",") + p->name();
      fmt::print(out_, "  {} against {}{}\n", l.spec.impl, peers.empty() ? "the oracle alone" : peers,
                 l.note.empty() ? "" : "; " + l.note);
    }
    fmt::print(out_, "  results: {} (one JSON line per unit; --resume continues it)\n", o_.results_path);
    std::fflush(out_);
  }

  std::string progress_line(const Unit& u) const {
    const double left = std::max(0.0, o_.duration_s - totals_.elapsed_s);
    auto hms = [](double s) {
      const auto t = static_cast<long>(s);
      return fmt::format("{:02}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
    };
    size_t cases = 0;
    for (const auto& [w, n] : totals_.cases_by_workload) cases += n;
    return fmt::format("[soak] {} units, {} cases, {} failed ({} signatures), {} elapsed, {} left, last: {} {}",
                       totals_.units, cases, totals_.failed_units, totals_.groups.size(), hms(totals_.elapsed_s),
                       hms(left), u.workload, lanes_[u.impl].spec.impl);
  }

  json summary_json(const SoakResult& r) const {
    json s{{"units", totals_.units}, {"failed_units", totals_.failed_units}, {"elapsed_s", totals_.elapsed_s},
           {"seed", fmt::format("{:#x}", o_.seed)}, {"stop_reason", r.stop_reason}, {"exit_code", r.exit_code()}};
    for (const auto& [w, n] : totals_.by_workload) s["units_by_workload"][w] = n;
    for (const auto& [w, n] : totals_.cases_by_workload) s["cases_by_workload"][w] = n;
    for (const auto& [k, v] : totals_.by_workload_impl)
      s["by_workload_impl"].push_back(
          {{"workload", k.first}, {"impl", k.second}, {"units", v.units}, {"cases", v.cases}, {"failed", v.failed}});
    s["failure_groups"] = json::array();
    for (const auto& [sig, g] : totals_.groups)
      s["failure_groups"].push_back({{"signature", sig}, {"count", g.count}, {"first_unit", g.first_unit},
                                     {"last_unit", g.last_unit}, {"replay", g.replay}});
    return s;
  }

  void print_summary(const SoakResult& r) {
    fmt::print(out_, "\ncollcheck soak: {} after {:.0f} s of {:.0f} s{}\n",
               r.stop_reason == "duration" ? "done" : "stopped by " + r.stop_reason, totals_.elapsed_s, o_.duration_s,
               r.stop_reason == "SIGINT" || r.stop_reason == "SIGTERM"
                   ? fmt::format(" (--resume --results {} goes on)", o_.results_path)
                   : "");
    fmt::print(out_, "  {:<8} {:<24} {:>8} {:>10} {:>8}\n", "workload", "impl", "units", "cases", "failed");
    for (const auto& [k, v] : totals_.by_workload_impl)
      fmt::print(out_, "  {:<8} {:<24} {:>8} {:>10} {:>8}\n", k.first, k.second, v.units, v.cases, v.failed);
    fmt::print(out_, "  {:<8} {:<24} {:>8} {:>10} {:>8}\n", "all", "", totals_.units, [&] {
      size_t n = 0;
      for (const auto& [w, c] : totals_.cases_by_workload) n += c;
      return n;
    }(), totals_.failed_units);
    fmt::print(out_, "  (cases: verify cases, fault scenarios, sweep rows)\n");
    if (!write_error().empty())
      fmt::print(out_, "ERROR: --results {}: {}; the soak stopped, and the units above are not all in the file (exit {})\n",
                 o_.results_path, write_error(), r.exit_code());
    if (totals_.groups.empty() && r.exit_code() != 0) {
      fmt::print(out_, "STOPPED: {} units, no failure so far; the run was cut short by {} (exit {}), not a pass\n",
                 totals_.units, r.stop_reason, r.exit_code());
    } else if (totals_.groups.empty()) {
      fmt::print(out_, "PASS: {} units, no failure\n", totals_.units);
    } else {
      fmt::print(out_, "FAIL: {} failed unit(s) in {} signature(s):\n", totals_.failed_units, totals_.groups.size());
      for (const auto& [sig, g] : totals_.groups)
        fmt::print(out_, "  {:>6} x {}\n         first unit {}, last {}; replay: {}\n", g.count, sig, g.first_unit,
                   g.last_unit, g.replay.empty() ? "(none)" : g.replay);
    }
    std::fflush(out_);
  }

  void export_metrics() {
    if (!o_.metrics) return;
    if (!o_.metrics_textfile.empty()) {
      try {
        o_.metrics->write_textfile(o_.metrics_textfile);
      } catch (const std::exception& e) {
        fmt::print(stderr, "collcheck soak: warning: --metrics-textfile: {}\n", e.what());
      }
    }
    if (o_.push) o_.metrics->push();  // on the pusher's thread, bounded; failures are said when they start and end
  }

 public:
  std::vector<Lane> lanes_;

 private:
  const SoakOptions& o_;
  std::FILE* out_;
  MpiWorld* mpi_;
  Clock::time_point t0_ = Clock::now();  // when this part of the soak began
  std::unique_ptr<ResultsFile> results_;  // locked while this soak runs
  SoakTotals totals_;
  size_t next_index_ = 0;
  double perf_s_per_byte_ = 0;  // the slowest sweep row so far
  std::vector<std::string> algorithm_peers_;  // what algorithms units draw from
  double remaining_s_ = 0;      // of the duration, when the unit started
  double elapsed_before_ = 0;
};

}  // namespace

SoakHeader read_soak_header(const std::string& path) {
  // Only a regular file is read (a FIFO would block until a writer came),
  // and only its first line, bounded: a start line is a few KiB.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw PlanError(fmt::format("--results {}: not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlanError(fmt::format("--resume: no results file {} to continue", path));
  std::string first;
  for (char c; first.size() < (size_t{16} << 20) && in.get(c) && c != '\n';) first += c;
  json j;
  try {
    j = json::parse(first);
  } catch (const json::exception&) {
  }
  if (!j.is_object() || j.value("type", "") != "start" || !j.contains("seed") || !j.contains("plan"))
    throw PlanError(fmt::format("--resume: {}:1: not a collcheck soak results file (no start line)", path));
  SoakHeader h;
  try {
    h.seed = std::stoull(j.at("seed").get<std::string>(), nullptr, 0);
  } catch (const std::exception&) {
    throw PlanError(fmt::format("--resume: {}:1: seed: not a seed", path));
  }
  h.plan = parse_plan(j.at("plan").get<std::string>(), path + " (its start line's plan)");
  h.plan.file = j.value("plan_file", h.plan.file);
  return h;
}

uint64_t soak_memory_needed(const SoakOptions& o) {
  Soak s(o, stdout);
  s.prepare_lanes(false);
  return s.memory_needed();
}

SoakResult run_soak(const SoakOptions& o, std::FILE* out) {
  Soak s(o, out);
  s.prepare_lanes(true);
  return s.run();
}

int serve_soak(const SoakOptions& o, World& world) {
  Soak s(o, stdout);
  s.prepare_lanes(true);
  return s.serve(world);
}

Report soak_report(const SoakOptions& o, const SoakResult& r) {
  Report rep;
  rep.command = "soak";
  rep.suite = fmt::format("collcheck soak {}", o.plan.file);
  rep.seconds = r.totals.elapsed_s;
  rep.properties = {{"seed", fmt::format("{:#x}", o.seed)},
                    {"duration_s", fmt::format("{}", o.duration_s)},
                    {"stop_reason", r.stop_reason},
                    {"results", o.results_path}};
  for (const auto& [k, v] : r.totals.by_workload_impl) {
    ReportCase c;
    c.name = fmt::format("{} {}", k.first, k.second);
    c.status = v.failed == 0 ? ReportCase::Status::Passed : ReportCase::Status::Failed;
    c.message = fmt::format("{} unit(s), {} case(s), {} failed", v.units, v.cases, v.failed);
    for (const auto& [sig, g] : r.totals.groups)
      if (g.workload == k.first && g.impl == k.second)
        c.detail += fmt::format("{} x {}\n  replay: {}\n{}\n", g.count, sig, g.replay, g.detail);
    rep.cases.push_back(std::move(c));
  }
  if (r.stop_reason == "SIGINT" || r.stop_reason == "SIGTERM") {
    // A cut run: an error case, so a report of it never reads as a full pass.
    ReportCase c;
    c.name = "soak ran its duration";
    c.status = ReportCase::Status::Error;
    c.message = fmt::format("stopped by {} after {:.0f} s of {:.0f} s", r.stop_reason, r.totals.elapsed_s, o.duration_s);
    rep.cases.push_back(std::move(c));
  }
  return rep;
}

}  // namespace collcheck
