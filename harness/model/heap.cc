#include "harness/model/heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

namespace collcheck {

namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// glibc's largest heap of a thread's arena (HEAP_MAX_SIZE on 64-bit: twice
// its largest mmap threshold, 32 MiB).
constexpr int kKeptHeapPad = 64 << 20;
// The main arena's heap (brk) from the first 2 MiB boundary at or above its
// top when keep_buffers_in_the_heap ran, and how far up it has been advised.
// 0: not set (the heap is left as the kernel and glibc make it).
std::atomic<uintptr_t> advised_from{0};
std::atomic<uintptr_t> advised_to{0};

uintptr_t heap_top() { return reinterpret_cast<uintptr_t>(sbrk(0)); }

}  // namespace

void keep_buffers_in_the_heap() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    // The heap grows 64 MiB at a time, so that each growth is advised whole
    // (glibc's own glibc.malloc.hugetlb=1 does the same, but only as an
    // environment setting read at start-up). The pad also decides whether a
    // thread's arena (verify --jobs' workers) keeps its heaps: glibc unmaps a
    // heap of such an arena whose memory is all free unless the free room
    // left would be under the pad, and a heap is 64 MiB at most, so at 64 MiB
    // none is unmapped. At 32 MiB a worker gave back the heaps a large case
    // had grown and faulted them in again for the next: 24,500 faults of a
    // 2,000-case verify against 3,000 on one job.
    mallopt(M_TOP_PAD, kKeptHeapPad);
    const uintptr_t from = (heap_top() + kHugePage - 1) & ~(kHugePage - 1);
    advised_to.store(from);
    advised_from.store(from);
  });
}

void heap_grown() {
  if (advised_from.load(std::memory_order_relaxed) == 0) return;
  // Whole huge pages only: the part of the top below the next 2 MiB boundary
  // waits for the next growth. madvise only marks the range (the pages come on
  // first touch), and marking a range twice is harmless, so two threads that
  // race here at worst both mark it. A kernel without transparent huge pages
  // refuses the advice, and the heap stays as it was.
  const uintptr_t top = heap_top() & ~(kHugePage - 1);
  uintptr_t prev = advised_to.load(std::memory_order_relaxed);
  if (top <= prev || !advised_to.compare_exchange_strong(prev, top)) return;
  madvise(reinterpret_cast<void*>(prev), top - prev, MADV_HUGEPAGE);
}

bool sanitizer_owns_malloc() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

namespace {
// "always [madvise] never": huge pages on request unless "never" is chosen.
bool kernel_gives_huge_pages_on_request() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  return std::getline(f, mode) && mode.find("[never]") == std::string::npos;
}
}  // namespace

void restart_with_huge_page_heaps(char** argv) {
  constexpr const char* kTunable = "glibc.malloc.hugetlb";
  const char* now = std::getenv("GLIBC_TUNABLES");
  const std::string tunables = now ? now : "";
  if (tunables.find(kTunable) != std::string::npos) return;  // set (by the restart, or by the user)
  if (sanitizer_owns_malloc() || !kernel_gives_huge_pages_on_request()) return;
  const std::string with = tunables.empty() ? std::string(kTunable) + "=1" : tunables + ":" + kTunable + "=1";
  if (setenv("GLIBC_TUNABLES", with.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // The exec failed: go on as we are, with the environment as it was.
  if (now) setenv("GLIBC_TUNABLES", now, 1);
  else unsetenv("GLIBC_TUNABLES");
}

}  // namespace collcheck
