#include "harness/model/size.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <stdexcept>
#include <string_view>

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

uint64_t parse_size_text(std::string_view text, std::string_view flag) {
  if (text.empty()) throw std::invalid_argument(fmt::format("{} needs a size such as 4096, 64K, 32M or 1G (K, M, G, T: powers of 1024)", flag));
  size_t mult = 1;
  std::string_view digits = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': mult = size_t{1} << 10; digits.remove_suffix(1); break;
    case 'M': mult = size_t{1} << 20; digits.remove_suffix(1); break;
    case 'G': mult = size_t{1} << 30; digits.remove_suffix(1); break;
    case 'T': mult = size_t{1} << 40; digits.remove_suffix(1); break;
    default: break;
  }
  if (!digits.empty() && digits[0] == '-')
    throw std::invalid_argument(fmt::format("{} must be a non-negative size (bytes, or with a K/M/G/T suffix), got '{}'", flag, text));
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty())
    throw std::invalid_argument(fmt::format("{} must be a size such as 4096, 64K, 32M or 1G, got '{}'", flag, text));
  const auto bytes = checked_mul(v, mult);
  if (!bytes || *bytes > kMaxBufferBytes)
    throw std::invalid_argument(fmt::format("{} is {}: more than one buffer can hold; the largest size is 256T (2^48 bytes)", flag,
                                 text));
  return *bytes;
}

}  // namespace collcheck
