#include "harness/check/output_check.h"

#include <fmt/format.h>

#include <cstring>

namespace collcheck {

namespace {
std::byte canary_byte(size_t k) { return static_cast<std::byte>(0xA5u ^ (k * 0x3Bu) ^ (k >> 3)); }
}  // namespace

std::vector<std::byte> framed(std::span<const std::byte> payload, bool poison) {
  std::vector<std::byte> b(payload.size() + 2 * kCanary);
  for (size_t k = 0; k < b.size(); ++k) b[k] = canary_byte(k);
  if (!poison && !payload.empty()) std::memcpy(b.data() + kCanary, payload.data(), payload.size());
  return b;
}

std::vector<std::byte> framed(size_t bytes) {
  std::vector<std::byte> b(bytes + 2 * kCanary);
  for (size_t k = 0; k < b.size(); ++k) b[k] = canary_byte(k);
  return b;
}

std::optional<StrayWrite> stray_write(std::span<const std::byte> frame, size_t payload_bytes) {
  for (size_t j = 0; j < frame.size(); ++j) {
    if (j >= kCanary && j < kCanary + payload_bytes) continue;
    if (frame[j] != canary_byte(j))
      return StrayWrite{static_cast<long>(j) - static_cast<long>(kCanary), canary_byte(j), frame[j]};
  }
  return std::nullopt;
}

std::string StrayWrite::where(size_t payload_bytes, DType t) const {
  if (offset < 0) return fmt::format("{} byte(s) before the buffer", -offset);
  return fmt::format("byte {} past the end (element [{}])", offset - static_cast<long>(payload_bytes),
                     offset / static_cast<long>(dtype_size(t)));
}

Difference difference(DType t, const void* reference, const void* other, size_t count) {
  const size_t es = dtype_size(t);
  Difference d;
  const auto* a = static_cast<const std::byte*>(reference);
  const auto* b = static_cast<const std::byte*>(other);
  if (count == 0 || std::memcmp(a, b, count * es) == 0) return d;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(a + i * es, b + i * es, es) != 0 && d.elements++ == 0) d.first = i;
  return d;
}

}  // namespace collcheck
