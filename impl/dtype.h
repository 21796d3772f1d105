// The 12 element types NCCL 2.28 reduces, their sizes and names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace collcheck {

enum class DType : uint8_t {
  Int8,
  Uint8,
  Int32,
  Uint32,
  Int64,
  Uint64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Fp8E4M3,
  Fp8E5M2,
};

inline constexpr std::array<DType, 12> kAllDTypes = {
    DType::Int8,    DType::Uint8,    DType::Int32,   DType::Uint32,
    DType::Int64,   DType::Uint64,   DType::Float16, DType::BFloat16,
    DType::Float32, DType::Float64,  DType::Fp8E4M3, DType::Fp8E5M2};

// Storage types for the formats C++ lacks. They are plain bit containers: all
// arithmetic goes through impl/float_formats.h and impl/element_ops.h.
struct f16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};
struct e4m3_t {
  uint8_t bits;
};
struct e5m2_t {
  uint8_t bits;
};

// Each dtype's name, size and kind: the one table (kAllDTypes' order). The
// size and kind are read in the inner loops of the inputs, kernels and
// oracle, so they are inline here.
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
  bool is_signed_int;
};
inline constexpr std::array<DTypeInfo, 12> kDTypeInfo = {{
    {DType::Int8, "int8", 1, false, true},
    {DType::Uint8, "uint8", 1, false, false},
    {DType::Int32, "int32", 4, false, true},
    {DType::Uint32, "uint32", 4, false, false},
    {DType::Int64, "int64", 8, false, true},
    {DType::Uint64, "uint64", 8, false, false},
    {DType::Float16, "float16", 2, true, false},
    {DType::BFloat16, "bfloat16", 2, true, false},
    {DType::Float32, "float32", 4, true, false},
    {DType::Float64, "float64", 8, true, false},
    {DType::Fp8E4M3, "fp8_e4m3", 1, true, false},
    {DType::Fp8E5M2, "fp8_e5m2", 1, true, false},
}};

static_assert([] {
  for (size_t i = 0; i < kDTypeInfo.size(); ++i)
    if (static_cast<size_t>(kDTypeInfo[i].type) != i || kDTypeInfo[i].type != kAllDTypes[i]) return false;
  return true;
}(), "kDTypeInfo is indexed by DType: its rows must be in the enum's order");

inline constexpr size_t dtype_size(DType t) { return kDTypeInfo[static_cast<size_t>(t)].size; }
inline constexpr bool dtype_is_float(DType t) { return kDTypeInfo[static_cast<size_t>(t)].is_float; }
inline constexpr bool dtype_is_signed_int(DType t) { return kDTypeInfo[static_cast<size_t>(t)].is_signed_int; }
std::string_view dtype_name(DType t);
// Accepts the canonical names above plus the usual aliases (half, float, double,
// bf16, fp16, e4m3, ...). Returns nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view name);
// "int8, uint8, ..." for error messages.
std::string dtype_choices();

// Calls f(T{}) with the storage type of t.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Int8: return f(int8_t{});
    case DType::Uint8: return f(uint8_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Uint32: return f(uint32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Uint64: return f(uint64_t{});
    case DType::Float16: return f(f16_t{});
    case DType::BFloat16: return f(bf16_t{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Fp8E4M3: return f(e4m3_t{});
    case DType::Fp8E5M2: return f(e5m2_t{});
  }
  __builtin_unreachable();
}

// The DType whose storage type is S: visit_dtype's inverse, for code that
// wants the dtype itself at compile time inside a visit.
template <typename S>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<S, int8_t>) return DType::Int8;
  else if constexpr (std::is_same_v<S, uint8_t>) return DType::Uint8;
  else if constexpr (std::is_same_v<S, int32_t>) return DType::Int32;
  else if constexpr (std::is_same_v<S, uint32_t>) return DType::Uint32;
  else if constexpr (std::is_same_v<S, int64_t>) return DType::Int64;
  else if constexpr (std::is_same_v<S, uint64_t>) return DType::Uint64;
  else if constexpr (std::is_same_v<S, f16_t>) return DType::Float16;
  else if constexpr (std::is_same_v<S, bf16_t>) return DType::BFloat16;
  else if constexpr (std::is_same_v<S, float>) return DType::Float32;
  else if constexpr (std::is_same_v<S, double>) return DType::Float64;
  else if constexpr (std::is_same_v<S, e4m3_t>) return DType::Fp8E4M3;
  else return DType::Fp8E5M2;
}();
static_assert(dtype_of<e5m2_t> == DType::Fp8E5M2 && dtype_of<f16_t> == DType::Float16 && dtype_of<float> == DType::Float32);

// Element i of a buffer of dtype t, as its bits in the low bytes (a
// little-endian host), and back. Inputs, kernels, the oracle and the checks
// all go through these.
// (A copy of a constant size per case: a memcpy of a variable one is a call.)
inline uint64_t load_element(DType t, const void* base, size_t i) {
  const auto* p = static_cast<const std::byte*>(base);
  switch (dtype_size(t)) {
    case 1: return static_cast<uint64_t>(std::to_integer<uint8_t>(p[i]));
    case 2: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    default: { uint64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
  }
}
inline void store_element(DType t, void* base, size_t i, uint64_t bits) {
  auto* p = static_cast<std::byte*>(base);
  switch (dtype_size(t)) {
    case 1: p[i] = static_cast<std::byte>(bits); return;
    case 2: { const auto v = static_cast<uint16_t>(bits); std::memcpy(p + 2 * i, &v, 2); return; }
    case 4: { const auto v = static_cast<uint32_t>(bits); std::memcpy(p + 4 * i, &v, 4); return; }
    default: std::memcpy(p + 8 * i, &bits, 8); return;
  }
}

}  // namespace collcheck
