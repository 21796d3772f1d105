#include "harness/check/guard.h"

#include <fmt/format.h>

#include <tuple>

namespace collcheck {

FingerprintGuard::FingerprintGuard(int nranks, Clock::time_point epoch, std::chrono::milliseconds settle)
    : nranks_(nranks), epoch_(epoch), settle_(settle) {}

namespace {
using Key = std::tuple<std::string, size_t, int, int, int, int>;
Key key_of(const CallFingerprint& f) {
  return {f.tag, f.count, static_cast<int>(f.dtype), reduces(f.coll) ? static_cast<int>(f.op) : 0,
          static_cast<int>(f.coll), f.peer};
}
}  // namespace

std::optional<Diagnosis> FingerprintGuard::classify(uint64_t seq) const {
  auto it = table_.find(seq);
  if (it == table_.end()) return std::nullopt;
  // The analysis's classification, on these fingerprints alone.
  std::vector<RankDump> dumps;
  for (const auto& [r, f] : it->second) {
    RankDump d;
    d.rank = r;
    d.size = nranks_;
    d.calls.push_back(record_of(f));
    dumps.push_back(d);
  }
  auto found = analyze(dumps);
  if (found.empty()) return std::nullopt;
  auto d = found.front();
  d.text += " (caught before the call by guarded mode)";
  return d;
}

void FingerprintGuard::check(int rank, const CallFingerprint& fp) {
  std::unique_lock<std::mutex> lk(mu_);
  auto& row = table_[fp.seq];
  row[rank] = fp;
  cv_.notify_all();
  if (violation_) throw GuardViolation("guarded mode: " + violation_->text);
  const Key first = key_of(row.begin()->second);
  bool same = true;
  for (const auto& [r, f] : row) same = same && key_of(f) == first;
  if (same) return;
  // A mismatch. Who is the odd one out is clear once a strict majority of the
  // world agrees, or every rank has posted.
  auto settled = [&] {
    if (violation_ || static_cast<int>(row.size()) == nranks_) return true;
    std::map<Key, int> n;
    for (const auto& [r, f] : row)
      if (2 * ++n[key_of(f)] > nranks_) return true;
    return false;
  };
  cv_.wait_until(lk, Clock::now() + settle_, settled);
  if (!violation_) {
    violation_ = classify(fp.seq);
    if (!violation_) {  // cannot happen with differing fingerprints; keep the message meaningful anyway
      Diagnosis d;
      d.kind = DiagnosisKind::ShapeMismatch;
      d.seq = fp.seq;
      d.text = fmt::format("fingerprints differ at call #{}", fp.seq);
      violation_ = d;
    }
    when_ = std::chrono::duration<double>(Clock::now() - epoch_).count();
    cv_.notify_all();
  }
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
