#include "harness/session/session.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>

#include "harness/world/thread_world.h"

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

std::string Session::launcher() const { return mpi_ ? fmt::format("mpirun -np {} ", mpi_->size()) : ""; }

WorldLease Session::world(int p) const {
  if (!mpi_) return WorldLease(std::make_unique<ThreadWorld>(p), nullptr);
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

}  // namespace collcheck
