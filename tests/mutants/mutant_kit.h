// A small all-reduce kit for the mutants: a correct ring and a correct binary
// tree written against the plugin ABI only (collcheck/plugin.h), with switches
// that plant one realistic bug each. control.cc builds the kit with no switch
// set and must pass verify; each mutant_*.cc sets one switch and must fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "collcheck/plugin.h"

namespace mk {

struct LinkFailed {};  // a link call failed; the harness recorded why

struct Ctx {
  const collcheck_call* c;
  const collcheck_links* l;
  int rank() const { return l->rank; }
  int p() const { return l->size; }
  size_t es() const { return c->dtype_size; }
  std::byte* at(void* base, size_t i) const { return static_cast<std::byte*>(base) + i * es(); }
};

inline collcheck_request* post(const Ctx& x, bool send, int peer, uint64_t tag, void* buf, size_t n) {
  collcheck_request* r = nullptr;
  const size_t bytes = n * x.es();
  const int rc = send ? x.l->isend(x.l->ctx, peer, tag, buf, bytes, &r) : x.l->irecv(x.l->ctx, peer, tag, buf, bytes, &r);
  if (rc != 0) throw LinkFailed{};
  return r;
}
inline void wait(const Ctx& x, collcheck_request* r) {
  if (x.l->wait(x.l->ctx, r) != 0) throw LinkFailed{};
}
// Sends `nout` elements to `to` and receives `nin` from `from`, both at once.
inline void sendrecv(const Ctx& x, int to, const void* out, size_t nout, int from, void* in, size_t nin, uint64_t tag) {
  collcheck_request* r = post(x, false, from, tag, in, nin);
  collcheck_request* s = post(x, true, to, tag, const_cast<void*>(out), nout);
  wait(x, r);
  wait(x, s);
}
inline void send(const Ctx& x, int to, const void* buf, size_t n, uint64_t tag) {
  wait(x, post(x, true, to, tag, const_cast<void*>(buf), n));
}
inline void recv(const Ctx& x, int from, void* buf, size_t n, uint64_t tag) { wait(x, post(x, false, from, tag, buf, n)); }

using CombineFn = std::function<void(const Ctx&, void* inout, const void* in, size_t n)>;
inline void harness_combine(const Ctx& x, void* inout, const void* in, size_t n) { x.l->combine(x.l->ctx, inout, in, n); }

struct Chunk {
  size_t off, n;
};

struct RingBugs {
  bool floor_chunks = false;     // chunks of count/p elements: the count % p tail is never reduced
  bool wrong_send_chunk = false; // reduce-scatter step s sends chunk r+s instead of r-s
  bool short_allgather = false;  // the all-gather loop stops one step early
  bool add_twice = false;        // the first received chunk is combined twice
  bool index_in_3_bits = false;  // the chunk index is kept in 3 bits: chunks 8.. alias chunks 0.. (p >= 9)
  // Not a bug by itself: chunk i is (*layout)[i], clamped to the count (a
  // layout computed for another call; see plan_cache_keyed_on_bytes).
  const std::vector<Chunk>* layout = nullptr;
};

inline Chunk ring_chunk(size_t count, int p, int i, const RingBugs& b) {
  if (b.layout) {
    const Chunk& c = (*b.layout)[static_cast<size_t>(i)];
    const size_t off = std::min(c.off, count);
    return {off, std::min(c.n, count - off)};
  }
  const size_t P = static_cast<size_t>(p), I = static_cast<size_t>(b.index_in_3_bits ? (i & 7) : i);
  if (b.floor_chunks) return {I * (count / P), count / P};
  const size_t base = count / P, extra = count % P;
  return {I * base + (I < extra ? I : extra), base + (I < extra ? 1 : 0)};
}

// Ring all-reduce on `buf`, which holds this rank's pre-multiplied
// contribution; applies postdiv. Reduce-scatter then all-gather.
inline void ring(const Ctx& x, void* buf, const RingBugs& b = {}, const CombineFn& combine = harness_combine) {
  const int p = x.p(), r = x.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  auto mod = [p](int v) { return ((v % p) + p) % p; };
  size_t maxn = 0;
  for (int i = 0; i < p; ++i) maxn = std::max(maxn, ring_chunk(x.c->count, p, i, b).n);
  std::vector<std::byte> tmp(maxn * x.es() + 1);
  for (int s = 0; s < p - 1; ++s) {
    const Chunk out = ring_chunk(x.c->count, p, b.wrong_send_chunk ? mod(r + s) : mod(r - s), b);
    const Chunk in = ring_chunk(x.c->count, p, mod(r - s - 1), b);
    sendrecv(x, right, x.at(buf, out.off), out.n, left, tmp.data(), in.n, x.c->tag_base);
    combine(x, x.at(buf, in.off), tmp.data(), in.n);
    if (b.add_twice && s == 0) combine(x, x.at(buf, in.off), tmp.data(), in.n);
  }
  // The 3-bit index bug stays in the reduce-scatter: in the all-gather the
  // aliased chunks would have a rank receive into a region it is sending from
  // at the same time, a data race (ThreadSanitizer stops on it) rather than the
  // wrong sums the mutant stands for.
  RingBugs ag = b;
  ag.index_in_3_bits = false;
  const Chunk mine = ring_chunk(x.c->count, p, mod(r + 1), ag);
  x.l->postdiv(x.l->ctx, x.at(buf, mine.off), mine.n);
  const int steps = b.short_allgather ? p - 2 : p - 1;
  for (int s = 0; s < steps; ++s) {
    const Chunk out = ring_chunk(x.c->count, p, mod(r + 1 - s), ag);
    const Chunk in = ring_chunk(x.c->count, p, mod(r - s), ag);
    sendrecv(x, right, x.at(buf, out.off), out.n, left, x.at(buf, in.off), in.n, x.c->tag_base + 1);
  }
}

// The kit ring's reduction order, as collcheck_plugin_reduction_order returns
// it: chunk c is folded from rank c along the ring (the same order as
// collcheck's reference ring).
inline int ring_order(int p, size_t count, size_t index, int* postfix, size_t capacity) {
  if (capacity < 2 * static_cast<size_t>(p) - 1) return -1;
  int c = 0;
  for (int i = 0; i < p; ++i) {
    const Chunk ch = ring_chunk(count, p, i, {});
    if (index >= ch.off && index < ch.off + ch.n) c = i;
  }
  int n = 0;
  postfix[n++] = c;
  for (int k = 1; k < p; ++k) {
    postfix[n++] = (c + k) % p;
    postfix[n++] = -1;
  }
  return n;
}

struct TreeBugs {
  bool drop_last_leaf = false;   // when p is not a power of two, rank p-1 is left out of the reduction
  bool root_other_order = false; // the root keeps a result it summed in another order than it sent
};

// Reduce to rank 0 along the heap tree (children 2r+1, 2r+2), then broadcast.
inline void tree(const Ctx& x, void* buf, const TreeBugs& b = {}, const CombineFn& combine = harness_combine) {
  const int p = x.p(), r = x.rank();
  const size_t n = x.c->count;
  const bool pow2 = (p & (p - 1)) == 0;
  auto in_reduce = [&](int rank) { return !(b.drop_last_leaf && !pow2 && rank == p - 1); };
  std::vector<std::byte> tmp(n * x.es() + 1);
  std::vector<std::byte> own;
  if (b.root_other_order && r == 0) own.assign(static_cast<std::byte*>(buf), static_cast<std::byte*>(buf) + n * x.es());
  std::vector<std::vector<std::byte>> kids;
  for (int k = 1; k <= 2; ++k) {
    const int child = 2 * r + k;
    if (child >= p || !in_reduce(child)) continue;
    recv(x, child, tmp.data(), n, x.c->tag_base);
    combine(x, buf, tmp.data(), n);
    if (b.root_other_order && r == 0) kids.emplace_back(tmp.begin(), tmp.end());
  }
  if (r != 0 && in_reduce(r)) send(x, (r - 1) / 2, buf, n, x.c->tag_base);
  if (r == 0) x.l->postdiv(x.l->ctx, buf, n);
  if (r != 0) recv(x, (r - 1) / 2, buf, n, x.c->tag_base + 1);
  for (int k = 1; k <= 2; ++k) {
    const int child = 2 * r + k;
    if (child < p) send(x, child, buf, n, x.c->tag_base + 1);
  }
  if (b.root_other_order && r == 0 && kids.size() == 2) {
    // What the root keeps for itself: own + (c0 + c1), not the (own + c0) + c1
    // it sent down the tree. Same values, another rounding.
    combine(x, kids[0].data(), kids[1].data(), n);
    combine(x, own.data(), kids[0].data(), n);
    std::memcpy(buf, own.data(), n * x.es());
    x.l->postdiv(x.l->ctx, buf, n);
  }
}

// Every rank sends its contribution to every other and folds all p of them
// in rank order into `buf` with `fold` (which gets them as an array of p
// pointers, rank order); then postdiv. The control folds with the harness's
// combine, one step at a time; the mutants bring their own arithmetic.
using FoldFn = std::function<void(const Ctx&, void* out, const std::vector<const void*>& all, size_t n)>;
inline void fold_steps(const Ctx& x, void* out, const std::vector<const void*>& all, size_t n) {
  std::memcpy(out, all[0], n * x.es());
  for (size_t k = 1; k < all.size(); ++k) harness_combine(x, out, all[k], n);
}
inline void gather_fold(const Ctx& x, void* buf, const FoldFn& fold = fold_steps) {
  const int p = x.p(), r = x.rank();
  const size_t n = x.c->count, bytes = n * x.es();
  std::vector<std::vector<std::byte>> from(static_cast<size_t>(p));
  std::vector<collcheck_request*> reqs;
  for (int k = 0; k < p; ++k) {
    if (k == r) continue;
    from[static_cast<size_t>(k)].resize(bytes + 1);
    reqs.push_back(post(x, false, k, x.c->tag_base, from[static_cast<size_t>(k)].data(), n));
  }
  for (int k = 0; k < p; ++k)
    if (k != r) reqs.push_back(post(x, true, k, x.c->tag_base, buf, n));
  for (auto* q : reqs) wait(x, q);
  std::vector<const void*> all(static_cast<size_t>(p));
  std::vector<std::byte> mine(static_cast<std::byte*>(buf), static_cast<std::byte*>(buf) + bytes);
  for (int k = 0; k < p; ++k) all[static_cast<size_t>(k)] = k == r ? mine.data() : from[static_cast<size_t>(k)].data();
  fold(x, buf, all, n);
  x.l->postdiv(x.l->ctx, buf, n);
}

// Runs `body` with the contribution already in c->recv; p == 1 and count == 0
// handled. Turns LinkFailed into an error return.
inline int run(const collcheck_call* c, const collcheck_links* l, const std::function<void(const Ctx&)>& body,
               bool premul = true) {
  const Ctx x{c, l};
  if (premul) l->premul(l->ctx, c->recv, c->send, c->count);
  try {
    if (l->size == 1 || c->count == 0) {
      l->postdiv(l->ctx, c->recv, c->count);
      return 0;
    }
    body(x);
    return 0;
  } catch (const LinkFailed&) {
    return 1;
  }
}

// ---- element helpers for mutants that bring their own arithmetic ----

inline bool is_nan(int dtype, const std::byte* e) {
  uint64_t v = 0;
  switch (dtype) {
    case COLLCHECK_FLOAT16: std::memcpy(&v, e, 2); return (v & 0x7c00) == 0x7c00 && (v & 0x3ff);
    case COLLCHECK_BFLOAT16: std::memcpy(&v, e, 2); return (v & 0x7f80) == 0x7f80 && (v & 0x7f);
    case COLLCHECK_FLOAT32: std::memcpy(&v, e, 4); return (v & 0x7f800000u) == 0x7f800000u && (v & 0x7fffffu);
    case COLLCHECK_FLOAT64:
      std::memcpy(&v, e, 8);
      return (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (v & 0xfffffffffffffull);
    case COLLCHECK_FP8_E4M3: std::memcpy(&v, e, 1); return (v & 0x7f) == 0x7f;
    case COLLCHECK_FP8_E5M2: std::memcpy(&v, e, 1); return (v & 0x7c) == 0x7c && (v & 0x3);
    default: return false;
  }
}

inline float fp8_to_float(int dtype, uint8_t v) {
  const bool e4m3 = dtype == COLLCHECK_FP8_E4M3;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const int exp = (v & 0x7f) >> mbits, man = v & ((1 << mbits) - 1);
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), 1 - bias - mbits)
                             : std::ldexp(1.0f + static_cast<float>(man) / static_cast<float>(1 << mbits), exp - bias);
  return (v & 0x80) ? -mag : mag;
}

// float16 bits to float (exact) and float to float16 bits, rounding to
// nearest with ties to even, or ties away from zero. Written out: clang 14
// has no _Float16 on x86, and the ASan stage builds with it.
inline float half_to_float(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);
  if (exp == 31) return man ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(1024 + man), exp - 25);
}
inline uint16_t float_to_half(float f, bool ties_away = false) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | 0x7c00;
  int q = 0;
  std::frexp(a, &q);  // a = m 2^q, m in [0.5, 1)
  const int e = std::max(q - 1, -14);  // the binade, subnormals in the lowest
  const double ulp = std::ldexp(1.0, e - 10);
  const double r = (ties_away ? std::round(a / ulp) : std::nearbyint(a / ulp)) * ulp;
  if (r > 65504.0) return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(r / std::ldexp(1.0, -24));
  std::frexp(r, &q);
  const int E = q - 1;
  return sign | static_cast<uint16_t>((E + 15) << 10) | static_cast<uint16_t>(r / std::ldexp(1.0, E - 10) - 1024);
}

}  // namespace mk

// The boilerplate every mutant exports. A kit plugin's ranks wait on each
// other only through the links and keep no per-thread state, so it declares
// that they may be fibers of one thread (collcheck_plugin_fiber_safe):
// `collcheck verify` runs it in the simulated world unless --world says
// otherwise. One that keeps per-thread state uses MK_PLUGIN_THREADS.
#define MK_PLUGIN_THREADS(label)                                                    \
  extern "C" int collcheck_plugin_abi_version(void) { return COLLCHECK_PLUGIN_ABI_VERSION; } \
  extern "C" const char* collcheck_plugin_name(void) { return label; }
#define MK_PLUGIN(label)  \
  MK_PLUGIN_THREADS(label) \
  extern "C" int collcheck_plugin_fiber_safe(void) { return 1; }
