// The process's allocator, set for runs that allocate and free large buffers
// over and over (verify's cases, a scenario's calls).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace collcheck {

// Called after a large block is allocated (NoZero): asks the kernel for huge
// pages over the heap grown since the last call (see keep_buffers_in_the_heap).
void heap_grown();
inline constexpr size_t kHugePageAdviceBytes = size_t{1} << 20;

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
  T* allocate(size_t n) {
    T* p = std::allocator<T>::allocate(n);
    if (n * sizeof(T) >= kHugePageAdviceBytes) heap_grown();
    return p;
  }
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
// above 256 MiB free at its top; the heaps of other threads' arenas are kept
// whole once grown (a worker's next large case reuses their pages). The heap grown after this call is backed by
// transparent huge pages where the kernel offers them on request
// (MADV_HUGEPAGE; the default "madvise" mode): a 128-rank replay faulted in
// 833 MB 4 KiB at a time, 205,000 faults, a sixth of its time, and the TLB
// misses of walking that memory were more. Once per process: the
// allocator's settings are the process's.
void keep_buffers_in_the_heap();

// The heaps of threads other than the main one (verify --jobs' workers) are
// not the main heap above, and glibc backs them with transparent huge pages
// only under its tunable glibc.malloc.hugetlb=1, which it reads at start-up
// alone. A verify run on 2 workers faulted in 200,000 pages of 4 KiB (a fifth
// of its time), and ran 1.24x slower in all than with the tunable. (Not for
// every command: a 128-rank replay, on the main thread, ran 1.2x slower with it.)
// Restarts the process once, the same program with the same arguments
// (execv of /proc/self/exe, before anything else has run), with the tunable
// added to GLIBC_TUNABLES. Returns without it where a restart has no use or
// cannot be had: the tunable is set already (or set otherwise by the user),
// the kernel offers no huge pages on request, a sanitizer owns malloc, or
// the exec fails.
void restart_with_huge_page_heaps(char** argv);
// Whether this build's malloc is a sanitizer's (ASan, TSan, MSan), not glibc's.
bool sanitizer_owns_malloc();

}  // namespace collcheck
