// Session::open (harness/session/session.h): the one place a command's world
// is made from what it asked for.
#include <gtest/gtest.h>

#include <string>

#include "harness/model/usage_error.h"
#include "harness/session/session.h"
#include "harness/world/sim_world.h"

namespace collcheck {
namespace {

Session open(WorldRequest w) {
  std::string warning;
  return Session::open(w, nullptr, nullptr, warning);
}

std::string refusal(WorldRequest w) {
  try {
    (void)open(std::move(w));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SessionOpen, TheDefaultIsTheCommandsDefault) {
  if (kNoFibers) GTEST_SKIP() << "this build has no fibers (" << kNoFibers << "): the default falls back to threads";
  const Session verify = open({"", true, "random", "1", ""});
  EXPECT_TRUE(verify.is_sim());
  EXPECT_TRUE(verify.sim_by_default());
  const Session sweep = open({"", false, "random", "1", ""});
  EXPECT_FALSE(sweep.is_sim());
  EXPECT_EQ(sweep.name(), "threads");
}

TEST(SessionOpen, NamedWorldsAreTheOnesNamed) {
  EXPECT_EQ(open({"threads", true, "random", "1", ""}).name(), "threads");
  EXPECT_NE(open({"threads", true, "random", "1", ""}).world_flag().find("--world threads"), std::string::npos);
  if (kNoFibers) {
    EXPECT_NE(refusal({"sim", false, "random", "1", ""}).find("--world sim"), std::string::npos);
    return;
  }
  const Session sim = open({"sim", false, "pct:3", "7", ""});
  EXPECT_TRUE(sim.is_sim());
  EXPECT_FALSE(sim.sim_by_default());
}

TEST(SessionOpen, BadValuesNameTheirFlag) {
  EXPECT_NE(refusal({"gpu", true, "random", "1", ""}).find("--world must be sim, threads or mpi, got 'gpu'"), std::string::npos);
  if (kNoFibers) return;
  EXPECT_NE(refusal({"sim", false, "random", "-1", ""}).find("--schedule-seed"), std::string::npos);
  EXPECT_NE(refusal({"sim", false, "sometimes", "1", ""}), "");
  EXPECT_NE(refusal({"sim", false, "random", "1", "alpha=fast"}), "");
}

}  // namespace
}  // namespace collcheck
