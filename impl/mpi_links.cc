#include "impl/mpi_links.h"

#include <fmt/format.h>

#include <climits>
#include <thread>

namespace collcheck {

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

namespace {

class MpiRequest final : public LinkRequest {
 public:
  MpiRequest(LinkDirection dir, int rank, int peer, Tag tag, size_t bytes)
      : dir_(dir), rank_(rank), peer_(peer), tag_(tag), bytes_(bytes) {}
  ~MpiRequest() override {
    if (done_ || req_ == MPI_REQUEST_NULL) return;
    // Cancel, then give the library a moment to confirm; a request it cannot
    // cancel is freed (the world is failing by then: a case timed out).
    MPI_Cancel(&req_);
    const auto until = Clock::now() + std::chrono::milliseconds(200);
    int flag = 0;
    while (Clock::now() < until) {
      MPI_Status st;
      if (MPI_Test(&req_, &flag, &st) != MPI_SUCCESS || flag) return;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
  }

  MPI_Request* handle() { return &req_; }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    MPI_Status st;
    const int rc = MPI_Test(&req_, &flag, &st);
    if (rc != MPI_SUCCESS) {
      done_ = true;
      req_ = MPI_REQUEST_NULL;
      int cls = 0;
      MPI_Error_class(rc, &cls);
      if (cls == MPI_ERR_TRUNCATE)
        throw LinkError(fmt::format("rank {}: message from rank {} is larger than the {} bytes posted ({})", rank_,
                                    peer_, bytes_, describe_tag(tag_)),
                        rank_, peer_, tag_, dir_);
      throw LinkError(fmt::format("rank {}: MPI {} with rank {} failed: {} ({})", rank_,
                                  dir_ == LinkDirection::Send ? "send" : "recv", peer_, mpi_error_string(rc),
                                  describe_tag(tag_)),
                      rank_, peer_, tag_, dir_);
    }
    if (!flag) return false;
    done_ = true;
    if (dir_ == LinkDirection::Recv) {
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (static_cast<size_t>(got) != bytes_)
        throw LinkError(fmt::format("rank {}: size mismatch: rank {} sent {} bytes, {} were expected ({})", rank_,
                                    peer_, got, bytes_, describe_tag(tag_)),
                        rank_, peer_, tag_, dir_);
    }
    return true;
  }

  void wait(Deadline deadline) override {
    // Poll: spin briefly, then yield the core (ranks are often oversubscribed).
    for (int spins = 0;; ++spins) {
      if (test()) return;
      if (Clock::now() >= deadline) {
        throw LinkTimeout(fmt::format("rank {}: {} rank {} did not complete by the deadline ({})", rank_,
                                      dir_ == LinkDirection::Send ? "send to" : "recv from", peer_,
                                      describe_tag(tag_)),
                          rank_, peer_, tag_, dir_);
      }
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  LinkDirection dir_;
  int rank_, peer_;
  Tag tag_;
  size_t bytes_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

void check_peer(const MpiLinks& l, int peer, Tag tag, LinkDirection dir, size_t bytes) {
  if (peer < 0 || peer >= l.size())
    throw LinkError(fmt::format("rank {}: peer {} is not a rank of this world (0..{})", l.rank(), peer, l.size() - 1),
                    l.rank(), peer, tag, dir);
  if (bytes > static_cast<size_t>(INT_MAX))
    throw LinkError(fmt::format("rank {}: one transfer of {} bytes exceeds MPI's int count; split it", l.rank(), bytes),
                    l.rank(), peer, tag, dir);
}

}  // namespace

MpiLinks::MpiLinks(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
}

int MpiLinks::mpi_tag(Tag tag) const {
  // tag = call sequence << 8 | channel; keep 15 bits of the sequence and 8 of
  // the epoch, then fold into what this MPI allows.
  const uint64_t mixed = ((epoch_ & 0xff) << 23) | ((call_of_tag(tag) & 0x7fff) << 8) | channel_of_tag(tag);
  return static_cast<int>(mixed % (static_cast<uint64_t>(tag_ub_) + 1));
}

RequestPtr MpiLinks::isend(int peer, Tag tag, std::span<const std::byte> data) {
  check_peer(*this, peer, tag, LinkDirection::Send, data.size());
  auto r = std::make_unique<MpiRequest>(LinkDirection::Send, rank_, peer, tag, data.size());
  const int rc = MPI_Isend(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, mpi_tag(tag), comm_, r->handle());
  if (rc != MPI_SUCCESS)
    throw LinkError(fmt::format("rank {}: MPI_Isend to rank {} failed: {}", rank_, peer, mpi_error_string(rc)), rank_,
                    peer, tag, LinkDirection::Send);
  return r;
}

RequestPtr MpiLinks::irecv(int peer, Tag tag, std::span<std::byte> data) {
  check_peer(*this, peer, tag, LinkDirection::Recv, data.size());
  auto r = std::make_unique<MpiRequest>(LinkDirection::Recv, rank_, peer, tag, data.size());
  const int rc = MPI_Irecv(data.data(), static_cast<int>(data.size()), MPI_BYTE, peer, mpi_tag(tag), comm_, r->handle());
  if (rc != MPI_SUCCESS)
    throw LinkError(fmt::format("rank {}: MPI_Irecv from rank {} failed: {}", rank_, peer, mpi_error_string(rc)), rank_,
                    peer, tag, LinkDirection::Recv);
  return r;
}

}  // namespace collcheck
