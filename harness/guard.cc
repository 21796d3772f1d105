#include "harness/guard.h"

#include <fmt/format.h>

namespace collcheck {

FingerprintGuard::FingerprintGuard(int nranks, Clock::time_point epoch) : nranks_(nranks), epoch_(epoch) {}

std::optional<Diagnosis> FingerprintGuard::classify(uint64_t seq) const {
  auto it = table_.find(seq);
  if (it == table_.end()) return std::nullopt;
  // The analysis's classification, on these fingerprints alone.
  std::vector<RankDump> dumps;
  for (const auto& [r, f] : it->second) {
    RankDump d;
    d.rank = r;
    d.size = nranks_;
    CallRecord c;
    c.seq = f.seq;
    c.tag = f.tag;
    c.count = f.count;
    c.dtype = f.dtype;
    c.op = f.op;
    d.calls.push_back(c);
    dumps.push_back(d);
  }
  auto found = analyze(dumps);
  if (found.empty()) return std::nullopt;
  auto d = found.front();
  d.text += " (caught before the call by guarded mode)";
  return d;
}

void FingerprintGuard::check(int rank, const CallFingerprint& fp) {
  std::lock_guard<std::mutex> g(mu_);
  table_[fp.seq][rank] = fp;
  if (violation_) throw GuardViolation("guarded mode: " + violation_->text);
  const auto& row = table_[fp.seq];
  const auto& first = row.begin()->second;
  bool same = true;
  for (const auto& [r, f] : row)
    same = same && f.tag == first.tag && f.count == first.count && f.dtype == first.dtype && f.op == first.op;
  if (same) return;
  violation_ = classify(fp.seq);
  when_ = std::chrono::duration<double>(Clock::now() - epoch_).count();
  throw GuardViolation("guarded mode: " + violation_->text);
}

std::optional<Diagnosis> FingerprintGuard::violation() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!violation_) return std::nullopt;
  return classify(*violation_->seq);
}

double FingerprintGuard::violation_time() const {
  std::lock_guard<std::mutex> g(mu_);
  return when_;
}

}  // namespace collcheck
