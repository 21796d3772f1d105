// What the sweep measures and checks besides the calls: memcpy's rate (the
// peer of the memory-traffic bound), a row's outputs, the sizes, the model.
#include "harness/run/sweep.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "harness/check/oracle.h"
#include "impl/links.h"
#include "harness/check/output_check.h"
#include "harness/run/sweep_detail.h"

namespace collcheck {

double memcpy_bandwidth(size_t bytes, int iters) {
  std::vector<std::byte> a(bytes, std::byte{1}), b(bytes);
  std::memcpy(b.data(), a.data(), bytes);  // warm up (page faults)
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0;
}

double memcpy_bandwidth_threads(size_t bytes, int iters, int threads) {
  if (threads <= 1) return memcpy_bandwidth(bytes, iters);
  std::vector<std::vector<std::byte>> a(static_cast<size_t>(threads)), b(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    a[k].assign(bytes, std::byte{1});
    b[k].assign(bytes, std::byte{0});  // touched: no page faults in the timed copies
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> secs(a.size());
  std::vector<std::thread> pool;
  for (size_t k = 0; k < a.size(); ++k)
    pool.emplace_back([&, k] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) std::memcpy(i % 2 ? a[k].data() : b[k].data(), i % 2 ? b[k].data() : a[k].data(), bytes);
      secs[k] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true);
  for (auto& t : pool) t.join();
  const double slowest = *std::max_element(secs.begin(), secs.end());
  return slowest > 0 ? static_cast<double>(bytes) * iters * threads / slowest / 1e9 : 0;
}

OutputCheck check_outputs(const Reduction& red, std::span<const void* const> pristine,
                          std::span<const void* const> outputs, std::span<const void* const> inputs_after,
                          size_t count) {
  OutputCheck oc;
  const CheckSummary cs = check_all_reduce(red, pristine, outputs[0], count);
  oc.wrong = cs.wrong;
  oc.max_err_units = cs.max_err_units;
  if (cs.first_wrong) oc.first_problem = "rank 0 " + cs.first_wrong_detail;
  for (size_t r = 1; r < outputs.size(); ++r) {
    if (const auto d = difference(red.dtype, outputs[0], outputs[r], count)) {
      oc.wrong += d.elements;
      if (oc.first_problem.empty())
        oc.first_problem = fmt::format("rank {} differs from rank 0 in {} elements, first at element {}: {} vs {}",
                                       r, d.elements, d.first,
                                       format_element(red.dtype, load_element(red.dtype, outputs[r], d.first)),
                                       format_element(red.dtype, load_element(red.dtype, outputs[0], d.first)));
    }
  }
  for (size_t r = 0; r < inputs_after.size(); ++r) {
    if (difference(red.dtype, pristine[r], inputs_after[r], count)) {
      oc.wrong += 1;
      if (oc.first_problem.empty()) oc.first_problem = fmt::format("rank {}'s input buffer was modified", r);
    }
  }
  return oc;
}

std::vector<size_t> sweep_counts(const SweepOptions& o, DType t) {
  const size_t es = dtype_size(t);
  if (o.count) return {*o.count};
  std::vector<size_t> counts;
  double b = static_cast<double>(o.min_bytes);
  for (;;) {
    const size_t bytes = static_cast<size_t>(b);
    counts.push_back(bytes / es);
    if (bytes >= o.max_bytes) break;
    b = std::min(b * o.factor, static_cast<double>(o.max_bytes));
  }
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::optional<double> alpha_beta_seconds(std::string_view algo, int p, int nodes, size_t bytes, double alpha_s,
                                         double bytes_per_s) {
  if (nodes < 2) return std::nullopt;
  const double beta = bytes_per_s > 0 ? 1.0 / bytes_per_s : 0;
  const double n = static_cast<double>(bytes);
  if (algo == "ring") return 2.0 * (p - 1) * (alpha_s + n / p * beta);
  if (algo == "hierarchical") return 2.0 * (nodes - 1) * (alpha_s + n / nodes * beta);
  return std::nullopt;
}

}  // namespace collcheck
