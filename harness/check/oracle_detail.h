// What the oracle's two files share (oracle.cc: the expectation of one
// element; oracle_check.cc: the check of a whole output): the reference
// arithmetic's type and its error constants. Not for use outside the oracle.
#pragma once

#include <limits>

namespace collcheck::oracle_detail {

using LD = long double;
static_assert(std::numeric_limits<LD>::digits >= 64, "the oracle's reference values need a 64-bit significand");
constexpr LD kLdEps = 0x1p-63L;  // at least the relative error of one long double operation
constexpr LD kWiden = 0x1p-40L;  // widening of every bound for the double arithmetic that derived it

}  // namespace collcheck::oracle_detail
