// Open MPI's allreduce algorithms (issue 31, item 5): the int8 deviation knows
// the algorithm (uniform for 1 to 5, each step saturating or wrapping for
// Rabenseifner and the default), and in-place may differ from out-of-place
// only where each result is one the documented deviation allows. The models
// as functions first, then the findings replayed on real MPI processes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <cstring>
#include <map>
#include <cstdint>
#include <vector>

#include "harness/peers/implementation.h"
#include "harness/peers/mpi_impl.h"
#include "harness/soak/algorithms.h"
#include "harness/soak/plan.h"
#include "properties/case.h"
#include "properties/properties.h"
#include "tests/run_command.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {

uint64_t i8(int v) { return static_cast<uint8_t>(static_cast<int8_t>(v)); }

std::vector<uint64_t> sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

TEST(MpiInt8Model, TheAlgorithmPicksTheModel) {
  for (int a = 1; a <= 5; ++a) EXPECT_EQ(mpi_int8_deviation(a).name, "ompi-avx-saturating-int8") << a;
  for (int a : {0, 6, -1}) EXPECT_EQ(mpi_int8_deviation(a).name, "ompi-avx-saturating-int8-mixed") << a;
}

TEST(MpiInt8Model, MixedStepsGiveWhatRabenseifnerGave) {
  // Element [26] of the algorithm-6 case of issue 31: 0 + -1 + -93 + -73.
  // Wrapped: 89 (NCCL). Open MPI gave 127: (-93 + -73) saturates to -128 on
  // the vector path, then -128 + -1 wraps to 127 on the scalar path.
  const Reduction red = resolve_reduction(DType::Int8, RedOp::Sum, 4);
  const std::vector<uint64_t> in{i8(0), i8(-1), i8(-93), i8(-73)};
  const Deviation& uniform = mpi_int8_deviation(4);
  const Deviation& mixed = mpi_int8_deviation(6);
  EXPECT_FALSE(uniform.allows(red, in, i8(127)));
  EXPECT_TRUE(mixed.allows(red, in, i8(127)));
  EXPECT_TRUE(mixed.allows(red, in, i8(89)));    // NCCL's
  EXPECT_TRUE(mixed.allows(red, in, i8(-128)));  // every step saturating
  // The uint8 case of the sweep: 0 + 1 + 174 + ... saturating at 255, then 255 + 1 wrapping to 0.
  const Reduction ru = resolve_reduction(DType::Uint8, RedOp::Sum, 3);
  EXPECT_TRUE(mpi_int8_deviation(6).allows(ru, std::vector<uint64_t>{1, 174, 200}, 0));
  EXPECT_FALSE(mpi_int8_deviation(5).allows(ru, std::vector<uint64_t>{1, 174, 200}, 0));
}

TEST(MpiInt8Model, MixedIsExactlyEveryTreeOfWrapsAndSaturations) {
  const Reduction red = resolve_reduction(DType::Int8, RedOp::Sum, 3);
  const Deviation& mixed = mpi_int8_deviation(6);
  // (100 + 100) wraps to -56 or saturates to 127; (100 + -100) is 0 either way.
  // -56 + -100: 100 wrapped, -128 saturated; 127 - 100 = 27; 0 + 100 = 100.
  EXPECT_EQ(sorted(mixed.outcomes(red, std::vector<uint64_t>{100, 100, i8(-100)})),
            sorted({i8(100), i8(-128), i8(27)}));
  for (int v : {26, 101, -56, 127}) EXPECT_FALSE(mixed.allows(red, std::vector<uint64_t>{100, 100, i8(-100)}, i8(v))) << v;
  // Nothing overflows: the one sum.
  EXPECT_EQ(mixed.outcomes(red, std::vector<uint64_t>{1, 2, 3}), std::vector<uint64_t>{6});
  // avg divides each of them (truncating toward zero).
  const Reduction avg = resolve_reduction(DType::Int8, RedOp::Avg, 3);
  EXPECT_EQ(sorted(mixed.outcomes(avg, std::vector<uint64_t>{100, 100, i8(-100)})),
            sorted({i8(33), i8(-42), i8(9)}));
  // Above 8 ranks it is not enumerated: every value, and it says so in its name's doc.
  const Reduction big = resolve_reduction(DType::Uint8, RedOp::Sum, 9);
  EXPECT_EQ(mixed.outcomes(big, std::vector<uint64_t>(9, 1)).size(), 256u);
}

// The ring, except that in place it changes its result after the call: each
// NaN to another quiet NaN (a right result in another order), or element 0 by
// one unit in the last place (a wrong one). It says it may
// reduce in another order in place, as Open MPI's algorithm 2 does.
class InPlaceOther final : public Implementation {
 public:
  explicit InPlaceOther(bool wrong) : wrong_(wrong) {}
  const std::string& name() const override { return name_; }
  std::optional<std::string> placement_reorders() const override { return std::string("test-inplace-order"); }
  void all_reduce(const AllReduceArgs& a) const override {
    ring_->all_reduce(a);
    if (a.send != a.recv || a.red.dtype != DType::Float32) return;
    auto* out = static_cast<std::byte*>(a.recv);
    for (size_t i = 0; i < a.count; ++i) {
      uint32_t bits;
      std::memcpy(&bits, out + 4 * i, 4);
      if (wrong_ && i == 0) bits += 1;
      else if (!wrong_ && (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu)) bits ^= 0x1u;  // another NaN payload
      std::memcpy(out + 4 * i, &bits, 4);
    }
  }

 private:
  bool wrong_;
  ImplPtr ring_ = make_implementation("ring");
  std::string name_ = "inplace-other";
};

TEST(PlacementOrder, AnotherRightResultInPlaceIsCountedAWrongOneFails) {
  // NaN + NaN: any NaN is right, so another payload in place is counted.
  const Case nan = decode_case("v1:p2:float32:sum:s1:n2:oop:x:0.ffd4209f/0.ffeb8081");
  const CaseOutcome a = CaseRunner(RunConfig{std::make_shared<InPlaceOther>(false), {}, 10000ms, {}}).run(nan);
  EXPECT_TRUE(a.ok) << a.failure.detail;
  EXPECT_EQ(a.deviant, (std::map<std::string, size_t>{{"test-inplace-order", 2}}));
  // One unit in the last place of 1 + 2 is no order's result: the property fails.
  const Case plain = decode_case("v1:p2:float32:sum:s1:n1:oop:x:3f800000/40000000");
  const CaseOutcome b = CaseRunner(RunConfig{std::make_shared<InPlaceOther>(true), {}, 10000ms, {}}).run(plain);
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.failure.property, "inplace-equals-out-of-place") << b.failure.detail;
  // Without placement_reorders, another NaN payload in place fails as before.
  class Strict final : public Implementation {
   public:
    const std::string& name() const override { return n_; }
    void all_reduce(const AllReduceArgs& x) const override { inner_.all_reduce(x); }
    InPlaceOther inner_{false};
    std::string n_ = "strict";
  };
  const CaseOutcome c = CaseRunner(RunConfig{std::make_shared<Strict>(), {}, 10000ms, {}}).run(nan);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.failure.property, "inplace-equals-out-of-place") << c.failure.detail;
}

// ---- on real MPI processes ----

TEST(MpiAlgorithms, RabenseifnersInt8CaseIsTheMixedDeviation) {
  const std::string token =
      "v1:p4:int8:premulsum:s1:n31:oop:x:0*31/0*26.ff.f.8c.fa.66/"
      "93.16.e6.a3.43.47.31.bb.27.b7.14.d.8b.61.3f.62.f0.75.bc.26.d3.62.8f.33.ea.1d.a3.b3.7c.60.9c/"
      "4c.b.bf.c7.4.d0.9c.e9.30.12.b0.1c.e4.77.1f.af.c2.96.a6.79.63.ff.39.12.b2.22.b7.8a.bf.92.c5";
  const auto six = testutil::run_command(
      testutil::mpirun(4) + " verify --world mpi --impl mpi --mpi-algo 6 --replay " + token, 120);
  EXPECT_EQ(six.code, 0) << six.out;
  EXPECT_NE(six.out.find("documented deviation ompi-avx-saturating-int8-mixed:"), std::string::npos)
      << "Open MPI's Rabenseifner no longer mixes saturating and wrapping int8 steps: update the README's Findings\n"
      << six.out;
  // The model follows the algorithm whoever sets it: here the environment (as
  // mpirun --mca passes it on) asks for recursive doubling, whose uniform model is the
  // stricter one; with nothing set, the default decision's, the mixed one.
  const std::string z = "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0";
  const std::string sat = " verify --world mpi --impl mpi --replay v1:p2:uint8:sum:s1:n16:oop:x:" + z + ".c8/" + z + ".64";
  const auto rd = testutil::run_command(
      "env OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=3 " + testutil::mpirun(2) + sat,
      120);
  EXPECT_EQ(rd.code, 0) << rd.out;
  EXPECT_NE(rd.out.find("documented deviation ompi-avx-saturating-int8: 1 elements"), std::string::npos) << rd.out;
  const auto dflt = testutil::run_command(testutil::mpirun(2) + sat, 120);
  EXPECT_EQ(dflt.code, 0) << dflt.out;
  EXPECT_NE(dflt.out.find("documented deviation ompi-avx-saturating-int8-mixed: 1 elements"), std::string::npos)
      << dflt.out;
}

TEST(MpiAlgorithms, NonoverlappingInPlaceMaxWithNaNDiffersAsDocumented) {
  // Out of place, Open MPI's algorithm 2 gives 0 for max(0, NaN); in place, the
  // NaN: the reduction order depends on the placement. Both are outcomes of
  // mpi-nan-order, so inplace-equals-out-of-place holds up to it, counted.
  const auto r = testutil::run_command(testutil::mpirun(2) +
                                           " verify --world mpi --impl mpi --mpi-algo 2 --repeat 3 --replay "
                                           "v1:p2:float32:max:s1:n2:oop:x:0.0/0.7fd3fd23",
                                       120);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("documented deviation ompi-inplace-order: 2 elements"), std::string::npos)
      << "in place and out of place now agree or differ otherwise: update the README's Findings\n"
      << r.out;
  // NaN payloads of a float sum, likewise; under the ring (algorithm 4) the
  // placements agree, and nothing is counted.
  const std::string sum = " --replay v1:p2:float32:sum:s1:n2:oop:x:0.ffd4209f/0.ffeb8081";
  const auto two = testutil::run_command(testutil::mpirun(2) + " verify --world mpi --impl mpi --mpi-algo 2" + sum, 120);
  EXPECT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("documented deviation ompi-inplace-order: 2 elements"), std::string::npos) << two.out;
  const auto four = testutil::run_command(testutil::mpirun(2) + " verify --world mpi --impl mpi --mpi-algo 4" + sum, 120);
  EXPECT_EQ(four.code, 0) << four.out;
  EXPECT_EQ(four.out.find("ompi-inplace-order"), std::string::npos) << four.out;
}

// ---- the soak's algorithms workload (harness/soak/algorithms.h) ----

TEST(AlgorithmsWorkload, APlanNamesOnlyRealAlgorithms) {
  const Plan ok = parse_plan("workloads: {algorithms: {weight: 1, cases: 50, peers: [mpi:6, gloo:allreduce]}}", "p.yaml");
  EXPECT_EQ(ok.algorithms.peers, (std::vector<std::string>{"mpi:6", "gloo:allreduce"}));
  try {
    (void)parse_plan("workloads:\n  algorithms: {weight: 1, peers: [mpi:9]}\n", "p.yaml");
    FAIL() << "mpi:9 accepted";
  } catch (const PlanError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("p.yaml:2"), std::string::npos) << w;
    EXPECT_NE(w.find("workloads.algorithms.peers: 'mpi:9': allowed: mpi:N takes coll/tuned's allreduce algorithm N, 0 to 6"),
              std::string::npos)
        << w;
  }
  // The default: every Open MPI algorithm (mpirun is installed here) and every Gloo one.
  const auto all = default_algorithm_peers();
  EXPECT_EQ(all.front(), "mpi:0");
  EXPECT_NE(std::find(all.begin(), all.end(), "mpi:6"), all.end());
  EXPECT_NE(std::find(all.begin(), all.end(), "gloo:allreduce_bcube"), all.end());
}

TEST(AlgorithmsWorkload, EachUnitIsAChildVerifyOfOneAlgorithm) {
  const std::string dir = ::testing::TempDir() + "/algorithms_workload_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/plan.yaml") << "implementations: [ring]\nranks: {min: 2, max: 3}\n"
                                         "workloads:\n  verify: {weight: 0}\n  faults: {weight: 0}\n  perf: {weight: 0}\n"
                                         "  algorithms: {weight: 1, cases: 100, peers: [mpi:6, gloo:allreduce]}\n";
  }
  const auto r = testutil::collcheck("soak --plan " + dir + "/plan.yaml --duration 20 --seed 3 --results " + dir +
                                         "/r.jsonl",
                                     300);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("each a child collcheck verify of one of: mpi:6 gloo:allreduce"), std::string::npos) << r.out;
  std::ifstream in(dir + "/r.jsonl");
  std::set<std::string> seen;
  size_t units = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") != "unit") continue;
    ++units;
    EXPECT_EQ(j.at("workload"), "algorithms") << line;
    seen.insert(j.at("impl").get<std::string>());
    if (!j.value("interrupted", false)) {
      EXPECT_TRUE(j.at("ok").get<bool>()) << line;
      EXPECT_GT(j.at("cases").get<size_t>(), 0u) << line;
    }
  }
  EXPECT_GE(units, 2u) << r.out;
  EXPECT_EQ(seen, (std::set<std::string>{"mpi:6", "gloo:allreduce"})) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(AlgorithmsWorkload, TheGlooOptionsFloat16MaxItFoundIsTheDocumentedFinding) {
  const auto r = testutil::collcheck("verify --impl gloo:allreduce --against ring --replay v1:p2:float16:max:s1:n3:oop:x:0.0.7bca/0.0.f934", 120);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("documented deviation gloo-f16-minmax: 1 elements"), std::string::npos)
      << "Gloo's options API no longer keeps the aliased operand: update the README's Findings\n" << r.out;
}
