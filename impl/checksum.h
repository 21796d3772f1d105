// The checksum of a payload (a transfer's bytes, a result): any one changed
// word, any changed byte of the tail and two swapped words change it, at
// memory speed. The flight recorder keeps one per transfer at each end, and
// the corrupted-payload detector compares them; the in-process links compute
// it as they move the bytes (copy_with_checksum), so neither end reads them
// again.
#pragma once

#include <cstddef>
#include <cstdint>

namespace collcheck {

uint64_t fnv1a(const void* data, size_t bytes);

uint64_t payload_checksum(const void* data, size_t bytes);
// The same checksum without the AVX2 loop: the reference the tests hold the
// vector loops to.
uint64_t payload_checksum_portable(const void* data, size_t bytes);
// memcpy(dst, src, bytes), returning payload_checksum of the bytes: one pass.
uint64_t copy_with_checksum(void* dst, const void* src, size_t bytes);

}  // namespace collcheck
