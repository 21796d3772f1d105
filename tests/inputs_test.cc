// Inputs that are not regular files, from issue 30: a FIFO, a device, a
// symlink loop or a directory where a command reads a file. Each was a hang or
// an abort on main; each must be one clear line and exit 2, within seconds.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/run_command.h"

namespace {

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/inputs_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

// A FIFO named like a dump: opening it blocked until a writer came (a hang).
TEST(Inputs, AFifoWhereADumpShouldBeIsRefused) {
  for (const std::string name : {"rank-0.json", "nccl_trace_rank_0"}) {
    const std::string dir = fresh_dir("fifo");
    ASSERT_EQ(mkfifo((dir + "/" + name).c_str(), 0600), 0);
    const auto r = testutil::collcheck("analyze " + dir, 30);
    EXPECT_EQ(r.code, 2) << name << ": " << r.out;  // 124 would be the time limit: the hang
    EXPECT_NE(r.out.find(name + ": is a FIFO, not a regular file"), std::string::npos) << r.out;
  }
}

// A symlink that points at itself: an uncaught filesystem_error (SIGABRT).
TEST(Inputs, ASymlinkLoopIsRefusedNotAnAbort) {
  for (const std::string name : {"rank-0.json", "nccl_trace_rank_0"}) {
    const std::string dir = fresh_dir("loop");
    std::filesystem::create_symlink(dir + "/" + name, dir + "/" + name);
    const auto r = testutil::collcheck("analyze " + dir, 30);
    EXPECT_EQ(r.code, 2) << name << ": " << r.out;
    EXPECT_NE(r.out.find("Too many levels of symbolic links"), std::string::npos) << r.out;
  }
}

// --replay @/dev/zero read without a limit (8.7 GB in 30 s).
TEST(Inputs, AReplayTokenFromADeviceIsRefused) {
  const auto r = testutil::collcheck("verify --replay @/dev/zero", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("/dev/zero: is a character device, not a regular file"), std::string::npos) << r.out;
  // A token file larger than any token: the limit, named.
  const std::string big = fresh_dir("token") + "/token.txt";
  std::ofstream(big) << std::string((size_t{1} << 20) + 10, 'A');
  const auto b = testutil::collcheck("verify --replay @" + big, 30);
  EXPECT_EQ(b.code, 2) << b.out;
  EXPECT_NE(b.out.find("larger than 1048576 bytes"), std::string::npos) << b.out;
}

// gate --baseline DIR aborted.
TEST(Inputs, AGateFileThatIsADirectoryIsRefused) {
  const std::string dir = fresh_dir("gate");
  const auto r = testutil::collcheck("gate --baseline " + dir + " --candidate " + dir, 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(dir + ": is a directory"), std::string::npos) << r.out;
}

// --version printed "hierarchicalreference": a name longer than the column ran into its text.
TEST(Inputs, VersionKeepsEveryNameApartFromItsText) {
  const auto r = testutil::collcheck("--version", 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("hierarchical reference algorithms"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hierarchicalreference"), std::string::npos) << r.out;
}

// The atomic writers renamed a temporary file over whatever was there: as
// root, --report junit=/dev/full replaced the device with a file, and a
// symlink became a file.
TEST(Outputs, ADeviceIsWrittenInPlaceAndKept) {
  // A clean set, so that the report's failure is what sets the exit code.
  const std::string clean = SOURCE_DIR "/tests/fixtures/torch-gloo/sets/correct_training";
  const auto r = testutil::collcheck("analyze " + clean + " --world-size 4 --report junit=/dev/full", 30);
  EXPECT_EQ(r.code, 5) << r.out;  // kExitOutputLost: the run happened, its report did not land
  EXPECT_NE(r.out.find("cannot write /dev/full: No space left on device"), std::string::npos) << r.out;
  const std::string sets = SOURCE_DIR "/tests/fixtures/torch-gloo/sets/rank_exits";
  struct stat st {};
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/full is no longer a character device";
  const auto null = testutil::collcheck("analyze " + sets + " --world-size 3 --report junit=/dev/null", 30);
  EXPECT_EQ(null.code, 1) << null.out;  // the diagnosis; the report went to /dev/null
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(Outputs, ASymlinkIsFollowedAndAFifoRefused) {
  const std::string dir = fresh_dir("outputs");
  const std::string sets = SOURCE_DIR "/tests/fixtures/torch-gloo/sets/rank_exits";
  std::filesystem::create_symlink(dir + "/real.xml", dir + "/link.xml");
  const auto r = testutil::collcheck("analyze " + sets + " --world-size 3 --report junit=" + dir + "/link.xml", 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.xml"));
  std::ifstream in(dir + "/real.xml");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("<testsuite"), std::string::npos) << ss.str();
  ASSERT_EQ(mkfifo((dir + "/fifo.xml").c_str(), 0600), 0);
  const auto f = testutil::collcheck("analyze " + sets + " --world-size 3 --report junit=" + dir + "/fifo.xml", 30);
  EXPECT_NE(f.code, 0) << f.out;
  EXPECT_NE(f.code, 124) << "a hang: " << f.out;
  EXPECT_NE(f.out.find("it is a FIFO"), std::string::npos) << f.out;
}
