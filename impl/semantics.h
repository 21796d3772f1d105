// The reduction semantics of NCCL 2.28, written down once.
//
// This is the only place that decides *what* an all-reduce computes for a given
// (dtype, op, nranks). Algorithms decide only the order of the combining steps;
// impl/element_ops.h implements each step per dtype. The table, from NCCL's
// src/enqueue.cc (hostToDevRedOp) and src/device/reduce_kernel.h:
//
// | op        | integer dtypes                     | floating dtypes                           |
// |-----------|------------------------------------|-------------------------------------------|
// | sum       | combine=sum, wraps mod 2^bits      | combine=sum, rounded to the dtype per step|
// | prod      | combine=prod, wraps mod 2^bits     | combine=prod, rounded per step            |
// | max / min | combine=max/min                    | fmax/fmin: NaN dropped, +0 > -0           |
// | avg       | combine=sum, then post-divide by p,| pre-multiply each input by s=RN_T(1/p)    |
// |           | truncating toward zero             | (via float, as NCCL does), then sum       |
// | premulsum | pre-multiply by scalar (wrapping), | pre-multiply by the scalar (element type),|
// |           | then sum                           | rounded to T, then sum                    |
//
// Per dtype (element_ops.h): float16 and bfloat16 operate in float and round back
// to the element type after every step (NCCL's __hadd/__hmul are correctly
// rounded); fp8 converts to float16, operates, rounds to float16, then converts
// back with round-to-nearest-even and saturation to the largest finite value.
// p == 1 is a copy, except that avg and premulsum still apply their scalar.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "impl/dtype.h"

namespace collcheck {

enum class RedOp : uint8_t { Sum, Prod, Max, Min, Avg, PreMulSum };
inline constexpr std::array<RedOp, 6> kAllOps = {RedOp::Sum, RedOp::Prod, RedOp::Max,
                                                 RedOp::Min, RedOp::Avg,  RedOp::PreMulSum};

std::string_view op_name(RedOp op);
std::optional<RedOp> parse_op(std::string_view name);
std::string op_choices();

// The binary step every algorithm applies between partial results.
enum class Combine : uint8_t { Sum, Prod, Max, Min };

// A fully resolved reduction: what NCCL executes for (dtype, op) on nranks ranks.
struct Reduction {
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  int nranks = 1;
  Combine combine = Combine::Sum;
  bool premul = false;       // each rank's input is multiplied by `scalar_bits` first
  uint64_t scalar_bits = 0;  // the multiplier, as bits of the element type
  bool postdiv = false;      // the final sum is divided by `divisor` (integer avg)
  uint64_t divisor = 1;
};

// `premul_scalar` is the user's pre-multiplier for PreMulSum, converted to the
// element type (round to nearest; integers truncate toward zero and wrap).
// Throws std::invalid_argument if nranks < 1.
Reduction resolve_reduction(DType dtype, RedOp op, int nranks, double premul_scalar = 1.0);

// The bits of `v` converted to `dtype` (used for scalars and for test data).
uint64_t to_element_bits(DType dtype, double v);
// The value of element bits, widened exactly to double (int64/uint64 beyond 2^53
// are rounded; callers that need exact integers use the bits).
double element_to_double(DType dtype, uint64_t bits);

}  // namespace collcheck
