// What the property rows share (internal to properties/): the element-level
// checks of one call (CallChecker), the peers' pass over the first call
// (PeerPass), documented deviations, and the text of a failure's detail.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/check/expectation_memo.h"
#include "harness/model/data.h"
#include "impl/element_ops.h"
#include "impl/kernels.h"
#include "properties/properties.h"

namespace collcheck {
// The names of a case's calls (the call, its repeat, the other placement, the async twin).
extern const char* const kCallNames[kNumCalls];
}  // namespace collcheck

namespace collcheck::checking {

inline std::string first_diff_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                              const std::byte* want, const std::byte* got, std::string_view want_name,
                              std::string_view got_name) {
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t a = load_element(c.dtype, want, i), b = load_element(c.dtype, got, i);
    if (a == b) continue;
    std::vector<uint64_t> vals;
    for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
    const Expectation e = expect_element(red, vals);
    return fmt::format("  first difference at element [{}]:\n    {}: {}\n    {}: {}\n    oracle: {}\n", i, want_name,
                       format_element(c.dtype, a), got_name, format_element(c.dtype, b), e.describe(c.dtype));
  }
  return "";
}

inline std::string oracle_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                          const std::byte* result, size_t i, std::string_view who) {
  std::vector<uint64_t> vals;
  for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
  const Expectation e = expect_element(red, vals);
  const uint64_t got = load_element(c.dtype, result, i);
  const Verdict v = judge(red, e, got);
  std::string bound;
  switch (e.kind) {
    case CheckKind::Bitwise: bound = "0 (bitwise: the result does not depend on the reduction order)"; break;
    case CheckKind::OneOf: bound = "exactly one of the outcomes some reduction order gives"; break;
    case CheckKind::Interval:
      bound = "the range or the special values that some reduction order can reach (overflow, underflow or "
              "saturation on the way)";
      break;
    case CheckKind::Bound:
      bound = fmt::format("{:.3g} [{}]; the error is {:.3g} bounds", e.bound, check_kind_name(e.kind), v.err_units);
  }
  std::string ins;
  for (size_t r = 0; r < vals.size(); ++r) ins += fmt::format("      rank {}: {}\n", r, format_element(c.dtype, vals[r]));
  return fmt::format("  first wrong element: [{}] on {}\n    expected: {}\n    got:      {}\n    bound:    {}\n"
                     "    inputs at [{}]:\n{}",
                     i, who, e.describe(c.dtype), format_element(c.dtype, got), bound, i, ins);
}

// Each line of `text` indented by `pad`.
inline std::string indent(const std::string& text, std::string_view pad = "    ") {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out += fmt::format("{}{}\n", pad, std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Whether `got`, which the oracle rejects, is one of the outcomes the
// implementation's documented deviation from NCCL semantics allows (counted,
// never silently).
inline bool deviation_accepts(const Implementation& impl, const Reduction& red, std::span<const uint64_t> vals, uint64_t got,
                              std::map<std::string, size_t>& deviant) {
  const Deviation* d = impl.deviation(red.dtype, red.op);
  if (!d || !d->allows(red, vals, got)) return false;
  ++deviant[d->name];
  return true;
}

// The peers' results on the first call, judged element by element under the
// expectation the implementation's result at that element was judged by (so
// that each element's expectation is computed once, not once per peer).
class PeerPass {
 public:
  explicit PeerPass(CheckContext& x) : x_(x) { x_.peers.assign(x.cfg.peers.size(), PeerJudgement{}); }
  // `a`: the implementation's result at element i; a_ok: the oracle accepts it as it is.
  void element(size_t i, const Expectation& e, std::span<const uint64_t> vals, uint64_t a, bool a_ok) {
    const DType t = x_.c.dtype;
    for (size_t pi = 0; pi < x_.peers.size(); ++pi) {
      PeerJudgement& j = x_.peers[pi];
      if (j.first_rejected) continue;
      const uint64_t b = load_element(t, x_.st.peer_out[pi][0].data(), i);
      const bool b_ok = judge(x_.red, e, b).ok;
      if (!b_ok && !deviation_accepts(*x_.cfg.peers[pi], x_.red, vals, b, j.deviant)) {
        j.first_rejected = i;
        j.expected_there = e.describe(t);
        continue;
      }
      // The difference in units of the bound, between results the oracle
      // accepts as they are (an element accepted only under a documented
      // deviation is counted there, not here).
      if (e.kind == CheckKind::Bound && e.bound > 0 && a_ok && b_ok) {
        const double da = element_to_double(t, a), db = element_to_double(t, b);
        if (std::isfinite(da) && std::isfinite(db))
          j.max_diff_units =
              std::max(j.max_diff_units, static_cast<double>(std::fabs(static_cast<long double>(da) - db) / e.bound));
      }
    }
  }

  // Whether the oracle's fast check (check_all_reduce) finds every peer's
  // result (rank 0's) right.
  bool all_right(const Reduction& red, std::span<const void* const> inputs, size_t count) const {
    for (size_t pi = 0; pi < x_.peers.size(); ++pi)
      if (check_all_reduce(red, inputs, x_.st.peer_out[pi][0].data(), count).wrong != 0) return false;
    return true;
  }

 private:
  CheckContext& x_;
};



// The checks of one call of a case's sequence, over every rank's buffers. Each
// returns the failure (property, detail) or nothing; `where` names the call in
// the detail when the case is a sequence.
class CallChecker {
 public:
  // `call` is the case itself or one of its further calls; `whole` the case
  // (its nodes hold for every call).
  CallChecker(const Case& whole, const Case& call, const std::vector<std::vector<std::byte>>& inputs,
              const RunConfig& cfg, CaseOutcome& out, std::string where)
      : c_(call), cfg_(cfg), out_(out), inputs_(inputs), red_(call.reduction()),
        bytes_(call.count * dtype_size(call.dtype)), where_(std::move(where)), nodes_(case_nodes(whole, cfg)) {}

  // Canaries intact, and out-of-place inputs left alone, in bufs[r][slot].
  std::optional<Failure> buffers(const CaseExecution& st, size_t slot, const char* call_name) const {
    for (size_t r = 0; r < st.bufs.size(); ++r) {
      const CallBuffers& b = st.bufs[r][slot];
      if (auto w = stray_write(b.recv, bytes_))
        return failure(c_.count == 0 ? "count-zero-is-noop" : "no-write-outside-count",
                       fmt::format("  rank {} wrote {} in {} ({}): byte is {:#04x}, canary was {:#04x}\n", r,
                                   w->where(bytes_, c_.dtype), call_name, b.inplace ? "in-place" : "out-of-place",
                                   static_cast<unsigned>(w->is), static_cast<unsigned>(w->was)));
      if (b.inplace) continue;
      if (auto d = difference(c_.dtype, inputs_[r].data(), b.send_data(), c_.count)) {
        const size_t i = d.first;
        return failure("input-untouched",
                       fmt::format("  rank {} modified its send buffer in {} (out-of-place): element [{}] was {}, is {}\n",
                                   r, call_name, i, format_element(c_.dtype, load_element(c_.dtype, inputs_[r].data(), i)),
                                   format_element(c_.dtype, load_element(c_.dtype, b.send_data(), i))));
      }
    }
    return std::nullopt;
  }

  // `result` (rank 0's) against the oracle, then in the implementation's
  // declared reduction order.
  // `peers`, when given, judges the peers' results at each element too.
  std::optional<Failure> oracle(const std::byte* result, PeerPass* peers = nullptr) {
    const size_t P = inputs_.size();
    // A large call's elements would otherwise spend seconds enumerating every
    // order's outcome where products of extreme values overflow (p = 6 to 8).
    const EnumerationBudget budget(kEnumerationStepsPerCall);
    // Integers, max and min: every element's expectation is the rank-order
    // fold, bit for bit (expect_element's Bitwise case). When the oracle's
    // fast check (the fold by the reduce kernels) finds this result and every
    // peer's right, the pass below would find the same and add only the
    // counts, so they are taken from it. Anything wrong takes the pass below,
    // for its report. (The declared-order replay is for float sums and
    // products only: not these.)
    if (order_free(red_)) {
      std::vector<const void*> ptrs(P);
      for (size_t r = 0; r < P; ++r) ptrs[r] = inputs_[r].data();
      const CheckSummary s = check_all_reduce(red_, ptrs, result, c_.count);
      if (s.wrong == 0 && (!peers || peers->all_right(red_, ptrs, c_.count))) {
        for (size_t k = 0; k < kCheckKinds; ++k) out_.by_kind[k] += s.by_kind[k];
        return std::nullopt;
      }
    }
    std::vector<uint64_t> vals(P);
    size_t wrong = 0;
    std::optional<size_t> first_wrong;
    ExpectationMemo memo(red_, P, c_.count);  // elements whose inputs repeat: a large call of a few values
    for (size_t i = 0; i < c_.count; ++i) {
      for (size_t r = 0; r < P; ++r) vals[r] = load_element(c_.dtype, inputs_[r].data(), i);
      const Expectation& e = memo.expect(vals);
      const uint64_t got = load_element(c_.dtype, result, i);
      ++out_.by_kind[static_cast<int>(e.kind)];
      const Verdict v = judge(red_, e, got);
      if (peers) peers->element(i, e, vals, got, v.ok);
      if (v.ok) {
        if (e.kind == CheckKind::Bound) out_.max_err_units = std::max(out_.max_err_units, v.err_units);
        continue;
      }
      if (deviation_accepts(*cfg_.impl, red_, vals, got, out_.deviant)) continue;
      ++wrong;
      if (!first_wrong) first_wrong = i;
    }
    if (wrong > 0)
      return failure("agrees-with-oracle", fmt::format("  {} of {} elements wrong\n", wrong, c_.count) +
                                               oracle_detail(c_, red_, inputs_, result, *first_wrong, "rank 0"));
    // The declared reduction order, replayed with NCCL's semantics: float sums
    // and products bit for bit, where the all-orders bound is too loose to see
    // a rounding bug.
    if (!dtype_is_float(c_.dtype) || (red_.combine != Combine::Sum && red_.combine != Combine::Prod))
      return std::nullopt;
    return visit_dtype(c_.dtype, [&](auto tag) { return replay_declared_order<decltype(tag)>(result); });
  }

  // Every rank's bufs[r][slot] holds rank 0's bits.
  std::optional<Failure> identical(const CaseExecution& st, size_t slot) const {
    const std::byte* result = st.bufs[0][slot].recv_data();
    for (size_t r = 1; r < st.bufs.size(); ++r) {
      const std::byte* other = st.bufs[r][slot].recv_data();
      if (std::memcmp(other, result, bytes_) != 0)
        return failure("ranks-identical", fmt::format("  rank {} differs from rank 0\n", r) +
                                              first_diff_detail(c_, red_, inputs_, result, other, "rank 0",
                                                                fmt::format("rank {}", r)));
    }
    return std::nullopt;
  }

  const std::vector<std::vector<std::byte>>& inputs() const { return inputs_; }
  const Reduction& red() const { return red_; }
  size_t bytes() const { return bytes_; }

 private:
  // The declared reduction order, replayed in T (the dtype's type: one
  // dispatch per call, not one per step). The elements that share an order
  // (a chunk's, in a ring) are replayed together, up to kOrderBlock at a
  // time: each step of the order once over the block's elements, in a loop
  // the compiler can vectorize, and the order itself checked once. The
  // elements are still judged in index order: the first that fails is the
  // one element by element would name, with the same words.
  static constexpr size_t kOrderBlock = 256;
  template <typename T>
  std::optional<Failure> replay_declared_order(const std::byte* result) {
    using Ops = ElementOps<T>;
    const size_t P = inputs_.size();
    const auto premul = [&](uint64_t x) {
      if constexpr (sizeof(T) == 1) return premul_bits_fast(red_, x);  // a table
      else return premul_bits_as<T>(red_, x);
    };
    [[maybe_unused]] const uint8_t* steps = fp8_step_table(c_.dtype, red_.combine);
    std::vector<int> prog, block_prog;
    std::vector<T> cols;  // the replay's stack, one column of kOrderBlock values per depth
    std::vector<bool> used(P);
    size_t first = 0, n = 0;  // the block: elements [first, first + n), all of order block_prog
    // Replays and judges the block; a failure for its first wrong element.
    const auto flush = [&]() -> std::optional<Failure> {
      if (n == 0) return std::nullopt;
      size_t depth = 0, most = 0;
      std::fill(used.begin(), used.end(), false);
      bool valid = true;
      for (int op : block_prog) {
        if (op >= 0 && static_cast<size_t>(op) < P && !used[static_cast<size_t>(op)]) {
          used[static_cast<size_t>(op)] = true;
          most = std::max(most, ++depth);
        } else if (op == -1 && depth >= 2) {
          --depth;
        } else {
          valid = false;
          break;
        }
      }
      valid = valid && depth == 1 && std::count(used.begin(), used.end(), true) == static_cast<long>(P);
      if (!valid)
        return failure("matches-declared-order",
                       fmt::format("  {} declares an order for element [{}] that is not a reduction tree over ranks "
                                   "0..{}: {}\n",
                                   cfg_.impl->name(), first, P - 1, fmt::join(block_prog, " ")));
      if (cols.size() < most * kOrderBlock) cols.resize(most * kOrderBlock);
      depth = 0;
      for (int op : block_prog) {
        if (op >= 0) {
          T* col = &cols[depth++ * kOrderBlock];
          const std::byte* in = inputs_[static_cast<size_t>(op)].data();
          for (size_t k = 0; k < n; ++k) col[k] = Ops::from_bits(premul(load_element(c_.dtype, in, first + k)));
        } else {
          T* a = &cols[(depth - 2) * kOrderBlock];
          const T* b = &cols[--depth * kOrderBlock];
          if constexpr (std::is_same_v<T, e4m3_t> || std::is_same_v<T, e5m2_t>) {  // fp8: a load a step
            for (size_t k = 0; k < n; ++k) a[k] = T{steps[static_cast<size_t>(a[k].bits) << 8 | b[k].bits]};
          } else if (red_.combine == Combine::Sum)
            for (size_t k = 0; k < n; ++k) a[k] = Ops::sum(a[k], b[k]);
          else
            for (size_t k = 0; k < n; ++k) a[k] = Ops::prod(a[k], b[k]);
        }
      }
      for (size_t k = 0; k < n; ++k) {
        const size_t i = first + k;
        ++out_.order_checked;
        const uint64_t want = Ops::to_bits(cols[k]), got = load_element(c_.dtype, result, i);
        const bool same = want == got || (std::isnan(element_to_double(c_.dtype, want)) &&
                                          std::isnan(element_to_double(c_.dtype, got)));
        if (!same)
          return failure("matches-declared-order",
                         fmt::format("  element [{}] on rank 0: the declared order (postfix: {}) gives {} with NCCL's "
                                     "rounding, the implementation returned {}\n",
                                     i, fmt::join(block_prog, " "), format_element(c_.dtype, want),
                                     format_element(c_.dtype, got)) +
                             oracle_detail(c_, red_, inputs_, result, i, "rank 0"));
      }
      n = 0;
      return std::nullopt;
    };
    for (size_t i = 0; i < c_.count; ++i) {
      prog.clear();
      bool declared;
      try {
        declared = cfg_.impl->reduction_order(c_.p, c_.count, i, nodes_, prog);
      } catch (const std::exception& e) {  // an order that breaks the ABI is a failure, never "none declared"
        if (auto f = flush()) return f;     // the elements before it first, as one at a time
        return failure("matches-declared-order", fmt::format("  {}\n", e.what()));
      }
      if (!declared) break;
      if (n > 0 && (n == kOrderBlock || prog != block_prog))
        if (auto f = flush()) return f;
      if (n == 0) {
        first = i;
        block_prog.swap(prog);
      }
      ++n;
    }
    return flush();
  }

  Failure failure(std::string_view property, std::string detail) const {
    if (!where_.empty()) detail = fmt::format("  in {}:\n", where_) + detail;
    return Failure{std::string(property), std::move(detail)};
  }
  const Case& c_;
  const RunConfig& cfg_;
  CaseOutcome& out_;
  const std::vector<std::vector<std::byte>>& inputs_;
  Reduction red_;
  size_t bytes_;
  std::string where_;
  std::vector<int> nodes_;  // case_nodes() of the whole case
};

}  // namespace collcheck::checking
