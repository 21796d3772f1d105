// Files are written atomically (DESIGN.md): a temporary file next to the
// target, then rename, so a crash never leaves a half-written report or dump.
#pragma once

#include <string>
#include <string_view>

#include "harness/model/exit_codes.h"

namespace collcheck {

// Throws std::runtime_error naming the path and the system error.
void write_file_atomically(const std::string& path, std::string_view text);
// Appends `text` to a file ($GITHUB_STEP_SUMMARY), creating it; checks the
// write and the close. Refuses what is not a regular file or a character
// device, as above. Throws std::runtime_error naming the path and the error.
void append_to_file(const std::string& path, std::string_view text);

}  // namespace collcheck
