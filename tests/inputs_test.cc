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
