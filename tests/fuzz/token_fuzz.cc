// libFuzzer over the replay token's real entry point (decode_case, what
// `collcheck verify --replay TOKEN` calls). Any text either decodes or throws
// std::invalid_argument (exit 2); a case that decodes encodes to a token that
// decodes to the same token.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "properties/case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  collcheck::Case c;
  try {
    c = collcheck::decode_case(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string token = collcheck::encode_case(c);
  if (collcheck::encode_case(collcheck::decode_case(token)) != token) std::abort();
  return 0;
}
