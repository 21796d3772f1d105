// x % d for a divisor fixed over many x, without a divide instruction: the
// remainder by Lemire's method (Lemire, Kaser and Kurz, "Faster remainder by
// direct computation", 2019), exact for every 64-bit x and every d >= 1, with
// three multiplies. The input generator takes a remainder of each element's
// random bits by a per-buffer divisor; a 64-bit divide there was a third of
// a fill's time.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace collcheck {

class FastMod {
 public:
  FastMod() = default;
  explicit FastMod(uint64_t d) : d_(d), m_(d == 0 ? 0 : ~Wide{0} / d + 1) {
    if (d == 0) throw std::invalid_argument("FastMod: a divisor of zero");
  }
  uint64_t divisor() const { return d_; }
  // x % divisor(): the high 64 bits of the fraction (m x mod 2^128) times d.
  uint64_t operator()(uint64_t x) const {
    const Wide low = m_ * x;
    const Wide bottom = (static_cast<Wide>(static_cast<uint64_t>(low)) * d_) >> 64;
    const Wide top = static_cast<Wide>(static_cast<uint64_t>(low >> 64)) * d_;
    return static_cast<uint64_t>((bottom + top) >> 64);
  }

 private:
  using Wide = unsigned __int128;
  uint64_t d_ = 1;
  Wide m_ = 0;  // ceil(2^128 / d) (0 for d = 1: every remainder is 0)
};

}  // namespace collcheck
