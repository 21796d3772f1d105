#include "harness/session/session.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdlib>
#include <stdexcept>

#include "harness/model/size.h"
#include "harness/model/usage_error.h"
#include "harness/model/user_values.h"

namespace collcheck {

Session Session::start_mpi(int* argc, char*** argv, std::string& warning) {
  // Read before MPI_Init: a singleton's init sets these itself.
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") || std::getenv("PMI_RANK");
  MpiWorld& w = MpiWorld::init(argc, argv);
  if (w.size() == 1) {
    if (!launched) {
      w.finalize();
      throw std::runtime_error("this process was not started by mpirun, and a world of 1 process tests nothing; start "
                               "it as `mpirun -np N collcheck ...`, or use --world threads");
    }
    warning = "--world mpi with 1 process (mpirun -np 1): only worlds of 1 rank run";
  }
  return Session(w);
}

Session Session::open(const WorldRequest& w, int* argc, char*** argv, std::string& warning) {
  // Gloo's worlds hold p(p-1) sockets each: use the open-file limit the
  // system allows (the soft limit is often 1024 of a much larger hard one).
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (!w.world.empty() && w.world != "threads" && w.world != "mpi" && w.world != "sim")
    throw UsageError(fmt::format("--world must be sim, threads or mpi, got '{}'", w.world));
  if (w.world == "mpi") {
    // A CI job that forgot its launcher must not go green on a world of one.
    try {
      return start_mpi(argc, argv, warning);
    } catch (const std::runtime_error& ex) {
      throw UsageError(fmt::format("--world mpi: {}", ex.what()));
    }
  }
  const bool by_default = w.world.empty() && w.sim_by_default;
  if (w.world == "sim" && kNoFibers != nullptr)
    throw UsageError(fmt::format("--world sim: {}; use --world threads", kNoFibers));
  if (w.world == "sim" || (by_default && kNoFibers == nullptr)) {
    SimOptions o;
    try {
      o.schedule = ScheduleOptions::parse(w.schedule, parse_seed(w.schedule_seed, "--schedule-seed"));
      if (!w.link_model.empty()) o.model = LinkModel::parse(w.link_model);
    } catch (const std::invalid_argument& ex) {
      throw UsageError(ex.what());
    }
    return simulated(std::move(o), by_default);
  }
  // Named, the thread world's replay lines say --world threads.
  return w.world == "threads" && w.sim_by_default ? threads_asked() : Session();
}

Session Session::simulated(SimOptions opts, bool by_default) {
  Session s;
  s.sim_ = std::move(opts);
  s.sim_by_default_ = by_default;
  return s;
}

Session Session::threads_asked() {
  Session s;
  s.threads_asked_ = true;
  return s;
}

WorldFactory Session::worlds() const { return sim_ ? sim_worlds(*sim_) : thread_worlds(); }

std::string Session::world_flag() const {
  if (mpi_) return " --world mpi";
  if (!sim_) return threads_asked_ ? " --world threads" : "";
  std::string f = sim_by_default_ ? "" : " --world sim";
  if (sim_->schedule.describe() != "random") f += " --schedule " + sim_->schedule.describe();
  if (sim_->schedule.seed != 1) f += fmt::format(" --schedule-seed {}", sim_->schedule.seed);
  if (sim_->model.describe() != LinkModel{}.describe()) f += " --link-model " + sim_->model.describe();
  return f;
}

std::string Session::launcher() const { return mpi_ ? fmt::format("mpirun -np {} ", mpi_->size()) : ""; }

WorldLease Session::world(int p) const {
  if (!mpi_) return WorldLease(worlds()({.ranks = p}), nullptr);
  if (p != mpi_->size())
    throw std::invalid_argument(fmt::format("a world of {} ranks, but mpirun started {} processes", p, mpi_->size()));
  return WorldLease(nullptr, mpi_);
}

std::optional<std::string> Session::from_root(const std::string& text, Deadline deadline) const {
  return mpi_ ? mpi_->broadcast(text, deadline) : std::optional<std::string>(text);
}

void Session::abort(int code) const {
  if (mpi_) mpi_->abort(code);
  std::exit(code);
}

void Session::finish() const {
  if (mpi_) mpi_->finalize();
}

void refuse_unless_fits(const Session& session, uint64_t need, const std::function<std::string(uint64_t have)>& why) {
  const auto have = memory_available();
  if (!session.is_mpi()) {
    if (have && need > *have) throw UsageError(why(*have));
    return;
  }
  // The processes of one node share its memory.
  const uint64_t on_node = static_cast<uint64_t>(session.processes_on_node(true));
  const uint64_t node_need = checked_mul(need, on_node).value_or(~uint64_t{0});
  const bool short_here = have && node_need > *have;
  if (!session.any_process(short_here)) return;
  if (short_here) throw UsageError(why(*have / on_node) + fmt::format(" (per process: {} processes share this node)", on_node));
  throw UsageError(fmt::format("another node of this job cannot fit the run: {} per process is more than its memory "
                               "available allows (rank 0's node has {} for each of its {} processes)",
                               format_bytes(need), format_bytes(have.value_or(0) / on_node), on_node));
}

}  // namespace collcheck
