// Files are written atomically (DESIGN.md): a temporary file next to the
// target, then rename, so a crash never leaves a half-written report or dump.
#pragma once

#include <string>
#include <string_view>

namespace collcheck {

// Throws std::runtime_error naming the path and the system error.
void write_file_atomically(const std::string& path, std::string_view text);

}  // namespace collcheck
