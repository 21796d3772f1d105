#include "harness/model/size.h"

#include <fmt/format.h>

#include <fstream>

namespace collcheck {

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

uint64_t max_count(DType t) { return kMaxBufferBytes / dtype_size(t); }

std::string count_problem(uint64_t count, DType t) {
  if (count <= max_count(t)) return "";
  return fmt::format("{} {} elements are more than one buffer can hold (2^48 bytes); the largest count of {} is {}",
                     count, dtype_name(t), dtype_name(t), max_count(t));
}

std::optional<uint64_t> memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace collcheck
