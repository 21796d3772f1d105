#include "harness/mpi_world.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace collcheck {

namespace {
MpiWorld* g_world = nullptr;

void poll_sleep(int& spins) {
  if (++spins < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}
}  // namespace

MpiWorld& MpiWorld::init(int* argc, char*** argv) {
  if (g_world) return *g_world;
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI_Init_thread failed: {}", mpi_error_string(rc)));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        fmt::format("the MPI library gives thread level {}, and the MPI world needs MPI_THREAD_MULTIPLE ({})",
                    provided, static_cast<int>(MPI_THREAD_MULTIPLE)));
  }
  auto* w = new MpiWorld();
  MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &w->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  w->host_.assign(name, static_cast<size_t>(len));
  MPI_Comm_dup(MPI_COMM_WORLD, &w->control_);
  MPI_Comm_set_errhandler(w->control_, MPI_ERRORS_RETURN);
  // All ranks are alive at start-up, so these collectives cannot hang on a
  // missing rank; a rank that never starts is mpirun's to report.
  for (int p = 1; p <= w->size_; ++p) {
    MPI_Comm lc = MPI_COMM_NULL, cc = MPI_COMM_NULL;
    const int color = w->rank_ < p ? 0 : MPI_UNDEFINED;
    MPI_Comm_split(MPI_COMM_WORLD, color, w->rank_, &lc);
    MPI_Comm_split(MPI_COMM_WORLD, color, w->rank_, &cc);
    if (cc != MPI_COMM_NULL) MPI_Comm_set_errhandler(cc, MPI_ERRORS_RETURN);
    w->links_comm_.push_back(lc);
    w->coll_comm_.push_back(cc);
    w->links_.push_back(lc != MPI_COMM_NULL ? std::make_unique<MpiLinks>(lc) : nullptr);
  }
  g_world = w;
  return *w;
}

MpiWorld* MpiWorld::get() { return g_world; }

MpiLinks& MpiWorld::links(int p) {
  if (p < 1 || p > size_ || !links_[static_cast<size_t>(p - 1)])
    throw std::logic_error(fmt::format("rank {} has no links for a world of {} ranks", rank_, p));
  return *links_[static_cast<size_t>(p - 1)];
}

MPI_Comm MpiWorld::comm(int p) const {
  if (p < 1 || p > size_) return MPI_COMM_NULL;
  return coll_comm_[static_cast<size_t>(p - 1)];
}

void MpiWorld::send(int to, int tag, const std::string& bytes, Deadline deadline) {
  MPI_Request req;
  MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, to, tag, control_, &req);
  int flag = 0, spins = 0;
  while (true) {
    MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (flag) return;
    if (Clock::now() >= deadline) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
      throw std::runtime_error(fmt::format("rank {}: rank {} did not take a control message by the deadline", rank_, to));
    }
    poll_sleep(spins);
  }
}

std::optional<std::string> MpiWorld::recv(int from, int tag, Deadline deadline) {
  int flag = 0, spins = 0;
  MPI_Status st;
  while (true) {
    MPI_Iprobe(from, tag, control_, &flag, &st);
    if (flag) break;
    if (Clock::now() >= deadline) return std::nullopt;
    poll_sleep(spins);
  }
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  std::string out(static_cast<size_t>(n), '\0');
  MPI_Recv(out.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, control_, MPI_STATUS_IGNORE);
  return out;
}

int MpiWorld::agree_exit_code(int code) {
  if (rank_ == 0) {
    for (int q = 1; q < size_; ++q) send(q, control_tag::kExitCode, std::to_string(code), Clock::now() + std::chrono::seconds(30));
    return code;
  }
  auto c = recv(0, control_tag::kExitCode, Clock::now() + std::chrono::seconds(120));
  return c ? std::atoi(c->c_str()) : 1;
}

void MpiWorld::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

void MpiWorld::finalize() {
  links_.clear();
  for (auto& c : links_comm_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  for (auto& c : coll_comm_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  MPI_Comm_free(&control_);
  MPI_Finalize();
}

}  // namespace collcheck
