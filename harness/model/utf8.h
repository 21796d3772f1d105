// Whether bytes are valid UTF-8: what the input readers (pickles, scenario
// keys) require of text before they keep it.
#pragma once

#include <cstddef>
#include <string_view>

namespace collcheck {

inline bool valid_utf8(std::string_view s) {
  for (size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || k + n > s.size()) return false;
    for (size_t j = 1; j < n; ++j)
      if ((static_cast<unsigned char>(s[k + j]) >> 6) != 2) return false;
    k += n;
  }
  return true;
}

}  // namespace collcheck
