// The 12 element types NCCL 2.28 reduces, their sizes and names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool dtype_is_float(DType t);
bool dtype_is_signed_int(DType t);
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

// Element i of a buffer of dtype t, as its bits in the low bytes (a
// little-endian host), and back. Inputs, kernels, the oracle and the checks
// all go through these.
inline uint64_t load_element(DType t, const void* base, size_t i) {
  const size_t es = dtype_size(t);
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const std::byte*>(base) + i * es, es);
  return v;
}
inline void store_element(DType t, void* base, size_t i, uint64_t bits) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<std::byte*>(base) + i * es, &bits, es);
}

}  // namespace collcheck
