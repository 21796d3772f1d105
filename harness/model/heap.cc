#include "harness/model/heap.h"

#include <malloc.h>

#include <mutex>

namespace collcheck {

void keep_buffers_in_the_heap() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  });
}

}  // namespace collcheck
