// The values users write in flags and job descriptions: sizes, counts, lists
// of dtypes, ops, data classes and algorithms, seeds, and the files a command
// writes. Every failure throws UsageError with one line that names the flag
// and the allowed values (exit code 2). The command line and the jobs share them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "harness/model/data.h"
#include "impl/dtype.h"
#include "harness/model/usage_error.h"
#include "impl/semantics.h"

namespace collcheck {

// "64M", "1K", "4096", "1G" (powers of 1024, like nccl-tests). Negative or
// malformed values throw UsageError naming `flag`.
size_t parse_size(std::string_view text, std::string_view flag);
// Non-negative integer; throws UsageError naming `flag`.
size_t parse_count(std::string_view text, std::string_view flag);
// "all" or a comma-separated list.
std::vector<DType> parse_dtype_list(std::string_view text, std::string_view flag);
std::vector<RedOp> parse_op_list(std::string_view text, std::string_view flag);
std::vector<DataClass> parse_data_class_list(std::string_view text, std::string_view flag);
std::vector<std::string> parse_algo_list(std::string_view text, std::string_view flag);
// A seed: decimal or 0x hex, non-negative.
uint64_t parse_seed(const std::string& text, const std::string& flag);

// The files one command writes and the ones it reads, as (flag, path, is an
// output): an output that names the same file as another output or an input
// (the same path, a symlink to it, a hard link) throws UsageError naming both
// flags. The results of a soak were overwritten by its --metrics-textfile
// with exit 0.
void check_distinct_paths(const std::vector<std::tuple<std::string, std::string, bool>>& paths);

}  // namespace collcheck
