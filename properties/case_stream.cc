#include "properties/case_stream.h"

#include <algorithm>
#include <utility>

#include "properties/generators.h"

namespace collcheck {

namespace {
// Cases the workers may run ahead of the one next() waits for, per worker.
// A slow case (a large count, seconds) leaves the other workers idle only
// once they run this far past it; a failure, a stop or a time budget drops
// those run ahead (they cost only the time they took, and the run waits only
// for the cases running then: a failure may wait for a heavy case started
// early, and only the reference algorithms, which fail only where collcheck
// has a bug, run side by side). An outcome kept ahead is a few hundred bytes.
constexpr size_t kAheadPerWorker = 4096;

}  // namespace

size_t case_weight(const Case& c) {
  size_t n = c.count;
  for (const Case& t : c.then) n += t.count;
  return kFixedWeight + n * static_cast<size_t>(c.p);
}

CaseStream::CaseStream(const VerifyOptions& o, RecordingExecutor& exec)
    : o_(o), exec_(exec), base_(o.seed), gen_(gen_case(o.space)) {}

CaseStream::~CaseStream() { stop_workers(); }

rc::Shrinkable<Case> CaseStream::draw(size_t i) {
  const rc::Random ri = base_.split();
  return gen_(ri, static_cast<int>((o_.first_size + i) % (rc::kNominalSize + 1)));
}

void CaseStream::draw_to(size_t end) {
  for (; drawn_ < end; ++drawn_) {
    auto sh = draw(drawn_);
    const size_t w = case_weight(sh.value());
    ahead_.emplace(drawn_, Slot{std::move(sh), w, false, std::nullopt, nullptr});
    waiting_.emplace(w, ~drawn_);
    waiting_weight_ += w;
  }
}

void CaseStream::started(size_t k) {
  Slot& slot = ahead_.at(k);
  slot.started = true;
  waiting_.erase({slot.weight, ~k});
  waiting_weight_ -= slot.weight;
}

void CaseStream::unstart_all() {
  waiting_.clear();
  waiting_weight_ = 0;
  for (auto& [k, slot] : ahead_) {
    slot.started = false;
    waiting_.emplace(slot.weight, ~k);
    waiting_weight_ += slot.weight;
  }
}

std::optional<size_t> CaseStream::pick() {
  const size_t limit = std::min(o_.cases, taken_ + kAheadPerWorker * exec_.parallel());
  first_free_ = std::max(first_free_, taken_);  // a taken case has left ahead_
  while (first_free_ < limit && first_free_ < drawn_ && ahead_.at(first_free_).started) ++first_free_;
  if (first_free_ >= limit) return std::nullopt;
  // Every case the workers may run is drawn, so that a heavy one later in
  // the window is seen (drawing is cheap: a case's fields, not its data).
  draw_to(limit);
  const auto [heaviest, not_index] = *waiting_.begin();  // first_free_ waits: never empty
  const size_t others = waiting_weight_ - heaviest;
  if (o_.cases - first_free_ <= kTail || others <= heaviest * exec_.parallel()) return ~not_index;
  return first_free_;
}

void CaseStream::work(size_t worker) {
  std::unique_lock lock(m_);
  for (;;) {
    std::optional<size_t> k;
    cv_.wait(lock, [&] { return stop_ || (k = pick()).has_value(); });
    if (stop_) return;
    // Drawn (unless a drop kept it drawn) in index order under the lock, as
    // one at a time would draw them.
    started(*k);
    Slot& slot = ahead_.at(*k);
    const Case c = slot.case_.value();
    lock.unlock();
    std::optional<CaseOutcome> out;
    std::exception_ptr error;
    try {
      out = exec_.run_on(worker, c);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    slot.outcome = std::move(out);  // the slot stays: only next() takes it, once its outcome or error is set
    slot.error = error;
    cv_.notify_all();
  }
}

void CaseStream::stop_workers() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  stop_ = false;
}

CaseStream::Next CaseStream::next(size_t i) {
  if (exec_.parallel() <= 1) return {draw(i), std::nullopt};
  if (workers_.empty()) {  // the first call, or after a stop (taken_ is i either way)
    for (size_t w = 0; w < exec_.parallel(); ++w) workers_.emplace_back(&CaseStream::work, this, w);
  }
  std::unique_lock lock(m_);
  // Bounded by the case's own deadlines (each call's, and the case's limit).
  cv_.wait(lock, [&] {
    const auto it = ahead_.find(i);
    return it != ahead_.end() && (it->second.outcome || it->second.error);
  });
  auto node = ahead_.extract(i);
  taken_ = i + 1;
  lock.unlock();
  cv_.notify_all();
  Slot& slot = node.mapped();
  // The history (the cases run before a failure) in index order, as one at
  // a time would record it; the cases run ahead of a failure never join it.
  exec_.record(slot.case_.value());
  if (slot.error) {
    stop_workers();
    std::rethrow_exception(slot.error);
  }
  if (slot.outcome->harness_error) stop_workers();  // the caller runs it again, on worker 0's runner
  return {std::move(slot.case_), std::move(slot.outcome)};
}

void CaseStream::drop_ahead() {
  stop_workers();
  // The cases stay drawn, not run: a later next() runs them again in turn, so
  // that the stream goes on as one at a time would.
  for (auto& [k, slot] : ahead_) {
    slot.outcome.reset();
    slot.error = nullptr;
  }
  unstart_all();
  first_free_ = taken_;
}

}  // namespace collcheck
