// The commands that run cases restart themselves once with glibc's huge-page
// heaps (harness/model/heap.h: restart_with_huge_page_heaps). The function is
// run in a child of this test, whose restart runs this binary again with
// --print-tunables: it prints what the restarted process sees. A user's other
// tunables are kept, a user's own choice of the tunable is left alone. And a
// verify run is seen (in /proc) running restarted.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "harness/model/heap.h"
#include "tests/run_command.h"

namespace {

const char* const kPrint = "--print-tunables";
char* g_self = nullptr;  // argv[0]

// Why no restart can be seen here, or empty.
std::string why_not() {
  if (collcheck::sanitizer_owns_malloc()) return "a sanitizer owns malloc here, so collcheck does not restart for glibc's tunable";
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  if (!std::getline(thp, mode) || mode.find("[never]") != std::string::npos)
    return "this kernel offers no transparent huge pages on request (" + mode + "), so collcheck does not restart";
  return "";
}

// What a child that calls restart_with_huge_page_heaps with GLIBC_TUNABLES
// `given` (nullptr: unset) prints: "restarted: X" or "not restarted: X".
std::string child_sees(const char* given) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    alarm(30);  // kept across the exec: the child never outlives 30 s
    if (given) setenv("GLIBC_TUNABLES", given, 1);
    else unsetenv("GLIBC_TUNABLES");
    char* args[] = {g_self, const_cast<char*>(kPrint), nullptr};
    collcheck::restart_with_huge_page_heaps(args);
    const char* now = std::getenv("GLIBC_TUNABLES");
    std::printf("not restarted: %s", now ? now : "(unset)");
    std::fflush(stdout);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

}  // namespace

TEST(HeapRestart, RestartsOnceWithTheTunableAddedAndLeavesAUsersChoice) {
  if (const std::string why = why_not(); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(child_sees(nullptr), "restarted: glibc.malloc.hugetlb=1");
  EXPECT_EQ(child_sees(""), "restarted: glibc.malloc.hugetlb=1");
  EXPECT_EQ(child_sees("glibc.malloc.perturb=0"), "restarted: glibc.malloc.perturb=0:glibc.malloc.hugetlb=1");
  EXPECT_EQ(child_sees("glibc.malloc.hugetlb=0"), "not restarted: glibc.malloc.hugetlb=0");
  EXPECT_EQ(child_sees("glibc.malloc.hugetlb=1"), "not restarted: glibc.malloc.hugetlb=1");  // once only
}

// verify (a command that runs cases) runs restarted: its supervisor and the
// child that runs the cases both have the tunable; faults is not restarted.
TEST(HeapRestart, VerifyRunsRestarted) {
  if (const std::string why = why_not(); !why.empty()) GTEST_SKIP() << why;
  // The command's supervisor and its supervised child (found in /proc: no
  // pgrep on a bare machine; the wait for it has a deadline of 30 s): how
  // many of the two have the tunable.
  const auto restarted = [](const std::string& command) {
    const auto r = testutil::run_command(
        fmt::format("bash -c 'env -u GLIBC_TUNABLES {} {} >/dev/null 2>&1 & pid=$!; "
                    "kids=; for i in $(seq 300); do kids=$(cat /proc/$pid/task/*/children 2>/dev/null); "
                    "[ -n \"$kids\" ] && break; sleep 0.1; done; n=0; "
                    "for p in $pid $kids; do tr \"\\0\" \"\\n\" < /proc/$p/environ | "
                    "grep -q ^GLIBC_TUNABLES=glibc.malloc.hugetlb=1$ && n=$((n+1)); done; "
                    "kill -9 $pid $kids; wait; echo \"with the tunable: $n of 1+$(echo $kids | wc -w)\"'",
                    COLLCHECK_BIN, command),
        60);
    const size_t at = r.out.find("with the tunable");
    return at == std::string::npos ? r.out : r.out.substr(at);
  };
  EXPECT_EQ(restarted("verify --cases 100000000 --progress off"), "with the tunable: 2 of 1+1\n");
  // faults runs its cases on the main thread: not restarted (no faster with it).
  EXPECT_EQ(restarted("faults --random 100000 --progress off"), "with the tunable: 0 of 1+1\n");
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], kPrint) == 0) {
    const char* now = std::getenv("GLIBC_TUNABLES");
    std::printf("restarted: %s", now ? now : "(unset)");
    return 0;
  }
  g_self = argv[0];
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
