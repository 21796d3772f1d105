// The process's allocator, set for runs that allocate and free large buffers
// over and over (verify's cases, a scenario's calls).
#pragma once

namespace collcheck {

// Buffers above glibc's mmap threshold were each mapped, faulted in page by
// page and unmapped again: a third of a verify run's time, and a quarter of a
// 128-rank replay's. Keeps them in the heap instead (up to 32 MiB a block,
// glibc's largest threshold), and returns heap memory to the system only
// above 256 MiB free at its top. Once per process: the allocator's settings
// are the process's.
void keep_buffers_in_the_heap();

}  // namespace collcheck
