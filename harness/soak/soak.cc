#include "harness/soak/soak.h"
#include "harness/soak/soak_impl.h"

namespace collcheck {
namespace soak_detail {

std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  if (g_signal.exchange(sig) != 0) {  // the second one: end now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

namespace {

// The workloads, in the order of their weights.
const char* const kWorkloads[] = {"verify", "faults", "perf", "algorithms"};

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

}  // namespace

void Soak::prepare_lanes(bool executors) {
  algorithm_peers_ = o_.plan.algorithms.peers.empty() ? default_algorithm_peers() : o_.plan.algorithms.peers;
  if (o_.plan.algorithms.weight > 0 && algorithm_peers_.empty())
    throw PlanError(fmt::format("{}: workloads.algorithms: no peer algorithm to run", o_.plan.file));
  const WorldKind kind = mpi_ ? WorldKind::Mpi : WorldKind::Threads;  // the soak's own units: threads or MPI
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
        i->fit_world(mpi_, l.space.max_ranks, [](const std::string&) {});
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
    if (o_.sim_worlds && !l.cfg.impl->threads_by_default()) l.cfg.make_world = o_.sim_worlds;
    if (!mpi_ && executors) l.exec = make_executor(l.cfg, l.cfg.impl->untrusted());
    lanes_.push_back(std::move(l));
  }
}

uint64_t Soak::memory_needed() const {
  uint64_t need = 0;
  for (const auto& l : lanes_)
    need = std::max(need, verify_memory_needed(l.space, mpi_ ? 1 : l.space.max_ranks, l.cfg.peers.size()));
  if (o_.plan.perf.weight > 0) {
    const uint64_t ranks = mpi_ ? 1 : static_cast<uint64_t>(o_.plan.max_ranks);
    need = std::max<uint64_t>(need, 4 * ranks * o_.plan.perf.max_bytes);
  }
  return need;
}

SoakResult Soak::run() {
  // The stop signals first: a SIGTERM while --resume reads a long file back
  // ends the soak with its summary, not by the default action.
  install_signals();
  open_results();
  const auto t0 = t0_ = Clock::now();
  auto last_metrics = t0;
  print_header();
  // The progress sink draws it (a bar, or a line every --progress-interval):
  // the time left is what the duration leaves this run.
  ev_.progress({.count = std::pair<size_t, size_t>{totals_.units, 0},
                .budget_s = std::max(1e-3, o_.duration_s - elapsed_before_)});
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
    ev_.progress({.count = std::pair<size_t, size_t>{totals_.units, 0}, .phase = progress_line(u)});
    if (seconds_since(last_metrics) >= o_.metrics_interval_s) {
      last_metrics = now;
      export_metrics();
    }
  }
  ev_.progress({.end = true});
  if (mpi_) (void)mpi_->broadcast(fmt::format("E{}", res.exit_code()), Clock::now() + std::chrono::seconds(30));
  totals_.elapsed_s = elapsed_before_ + seconds_since(t0);
  res.totals = totals_;
  if (o_.metrics) o_.metrics->elapsed(totals_.elapsed_s, std::max(0.0, o_.duration_s - totals_.elapsed_s));
  append({{"type", "end"}, {"t", totals_.elapsed_s}, {"reason", res.stop_reason}, {"summary", summary_json(res)}});
  export_metrics();
  print_summary(res);
  if (o_.metrics && o_.push)
    if (const std::string why = o_.metrics->finish_pushes(); !why.empty())
      ev_.warn("collcheck soak: warning: --pushgateway: {}\n", why);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  return res;
}

int Soak::serve(World& world) {
  install_signals();  // a signal ends the soak through rank 0, never here
  const auto idle = std::chrono::seconds(600) + 8 * std::chrono::milliseconds(static_cast<long long>(o_.plan.timeout_s * 1000));
  for (;;) {
    const auto cmd = world.broadcast("", Clock::now() + idle);
    if (!cmd) {
      ev_.warn("collcheck soak: rank {}: no word from rank 0 within {:.0f} s; ending\n", mpi_ ? mpi_->rank() : -1, std::chrono::duration<double>(idle).count());
      return 1;
    }
    if (cmd->starts_with("E")) return std::atoi(cmd->c_str() + 1);
    const json j = json::parse(cmd->substr(1));
    const std::string w = j.at("w");
    Lane& l = lanes_.at(j.at("x").get<size_t>());
    if (w == "verify") {
      const auto code = serve_cases(world, l.cfg, ev_);
      if (!code) return 1;
    } else if (w == "faults") {
      const Scenario s = parse_scenario(j.at("scenario").get<std::string>(), "soak scenario");
      ReplayOptions ro;
      (void)replay_scenario(s, ro, world);
    } else if (w == "perf") {
      Events quiet;
      (void)run_sweep(perf_options(l, j), quiet, session_);
    }
    world.drain(Clock::now() + std::chrono::seconds(120));
  }
}

void Soak::install_signals() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void Soak::open_results() {
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

void Soak::restore() {
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
      ev_);
  totals_.elapsed_s = elapsed_before_;
  ev_.print("resuming {}: {} units done in {:.0f} s, {} failed; going on from unit {}\n", o_.results_path,
             totals_.units, elapsed_before_, totals_.failed_units, next_index_);
}

void Soak::append(const json& j, json calls) {
  if (j.value("type", "") == "unit") ev_.emit(UnitEvent{j, std::move(calls)});
  if (results_) results_->append(j);
}

void Soak::count_unit(const json& j) {
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

}  // namespace soak_detail

using namespace soak_detail;

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

uint64_t soak_memory_needed(const SoakOptions& o, const Session& session) {
  Events quiet;  // planning only: nothing is said
  Soak s(o, quiet, session);
  s.prepare_lanes(false);
  return s.memory_needed();
}

SoakResult run_soak(const SoakOptions& o, Events& ev, const Session& session) {
  Soak s(o, ev, session);
  s.prepare_lanes(true);
  return s.run();
}

int serve_soak(const SoakOptions& o, Events& ev, const Session& session) {
  Soak s(o, ev, session);
  s.prepare_lanes(true);
  return s.serve(*session.mpi());
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
