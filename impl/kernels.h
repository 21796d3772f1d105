// CPU reduce kernels. The reference is a plain loop over a compile-time
// (dtype, step) pair (combine_scalar), which GCC vectorizes for the integers
// and for float and double sum and prod (see impl/CMakeLists.txt for the
// flags). float16 and bfloat16, and float and double max and min, run AVX2 +
// F16C loops when the CPU has them (impl/kernels_avx2.h); fp8 looks each pair
// up in a table of results built from the reference. All are bit-identical to
// the reference (tests/kernels_test.cc), and all element semantics come from
// impl/element_ops.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

// dst[i] = dst[i] (op) src[i] for i in [0, count).
void reduce(void* dst, const void* src, size_t count, DType dtype, Combine op);

// dst[i] = a[i] (op) b[i]. dst may be a or b; no other overlap is allowed.
// Vector loops where the CPU has them (impl/kernels_avx2.h), else scalar.
void combine(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op);
// The scalar loops alone: the reference the vector loops are held to.
void combine_scalar(void* dst, const void* a, const void* b, size_t count, DType dtype, Combine op);

// fp8 (e4m3, e5m2): every pair's step as a 64 KiB table, built from the
// element steps (impl/element_ops.h) on first use: table[a << 8 | b] is the
// bits of a (op) b, NaNs as the step makes them. nullptr for other dtypes.
const uint8_t* fp8_step_table(DType dtype, Combine op);

// What a rank contributes: dst[i] = src[i] * scalar when the reduction
// pre-multiplies (avg on floats, premulsum), else a copy. dst may equal src.
void apply_pre(const Reduction& r, void* dst, const void* src, size_t count);

// The final step on a fully reduced value: integer avg divides by p. A no-op
// for every other reduction.
void apply_post(const Reduction& r, void* buf, size_t count);

}  // namespace collcheck
