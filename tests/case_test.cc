// The case model and its generator: replay tokens round-trip, bad tokens are
// rejected with the field named, generation respects the space and favours
// the edges, shrinks are simpler, and the input distributions produce what
// they promise.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <set>

#include "harness/check/oracle.h"
#include "impl/float_formats.h"
#include "properties/case.h"
#include "properties/generators.h"
#include "properties/verify.h"

using namespace collcheck;

namespace {
CaseSpace small_space() {
  CaseSpace s;
  s.max_ranks = 6;
  s.max_count = 40;
  return s;
}
}  // namespace

RC_GTEST_PROP(CaseToken, RoundTripsSeededAndExplicitCases, ()) {
  Case c = *gen_case(small_space());
  RC_ASSERT(decode_case(encode_case(c)) == c);
  c.make_explicit();
  const Case back = decode_case(encode_case(c));
  RC_ASSERT(back == c);
  RC_ASSERT(back.input_buffers() == c.input_buffers());
}

TEST(CaseToken, ExplicitTokenIsReadable) {
  Case c;
  c.p = 2;
  c.dtype = DType::Float32;
  c.op = RedOp::Sum;
  c.count = 2;
  c.explicit_values = true;
  c.values = {{0x3f800000, 0}, {0x40000000, 0x3f800000}};
  EXPECT_EQ(encode_case(c), "v1:p2:float32:sum:s1:n2:oop:x:3f800000.0/40000000.3f800000");
}

TEST(CaseToken, ASequenceIsReadableAndRoundTrips) {
  Case c;
  c.p = 2;
  c.count = 6;
  c.seed = 0x1f;
  c.perturb = 9;
  Case n;
  n.p = 2;
  n.dtype = DType::Float16;
  n.count = 12;
  n.inplace = true;
  n.async = true;
  n.defer = 1;
  n.data = DataClass::Random;
  n.seed = 2;
  c.then.push_back(n);
  const std::string t = encode_case(c);
  EXPECT_EQ(t, "v1:p2:float32:sum:s1:n6:oop:d:exact:1f,z9,float16:sum:s1:n12:ip:async1:d:random:2");
  EXPECT_TRUE(decode_case(t) == c);
  EXPECT_EQ(c.total_count(), 18u);
  c.then[0].make_explicit();
  EXPECT_TRUE(decode_case(encode_case(c)) == c);
  // 16 calls at most.
  std::string longest = "v1:p1:int8:sum:s1:n1:oop:x:0";
  for (int k = 0; k < 15; ++k) longest += ",int8:sum:s1:n1:oop:sync:x:0";
  EXPECT_EQ(decode_case(longest).calls(), 16u);
  EXPECT_THROW(decode_case(longest + ",int8:sum:s1:n1:oop:sync:x:0"), std::invalid_argument);
}

TEST(CaseToken, BadTokensNameTheField) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "token"},
      {"v2:p2:float32:sum:s1:n2:oop:x:0.0/0.0", "token"},
      {"v1:q2:float32:sum:s1:n2:oop:x:0.0/0.0", "ranks field"},
      {"v1:p0:float32:sum:s1:n2:oop:x:0.0/0.0", "ranks field"},
      {"v1:p2:float33:sum:s1:n2:oop:x:0.0/0.0", "dtype"},
      {"v1:p2:float32:add:s1:n2:oop:x:0.0/0.0", "op"},
      {"v1:p2:float32:sum:sx:n2:oop:x:0.0/0.0", "scalar field"},
      {"v1:p2:float32:sum:s1:n-2:oop:x:0.0/0.0", "count field"},
      {"v1:p2:float32:sum:s1:n2:out:x:0.0/0.0", "placement"},
      {"v1:p2:float32:sum:s1:n2:oop:x:0.0", "values"},
      {"v1:p2:float32:sum:s1:n2:oop:x:0.0/0", "values"},
      {"v1:p2:int8:sum:s1:n2:oop:x:0.100/0.0", "element"},
      {"v1:p2:float32:sum:s1:n2:oop:x:0.zz/0.0", "element"},
      {"v1:p2:float32:sum:s1:n2:oop:d:gaussian:12", "data class"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:xyz", "seed"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1:w1::0", "window field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1:w4:0.9:0", "window ranks"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1:w4:0:0", "window ranks"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1:w4:0.1:x", "window offset"},
      // The sequence: further calls and the perturbation seed.
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1:n2:oop:d:exact:2", "async field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1", "call"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1:n2:oop:later:d:exact:2", "async field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1:n2:oop:async99:d:exact:2", "async field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float17:sum:s1:n2:oop:sync:d:exact:2", "dtype"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1:n2:oop:sync:x:0.0", "values"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,z0", "perturbation field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,zq", "perturbation field"},
      {"v1:p2:float32:sum:s1:n2:oop:d:exact:1,float16:sum:s1:n2:oop:sync:d:exact:2,z5", "perturbation field"},
  };
  for (const auto& [token, field] : bad) {
    try {
      decode_case(token);
      ADD_FAILURE() << "accepted: " << token;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << token << " -> " << e.what();
    }
  }
}

RC_GTEST_PROP(Generator, RespectsTheSpace, ()) {
  CaseSpace s = small_space();
  s.dtypes = {DType::Int8, DType::BFloat16};
  s.ops = {RedOp::Max, RedOp::PreMulSum};
  const Case c = *gen_case(s);
  RC_ASSERT(c.p >= 1);
  RC_ASSERT(c.p <= s.max_ranks);
  const auto large = large_counts(c.dtype, s.large_bytes);
  RC_ASSERT(c.count <= s.max_count || std::count(large.begin(), large.end(), c.count) == 1);
  RC_ASSERT(c.dtype == DType::Int8 || c.dtype == DType::BFloat16);
  RC_ASSERT(c.op == RedOp::Max || c.op == RedOp::PreMulSum);
  RC_ASSERT(!(dtype_is_float(c.dtype) && c.data == DataClass::Wrap));
}

TEST(Generator, FavoursEdgeCountsAndCoversEveryDtypeOpAndClass) {
  CaseSpace s;  // the verify defaults
  const auto gen = gen_case(s);
  rc::Random rnd(42);
  std::set<size_t> counts;
  std::set<std::pair<int, int>> pairs;
  std::set<int> classes, ps;
  int above8 = 0, above16 = 0, large = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const Case c = gen(rnd.split(), i % 101).value();
    counts.insert(c.count);
    pairs.insert({static_cast<int>(c.dtype), static_cast<int>(c.op)});
    classes.insert(static_cast<int>(c.data));
    ps.insert(c.p);
    above8 += c.p > 8;
    above16 += c.p > 16;
    large += c.count * dtype_size(c.dtype) >= (size_t{64} << 10) - 8;
  }
  EXPECT_EQ(pairs.size(), 72u);
  for (int p = 1; p <= 16; ++p) EXPECT_TRUE(ps.count(p)) << "p=" << p << " never drawn";
  EXPECT_GT(*ps.rbegin(), 32) << "large worlds never drawn";
  // p > 8 in 18 % of the cases, p > 16 in 3 %.
  EXPECT_GT(above8, n * 14 / 100);
  EXPECT_LT(above8, n * 22 / 100);
  EXPECT_GT(above16, n * 2 / 100);
  EXPECT_LT(above16, n * 5 / 100);
  // Large counts (64 KiB .. 1 MiB, +-1 element) in about 1 case in 100.
  EXPECT_GT(large, n / 300);
  EXPECT_LT(large, n / 30);
  for (size_t e : {0, 1, 2, 3, 4, 5, 7, 8, 9, 63, 64, 65, 511, 512, 513}) EXPECT_TRUE(counts.count(e)) << "count " << e << " never drawn";
  for (DataClass c : {DataClass::Exact, DataClass::Random, DataClass::Extreme, DataClass::Special, DataClass::Wrap})
    EXPECT_TRUE(classes.count(static_cast<int>(c))) << data_class_name(c);
  for (size_t e : edge_counts(5, 100))
    if (e > 100) ADD_FAILURE() << e;
  const auto e5 = edge_counts(5, 1000);
  for (size_t e : {0, 1, 3, 4, 5, 6, 9, 10, 11, 14, 15, 16, 39, 40, 41, 319, 320, 321, 255, 256, 257})
    EXPECT_TRUE(std::count(e5.begin(), e5.end(), static_cast<size_t>(e))) << e;
}

// Every world size up to max_ranks is drawn often, also for small worlds: an
// MPI world of 2 processes once drew p = 2 in only 1 case of 101 (the upper
// bound was rounded down).
TEST(Generator, DrawsTheLargestWorldSizeOftenForEveryMaxRanks) {
  for (int max_ranks = 1; max_ranks <= 8; ++max_ranks) {
    CaseSpace s;
    s.max_ranks = max_ranks;
    const auto gen = gen_case(s);
    rc::Random rnd(7);
    std::map<int, int> n;
    const int cases = 303;
    for (int i = 0; i < cases; ++i) ++n[gen(rnd.split(), i % 101).value().p];
    for (int p = 1; p <= max_ranks; ++p) EXPECT_GT(n[p], 0) << "p=" << p << " never drawn with max_ranks " << max_ranks;
    // World size grows with RapidCheck's size, so large worlds come late by
    // design; small worlds (MPI worlds of 2 to 4 processes) must reach their
    // largest size in a good share of the cases from early on.
    if (max_ranks <= 4) {
      EXPECT_GE(n[max_ranks] * 4 * max_ranks, cases) << "p=" << max_ranks << " drawn " << n[max_ranks] << " times in "
                                                    << cases << " with max_ranks " << max_ranks;
    }
  }
}

// Every shrink is simpler: fewer ranks, fewer elements, in-place turned off,
// scalar 1, or one value replaced by a simpler one; never the case itself.
RC_GTEST_PROP(Shrinks, AreStrictlySimpler, ()) {
  const Case c = *gen_case(small_space());
  auto seq = case_shrinks(c);
  int n = 0;
  while (auto s = seq.next()) {
    if (++n > 300) break;
    RC_ASSERT(!(*s == c));
    RC_ASSERT(s->p <= c.p);
    RC_ASSERT(s->then.size() <= c.then.size());
    // A sequence that lost its first call opens with its second (its own
    // dtype, op and count): shorter, so simpler.
    if (s->then.size() == c.then.size()) {
      // (A smaller world with fresh inputs, the last stage, may have more elements.)
      if (s->p == c.p) RC_ASSERT(s->count <= c.count);
      RC_ASSERT(s->dtype == c.dtype);
      RC_ASSERT(s->op == c.op);
    }
    size_t async_before = 0, async_after = 0;
    for (const auto& t : c.then) async_before += t.async;
    for (const auto& t : s->then) async_after += t.async;
    bool later_count_smaller = false;
    if (s->then.size() == c.then.size())
      for (size_t k = 0; k < c.then.size(); ++k) later_count_smaller |= s->then[k].count < c.then[k].count;
    const bool smaller = s->p < c.p || s->count < c.count || (c.inplace && !s->inplace) ||
                         (c.op == RedOp::PreMulSum && s->scalar == 1.0 && c.scalar != 1.0) ||
                         s->then.size() < c.then.size() || async_after < async_before ||
                         (c.perturb && !s->perturb) || later_count_smaller;
    if (!smaller) {
      // Exactly one value changed, in one of the calls.
      int changed = 0;
      for (size_t k = 0; k < c.calls(); ++k) {
        const Case& a = k == 0 ? c : c.then[k - 1];
        const Case& b = k == 0 ? *s : s->then[k - 1];
        RC_ASSERT(b.count == a.count);
        for (int r = 0; r < c.p; ++r)
          for (size_t i = 0; i < a.count; ++i) changed += b.input(r, i) != a.input(r, i);
      }
      RC_ASSERT(changed == 1);
    }
  }
}

TEST(Shrinks, TryOneRankFirstKeepingItsValues) {
  Case c;
  c.p = 6;
  c.count = 10;
  c.seed = 7;
  auto seq = case_shrinks(c);
  auto first = seq.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->p, 1);
  EXPECT_EQ(first->count, 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(first->input(0, i), c.input(0, i));
}

// Shrinking a seeded case to fewer ranks or a shorter buffer keeps it seeded
// (a window on the original world), so its token stays short, and the
// window holds exactly the original values.
TEST(Shrinks, KeepSeededInputsSeededAndTheTokenShort) {
  Case c;
  c.p = 5;
  c.dtype = DType::Int64;
  c.count = 8196 * 2;
  c.data = DataClass::Random;
  c.seed = 99;
  auto seq = case_shrinks(c);
  size_t seen = 0;
  while (auto s = seq.next()) {
    if (++seen > 40) break;
    if (s->explicit_values) continue;
    if (s->seed != c.seed) continue;  // the last stage: a smaller world with fresh inputs
    const std::string token = encode_case(*s);
    EXPECT_LT(token.size(), 200u) << token;
    const Case back = decode_case(token);
    ASSERT_TRUE(back == *s) << token;
    // Every value is the original's at the window's rank and offset.
    for (int r = 0; r < s->p; ++r) {
      const int from = s->seed_ranks.empty() ? r : s->seed_ranks[static_cast<size_t>(r)];
      if (s->count == 0) continue;
      for (size_t i : {size_t{0}, s->count / 2, s->count - 1}) {
        EXPECT_EQ(back.input(r, i), c.input(from, s->seed_offset + i)) << token;
      }
    }
  }
  EXPECT_GT(seen, 10u);
}

TEST(CaseToken, RunsOfEqualValuesAreWrittenOnce) {
  Case c;
  c.p = 2;
  c.dtype = DType::Int8;
  c.count = 6;
  c.explicit_values = true;
  c.values = {{0, 0, 0, 0, 7, 7}, {1, 1, 1, 2, 2, 2}};
  EXPECT_EQ(encode_case(c), "v1:p2:int8:sum:s1:n6:oop:x:0*4.7.7/1*3.2*3");
  EXPECT_TRUE(decode_case(encode_case(c)) == c);
  EXPECT_THROW(decode_case("v1:p2:int8:sum:s1:n6:oop:x:0*7/1*6"), std::invalid_argument);
  EXPECT_THROW(decode_case("v1:p2:int8:sum:s1:n6:oop:x:0*0.1*6/1*6"), std::invalid_argument);
}

TEST(DataClasses, SpecialFloatsContainNanInfAndSignedZeros) {
  for (DType t : kAllDTypes) {
    if (!dtype_is_float(t)) continue;
    bool nan = false, inf = false, pz = false, nz = false;
    for (size_t i = 0; i < 2000; ++i) {
      const double v = element_to_double(t, input_element(t, RedOp::Sum, 4, 1, i, 9, DataClass::Special));
      nan |= std::isnan(v);
      inf |= std::isinf(v);
      pz |= v == 0 && !std::signbit(v);
      nz |= v == 0 && std::signbit(v);
    }
    EXPECT_TRUE(nan) << dtype_name(t);
    // fp8 e4m3 has no infinity; its conversion saturates.
    if (t != DType::Fp8E4M3) {
      EXPECT_TRUE(inf) << dtype_name(t);
    }
    EXPECT_TRUE(pz && nz) << dtype_name(t);
  }
}

TEST(DataClasses, ExtremeFloatsReachTheLargestFiniteValueAndTheSubnormals) {
  for (DType t : kAllDTypes) {
    if (!dtype_is_float(t)) continue;
    double biggest = 0, smallest = INFINITY;
    for (size_t i = 0; i < 2000; ++i) {
      const double v = std::fabs(element_to_double(t, input_element(t, RedOp::Sum, 4, 0, i, 3, DataClass::Extreme)));
      biggest = std::max(biggest, v);
      if (v > 0) smallest = std::min(smallest, v);
    }
    const auto lim = float_info(t);
    EXPECT_GE(biggest, 0.9 * lim.max_finite) << dtype_name(t);
    EXPECT_LT(smallest, lim.min_normal) << dtype_name(t);
  }
}

TEST(DataClasses, WrapIntegersOverflowWhenSummed) {
  for (DType t : {DType::Int8, DType::Uint8, DType::Int32, DType::Uint32, DType::Int64, DType::Uint64}) {
    const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t));
    int overflowed = 0;
    for (size_t i = 0; i < 1000; ++i) {
      const uint64_t a = input_element(t, RedOp::Sum, 2, 0, i, 5, DataClass::Wrap);
      const uint64_t b = input_element(t, RedOp::Sum, 2, 1, i, 5, DataClass::Wrap);
      // Overflow of the signed or unsigned interpretation: the carry into or out of the top bit.
      const __int128 sa = dtype_is_signed_int(t) ? static_cast<__int128>(static_cast<int64_t>(a << (64 - bits)) >> (64 - bits)) : a;
      const __int128 sb = dtype_is_signed_int(t) ? static_cast<__int128>(static_cast<int64_t>(b << (64 - bits)) >> (64 - bits)) : b;
      const __int128 s = sa + sb;
      const __int128 lo = dtype_is_signed_int(t) ? -(static_cast<__int128>(1) << (bits - 1)) : 0;
      const __int128 hi = dtype_is_signed_int(t) ? (static_cast<__int128>(1) << (bits - 1)) - 1 : (static_cast<__int128>(1) << bits) - 1;
      overflowed += s < lo || s > hi;
    }
    EXPECT_GT(overflowed, 300) << dtype_name(t);
  }
}

// Issue 31: a replay token too long for a command line was written into the
// working directory (often a user's checkout). It goes next to the run's
// reports (token_dir), else to $TMPDIR, and the replay line names its path.
TEST(ReplayToken, ALongTokenIsWrittenNextToTheReportsOrInTmpdir) {
  Case c;
  c.p = 2;
  c.count = 3000;
  c.seed = 5;
  c.data = DataClass::Random;
  c.make_explicit();
  ASSERT_GT(encode_case(c).size(), kMaxInlineToken);
  const std::string dir = testing::TempDir() + "token-dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto cwd_before = std::distance(std::filesystem::directory_iterator("."), std::filesystem::directory_iterator{});
  VerifyOptions o;
  o.impl_spec = "ring";
  o.token_dir = dir;
  const std::string line = replay_command(o, c);
  const std::string want = "--replay @" + dir + "/collcheck-replay-";
  ASSERT_NE(line.find(want), std::string::npos) << line;
  const std::string path = line.substr(line.find('@') + 1);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  EXPECT_EQ(decode_case(token), c);
  // No token_dir: $TMPDIR.
  setenv("TMPDIR", dir.c_str(), 1);
  o.token_dir.clear();
  c.seed = 6;
  const std::string line2 = replay_command(o, c);
  EXPECT_NE(line2.find(want), std::string::npos) << line2;
  unsetenv("TMPDIR");
  const auto cwd_after = std::distance(std::filesystem::directory_iterator("."), std::filesystem::directory_iterator{});
  EXPECT_EQ(cwd_before, cwd_after) << "nothing is written into the working directory";
}

// A sequence's calls of the first call's byte size are cut together to a
// prefix, so that their byte sizes stay equal; a call of another size is
// left alone, and a count that fits no call's dtype, or is not smaller,
// gives nothing.
TEST(CaseShrink, CallsOfTheFirstCallsByteSizeAreCutTogether) {
  Case c;
  c.p = 2;
  c.dtype = DType::Uint64;
  c.count = 1025;
  c.make_explicit();
  Case same;  // 8200 bytes, as the first call
  same.p = 2;
  same.dtype = DType::Fp8E4M3;
  same.count = 8200;
  same.seed = 3;
  Case other = same;  // 4 bytes: another size
  other.count = 4;
  c.then = {same, other};
  const auto cut = calls_cut_together(c, 1);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->count, 1u);
  for (const auto& v : cut->values) EXPECT_EQ(v.size(), 1u);
  for (size_t r = 0; r < 2; ++r) EXPECT_EQ(cut->values[r][0], c.values[r][0]);  // a prefix
  EXPECT_EQ(cut->then[0].count, 8u);
  EXPECT_EQ(cut->then[0].seed, 3u);  // seeded: the same prefix of the same stream
  EXPECT_EQ(cut->then[1].count, 4u);
  EXPECT_FALSE(calls_cut_together(c, 1025).has_value());  // not smaller
  // The other way round: 8 bytes of int8 then one uint64; 1 int8 fits no uint64.
  Case d;
  d.p = 2;
  d.dtype = DType::Int8;
  d.count = 16;
  Case wide = same;
  wide.dtype = DType::Uint64;
  wide.count = 2;
  d.then = {wide};
  EXPECT_FALSE(calls_cut_together(d, 1).has_value());
  const auto eight = calls_cut_together(d, 8);
  ASSERT_TRUE(eight.has_value());
  EXPECT_EQ(eight->then[0].count, 1u);
  Case none = d;  // no call of the first call's size
  none.then[0].count = 3;
  EXPECT_FALSE(calls_cut_together(none, 8).has_value());
}
