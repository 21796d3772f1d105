#include "harness/model/user_values.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#include <cctype>
#include <charconv>
#include <optional>
#include <tuple>

#include "harness/model/size.h"
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
  try {
    return parse_size_text(text, flag);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

namespace {
// "all" gives every choice; otherwise each comma-separated name must parse.
template <typename T, typename Parse>
std::vector<T> parse_list(std::string_view text, std::string_view flag, std::string_view what, Parse parse,
                          const std::vector<T>& all, const std::string& choices) {
  if (text == "all") return all;
  std::vector<T> out;
  for (auto name : split(text)) {
    auto v = parse(name);
    if (!v) throw UsageError(fmt::format("unknown {} '{}' for {}; allowed: {}, or all", what, name, flag, choices));
    out.push_back(*v);
  }
  return out;
}
}  // namespace

std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag) {
  return parse_list<DType>(text, flag, "dtype", parse_dtype, {kAllDTypes.begin(), kAllDTypes.end()},
                           dtype_choices());
}

std::vector<RedOp> parse_op_list(std::string_view text, std::string_view flag) {
  return parse_list<RedOp>(text, flag, "op", parse_op, {kAllOps.begin(), kAllOps.end()}, op_choices());
}

std::vector<DataClass> parse_data_class_list(std::string_view text, std::string_view flag) {
  return parse_list<DataClass>(text, flag, "data class", parse_data_class,
                               {std::begin(kAllDataClasses), std::end(kAllDataClasses)}, data_class_choices());
}

std::vector<std::string> parse_algo_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> all;
  for (const auto& a : algorithms()) all.emplace_back(a.name);
  auto find = [](std::string_view name) -> std::optional<std::string> {
    if (!find_algorithm(name)) return std::nullopt;
    return std::string(name);
  };
  return parse_list<std::string>(text, flag, "algorithm", find, all, algorithm_choices());
}

void check_distinct_paths(const std::vector<std::tuple<std::string, std::string, bool>>& paths) {
  namespace fs = std::filesystem;
  // A file that exists is known by its device and inode; one that does not
  // yet, by its absolute path with the links of its folders followed.
  auto identity = [](const std::string& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) return fmt::format("inode {}:{}", st.st_dev, st.st_ino);
    std::error_code ec;
    const fs::path canon = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return "path " + (ec ? p : canon.string());
  };
  struct Seen {
    std::string id, flag;
    bool output;
  };
  std::vector<Seen> seen;
  for (const auto& [flag, path, output] : paths) {
    if (path.empty()) continue;
    const std::string id = identity(path);
    // A character device (/dev/null, /dev/stdout) may take several outputs.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) continue;
    for (const auto& o : seen)
      if (o.id == id && (o.output || output))  // two inputs may be one file (a baseline against itself)
        throw UsageError(fmt::format("{} and {} name the same file ({}); give each its own path", o.flag, flag, path));
    seen.push_back({id, flag, output});
  }
}

uint64_t parse_seed(const std::string& text, const std::string& flag) {
  try {
    size_t pos = 0;
    const uint64_t seed = std::stoull(text, &pos, 0);
    if (pos != text.size() || text.empty() || text[0] == '-') throw std::invalid_argument("trailing");
    return seed;
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{} must be a non-negative integer (decimal or 0x hex), got '{}'", flag, text));
  }
}

}  // namespace collcheck
