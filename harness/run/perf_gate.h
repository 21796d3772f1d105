// The performance half of `collcheck gate` (issue 14): two sweep JSON files
// (sweep --json, --reps >= 9), compared row by row over their busbw samples.
// Rows match by algo, type, redop, size and placement; by all but the algo
// when each file holds one algo (a candidate implementation's rows against a
// baseline implementation's).
// A row regressed when three things hold together:
// - its candidate median busbw is more than `max_regression` below the
//   baseline's;
// - a one-sided Mann-Whitney U test (normal approximation, ties and
//   continuity corrected) says the candidate is slower at level `alpha`
//   divided by the number of rows compared (Bonferroni: many rows must not
//   multiply the false alarms);
// - the samples are apart: the candidate's upper quartile is below the
//   baseline's lower quartile (a shared, noisy machine moves whole runs).
// The samples are busbw, or busbw relative to the memcpy that sweep measured
// after each repetition when both files have one (memcpy_samples): a machine
// busier during one run than during the other slows the memcpy too.
//
// Two runs made one after the other drift apart on a shared machine (measured
// on the 2-core CI machine: a row's median moved by up to 30 % over a few
// minutes, and same-against-same pairs of files failed 46 times in 240). The
// side-by-side gate (compare_side_by_side) times both implementations in one
// sweep, sample k of each row in the same round, and compares round by round:
// the drift falls on both alike and cancels in each round's ratio.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/report/events.h"
#include "harness/report/report.h"

namespace collcheck {

class GateInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GateRow {
  std::string key;  // "ring float32 sum 1048576 B out-of-place" (without the algo when each file has one)
  size_t n_base = 0, n_cand = 0;
  double base_median = 0, cand_median = 0;  // busbw, GB/s
  double change = 0;                        // cand/base - 1, of the samples compared
  bool relative = false;                    // samples were busbw / memcpy (both files had memcpy_samples)
  double p_value = 1;
  bool paired = false;  // side by side: change is the median per-round ratio, p a Wilcoxon signed-rank test
  bool regressed = false;
  // Set when the candidate's row is wrong, failed or skipped: not compared,
  // and a failure of the gate.
  std::string unusable;
};

struct GateResult {
  std::vector<GateRow> rows;
  std::vector<std::string> only_in_baseline, only_in_candidate;
  double alpha_per_row = 0;
  size_t regressed() const;
  size_t unusable() const;
  size_t failed() const;  // regressed or unusable
};

// One-sided Mann-Whitney U: the p-value of "y is stochastically smaller than x".
double mann_whitney_less(const std::vector<double>& x, const std::vector<double>& y);

// Exact one-sided Wilcoxon signed-rank test: the p-value of "the d are centred
// below 0" (zeros dropped, tied magnitudes given their mean rank; exact over
// the 2^n signs of the ranks for n <= 40, the normal approximation beyond).
double wilcoxon_signed_rank_less(const std::vector<double>& d);

struct SweepResult;

// Side by side: `r` is one sweep whose first `n` rows are the baseline's and
// the next `n` the candidate's, in the same order, their samples taken in the
// same rounds. A row regressed when its median per-round busbw ratio is more
// than `max_regression` below 1, the Wilcoxon test on the per-round log ratios
// gives p < alpha / rows, and the candidate was slower in three rounds of four
// (the ratios' upper quartile below 1). Throws GateInputError for rows with
// fewer than `min_samples` samples or a baseline row that is no measurement.
GateResult compare_side_by_side(const SweepResult& r, size_t n, double max_regression, double alpha,
                                size_t min_samples);

// Throws GateInputError naming the file and the field for a file that is not
// a sweep --json file, rows with fewer than `min_samples` samples, a baseline
// row that is wrong, failed or skipped, or samples whose ratio is no finite
// number. A candidate row that is wrong, failed or skipped is a failed row.
GateResult compare_sweeps(const std::string& baseline_path, const std::string& candidate_path, double max_regression,
                          double alpha, size_t min_samples);

// "no regression", or what failed.
std::string gate_verdict(const GateResult& r);

// The comparison as a Markdown table, for a CI step summary.
std::string gate_markdown(const GateResult& r, double max_regression);

// The comparison as a table, one row per sweep row, and the verdict, to
// `ev`; `side`: timed side by side (the change is the median of the
// per-round ratios).
void say_perf_gate(Events& ev, const GateResult& r, const std::string& base, const std::string& cand, double limit,
                   bool side);
// The comparison's verdicts, one per row, for --report.
Report perf_gate_report(const GateResult& r, const std::string& base, const std::string& cand,
                        const std::string& limit);

}  // namespace collcheck
