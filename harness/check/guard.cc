#include "harness/check/guard.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>

#include "impl/sched.h"

namespace collcheck {

FingerprintGuard::FingerprintGuard(int nranks, Clock::time_point epoch, std::chrono::milliseconds settle)
    : nranks_(nranks), epoch_(epoch), settle_(settle) {}

namespace {
// The fields record_of and detect_mismatch's key compare (the blocking form only under MPI's rule).
using Key = std::tuple<std::string, size_t, int, int, int, int, bool>;
Key key_of(const CallFingerprint& f) {
  return {f.tag, f.count, static_cast<int>(f.dtype), reduces(f.coll) ? static_cast<int>(f.op) : 0,
          static_cast<int>(f.coll), f.peer, f.blocking_matters && f.async};
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
  auto& last = last_checked_[rank];
  last = std::max(last, fp.seq);
  sched::notify_all(cv_);
  if (violation_) throw GuardViolation("guarded mode: " + violation_->text);
  const Key first = key_of(row.begin()->second);
  bool same = true;
  for (const auto& [r, f] : row) same = same && key_of(f) == first;
  if (same) {
    // Every rank agreed on this call: nothing can be asked of its row again
    // (a mismatch or a missing rank is found in a row some rank lacks or
    // differs in), so it goes, and the table stays as small as the ranks'
    // spread. last_checked_ keeps what ended() needs.
    if (static_cast<int>(row.size()) == nranks_) table_.erase(fp.seq);
    if (ended_.empty()) return;
    violation_ = missing();
    if (!violation_) return;
    when_ = std::chrono::duration<double>(sched::now() - epoch_).count();
    sched::notify_all(cv_);
    throw GuardViolation("guarded mode: " + violation_->text);
  }
  // A mismatch. Every odd one out is known once every rank has posted. (A
  // strict majority was once enough to stop waiting; but then the world
  // aborted the ranks still finishing the call before, and an odd one among
  // them was never named: at 128 rank threads, 1 run in 5 named rank 110 of
  // the two that skipped a call.) A rank that never comes (stalled, or held
  // by another group's call) is waited for until `settle` passes.
  auto settled = [&] { return violation_ || static_cast<int>(row.size()) == nranks_; };
  sched::wait_until(cv_, lk, sched::now() + settle_, settled);
  if (!violation_) {
    violation_ = classify(fp.seq);
    if (!violation_) {  // cannot happen with differing fingerprints; keep the message meaningful anyway
      Diagnosis d;
      d.kind = DiagnosisKind::ShapeMismatch;
      d.seq = fp.seq;
      d.text = fmt::format("fingerprints differ at call #{}", fp.seq);
      violation_ = d;
    }
    when_ = std::chrono::duration<double>(sched::now() - epoch_).count();
    sched::notify_all(cv_);
  }
  throw GuardViolation("guarded mode: " + violation_->text);
}

void FingerprintGuard::ended(int rank) {
  std::lock_guard<std::mutex> g(mu_);
  const auto it = last_checked_.find(rank);
  ended_[rank] = it == last_checked_.end() ? 0 : it->second;
  if (violation_) return;
  violation_ = missing();
  if (!violation_) return;
  when_ = std::chrono::duration<double>(sched::now() - epoch_).count();
  sched::notify_all(cv_);
  // This rank's program is over; its throw aborts the waits of the ranks
  // inside the call it will never join.
  throw GuardViolation("guarded mode: " + violation_->text);
}

std::optional<Diagnosis> FingerprintGuard::missing() const {
  if (ended_.empty()) return std::nullopt;
  uint64_t first_missed = UINT64_MAX;
  for (const auto& [r, last] : ended_) first_missed = std::min(first_missed, last + 1);
  const auto row = table_.find(first_missed);
  if (row == table_.end() || row->second.empty()) return std::nullopt;  // nobody waits in it
  std::vector<int> gone;
  for (const auto& [r, last] : ended_)
    if (last + 1 == first_missed) gone.push_back(r);
  if (row->second.size() + gone.size() != static_cast<size_t>(nranks_)) return std::nullopt;  // someone yet to come
  const Key first = key_of(row->second.begin()->second);
  for (const auto& [r, f] : row->second)
    if (key_of(f) != first) return std::nullopt;  // a mismatch there: check() names it
  std::vector<int> in;
  for (const auto& [r, f] : row->second) in.push_back(r);
  const CallFingerprint& fp = row->second.begin()->second;
  Diagnosis d;
  d.kind = DiagnosisKind::MissingRank;
  d.ranks = gone;
  d.seq = first_missed;
  d.text = fmt::format("{} ended {} program after call #{} and will never join call #{} ({} {} count={} {}), which "
                       "{} entered (caught by guarded mode when the last rank arrived, without waiting out the "
                       "deadline)",
                       rank_ranges_text(gone), gone.size() == 1 ? "its" : "their", first_missed - 1, first_missed,
                       collective_name(fp.coll), fp.tag, fp.count, dtype_name(fp.dtype), rank_ranges_text(in));
  return d;
}

std::optional<Diagnosis> FingerprintGuard::violation() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!violation_) return std::nullopt;
  if (violation_->kind == DiagnosisKind::MissingRank) return violation_;
  return classify(*violation_->seq);
}

double FingerprintGuard::violation_time() const {
  std::lock_guard<std::mutex> g(mu_);
  return when_;
}

}  // namespace collcheck
