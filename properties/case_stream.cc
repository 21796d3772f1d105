#include "properties/case_stream.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "properties/generators.h"

namespace collcheck {

CaseStream::CaseStream(const VerifyOptions& o, RecordingExecutor& exec)
    : o_(o), exec_(exec), base_(o.seed), gen_(gen_case(o.space)), batch_(4 * exec.parallel()) {}

rc::Shrinkable<Case> CaseStream::draw(size_t i) {
  const rc::Random ri = base_.split();
  return gen_(ri, static_cast<int>((o_.first_size + i) % (rc::kNominalSize + 1)));
}

CaseStream::Next CaseStream::next(size_t i) {
  if (ahead_.empty() && exec_.parallel() > 1) {
    std::vector<rc::Shrinkable<Case>> drawn;
    std::vector<Case> cs;
    for (size_t k = i; k < o_.cases && k < i + batch_; ++k) {
      drawn.push_back(draw(k));
      cs.push_back(drawn.back().value());
    }
    const auto t0 = Clock::now();
    std::vector<CaseOutcome> outs = exec_.run_batch(cs);
    // About half a second a batch: a time budget, a stop or a failure waits
    // at most that long for the rest of its batch, and a batch is long enough
    // that a slow case (a large count) seldom leaves the other threads idle.
    const double took = std::max(1e-3, std::chrono::duration<double>(Clock::now() - t0).count());
    batch_ = std::clamp<size_t>(static_cast<size_t>(static_cast<double>(cs.size()) * 0.5 / took), exec_.parallel(),
                                256 * exec_.parallel());
    for (size_t k = 0; k < cs.size(); ++k) ahead_.emplace_back(std::move(drawn[k]), std::move(outs[k]));
  }
  if (ahead_.empty()) return {draw(i), std::nullopt};
  Next n{std::move(ahead_.front().first), std::move(ahead_.front().second)};
  ahead_.pop_front();
  return n;
}

void CaseStream::drop_ahead() {
  exec_.forget_last(ahead_.size());
  ahead_.clear();
}

}  // namespace collcheck
