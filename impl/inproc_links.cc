#include "impl/inproc_links.h"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "impl/checksum.h"
#include "impl/sched.h"

namespace collcheck {

namespace {
// Pending: queued, unmatched. Matched: paired with its opposite (`partner`),
// the bytes not yet moved. Copying: one side's waiter is moving them, outside
// the lock. A matched pair's bytes move when either side first waits on (or
// tests, or drops) its request, on that thread, so that in an exchange each
// rank usually copies what it receives, in parallel, rather than whichever
// posted second copying both ways while the other idles.
enum class OpState : uint8_t { Pending, Matched, Copying, Done, Failed, Cancelled };

struct Op {
  LinkDirection dir;
  int rank;  // the rank that posted it
  int peer;
  Tag tag;
  const std::byte* src = nullptr;  // send
  std::byte* dst = nullptr;        // recv
  size_t size = 0;
  OpState state = OpState::Pending;
  std::string error;
  // Sizes as NCCL runs them: a receive matched by a shorter send got these
  // bytes and waits for the rest, which never come (SIZE_MAX: not so).
  size_t arrived = SIZE_MAX;
  // A simulated world's α-β cost: the transfer completes, for both sides, at
  // this virtual time (min(): at once).
  Clock::time_point ready_at = Clock::time_point::min();
  // While Matched or Copying. Ops live in their requests, and a request's
  // destructor brings its op past both (and out of its mailbox's queue)
  // under the mailbox's lock, so no pointer to an op outlives it.
  Op* partner = nullptr;
  std::optional<uint64_t> checksum;  // Done by move_bytes: the bytes' payload_checksum
};
using Key = std::pair<int, Tag>;  // (source rank, tag) within a destination's mailbox

// An op's key in the mailbox of its destination: a send's source is its own
// rank, a receive's its peer.
Key key_of(const Op& op) { return {op.dir == LinkDirection::Send ? op.rank : op.peer, op.tag}; }

struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  // Pending (unmatched) ops, in the order they were posted: a match takes
  // the first of its key, so each (source, tag) pair is FIFO. Flat vectors,
  // searched: a mailbox holds a few pending ops at a time, and a map of
  // queues cost three allocations per unmatched post (a fifth of a verify
  // of small cases, with the request's own two).
  std::vector<Op*> sends;
  std::vector<Op*> recvs;
  // Transfers posted and then cancelled before they matched, by direction and
  // key, with how: so that a waiter that times out can say the peer posted and
  // cancelled, rather than that it never posted.
  std::map<std::pair<LinkDirection, Key>, std::pair<size_t, std::string>> cancelled;
};

const char* dir_name(LinkDirection d) { return d == LinkDirection::Send ? "send to" : "recv from"; }
}  // namespace

struct InProcFabric::Impl {
  explicit Impl(int n) : boxes(static_cast<size_t>(n)) {
    for (auto& b : boxes) b = std::make_unique<Mailbox>();
  }
  std::vector<std::unique_ptr<Mailbox>> boxes;  // indexed by destination rank
  std::atomic<bool> aborted{false};
  // The first call whose transfers an abort fails (the smallest asked for).
  std::atomic<uint64_t> abort_from{UINT64_MAX};
  // The process group of that call: other groups' transfers all fail.
  std::atomic<uint64_t> abort_group{0};
  std::atomic<bool> nccl_sizes{false};  // InProcFabric::set_sizes_as_nccl
  std::optional<LinkModel> model;       // InProcFabric::set_link_model
  bool one_thread = false;              // InProcFabric::set_one_thread
  std::mutex abort_mu;
  std::string abort_reason;

  bool aborts(Tag tag) const {
    return aborted.load(std::memory_order_acquire) &&
           (group_of_tag(tag) != abort_group.load(std::memory_order_acquire) ||
            call_of_tag(tag) >= abort_from.load(std::memory_order_acquire));
  }

  // A mailbox's lock, held; or, on a fabric of one thread, not taken (the
  // waits below release it only where they hold it). A simulated world's
  // ranks took and released an uncontended mutex about ten times a message:
  // a sixth of a verify of small cases in the profile.
  std::unique_lock<std::mutex> lock(Mailbox& box) const {
    return one_thread ? std::unique_lock<std::mutex>(box.mu, std::defer_lock) : std::unique_lock<std::mutex>(box.mu);
  }

  std::string reason() {
    std::lock_guard<std::mutex> g(abort_mu);
    return abort_reason;
  }

  // Matches `op` against the opposite queue or enqueues it. Called with box.mu held.
  static void post(Mailbox& box, Op* op, bool nccl_sizes, const LinkModel* model) {
    auto& opposite = op->dir == LinkDirection::Send ? box.recvs : box.sends;
    auto& mine = op->dir == LinkDirection::Send ? box.sends : box.recvs;
    const Key key = key_of(*op);
    const auto it = std::find_if(opposite.begin(), opposite.end(), [&](const Op* o) { return key_of(*o) == key; });
    if (it == opposite.end()) {
      mine.push_back(op);
      return;
    }
    Op* other = *it;
    opposite.erase(it);
    Op& send = op->dir == LinkDirection::Send ? *op : *other;
    Op& recv = op->dir == LinkDirection::Send ? *other : *op;
    if (send.size != recv.size && nccl_sizes) {
      // No error, as NCCL has none: what fits moves. A longer send is cut
      // (both complete: the receiver's data is wrong); a shorter one leaves
      // the receiver waiting for bytes that never come (a hang).
      const size_t n = std::min(send.size, recv.size);
      if (n > 0) std::memcpy(recv.dst, send.src, n);
      send.state = OpState::Done;
      if (send.size >= recv.size) {
        recv.state = OpState::Done;
      } else {
        recv.arrived = n;
      }
    } else if (send.size != recv.size) {
      const std::string msg = fmt::format(
          "size mismatch on {}: rank {} sent {} bytes to rank {}, which expected {} bytes",
          describe_tag(send.tag), send.rank, send.size, recv.rank, recv.size);
      send.state = recv.state = OpState::Failed;
      send.error = recv.error = msg;
    } else if (send.size == 0) {
      send.state = recv.state = OpState::Done;
    } else {
      send.state = recv.state = OpState::Matched;
      op->partner = other;
      other->partner = op;
      if (model != nullptr) send.ready_at = recv.ready_at = sched::now() + model->message(send.rank, recv.rank, send.size);
    }
    sched::notify_all(box.cv);
  }

  // Moves a matched pair's bytes: claims the pair, copies with the lock
  // released, completes both. Called with lk holding box.mu and op Matched;
  // returns with it held.
  static void move_bytes(Mailbox& box, Op* op, std::unique_lock<std::mutex>& lk) {
    Op* other = op->partner;
    Op& send = op->dir == LinkDirection::Send ? *op : *other;
    Op& recv = op->dir == LinkDirection::Send ? *other : *op;
    send.state = recv.state = OpState::Copying;
    const bool held = lk.owns_lock();
    if (held) lk.unlock();
    const uint64_t sum = copy_with_checksum(recv.dst, send.src, send.size);
    if (held) lk.lock();
    send.checksum = recv.checksum = sum;
    send.state = recv.state = OpState::Done;
    send.partner = recv.partner = nullptr;
    sched::notify_all(box.cv);
  }
  // Brings op past Matched and Copying (moving the bytes, or waiting while
  // the partner's thread does: a copy's time, not a peer's). Lock held.
  static void settle(Mailbox& box, Op* op, std::unique_lock<std::mutex>& lk) {
    if (op->state == OpState::Matched) move_bytes(box, op, lk);
    sched::wait(box.cv, lk, [&] { return op->state != OpState::Copying; });
  }

  // Unlinks a pending op and records its cancellation. Called with box.mu held.
  static void cancel(Mailbox& box, Op* op, std::string how) {
    unlink(box, op);
    op->state = OpState::Cancelled;
    auto& c = box.cancelled[{op->dir, key_of(*op)}];
    ++c.first;
    c.second = std::move(how);
  }

  static void unlink(Mailbox& box, const Op* op) {
    auto& mine = op->dir == LinkDirection::Send ? box.sends : box.recvs;
    if (auto it = std::find(mine.begin(), mine.end(), op); it != mine.end()) mine.erase(it);
  }
};

namespace {

class InProcRequest final : public LinkRequest {
 public:
  // The op is posted by the caller once the request holds it (its address
  // is what the mailbox and the partner keep).
  InProcRequest(std::shared_ptr<InProcFabric::Impl> fabric, Mailbox* box, Op op)
      : fabric_(std::move(fabric)), box_(box), op_data_(std::move(op)) {}
  InProcRequest(const InProcRequest&) = delete;
  InProcRequest& operator=(const InProcRequest&) = delete;
  Op* op() { return op_; }

  ~InProcRequest() override {
    auto lk = fabric_->lock(*box_);
    if (op_->state == OpState::Pending)
      InProcFabric::Impl::cancel(*box_, op_, "cancelled it before it matched (the request was dropped)");
    InProcFabric::Impl::settle(*box_, op_, lk);  // matched: the transfer happens, as it would have at the match
  }

  // A poll that finds the transfer not done yields (in virtual time, 1 us:
  // the others run and the clock moves), whether or not the peer has posted
  // its side: a plugin spinning on test() never holds the simulated world's
  // one thread.
  bool test() override {
    auto lk = fabric_->lock(*box_);
    InProcFabric::Impl::settle(*box_, op_, lk);
    if (check_locked() && sched::now() >= op_->ready_at) return true;
    if (lk.owns_lock()) lk.unlock();
    sched::yield();
    return false;
  }

  std::optional<uint64_t> moved_checksum() const override { return op_->checksum; }

  void wait(Deadline deadline) override {
    const auto start = sched::now();
    auto lk = fabric_->lock(*box_);
    sched::wait_until(box_->cv, lk, deadline, [&] {
      return op_->state != OpState::Pending || fabric_->aborts(op_->tag);
    });
    InProcFabric::Impl::settle(*box_, op_, lk);
    if (check_locked()) {
      const auto ready = op_->ready_at;
      if (lk.owns_lock()) lk.unlock();
      if (ready > sched::now()) sched::sleep_until(ready);  // the message's α + β·bytes
      return;
    }
    // Still pending: the deadline expired or the world was aborted. Cancel first
    // so the peer can never write into (or read from) our buffer afterwards.
    InProcFabric::Impl::cancel(*box_, op_, "gave up on it at its own deadline");
    // Did the peer post the matching transfer and cancel it?
    std::string peer_side = "the peer never posted the matching transfer";
    if (op_->arrived != SIZE_MAX)
      peer_side = fmt::format("rank {}'s matching send carried {} bytes and the rest never came (a size mismatch, "
                              "which NCCL does not check: it waits)",
                              op_->peer, op_->arrived);
    const LinkDirection opposite = op_->dir == LinkDirection::Send ? LinkDirection::Recv : LinkDirection::Send;
    if (auto it = box_->cancelled.find({opposite, key_of(*op_)}); it != box_->cancelled.end())
      peer_side = fmt::format("rank {} posted the matching {} and then {}{}", op_->peer,
                              opposite == LinkDirection::Send ? "send" : "recv", it->second.second,
                              it->second.first > 1 ? fmt::format(" ({} times)", it->second.first) : "");
    if (lk.owns_lock()) lk.unlock();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(sched::now() - start);
    if (fabric_->aborts(op_->tag)) {
      throw LinkAborted(fmt::format("rank {}: {} rank {} on {} aborted: {}", op_->rank, dir_name(op_->dir),
                                    op_->peer, describe_tag(op_->tag), fabric_->reason()),
                        op_->rank, op_->peer, op_->tag, op_->dir);
    }
    throw LinkTimeout(fmt::format("rank {}: {} rank {} on {} ({} bytes) did not complete by its deadline "
                                  "(waited {} ms); {}",
                                  op_->rank, dir_name(op_->dir), op_->peer, describe_tag(op_->tag), op_->size,
                                  waited.count(), peer_side),
                      op_->rank, op_->peer, op_->tag, op_->dir);
  }

 private:
  bool check_locked() {
    switch (op_->state) {
      case OpState::Done: return true;
      case OpState::Failed: throw LinkError(op_->error, op_->rank, op_->peer, op_->tag, op_->dir);
      case OpState::Cancelled:
        throw LinkError(fmt::format("rank {}: {} rank {} on {} was cancelled", op_->rank, dir_name(op_->dir),
                                    op_->peer, describe_tag(op_->tag)),
                        op_->rank, op_->peer, op_->tag, op_->dir);
      case OpState::Pending:
      case OpState::Matched:
      case OpState::Copying: return false;
    }
    return false;
  }

  std::shared_ptr<InProcFabric::Impl> fabric_;
  Mailbox* box_;
  Op op_data_;
  Op* const op_ = &op_data_;
};

class InProcLinks final : public Links {
 public:
  InProcLinks(std::shared_ptr<InProcFabric::Impl> fabric, int rank) : fabric_(std::move(fabric)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(fabric_->boxes.size()); }

  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override {
    Op op = make_op(LinkDirection::Send, peer, tag, data.size());
    op.src = data.data();
    return post(*fabric_->boxes[static_cast<size_t>(peer)], std::move(op));
  }

  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    Op op = make_op(LinkDirection::Recv, peer, tag, data.size());
    op.dst = data.data();
    return post(*fabric_->boxes[static_cast<size_t>(rank_)], std::move(op));
  }

 private:
  Op make_op(LinkDirection dir, int peer, Tag tag, size_t size) const {
    if (peer < 0 || peer >= this->size() || peer == rank_) {
      throw LinkError(fmt::format("rank {}: invalid peer {} (world size {})", rank_, peer, this->size()), rank_,
                      peer, tag, dir);
    }
    Op op;
    op.dir = dir;
    op.rank = rank_;
    op.peer = peer;
    op.tag = tag;
    op.size = size;
    return op;
  }
  RequestPtr post(Mailbox& box, Op op) {
    if (fabric_->one_thread && !sched::in_fiber()) {
      // Not a rank's fiber: a thread of the implementation's own, which the
      // unlocked mailboxes cannot serve (and whose waits would not be in
      // virtual time). Refused rather than raced.
      throw LinkError(fmt::format("rank {}: {} rank {} on {} came from outside the simulated world's fibers (a thread "
                                  "of the implementation's own?); its ranks must call the links themselves, or run "
                                  "it as threads (--world threads)",
                                  op.rank, dir_name(op.dir), op.peer, describe_tag(op.tag)),
                      op.rank, op.peer, op.tag, op.dir);
    }
    auto req = std::make_unique<InProcRequest>(fabric_, &box, std::move(op));
    {
      const auto lk = fabric_->lock(box);
      InProcFabric::Impl::post(box, req->op(), fabric_->nccl_sizes.load(std::memory_order_relaxed),
                               fabric_->model ? &*fabric_->model : nullptr);
    }
    return req;
  }

  std::shared_ptr<InProcFabric::Impl> fabric_;
  int rank_;
};

}  // namespace

InProcFabric::InProcFabric(int size) {
  if (size < 1) throw std::invalid_argument("InProcFabric: size must be >= 1");
  impl_ = std::make_shared<Impl>(size);
}
InProcFabric::~InProcFabric() = default;

int InProcFabric::size() const { return static_cast<int>(impl_->boxes.size()); }

std::unique_ptr<Links> InProcFabric::links(int rank) {
  if (rank < 0 || rank >= size()) throw std::out_of_range("InProcFabric::links: rank out of range");
  return std::make_unique<InProcLinks>(impl_, rank);
}

void InProcFabric::abort(const std::string& reason, uint64_t from_call, uint64_t group) {
  {
    std::lock_guard<std::mutex> g(impl_->abort_mu);
    if (!impl_->aborted.load()) {
      impl_->abort_reason = reason;
      impl_->abort_group.store(group, std::memory_order_release);
    } else if (group != impl_->abort_group.load()) {
      from_call = 0;  // failures in two groups: every transfer fails
    }
    if (from_call < impl_->abort_from.load()) impl_->abort_from.store(from_call, std::memory_order_release);
  }
  impl_->aborted.store(true, std::memory_order_release);
  for (auto& b : impl_->boxes) {
    std::lock_guard<std::mutex> g(b->mu);
    sched::notify_all(b->cv);
  }
}

void InProcFabric::set_sizes_as_nccl(bool on) { impl_->nccl_sizes.store(on); }
void InProcFabric::set_link_model(std::optional<LinkModel> m) { impl_->model = std::move(m); }
void InProcFabric::set_one_thread() { impl_->one_thread = true; }

bool InProcFabric::aborted() const { return impl_->aborted.load(std::memory_order_acquire); }
std::string InProcFabric::abort_reason() const { return impl_->reason(); }

void InProcFabric::reset() {
  for (auto& b : impl_->boxes) {
    std::lock_guard<std::mutex> g(b->mu);
    for (auto* queue : {&b->sends, &b->recvs})
      for (Op* op : *queue) op->state = OpState::Cancelled;
    b->sends.clear();
    b->recvs.clear();
    b->cancelled.clear();
  }
  std::lock_guard<std::mutex> g(impl_->abort_mu);
  impl_->abort_reason.clear();
  impl_->abort_from.store(UINT64_MAX, std::memory_order_release);
  impl_->abort_group.store(0, std::memory_order_release);
  impl_->aborted.store(false, std::memory_order_release);
}

size_t InProcFabric::pending() const {
  size_t n = 0;
  for (auto& b : impl_->boxes) {
    std::lock_guard<std::mutex> g(b->mu);
    n += b->sends.size() + b->recvs.size();
  }
  return n;
}

}  // namespace collcheck
