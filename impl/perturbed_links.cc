#include "impl/perturbed_links.h"

#include <mutex>
#include <optional>
#include <thread>

#include "impl/sched.h"

namespace collcheck {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A posted transfer whose completion is seen no earlier than `visible_after`
// after it completed.
class PerturbedRequest final : public LinkRequest {
 public:
  PerturbedRequest(RequestPtr inner, Clock::duration visible_after)
      : inner_(std::move(inner)), visible_after_(visible_after) {}
  bool test() override {
    if (!done_) {
      if (!inner_->test()) return false;
      done_ = sched::now();
    }
    if (sched::now() >= *done_ + visible_after_) return true;
    sched::yield();
    return false;
  }
  void wait(Deadline deadline) override {
    if (!done_) {
      inner_->wait(deadline);
      done_ = sched::now();
    }
    sched::sleep_until(std::min(*done_ + visible_after_, deadline));
  }

 private:
  RequestPtr inner_;
  Clock::duration visible_after_;
  std::optional<Clock::time_point> done_;
};

// Posting late is done by sleeping before the post: the rank is then slow at
// exactly that point, FIFO per (peer, tag) holds trivially, and no transfer
// depends on its owner coming back to it (a deferred send handed over only
// when its owner waits on it would deadlock two ranks that each wait on a
// receive first).
class PerturbedLinks final : public LinksDecorator {
 public:
  PerturbedLinks(Links& inner, uint64_t seed) : LinksDecorator(inner), state_(mix(seed ^ mix(static_cast<uint64_t>(inner.rank())))) {}
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override {
    const auto [late, visible] = draw();
    if (late > Clock::duration::zero()) sched::sleep_for(late);
    return std::make_unique<PerturbedRequest>(inner_.isend(peer, tag, data), visible);
  }
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    const auto [late, visible] = draw();
    if (late > Clock::duration::zero()) sched::sleep_for(late);
    return std::make_unique<PerturbedRequest>(inner_.irecv(peer, tag, data), visible);
  }

 private:
  // 0 seven times in eight, else up to kMaxPerturbDelay; for the post and for
  // the completion.
  std::pair<Clock::duration, Clock::duration> draw() {
    std::lock_guard lock(mu_);  // an async call may run on the communicator's worker thread
    auto one = [&] {
      state_ = mix(state_);
      if (state_ % 8 != 0) return Clock::duration::zero();
      return std::chrono::duration_cast<Clock::duration>(kMaxPerturbDelay) * static_cast<int64_t>((state_ >> 8) % 1024) /
             1024;
    };
    const auto a = one();
    return {a, one()};
  }
  std::mutex mu_;
  uint64_t state_;
};

}  // namespace

std::unique_ptr<Links> make_perturbed_links(Links& inner, uint64_t seed) {
  return std::make_unique<PerturbedLinks>(inner, seed);
}

}  // namespace collcheck
