#include "harness/peers/gloo_deviations.h"

#include <gloo/algorithm.h>
#include <gloo/math.h>
#include <gloo/types.h>

#include <cstring>
#include <span>
#include <vector>

#include "harness/check/oracle.h"

namespace collcheck {

namespace {

// How Gloo calls its max or min for one step:
// - Legacy: the legacy algorithms, ReductionFunction<T>::max->call(acc, x, 1): acc = op(acc, x);
// - OutIsA, OutIsB: the options API's three-pointer form op(out, a, b), whose
//   out aliases one of the operands (a float16 assignment then compares with
//   that operand's old bits: float16::operator=, finding 9).
enum class GlooCall { Legacy, OutIsA, OutIsB };

template <typename T>
uint64_t gloo_step(bool is_max, GlooCall how, uint64_t acc_bits, uint64_t x_bits) {
  T acc, x;
  std::memcpy(static_cast<void*>(&acc), &acc_bits, sizeof(T));
  std::memcpy(static_cast<void*>(&x), &x_bits, sizeof(T));
  T* out = how == GlooCall::OutIsB ? &x : &acc;
  if (how == GlooCall::Legacy) (is_max ? gloo::ReductionFunction<T>::max : gloo::ReductionFunction<T>::min)->call(&acc, &x, 1);
  else if (is_max) gloo::max<T>(static_cast<void*>(out), &acc, &x, 1);
  else gloo::min<T>(static_cast<void*>(out), &acc, &x, 1);
  uint64_t bits = 0;
  std::memcpy(&bits, out, sizeof(T));
  return bits;
}

template <bool IsMax, GlooCall How>
uint64_t gloo_float_step(DType t, uint64_t a, uint64_t b) {
  switch (t) {
    case DType::Float16: return gloo_step<gloo::float16>(IsMax, How, a, b);
    case DType::Float32: return gloo_step<float>(IsMax, How, a, b);
    default: return gloo_step<double>(IsMax, How, a, b);
  }
}

// NCCL's result, or whatever Gloo's own max/min gives in some reduction order
// (the options API: with out aliasing either operand).
template <bool Legacy>
std::vector<uint64_t> gloo_minmax_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  const bool mx = red.combine == Combine::Max;
  std::vector<uint64_t> out;
  if (Legacy) {
    out = tree_outcomes(values, mx ? &gloo_float_step<true, GlooCall::Legacy> : &gloo_float_step<false, GlooCall::Legacy>,
                        red.dtype);
  } else {
    out = tree_outcomes(values, mx ? &gloo_float_step<true, GlooCall::OutIsA> : &gloo_float_step<false, GlooCall::OutIsA>,
                        red.dtype);
    const auto b = tree_outcomes(
        values, mx ? &gloo_float_step<true, GlooCall::OutIsB> : &gloo_float_step<false, GlooCall::OutIsB>, red.dtype);
    out.insert(out.end(), b.begin(), b.end());
  }
  add_nccl_result(red, values, out);
  return out;
}

const Deviation kNanOrder{
    "gloo-nan-order",
    "float max/min use std::max/std::min, a comparison and a select: with a NaN among the inputs the result "
    "can be the NaN or a value that hides the ones reduced before the NaN, and of +0 and -0 either may come "
    "out, depending on the reduction order (NCCL: fmax/fmin, NaN dropped, +0 > -0); checked against Gloo's own "
    "op over every reduction order",
    &gloo_minmax_outcomes<true>};

const Deviation kNanOrderOptions{kNanOrder.name, kNanOrder.doc, &gloo_minmax_outcomes<false>};

// One step of Gloo's own float16 sum or product as the legacy algorithms call
// it (ReductionFunction<float16>::sum/product->call(acc, x, 1)): the rounded
// result is assigned to acc through float16::operator=, which skips the
// assignment when the new bits equal float16(the integer value of acc's bits)
// (operator!= compares bits with an integer): acc keeps its old value.
template <Combine C>
uint64_t gloo_f16_step(DType, uint64_t acc_bits, uint64_t x_bits) {
  gloo::float16 acc, x;
  acc.x = static_cast<uint16_t>(acc_bits);
  x.x = static_cast<uint16_t>(x_bits);
  (C == Combine::Sum ? gloo::ReductionFunction<gloo::float16>::sum : gloo::ReductionFunction<gloo::float16>::product)
      ->call(&acc, &x, 1);
  return acc.x;
}

// NCCL's result, or what Gloo's own float16 step gives in some reduction order
// (exact up to p = 8; above, the closure of the inputs under the step while it
// stays small, else NCCL's result only: a hit is then reported as the finding).
std::vector<uint64_t> gloo_f16_assign_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  std::vector<uint64_t> out =
      tree_outcomes(values, red.combine == Combine::Sum ? &gloo_f16_step<Combine::Sum> : &gloo_f16_step<Combine::Prod>,
                    red.dtype);
  if (values.size() > 8 && out.size() >= 4096) out.clear();  // the closure was cut short: not a sound set
  add_nccl_result(red, values, out);
  return out;
}

const Deviation kF16Assign{
    "gloo-f16-assign",
    "float16::operator= skips the assignment when the new value's bits equal float16(the integer value of the old "
    "value's bits), so a float16 sum or product sometimes keeps the old value: "
    "33248 + -2.87e-05 gives -2.87e-05 (65533 of the 2^32 (old, new) pairs); the options API's gloo::sum/product "
    "assign the same way; checked against Gloo's own step over every reduction order",
    &gloo_f16_assign_outcomes};

const Deviation kF16MinMax{
    "gloo-f16-minmax",
    "float16 max/min as the legacy algorithms call them (ReductionFunction<float16>::max/min, in place) "
    "sometimes keep the accumulator: max(acc=0x0001, 1.0) returns 0x0001, because float16::operator= skips the "
    "assignment when the new bits equal float16(the integer value of the old bits) (as gloo-f16-assign); on top "
    "of the NaN-order behaviour of gloo-nan-order; checked against Gloo's own op over every reduction order",
    &gloo_minmax_outcomes<true>};

const Deviation kF16MinMaxOptions{
    "gloo-f16-minmax",
    "float16 max/min as the options API calls them (gloo::max/min(out, a, b), out aliasing an operand) sometimes "
    "keep the operand out aliases: max(63808, -42624) gives -42624, because float16::operator= skips the "
    "assignment when the new bits equal float16(the integer value of the old bits) (as gloo-f16-assign); on top "
    "of the NaN-order behaviour of gloo-nan-order; checked against Gloo's own op over every reduction order, out "
    "aliasing either operand",
    &gloo_minmax_outcomes<false>};

}  // namespace

const Deviation* gloo_deviation(DType t, RedOp op, bool legacy) {
  // The options API's gloo::sum/product(out, a, b) assigns through the same
  // operator=, with out aliasing one operand: the same outcomes.
  if (t == DType::Float16 && (op == RedOp::Sum || op == RedOp::Prod)) return &kF16Assign;
  if (op != RedOp::Max && op != RedOp::Min) return nullptr;
  if (t == DType::Float16) return legacy ? &kF16MinMax : &kF16MinMaxOptions;
  if (t != DType::Float32 && t != DType::Float64) return nullptr;
  return legacy ? &kNanOrder : &kNanOrderOptions;
}

}  // namespace collcheck
