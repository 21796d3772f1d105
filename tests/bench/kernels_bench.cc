// Micro-benchmark of the CPU reduce kernels, side by side with memcpy as the
// peer in the same run. `reduce(dst, src)` reads two buffers and writes one, so
// a memory-bound kernel moves 3 bytes per output byte where memcpy moves 2; the
// table after the run prints each kernel's bandwidth (bytes of dst per second)
// as a ratio to memcpy's. Run it with ci/bench; it is not a test and is not
// timed in CI.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "harness/check/oracle.h"
#include "impl/element_ops.h"
#include "impl/kernels.h"

using namespace collcheck;

namespace {

// 256 MiB: beyond any last-level cache, so memcpy and the kernels both run
// at memory speed. 8 MiB stayed in L3 on an EPYC host (memcpy at 36-49 GB/s
// there, against 15 GB/s from 128 MiB up), which timed the cache, not memory.
constexpr size_t kBytes = size_t{256} << 20;

void BM_memcpy(benchmark::State& state) {
  std::vector<std::byte> a(kBytes, std::byte{1}), b(kBytes);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kBytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}

void BM_reduce(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const auto c = static_cast<Combine>(state.range(1));
  const size_t n = kBytes / dtype_size(t);
  std::vector<std::byte> dst(kBytes), src(kBytes);
  // Benign values (1.0-ish): no NaN, Inf or subnormal slow paths. Seven
  // elements' pattern, tiled (one conversion per element would take seconds).
  std::vector<std::byte> pattern(7 * dtype_size(t));
  for (size_t i = 0; i < 7; ++i) {
    const uint64_t one = to_element_bits(t, 1.0 + static_cast<double>(i) / 8);
    std::memcpy(pattern.data() + i * dtype_size(t), &one, dtype_size(t));
  }
  for (size_t off = 0; off < kBytes; off += pattern.size()) {
    const size_t len = std::min(pattern.size(), kBytes - off);
    std::memcpy(dst.data() + off, pattern.data(), len);
    std::memcpy(src.data() + off, pattern.data(), len);
  }
  for (auto _ : state) {
    // prod overflows to Inf (or saturates, or wraps) after a few rounds: no
    // slow path on these CPUs (only subnormals have one).
    reduce(dst.data(), src.data(), n, t, c);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
  // This kernel's own peer (after the timed loop): memcpy between the same two buffers, right after
  // it, so that a shared host's slow minute falls on both (one memcpy at the
  // start of the run was 15-21 GB/s from run to run on the EPYC host).
  constexpr int kCopies = 4;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCopies; ++i) {
    std::memcpy(i % 2 ? src.data() : dst.data(), i % 2 ? dst.data() : src.data(), kBytes);
    benchmark::ClobberMemory();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.counters["memcpy_Bps"] = static_cast<double>(kBytes) * kCopies / secs;
  const char* op = c == Combine::Sum ? "sum" : c == Combine::Prod ? "prod" : c == Combine::Max ? "max" : "min";
  state.SetLabel(fmt::format("{} {}", dtype_name(t), op));
}

// The oracle's check of one all-reduce result: 64 MiB of float32 from each
// of 8 ranks. Integers, max and min (`bitwise`: one fold, compared bit for
// bit) and sum (`bound`: the exact sum and the error bound per element).
// Bytes are those of the result checked, as for the kernels.
void BM_oracle(benchmark::State& state) {
  const auto c = static_cast<Combine>(state.range(0));
  constexpr int p = 8;
  constexpr size_t kOracleBytes = 64 << 20;
  const size_t n = kOracleBytes / sizeof(float);
  std::vector<std::vector<float>> in(p, std::vector<float>(n));
  std::vector<const void*> ptrs;
  std::mt19937 rng(12345);
  for (auto& v : in) {
    for (auto& e : v) e = static_cast<float>(rng() >> 8) / 16777216.0f - 0.5f;  // [-0.5, 0.5): no overflow
    ptrs.push_back(v.data());
  }
  const Reduction red = resolve_reduction(DType::Float32, c == Combine::Sum ? RedOp::Sum : RedOp::Max, p);
  std::vector<float> result(n);
  for (size_t i = 0; i < n; ++i) {
    float acc = in[0][i];
    for (int r = 1; r < p; ++r) acc = c == Combine::Sum ? acc + in[static_cast<size_t>(r)][i] : std::max(acc, in[static_cast<size_t>(r)][i]);
    result[i] = acc;
  }
  for (auto _ : state) {
    const CheckSummary sum = check_all_reduce(red, ptrs, result.data(), n);
    if (sum.wrong != 0) state.SkipWithError("the oracle rejected a correct result");
    benchmark::DoNotOptimize(sum.checked);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kOracleBytes));
  state.SetLabel(c == Combine::Sum ? "oracle float32 sum (bound), 8 ranks, 64 MiB" : "oracle float32 max (bitwise), 8 ranks, 64 MiB");
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      auto it = r.counters.find("bytes_per_second");
      if (it == r.counters.end()) continue;
      if (r.benchmark_name().rfind("BM_memcpy", 0) == 0) {
        memcpy_bps_ = it->second.value;
      } else {
        auto own = r.counters.find("memcpy_Bps");  // a kernel's memcpy, run right after it
        rows_.push_back({r.report_label, it->second.value, own == r.counters.end() ? 0 : own->second.value});
      }
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    if (memcpy_bps_ <= 0) return;
    fmt::print("\npeer: memcpy {:.2f} GB/s at the start (the oracle's); each kernel's own memcpy right after it\n",
               memcpy_bps_ / 1e9);
    for (const auto& row : rows_) {
      const double peer = row.peer > 0 ? row.peer : memcpy_bps_;
      fmt::print("  {}{:<18} {:7.3f} GB/s   memcpy {:7.3f} GB/s   ratio {:.3f}\n",
                 row.label.rfind("oracle", 0) == 0 ? "" : "reduce ", row.label, row.bps / 1e9, peer / 1e9, row.bps / peer);
    }
    // ci/bench's one table: a row per kernel and oracle class, appended to this file when set.
    if (const char* path = std::getenv("COLLCHECK_BENCH_TABLE")) {
      if (std::FILE* t = std::fopen(path, "a")) {
        for (const auto& row : rows_) {
          const bool oracle = row.label.rfind("oracle", 0) == 0;
          const bool bitwise = row.label.find("bitwise") != std::string::npos;
          const double peer = row.peer > 0 ? row.peer : memcpy_bps_;
          fmt::print(t, "{}\t{}\t{:.3f} GB/s\tmemcpy {:.2f} GB/s\t{:.3f}x\t{}\n", oracle ? "oracle" : "reduce kernel",
                     oracle ? row.label.substr(7) : row.label, row.bps / 1e9, peer / 1e9, row.bps / peer,
                     oracle ? (bitwise ? ">= 1 GB/s" : ">= 0.2 GB/s") : ">= 0.8x");
        }
        std::fclose(t);
      }
    }
  }

 private:
  struct Row {
    std::string label;
    double bps;   // the kernel's (or the oracle's) bytes per second
    double peer;  // its own memcpy's, 0: the run's BM_memcpy
  };
  double memcpy_bps_ = 0;
  std::vector<Row> rows_;
};

}  // namespace

BENCHMARK(BM_memcpy);
BENCHMARK(BM_reduce)->ArgsProduct(
    {{static_cast<int64_t>(DType::Int8), static_cast<int64_t>(DType::Uint8), static_cast<int64_t>(DType::Int32),
      static_cast<int64_t>(DType::Uint32), static_cast<int64_t>(DType::Int64), static_cast<int64_t>(DType::Uint64),
      static_cast<int64_t>(DType::Float16), static_cast<int64_t>(DType::BFloat16), static_cast<int64_t>(DType::Float32),
      static_cast<int64_t>(DType::Float64), static_cast<int64_t>(DType::Fp8E4M3), static_cast<int64_t>(DType::Fp8E5M2)},
     {static_cast<int64_t>(Combine::Sum), static_cast<int64_t>(Combine::Prod), static_cast<int64_t>(Combine::Max),
      static_cast<int64_t>(Combine::Min)}});

BENCHMARK(BM_oracle)
    ->Arg(static_cast<int64_t>(Combine::Max))
    ->Arg(static_cast<int64_t>(Combine::Sum))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
