#include "impl/mpi_links.h"

#include <fmt/format.h>

#include <climits>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace collcheck {

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

namespace {

// A request destroyed before it completed that MPI would not cancel (a send,
// or a receive already matched): MPI may still read or write its buffer, so
// the buffer lives here until MPI says the request is done.
struct Abandoned {
  MPI_Request req;
  std::vector<std::byte> buffer;
};
std::mutex g_abandoned_mu;
std::vector<Abandoned>& abandoned() {
  static auto* v = new std::vector<Abandoned>();  // never destroyed: MPI may finish late
  return *v;
}
size_t g_abandoned_bytes = 0;  // under g_abandoned_mu
// Above this, a post reaps too: a soak's failed cases must not pile up memory.
constexpr size_t kAbandonedBytesReapedOnPost = size_t{64} << 20;

// Frees the buffers of the abandoned requests MPI has finished, with one
// MPI_Testsome: one turn of MPI's progress engine, however many there are.
// Every MPI test that finds nothing to do yields the core when the node is
// oversubscribed (Open MPI's mpi_yield_when_idle, on by default then); one
// test per abandoned request, on every post, cost a rank a time slice behind
// the host's other processes for each, 50-80 ms a post under 8 busy ones,
// and a slow link's receiver looked stalled the whole time it was slow.
void reap_abandoned(bool posting) {
  std::lock_guard lk(g_abandoned_mu);
  auto& a = abandoned();
  if (a.empty() || (posting && g_abandoned_bytes < kAbandonedBytesReapedOnPost)) return;
  std::vector<MPI_Request> reqs;
  reqs.reserve(a.size());
  for (const auto& x : a) reqs.push_back(x.req);
  std::vector<int> done(a.size());
  int n = 0;
  const bool failed = MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &n, done.data(),
                                   MPI_STATUSES_IGNORE) != MPI_SUCCESS;
  for (size_t i = 0; i < a.size(); ++i) a[i].req = reqs[i];
  // A completed request is MPI_REQUEST_NULL now. After an error, each is
  // tested alone: one whose own test fails is done with, as before.
  std::erase_if(a, [&](Abandoned& x) {
    int flag = 0;
    if (x.req != MPI_REQUEST_NULL && (!failed || (MPI_Test(&x.req, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag)))
      return false;
    g_abandoned_bytes -= x.buffer.size();
    return true;
  });
}

}  // namespace

// Every request transfers through a buffer of its own: a send copies the data
// in when posted, so a send abandoned by a failing case never reads memory its
// caller has freed. A receive is not posted to MPI up front: MpiLinks::progress
// matches it with MPI_Improbe, sees the message's size, and only receives a
// message of exactly the expected size (MPI_Imrecv). Open MPI 4.1 writes a
// longer message past the end of a posted receive buffer (a mismatched shape
// does exactly that), so no receive is ever posted shorter than its message.
class MpiRequest final : public LinkRequest {
 public:
  MpiRequest(MpiLinks& links, LinkDirection dir, int peer, Tag tag, size_t bytes, std::span<std::byte> out = {})
      : links_(links), dir_(dir), peer_(peer), tag_(tag), mpi_tag_(links.mpi_tag(tag)), bytes_(bytes), out_(out),
        buffer_(bytes) {}
  ~MpiRequest() override {
    if (unmatched()) links_.forget(this);
    if (done_ || req_ == MPI_REQUEST_NULL) return;
    MPI_Cancel(&req_);
    int flag = 0;
    if (MPI_Test(&req_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag) return;
    std::lock_guard lk(g_abandoned_mu);
    g_abandoned_bytes += buffer_.size();
    abandoned().push_back(Abandoned{req_, std::move(buffer_)});
  }

  MPI_Request* handle() { return &req_; }
  std::byte* buffer() { return buffer_.data(); }
  bool unmatched() const { return dir_ == LinkDirection::Recv && !matched_ && !done_; }

  // A receive: is its message there? If so, receive it (or fail on its size).
  // Returns whether it matched.
  bool try_match() {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    const int rc = MPI_Improbe(peer_, mpi_tag_, links_.comm(), &flag, &msg, &st);
    if (rc != MPI_SUCCESS) {
      error_ = fmt::format("rank {}: MPI probe for a message from rank {} failed: {} ({})", links_.rank(), peer_,
                           mpi_error_string(rc), describe_tag(tag_));
      matched_ = true;
      return true;
    }
    if (!flag) return false;
    matched_ = true;
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (static_cast<size_t>(got) != bytes_) {
      // Take the message off the queue into a buffer of its own size, then fail.
      std::vector<std::byte> sink(static_cast<size_t>(got));
      MPI_Mrecv(sink.data(), got, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
      error_ = fmt::format("rank {}: size mismatch: rank {} sent {} bytes, {} were expected ({})", links_.rank(), peer_,
                           got, bytes_, describe_tag(tag_));
      return true;
    }
    const int mrc = MPI_Imrecv(buffer_.data(), got, MPI_BYTE, &msg, &req_);
    if (mrc != MPI_SUCCESS)
      error_ = fmt::format("rank {}: MPI recv from rank {} failed: {} ({})", links_.rank(), peer_,
                           mpi_error_string(mrc), describe_tag(tag_));
    return true;
  }

  bool test() override {
    if (done_) return true;
    links_.progress();  // match every pending receive, not only this one: a peer may wait on them
    if (unmatched()) return false;
    if (!error_.empty()) {
      done_ = true;
      throw LinkError(error_, links_.rank(), peer_, tag_, dir_);
    }
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      done_ = true;
      req_ = MPI_REQUEST_NULL;
      throw LinkError(fmt::format("rank {}: MPI {} with rank {} failed: {} ({})", links_.rank(),
                                  dir_ == LinkDirection::Send ? "send" : "recv", peer_, mpi_error_string(rc),
                                  describe_tag(tag_)),
                      links_.rank(), peer_, tag_, dir_);
    }
    if (!flag) return false;
    done_ = true;
    if (dir_ == LinkDirection::Recv && bytes_ > 0) std::memcpy(out_.data(), buffer_.data(), bytes_);
    return true;
  }

  void wait(Deadline deadline) override {
    // Poll: spin briefly, then yield the core (ranks are often oversubscribed).
    for (int spins = 0;; ++spins) {
      if (test()) return;
      if (Clock::now() >= deadline) {
        throw LinkTimeout(fmt::format("rank {}: {} rank {} did not complete by the deadline ({})", links_.rank(),
                                      dir_ == LinkDirection::Send ? "send to" : "recv from", peer_,
                                      describe_tag(tag_)),
                          links_.rank(), peer_, tag_, dir_);
      }
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

 private:
  MpiLinks& links_;
  LinkDirection dir_;
  int peer_;
  Tag tag_;
  int mpi_tag_;
  size_t bytes_;
  std::span<std::byte> out_;  // receives: where the data goes on completion
  std::vector<std::byte> buffer_;
  MPI_Request req_ = MPI_REQUEST_NULL;
  bool matched_ = false;  // receives: MPI_Improbe found the message
  std::string error_;     // a receive that matched but cannot complete (its size)
  bool done_ = false;
};

void MpiLinks::progress() {
  // In posting order, so that of two receives with the same peer and tag the
  // first posted takes the first message (MPI's own matching order).
  for (size_t i = 0; i < pending_.size();) {
    if (pending_[i]->try_match()) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void MpiLinks::forget(MpiRequest* r) { std::erase(pending_, r); }

size_t MpiLinks::drain() {
  size_t n = 0;
  std::vector<std::byte> scratch;
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &msg, &st) != MPI_SUCCESS || !flag) break;
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    scratch.resize(static_cast<size_t>(std::max(bytes, 1)));
    MPI_Mrecv(scratch.data(), bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    ++n;
  }
  reap_abandoned(false);
  return n;
}

namespace {

void check_peer(const MpiLinks& l, int peer, Tag tag, LinkDirection dir, size_t bytes) {
  if (peer < 0 || peer >= l.size())
    throw LinkError(fmt::format("rank {}: peer {} is not a rank of this world (0..{})", l.rank(), peer, l.size() - 1),
                    l.rank(), peer, tag, dir);
  if (bytes > static_cast<size_t>(INT_MAX))
    throw LinkError(fmt::format("rank {}: one transfer of {} bytes exceeds MPI's int count; split it", l.rank(), bytes),
                    l.rank(), peer, tag, dir);
}

}  // namespace

MpiLinks::MpiLinks(MPI_Comm comm, std::vector<int> nodes, MPI_Comm collectives)
    : comm_(comm), collectives_(collectives), nodes_(std::move(nodes)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
}

int MpiLinks::mpi_tag(Tag tag) const {
  // tag = group << 48 | call sequence << 8 | channel; keep 15 bits of the
  // sequence (the group and the point-to-point bit mixed in, so that two
  // groups' calls of the same number do not meet) and 8 of the epoch, then
  // fold into what this MPI allows.
  const uint64_t call = call_of_tag(tag) + group_of_tag(tag) * 0x2f1 + ((call_of_tag(tag) & kP2pCall) ? 0x4d3 : 0);
  const uint64_t mixed = ((epoch_ & 0xff) << 23) | ((call & 0x7fff) << 8) | channel_of_tag(tag);
  return static_cast<int>(mixed % (static_cast<uint64_t>(tag_ub_) + 1));
}

RequestPtr MpiLinks::isend(int peer, Tag tag, std::span<const std::byte> data) {
  check_peer(*this, peer, tag, LinkDirection::Send, data.size());
  reap_abandoned(true);
  auto r = std::make_unique<MpiRequest>(*this, LinkDirection::Send, peer, tag, data.size());
  if (!data.empty()) std::memcpy(r->buffer(), data.data(), data.size());
  const int rc = MPI_Isend(r->buffer(), static_cast<int>(data.size()), MPI_BYTE, peer, mpi_tag(tag), comm_, r->handle());
  if (rc != MPI_SUCCESS)
    throw LinkError(fmt::format("rank {}: MPI_Isend to rank {} failed: {}", rank_, peer, mpi_error_string(rc)), rank_,
                    peer, tag, LinkDirection::Send);
  return r;
}

RequestPtr MpiLinks::irecv(int peer, Tag tag, std::span<std::byte> data) {
  check_peer(*this, peer, tag, LinkDirection::Recv, data.size());
  reap_abandoned(true);
  auto r = std::make_unique<MpiRequest>(*this, LinkDirection::Recv, peer, tag, data.size(), data);
  pending_.push_back(r.get());
  return r;
}

}  // namespace collcheck
