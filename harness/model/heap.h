// The process's allocator, set for runs that allocate and free large buffers
// over and over (verify's cases, a scenario's calls).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace collcheck {

// An allocator that leaves new elements uninitialized (a resize does not
// zero): for buffers that are filled whole before they are read. At 128 ranks
// of 1 MiB calls, zeroing them was a tenth of a replay, and a pass over
// memory that the fill makes again.
template <typename T>
struct NoZero : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = NoZero<U>;
  };
  NoZero() = default;
  template <typename U>
  NoZero(const NoZero<U>&) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) > 0) ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
// Bytes that a resize leaves as they were (see NoZero).
using Bytes = std::vector<std::byte, NoZero<std::byte>>;

// Buffers above glibc's mmap threshold were each mapped, faulted in page by
// page and unmapped again: a third of a verify run's time, and a quarter of a
// 128-rank replay's. Keeps them in the heap instead (up to 32 MiB a block,
// glibc's largest threshold), and returns heap memory to the system only
// above 256 MiB free at its top. Once per process: the allocator's settings
// are the process's.
void keep_buffers_in_the_heap();

}  // namespace collcheck
