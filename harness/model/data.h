// Deterministic input data: every element is a pure function of (seed, rank,
// element index), so any case can be rebuilt from its seed alone, on any rank,
// in any process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "impl/semantics.h"

namespace collcheck {

enum class DataClass : uint8_t {
  // Small integers scaled by a power of two (sum-like ops), or powers of two
  // (prod): every partial result is exact in any order, so any correct
  // implementation matches bit for bit.
  Exact,
  // Random finite values in a range where nothing overflows: compared within
  // the oracle's bound.
  Random,
  // Element i alternates between Exact and Random.
  Mixed,
  // Floats: values near the largest finite value (sums and products overflow,
  // or saturate in fp8) mixed with subnormals and ordinary values. Integers:
  // values near the type's minimum and maximum.
  Extreme,
  // Floats: NaN (with payloads), +-Inf, +-0 and ordinary values. Integers: 0,
  // 1, -1 (all ones), the minimum and the maximum.
  Special,
  // Integers whose sums and products overflow and wrap (large magnitudes of
  // both signs). For floats, the same as Extreme.
  Wrap,
};

std::string_view data_class_name(DataClass c);
// Every class, and their names as one "a, b, c" string for error messages.
inline constexpr DataClass kAllDataClasses[] = {DataClass::Exact,   DataClass::Random,  DataClass::Mixed,
                                                DataClass::Extreme, DataClass::Special, DataClass::Wrap};
std::string data_class_choices();
std::optional<DataClass> parse_data_class(std::string_view s);

uint64_t splitmix64(uint64_t x);

// The bits of element `index` of rank `rank`'s input.
uint64_t input_element(DType t, RedOp op, int nranks, int rank, size_t index, uint64_t seed, DataClass cls);

// Fills `count` elements of `out` (dtype t).
void fill_input(void* out, size_t count, DType t, RedOp op, int nranks, int rank, uint64_t seed, DataClass cls);
// The same for ranks 0, 1, ... into outs[0], outs[1], ..., a little faster
// than one rank at a time (an element's index is hashed once for all).
void fill_inputs(std::span<void* const> outs, size_t count, DType t, RedOp op, int nranks, uint64_t seed,
                 DataClass cls);

}  // namespace collcheck
