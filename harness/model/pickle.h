// A reader of Python pickles that hold plain data only: dicts, lists,
// tuples, sets, strings, bytes, integers, floats, None and booleans (what a
// PyTorch Flight Recorder dump is). It never executes anything: an opcode that
// names a global, calls a constructor or reaches outside the data (GLOBAL,
// REDUCE, BUILD, INST, OBJ, NEWOBJ, persistent ids, extensions) is refused with
// its byte offset. Protocols 0 to 5 are read; protocol 0's text strings are not.
//
// The result is JSON: a dict becomes an object (its keys, strings, integers,
// booleans or None, as text), a list, tuple or set an array, bytes a binary
// value. Objects shared through the memo are copied where they are used, up to
// a bound on the values produced, so a small pickle cannot expand without end.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace collcheck {

struct PickleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PickleLimits {
  size_t max_depth = 64;              // containers nested at most this deep
  size_t max_values = size_t{1} << 22;  // values in the result, shared ones counted each time
  uint64_t max_text_bytes = uint64_t{256} << 20;  // string and bytes in the result, the same way
};

// The value a pickle holds; throws PickleError ("byte N: ...") on anything
// else, on a truncated or malformed pickle, and past the limits.
nlohmann::json read_pickle(std::string_view bytes, const PickleLimits& limits = {});

}  // namespace collcheck
