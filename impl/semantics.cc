#include "impl/semantics.h"

#include "impl/float_encode.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "impl/float_formats.h"

namespace collcheck {

namespace {
constexpr std::array<std::string_view, 6> kOpNames = {"sum", "prod", "max", "min", "avg", "premulsum"};

template <typename I>
I wrap_from_double(double v) {
  // Truncate toward zero, then reduce modulo 2^bits, like a C cast on a
  // two's-complement machine but without undefined behaviour.
  if (!std::isfinite(v)) return I{0};
  const long double t = std::trunc(static_cast<long double>(v));
  const long double m = std::fmod(t, 18446744073709551616.0L);  // |m| < 2^64
  const uint64_t mag = static_cast<uint64_t>(std::fabs(m));
  const uint64_t bits = m >= 0 ? mag : ~mag + 1u;
  return static_cast<I>(static_cast<std::make_unsigned_t<I>>(bits));
}
}  // namespace

std::string_view op_name(RedOp op) { return kOpNames[static_cast<size_t>(op)]; }

std::optional<RedOp> parse_op(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == lower) return static_cast<RedOp>(i);
  if (lower == "mulsum" || lower == "premul") return RedOp::PreMulSum;
  return std::nullopt;
}

std::string op_choices() {
  std::string s;
  for (auto n : kOpNames) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

uint64_t to_element_bits(DType dtype, double v) {
  switch (dtype) {
    case DType::Int8: return static_cast<uint8_t>(wrap_from_double<int8_t>(v));
    case DType::Uint8: return wrap_from_double<uint8_t>(v);
    case DType::Int32: return static_cast<uint32_t>(wrap_from_double<int32_t>(v));
    case DType::Uint32: return wrap_from_double<uint32_t>(v);
    case DType::Int64: return static_cast<uint64_t>(wrap_from_double<int64_t>(v));
    case DType::Uint64: return wrap_from_double<uint64_t>(v);
    case DType::Float16: return float_encode::float_bits<DType::Float16>(v);
    case DType::BFloat16: return float_encode::float_bits<DType::BFloat16>(v);
    case DType::Float32: return float_encode::float_bits<DType::Float32>(v);
    case DType::Float64: return float_encode::float_bits<DType::Float64>(v);
    case DType::Fp8E4M3: return float_encode::float_bits<DType::Fp8E4M3>(v);
    case DType::Fp8E5M2: return float_encode::float_bits<DType::Fp8E5M2>(v);
  }
  return 0;
}

double element_to_double(DType dtype, uint64_t bits) {
  switch (dtype) {
    case DType::Int8: return static_cast<int8_t>(bits);
    case DType::Uint8: return static_cast<uint8_t>(bits);
    case DType::Int32: return static_cast<int32_t>(bits);
    case DType::Uint32: return static_cast<uint32_t>(bits);
    case DType::Int64: return static_cast<double>(static_cast<int64_t>(bits));
    case DType::Uint64: return static_cast<double>(bits);
    // The narrow floats through their fast decoders (exact, and equal to
    // small_float_decode on every pattern: FastDecodersMatchTheGenericDecoder...).
    case DType::Float16: return f16_to_float(static_cast<uint16_t>(bits));
    case DType::BFloat16: return bf16_to_float(static_cast<uint16_t>(bits));
    case DType::Float32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::Float64: return std::bit_cast<double>(bits);
    case DType::Fp8E4M3: return e4m3_to_float(static_cast<uint8_t>(bits));
    case DType::Fp8E5M2: return e5m2_to_float(static_cast<uint8_t>(bits));
  }
  return 0;
}

Reduction resolve_reduction(DType dtype, RedOp op, int nranks, double premul_scalar) {
  if (nranks < 1) throw std::invalid_argument("nranks must be >= 1");
  Reduction r;
  r.dtype = dtype;
  r.op = op;
  r.nranks = nranks;
  const bool is_float = dtype_is_float(dtype);
  switch (op) {
    case RedOp::Sum: r.combine = Combine::Sum; break;
    case RedOp::Prod: r.combine = Combine::Prod; break;
    case RedOp::Max: r.combine = Combine::Max; break;
    case RedOp::Min: r.combine = Combine::Min; break;
    case RedOp::PreMulSum:
      r.combine = Combine::Sum;
      r.premul = true;
      r.scalar_bits = to_element_bits(dtype, premul_scalar);
      break;
    case RedOp::Avg:
      r.combine = Combine::Sum;
      if (!is_float) {
        r.postdiv = true;  // ncclDevSumPostDiv: wrapping sum, then divide, toward zero
        r.divisor = static_cast<uint64_t>(nranks);
      } else {
        // ncclDevPreMulSum with s = 1/p computed in double, narrowed to float,
        // then to the element type (one rounding per narrowing, as NCCL does).
        r.premul = true;
        const double inv = 1.0 / nranks;
        const float inv_f = static_cast<float>(inv);
        switch (dtype) {
          case DType::Float64: r.scalar_bits = std::bit_cast<uint64_t>(inv); break;
          case DType::Float32: r.scalar_bits = std::bit_cast<uint32_t>(inv_f); break;
          case DType::Float16: r.scalar_bits = float_to_f16(inv_f); break;
          case DType::BFloat16: r.scalar_bits = float_to_bf16(inv_f); break;
          case DType::Fp8E4M3: r.scalar_bits = float_to_e4m3(inv_f); break;
          case DType::Fp8E5M2: r.scalar_bits = float_to_e5m2(inv_f); break;
          default: break;
        }
      }
      break;
  }
  return r;
}

}  // namespace collcheck
