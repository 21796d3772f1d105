// The vector half of the reduce kernels (impl/kernels_avx2.cc): AVX2 and F16C,
// bit-identical to the scalar loops of impl/kernels.cc, which do the tail and
// run alone on a CPU without them.
#pragma once

#include <cstddef>

#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

// True when this CPU has AVX2 and F16C (checked once).
bool avx2_kernels_available();

// dst[i] = a[i] (op) b[i] for the leading elements it has a vector loop for;
// returns how many it did (a multiple of its step, 0 when it has none for this
// dtype and op or the CPU lacks the instructions). dst may be a or b.
size_t combine_avx2(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op);

}  // namespace collcheck
