// The one check of an all-reduce call's buffers that needs no oracle:
// canaries around every output, inputs left as they were, every rank holding
// the same bits. verify's properties and the sweep both use it; whether the
// values are right is the oracle's question (oracle.h).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "impl/dtype.h"

namespace collcheck {

// Bytes of canary pattern on each side of a framed buffer.
inline constexpr size_t kCanary = 64;

// `payload` with kCanary bytes of canary pattern on each side. The pattern
// depends on the position, so a stray copy of any one byte value shows.
// `poison` fills the payload with the pattern as well (an output no call has
// written yet).
std::vector<std::byte> framed(std::span<const std::byte> payload, bool poison = false);
// A poisoned frame of `bytes` payload bytes.
std::vector<std::byte> framed(size_t bytes);

// A write outside a framed buffer's payload: the first canary byte changed.
struct StrayWrite {
  long offset = 0;  // from the payload's first byte; negative: before it
  std::byte was{}, is{};
  // "3 byte(s) before the buffer", "byte 0 past the end (element [16])".
  std::string where(size_t payload_bytes, DType t) const;
};
std::optional<StrayWrite> stray_write(std::span<const std::byte> frame, size_t payload_bytes);

// Elements of `other` that differ from `reference` bit for bit: how many, and
// the first.
struct Difference {
  size_t elements = 0;
  size_t first = 0;
  explicit operator bool() const { return elements > 0; }
};
Difference difference(DType t, const void* reference, const void* other, size_t count);

}  // namespace collcheck
