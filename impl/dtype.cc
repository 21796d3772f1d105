#include "impl/dtype.h"

#include <algorithm>
#include <cctype>

namespace collcheck {

namespace {
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

}  // namespace

std::string_view dtype_name(DType t) { return kDTypeInfo[static_cast<size_t>(t)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& i : kDTypeInfo)
    if (i.name == lower) return i.type;
  for (const auto& a : kAliases)
    if (a.alias == lower) return a.type;
  return std::nullopt;
}

std::string dtype_choices() {
  std::string s;
  for (const auto& i : kDTypeInfo) {
    if (!s.empty()) s += ", ";
    s += i.name;
  }
  return s;
}

}  // namespace collcheck
