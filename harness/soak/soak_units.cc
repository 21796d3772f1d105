// The soak: one unit of each workload (soak_impl.h).
#include "harness/soak/soak_impl.h"

namespace collcheck::soak_detail {

bool Soak::run_unit(const Unit& u, double t) {
  Lane& l = lanes_[u.impl];
  json j{{"type", "unit"}, {"i", u.index}, {"workload", u.workload}, {"impl", l.spec.impl},
         {"seed", fmt::format("{:#x}", u.seed)}};
  bool world_ok = true;
  const auto t0 = Clock::now();
  json calls = nullptr;  // the calls a fault unit timed, for the metrics sink
  if (u.workload == "verify") world_ok = verify_unit(l, u, j);
  else if (u.workload == "faults") calls = faults_unit(u, j);
  else if (u.workload == "algorithms") algorithms_unit(u, j);
  else perf_unit(l, u, j);
  // What a failed unit left in flight must not reach a later one.
  if (mpi_ && world_ok) mpi_->drain(Clock::now() + std::chrono::seconds(120));
  j["seconds"] = seconds_since(t0);
  j["t"] = t + seconds_since(t0);
  count_unit(j);
  append(j, std::move(calls));
  return world_ok;
}

bool Soak::verify_unit(Lane& l, const Unit& u, json& j) {
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
  std::string text;  // what verify said, for the unit's detail
  Events report;
  report.add(text_collector(text));
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
  j["cases"] = r.cases_run;
  j["ok"] = !r.failed && !r.harness_error;
  if (r.interrupted) j["interrupted"] = true;
  const std::string property = r.harness_error ? "harness" : r.failure.property;
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

json Soak::faults_unit(const Unit& u, json& j) {
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
  } else if (o_.sim_worlds) {
    out = check_detection(dc, [&](const Scenario& sc) {
      ReplayOptions ro;
      ro.make_world = o_.sim_worlds;
      return replay_scenario(sc, ro);
    });
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
  // Rank 0's timed calls, for the metrics (metrics_sink.h).
  json calls = json::array();
  for (const auto& d : out.result.dumps)
    if (d.rank == 0)
      for (const auto& c : d.calls)
        if (c.t_started >= 0 && c.t_completed >= c.t_started)
          calls.push_back({c.impl.empty() ? s.impl : c.impl, std::string(op_name(c.op)),
                           std::string(dtype_name(c.dtype)), c.count * dtype_size(c.dtype),
                           c.t_completed - c.t_started});
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
  return calls;
}

SweepOptions Soak::perf_options(const Lane& l, const json& j) const {
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

void Soak::perf_unit(Lane& l, const Unit& u, json& j) {
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
  const auto perf_t0 = Clock::now();
  Events quiet;  // the row goes into the results file, not on the console
  const SweepResult r = run_sweep(perf_options(l, desc), quiet, session_);
  j["cases"] = 1;
  if (r.rows.empty()) {
    j["ok"] = false;
    j["property"] = "perf_row";
    j["signature"] = fmt::format("perf | {} | no row | {}", l.spec.impl, dtype_name(t));
    j["detail"] = "the sweep produced no row";
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

void Soak::algorithms_unit(const Unit& u, json& j) {
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
  if (r.ok || r.interrupted) return;
  j["property"] = r.harness_error ? "harness" : r.property;
  j["signature"] = fmt::format("algorithms | {} | {} | {}", a.peer, r.property,
                               r.minimal.empty() ? fmt::format("np {}", a.ranks) : r.minimal);
  j["replay"] = r.replay.empty() ? r.command : r.replay;
  j["command"] = r.command;
  j["detail"] = r.detail;
}

std::string Soak::self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("collcheck") : p.string();
}

}  // namespace collcheck::soak_detail
