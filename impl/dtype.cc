#include "impl/dtype.h"

#include <algorithm>
#include <cctype>

namespace collcheck {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
  bool is_float;
  bool is_signed_int;
};

constexpr std::array<DTypeInfo, 12> kInfo = {{
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

struct Alias {
  std::string_view alias;
  DType type;
};
constexpr std::array<Alias, 14> kAliases = {{
    {"char", DType::Int8},       {"int", DType::Int32},
    {"half", DType::Float16},    {"fp16", DType::Float16},
    {"bf16", DType::BFloat16},   {"float", DType::Float32},
    {"fp32", DType::Float32},    {"double", DType::Float64},
    {"fp64", DType::Float64},    {"e4m3", DType::Fp8E4M3},
    {"f8e4m3", DType::Fp8E4M3},  {"e5m2", DType::Fp8E5M2},
    {"f8e5m2", DType::Fp8E5M2},  {"uint", DType::Uint32},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
bool dtype_is_float(DType t) { return info(t).is_float; }
bool dtype_is_signed_int(DType t) { return info(t).is_signed_int; }

std::optional<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& i : kInfo)
    if (i.name == lower) return i.type;
  for (const auto& a : kAliases)
    if (a.alias == lower) return a.type;
  return std::nullopt;
}

std::string dtype_choices() {
  std::string s;
  for (const auto& i : kInfo) {
    if (!s.empty()) s += ", ";
    s += i.name;
  }
  return s;
}

}  // namespace collcheck
