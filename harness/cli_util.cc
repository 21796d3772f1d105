#include "harness/cli_util.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "impl/algorithm.h"

namespace collcheck {

namespace {
std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string_view::npos ? s.size() : comma;
    out.push_back(s.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}
}  // namespace

size_t parse_count(std::string_view text, std::string_view flag) {
  if (!text.empty() && text[0] == '-')
    throw UsageError(fmt::format("{} must be a non-negative integer, got '{}'", flag, text));
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    throw UsageError(fmt::format("{} must be a non-negative integer, got '{}'", flag, text));
  return v;
}

size_t parse_size(std::string_view text, std::string_view flag) {
  if (text.empty()) throw UsageError(fmt::format("{} needs a size such as 4096, 64K, 32M or 1G", flag));
  size_t mult = 1;
  std::string_view digits = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K': mult = size_t{1} << 10; digits.remove_suffix(1); break;
    case 'M': mult = size_t{1} << 20; digits.remove_suffix(1); break;
    case 'G': mult = size_t{1} << 30; digits.remove_suffix(1); break;
    default: break;
  }
  if (!digits.empty() && digits[0] == '-')
    throw UsageError(fmt::format("{} must be a non-negative size (bytes, or with a K/M/G suffix), got '{}'", flag, text));
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty())
    throw UsageError(fmt::format("{} must be a size such as 4096, 64K, 32M or 1G, got '{}'", flag, text));
  return v * mult;
}

std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag) {
  if (text == "all") return {kAllDTypes.begin(), kAllDTypes.end()};
  std::vector<DType> out;
  for (auto name : split(text)) {
    auto t = parse_dtype(name);
    if (!t) throw UsageError(fmt::format("unknown dtype '{}' for {}; allowed: {}, or all", name, flag, dtype_choices()));
    out.push_back(*t);
  }
  return out;
}

std::vector<RedOp> parse_op_list(std::string_view text, std::string_view flag) {
  if (text == "all") return {kAllOps.begin(), kAllOps.end()};
  std::vector<RedOp> out;
  for (auto name : split(text)) {
    auto op = parse_op(name);
    if (!op) throw UsageError(fmt::format("unknown op '{}' for {}; allowed: {}, or all", name, flag, op_choices()));
    out.push_back(*op);
  }
  return out;
}

std::vector<std::string> parse_algo_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> out;
  if (text == "all") {
    for (const auto& a : algorithms()) out.emplace_back(a.name);
    return out;
  }
  for (auto name : split(text)) {
    if (!find_algorithm(name))
      throw UsageError(
          fmt::format("unknown algorithm '{}' for {}; allowed: {}, or all", name, flag, algorithm_choices()));
    out.emplace_back(name);
  }
  return out;
}

}  // namespace collcheck
