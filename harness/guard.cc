#include "harness/guard.h"

#include <fmt/format.h>

namespace collcheck {

FingerprintGuard::FingerprintGuard(int nranks, Clock::time_point epoch) : nranks_(nranks), epoch_(epoch) {}

void FingerprintGuard::check(int rank, const CallFingerprint& fp) {
  std::lock_guard<std::mutex> g(mu_);
  auto& row = table_[fp.seq];
  row[rank] = fp;
  if (violation_) throw GuardViolation("guarded mode: " + violation_->text);
  // Compare with the fingerprint most ranks have at this sequence number so far.
  std::map<std::tuple<std::string, size_t, int, int>, std::vector<int>> groups;
  for (const auto& [r, f] : row)
    groups[{f.tag, f.count, static_cast<int>(f.dtype), static_cast<int>(f.op)}].push_back(r);
  if (groups.size() < 2) return;
  // Reuse the analysis's classification on these fingerprints.
  std::vector<RankDump> dumps;
  for (const auto& [r, f] : row) {
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
  if (found.empty()) return;
  violation_ = found.front();
  violation_->text += " (caught before the call by guarded mode)";
  when_ = std::chrono::duration<double>(Clock::now() - epoch_).count();
  throw GuardViolation("guarded mode: " + violation_->text);
}

std::optional<Diagnosis> FingerprintGuard::violation() const {
  std::lock_guard<std::mutex> g(mu_);
  return violation_;
}

double FingerprintGuard::violation_time() const {
  std::lock_guard<std::mutex> g(mu_);
  return when_;
}

}  // namespace collcheck
