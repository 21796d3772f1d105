#include "impl/checksum.h"

#include <cstring>
#include <initializer_list>

#include "impl/kernels_avx2.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace collcheck {

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

namespace {

// payload_checksum's four lanes, four words at a time in one AVX2 register:
// the same adds in the same lanes, so the same sums as the scalar loop, at
// one load a step (the checksum of every transfer, at both ends, was the
// largest share of a 128-rank replay). `bytes` is a multiple of 32.
#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
void fletcher_lanes_avx2(unsigned char* dst, const unsigned char* p, size_t bytes, uint64_t& a0, uint64_t& a1, uint64_t& a2,
                         uint64_t& a3, uint64_t& b0, uint64_t& b1, uint64_t& b2, uint64_t& b3) {
#if defined(__x86_64__)
  __m256i a = _mm256_set_epi64x(static_cast<long long>(a3), static_cast<long long>(a2), static_cast<long long>(a1),
                                static_cast<long long>(a0));
  __m256i b = _mm256_set_epi64x(static_cast<long long>(b3), static_cast<long long>(b2), static_cast<long long>(b1),
                                static_cast<long long>(b0));
  if (dst != nullptr) {
    for (size_t i = 0; i < bytes; i += 32) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), w);
      a = _mm256_add_epi64(a, w);
      b = _mm256_add_epi64(b, a);
    }
  } else {
    for (size_t i = 0; i < bytes; i += 32) {
      a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
      b = _mm256_add_epi64(b, a);
    }
  }
  alignas(32) uint64_t av[4], bv[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(av), a);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bv), b);
  a0 = av[0], a1 = av[1], a2 = av[2], a3 = av[3];
  b0 = bv[0], b1 = bv[1], b2 = bv[2], b3 = bv[3];
#else
  (void)dst, (void)p, (void)bytes, (void)a0, (void)a1, (void)a2, (void)a3, (void)b0, (void)b1, (void)b2, (void)b3;
#endif
}

// `dst` non-null: the bytes are copied there as they are summed.
uint64_t checksum(void* dst, const void* data, size_t bytes, bool vector) {
  // Fletcher's two running sums, mod 2^64, in four independent lanes of
  // 64-bit words: a += w; b += a. A changed word changes its lane's a (the
  // step is a bijection of the word), so two payloads that differ in any one
  // word always differ here. Two different words swapped across lanes change
  // both lanes' a; within a lane they change b by (j - i)(w_i - w_j), which
  // is zero only when that product is a multiple of 2^64. Only adds:
  // the lanes run at load speed, where a multiply per word ((h ^ w) * odd)
  // was a quarter of a 128-rank replay's time, and byte-wise FNV-1a a third.
  // The lanes are mixed with multiplies once, at the end.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t a0 = 0xcbf29ce484222325ull, a1 = 0x84222325cbf29ce4ull, a2 = 0x100000001b3ull, a3 = 0x5bd1e9955bd1e995ull;
  uint64_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  if (vector && bytes >= 256 && avx2_kernels_available()) {
    const size_t whole = bytes / 32 * 32;
    fletcher_lanes_avx2(static_cast<unsigned char*>(dst), p, whole, a0, a1, a2, a3, b0, b1, b2, b3);
    i = whole;
  }
  if (dst != nullptr && i < bytes) std::memcpy(static_cast<unsigned char*>(dst) + i, p + i, bytes - i);
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w0, w1, w2, w3;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + i + 8, 8);
    std::memcpy(&w2, p + i + 16, 8);
    std::memcpy(&w3, p + i + 24, 8);
    a0 += w0, a1 += w1, a2 += w2, a3 += w3;
    b0 += a0, b1 += a1, b2 += a2, b3 += a3;
  }
  uint64_t out = fnv1a(p + i, bytes - i) ^ bytes;
  for (const uint64_t v : {a0, b0, a1, b1, a2, b2, a3, b3}) out = (out ^ (v ^ (v >> 29))) * kMul;
  return out;
}

}  // namespace

uint64_t payload_checksum(const void* data, size_t bytes) { return checksum(nullptr, data, bytes, true); }
uint64_t payload_checksum_portable(const void* data, size_t bytes) { return checksum(nullptr, data, bytes, false); }
uint64_t copy_with_checksum(void* dst, const void* src, size_t bytes) { return checksum(dst, src, bytes, true); }

}  // namespace collcheck
