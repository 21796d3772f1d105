#include "harness/check/output_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace collcheck {

namespace {
std::byte canary_byte(size_t k) { return static_cast<std::byte>(0xA5u ^ (k * 0x3Bu) ^ (k >> 3)); }
// The pattern repeats every 2,048 bytes: k * 0x3B mod 256 every 256, k >> 3 mod 256 every 2,048.
constexpr size_t kCanaryPeriod = 2048;

// Bytes [from, to) of b set to the pattern: one period by hand, the rest copied.
void fill_canary(std::byte* b, size_t from, size_t to) {
  const size_t first = std::min(to, from + kCanaryPeriod);
  for (size_t k = from; k < first; ++k) b[k] = canary_byte(k);
  for (size_t done = first - from; from + done < to;) {
    const size_t n = std::min(done, to - from - done);  // done is a whole number of periods
    std::memcpy(b + from + done, b + from, n);
    done += n;
  }
}

std::optional<StrayWrite> stray_in(std::span<const std::byte> frame, size_t from, size_t to) {
  for (size_t j = from; j < to; ++j)
    if (frame[j] != canary_byte(j))
      return StrayWrite{static_cast<long>(j) - static_cast<long>(kCanary), canary_byte(j), frame[j]};
  return std::nullopt;
}
}  // namespace

std::vector<std::byte> framed(std::span<const std::byte> payload, bool poison) {
  if (poison) {
    std::vector<std::byte> b(payload.size() + 2 * kCanary);
    fill_canary(b.data(), 0, b.size());
    return b;
  }
  // Built in one pass: the payload is copied, never zeroed first.
  std::vector<std::byte> c;
  c.reserve(payload.size() + 2 * kCanary);
  for (size_t k = 0; k < kCanary; ++k) c.push_back(canary_byte(k));
  c.insert(c.end(), payload.begin(), payload.end());
  for (size_t k = kCanary + payload.size(); k < payload.size() + 2 * kCanary; ++k) c.push_back(canary_byte(k));
  return c;
}

std::vector<std::byte> framed(size_t bytes) {
  std::vector<std::byte> b(bytes + 2 * kCanary);
  fill_canary(b.data(), 0, b.size());
  return b;
}

// The canaries only: the payload is the call's to write. A frame shorter than
// its payload is all canary (the caller's mistake shows as a stray write).
std::optional<StrayWrite> stray_write(std::span<const std::byte> frame, size_t payload_bytes) {
  const size_t head = std::min(frame.size(), kCanary);
  if (auto w = stray_in(frame, 0, head)) return w;
  return stray_in(frame, std::min(frame.size(), kCanary + payload_bytes), frame.size());
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
