// The one way a user's number becomes a size in bytes: checked arithmetic,
// so that no count, range or product of flags can wrap size_t and become a
// small buffer (issue 13: 2^62 float32 elements were 0 bytes and a SIGSEGV).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "impl/dtype.h"

namespace collcheck {

// The largest buffer of one call on one rank: 2^48 bytes, the whole of an
// x86-64 or AArch64 virtual address space. Whether it fits this machine's
// memory is a later, separate check.
inline constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 48;

// a * b, or nullopt when the product does not fit 64 bits.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b);
// a + b, likewise.
std::optional<uint64_t> checked_add(uint64_t a, uint64_t b);

// The largest count of `t` elements in one buffer.
uint64_t max_count(DType t);
// Why `count` elements of `t` cannot be a buffer ("" when they can): names the
// largest count, for an error that starts with the field's name.
std::string count_problem(uint64_t count, DType t);

// A size as the user writes it: "4096", "64K", "32M", "1G", "2T" (powers of
// 1024, like nccl-tests), at most kMaxBufferBytes. Anything else throws
// std::invalid_argument naming `what` (a flag, or a file's field).
uint64_t parse_size_text(std::string_view text, std::string_view what);

// What this machine can still give (MemAvailable in /proc/meminfo), or
// nullopt where that cannot be read.
std::optional<uint64_t> memory_available();
// "1.5 GiB"
std::string format_bytes(uint64_t bytes);

}  // namespace collcheck
