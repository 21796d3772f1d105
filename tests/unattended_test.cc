// Unattended runs that never lie (issue 30): the Pushgateway and the metrics
// endpoint under real sockets (a blackhole listener, a server that answers
// 500, idle connections), outputs that name one file, the results file's
// lock, a full disk, --dump-dir that cannot hold the dumps, and bounds that
// bound (--duration, SIGTERM and gate --budget against an implementation
// that never returns). Each of these failed on main before the fix: the
// comment on each test says how.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/net_util.h"
#include "tests/run_command.h"

namespace {

using namespace testutil::net;
using testutil::collcheck;

const std::string kBin = COLLCHECK_BIN;
const std::string kPlugins = PLUGIN_DIR;

std::string fresh(const std::string& name) {
  const std::string p = testing::TempDir() + "/unattended-" + name;
  std::filesystem::remove_all(p);
  return p;
}

void expect_has(const testutil::CommandResult& r, const std::string& what) {
  EXPECT_NE(r.out.find(what), std::string::npos) << "missing '" << what << "' in:\n" << r.out;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A listening socket on 127.0.0.1 that never accepts: the kernel completes
// connections into its backlog, and nothing ever answers.
struct Blackhole {
  int fd = -1, port = 0;
  Blackhole() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 64);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Blackhole() { close(fd); }
};

// An HTTP server that answers every request with 500, counting them.
struct Answers500 {
  Blackhole sock;
  std::atomic<int> requests{0};
  std::atomic<bool> stop{false};
  std::thread t;
  Answers500() {
    timeval tv{0, 200000};
    setsockopt(sock.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    t = std::thread([this] {
      while (!stop) {
        const int c = accept(sock.fd, nullptr, nullptr);
        if (c < 0) continue;
        timeval rt{2, 0};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof rt);
        std::string req;
        char buf[4096];
        ssize_t n;
        while (req.find("\r\n\r\n") == std::string::npos && (n = read(c, buf, sizeof buf)) > 0)
          req.append(buf, static_cast<size_t>(n));
        ++requests;
        const std::string resp = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!write(c, resp.data(), resp.size());
        close(c);
      }
    });
  }
  ~Answers500() {
    stop = true;
    t.join();
  }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

// A gateway that accepts and never answers hung verify (and sweep, and the
// soak) forever: the push had no timeout. Now it ends, saying why.
TEST(Pushgateway, ABlackholeGatewayCannotHangARun) {
  Blackhole hole;
  const auto t0 = Clock::now();
  const auto r = collcheck("verify --impl ring --cases 30 --seed 1 --pushgateway 127.0.0.1:" + std::to_string(hole.port), 60);
  EXPECT_EQ(r.code, 0) << r.out;  // the verdict stands; the push is a warning
  expect_has(r, "no answer within 10 s");
  EXPECT_LT(seconds_since(t0), 30) << r.out;
}

// A gateway that answers 500: one warning per interval, in curl's numbers
// (`push failed (500)`, 960 lines over 4 hours). Now it is said once, in
// words, and counted at the end. A URL with its scheme works too (it was
// accepted, and every push failed).
TEST(Pushgateway, A500IsSaidOnceAndCountedAtTheEnd) {
  Answers500 server;
  const std::string plan = fresh("verify-only.yaml");
  // Small units (no large counts), so that the soak reaches a push point
  // every --metrics-interval even on a loaded host: with the default sizes
  // one unit once took most of the 5 s beside other suites, and the soak made
  // 2 pushes, not the 3 this test needs to see a failure said once.
  std::ofstream(plan) << "workloads: {verify: {weight: 1, cases: 20, max_count: 4096, large_bytes: 0}, faults: {weight: 0}, "
                         "perf: {weight: 0}}\n";
  const auto r = collcheck("soak --duration 5 --plan " + plan + " --results " + fresh("500.jsonl") +
                               " --metrics-interval 1 --pushgateway http://127.0.0.1:" + std::to_string(server.sock.port),
                           90);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_GE(server.requests.load(), 3) << r.out;
  EXPECT_EQ(count(r.out, "the gateway answered HTTP 500"), 2u) << "once when it starts, once in the end's count\n" << r.out;
  expect_has(r, "push(es) failed; the last: the gateway answered HTTP 500");
}

TEST(Pushgateway, BadAddressesAreBadInput) {
  const struct {
    std::string flags, what;
  } bad[] = {
      {"--pushgateway ftp://127.0.0.1:9091", "the scheme must be http:// or https://"},
      {"--pushgateway 127.0.0.1:9091/metrics", "with no path"},
      {"--metrics-listen 999.1.1.1:0", "'999.1.1.1' is not an IP address"},
      {"--metrics-listen localhost:0", "'localhost' is not an IP address"},
  };
  for (const auto& b : bad) {
    const auto r = collcheck("soak --duration 1 --results " + fresh("bad.jsonl") + " " + b.flags, 30);
    EXPECT_EQ(r.code, 2) << b.flags << "\n" << r.out;
    expect_has(r, b.what);
  }
  // A port in use: said in our words (it was civetweb's "null context when
  // constructing CivetServer").
  Blackhole taken;
  const auto r = collcheck("soak --duration 1 --results " + fresh("bad.jsonl") + " --metrics-listen 127.0.0.1:" +
                               std::to_string(taken.port),
                           30);
  EXPECT_EQ(r.code, 2) << r.out;
  expect_has(r, "cannot listen on 127.0.0.1:" + std::to_string(taken.port) + ": the port is in use");
  EXPECT_EQ(r.out.find("CivetServer"), std::string::npos) << r.out;
}

// A perf unit's replay line left out the plan's deadline (and its
// iterations): a row that failed by its 1 ms deadline passed when replayed.
TEST(Results, APerfFailuresReplayLineRunsUnderTheSameDeadline) {
  const std::string plan = fresh("perf.yaml"), results = fresh("perf.jsonl");
  std::ofstream(plan) << "timeout: 0.001\nworkloads: {verify: {weight: 0}, faults: {weight: 0}, "
                         "perf: {weight: 1, min_bytes: 4M, max_bytes: 4M}}\n";
  const auto r = collcheck("soak --duration 4 --plan " + plan + " --results " + results, 120);
  EXPECT_EQ(r.code, 1) << r.out;
  std::string replay;
  std::ifstream in(results);
  for (std::string l; std::getline(in, l) && replay.empty();) {
    const auto at = l.find("\"replay\":\"collcheck sweep ");
    if (at != std::string::npos) replay = l.substr(at + 10, l.find('"', at + 10) - at - 10);
  }
  ASSERT_FALSE(replay.empty()) << slurp(results);
  EXPECT_NE(replay.find(" --timeout 0.001"), std::string::npos) << replay;
  const auto again = collcheck(replay.substr(std::string("collcheck ").size()), 120);
  EXPECT_EQ(again.code, 1) << replay << "\n" << again.out;
}

// Two idle connections held both of the endpoint's two workers for about
// 30 s: every scrape in that time failed (Prometheus gives up after 10 s).
TEST(MetricsEndpoint, IdleConnectionsDoNotStarveAScrape) {
  const std::string log = fresh("idle.log");
  Process soak(kBin + " soak --duration 30 --results " + fresh("idle.jsonl") + " --metrics-listen 0", log);
  int port = 0;
  ASSERT_TRUE(wait_until(30, [&] {
    const std::string text = slurp(log);
    const auto at = text.find("metrics: http://127.0.0.1:");
    if (at == std::string::npos) return false;
    port = std::atoi(text.c_str() + at + std::string("metrics: http://127.0.0.1:").size());
    return port > 0;
  })) << slurp(log);
  std::vector<int> idle;
  for (int i = 0; i < 6; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    idle.push_back(fd);  // connected, and never a byte sent
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  const auto body = http_get(port, "/metrics");  // gives up after 5 s
  const double took = seconds_since(t0);
  for (int fd : idle) close(fd);
  ASSERT_TRUE(body.has_value()) << "no answer within 5 s with 6 idle connections open\n" << slurp(log);
  EXPECT_NE(body->find("collcheck_build_info"), std::string::npos) << *body;
  std::printf("[ scrape   ] answered in %.3f s with 6 idle connections open\n", took);
}

// --results named the same file as --metrics-textfile, --junit or --report:
// the results were overwritten, exit 0.
TEST(Outputs, TwoOutputsThatNameOneFileAreRefused) {
  const std::string f = fresh("same.out");
  const std::string link = fresh("same.link");
  std::ofstream(f) << "";
  std::filesystem::create_symlink(f, link);
  const struct {
    std::string args, what;
  } bad[] = {
      {"soak --duration 1 --results " + f + " --metrics-textfile " + f, "--results and --metrics-textfile name the same file"},
      {"soak --duration 1 --results " + fresh("r.jsonl") + " --junit " + f + " --report junit=" + link,
       "--junit and --report junit=" + link + " name the same file"},
      {"verify --cases 5 --metrics-textfile " + f + " --junit " + f, "--metrics-textfile and --junit name the same file"},
      {"sweep -b 1K -e 1K --json " + f + " --report markdown=" + f, "--json and --report markdown=" + f},
  };
  for (const auto& b : bad) {
    const auto r = collcheck(b.args, 30);
    EXPECT_EQ(r.code, 2) << b.args << "\n" << r.out;
    expect_has(r, b.what);
  }
  EXPECT_EQ(slurp(f), "") << "a refused run wrote nothing";
}

// --resume took no lock: two resumes of one file left duplicated units and
// three end lines; a thread-world file resumed under mpirun mixed worlds.
TEST(Results, ResumeIsLockedAndKeepsOneWorld) {
  const std::string results = fresh("lock.jsonl");
  auto r = collcheck("soak --duration 1 --results " + results, 60);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string log = fresh("lock.log");
  {
    Process first(kBin + " soak --duration 60 --resume --results " + results, log);
    ASSERT_TRUE(wait_until(30, [&] { return slurp(log).find("resuming") != std::string::npos; })) << slurp(log);
    r = collcheck("soak --duration 60 --resume --results " + results, 30);
    EXPECT_EQ(r.code, 2) << r.out;
    expect_has(r, "another collcheck soak is writing this file");
  }  // SIGTERM: the first ends, and its lock with it
  r = testutil::run_command(testutil::mpirun(2) + " soak --world mpi --duration 2 --resume --results " + results, 120);
  EXPECT_EQ(r.code, 2) << r.out;
  expect_has(r, "holds a soak of the threads world; this one runs in the mpi:2 world");
}

// A FIFO as the results file: refused at once, never a wait for a reader.
TEST(Results, AFifoIsRefusedNotWaitedOn) {
  const std::string fifo = fresh("results.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const auto r = collcheck("soak --duration 1 --resume --results " + fifo, 30);
  EXPECT_EQ(r.code, 2) << r.out;
  expect_has(r, "--results " + fifo + ": not a regular file");
}

// On a full disk the soak printed PASS, exited 0 and left its results file
// cut mid-line. The disk is made full here by the file size limit (no root
// needed): every write past 24 KiB fails.
TEST(Results, AFullDiskStopsTheSoakWithItsOwnExitCode) {
  const std::string results = fresh("full.jsonl");
  const std::string plan = fresh("full.yaml");
  std::ofstream(plan) << "workloads: {verify: {weight: 1, cases: 5}, faults: {weight: 0}, perf: {weight: 0}}\n";
  const auto r = testutil::run_command("bash -c 'trap \"\" XFSZ; ulimit -f 24; exec " + kBin + " soak --duration 60 --plan " +
                                           plan + " --results " + results + "'",
                                       120);
  EXPECT_EQ(r.code, 5) << r.out;
  expect_has(r, "ERROR: --results " + results + ": cannot write: File too large");
  EXPECT_EQ(r.out.find("PASS"), std::string::npos) << r.out;
  const std::string text = slurp(results);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "no line cut in the middle";
}

// replay --dump-dir aborted (SIGABRT) on a file, a directory it cannot make,
// a full disk, and a larger world's stale dumps (read as this run's).
TEST(Replay, DumpDirsThatCannotHoldTheDumpsAreSaidNotCrashed) {
  const std::string scenario = SOURCE_DIR "/examples/bugs/rank_zero_logs_epoch_time.yaml";
  const std::string file = fresh("dumps-file");
  std::ofstream(file) << "x";
  const std::string stale = fresh("dumps-stale");
  std::filesystem::create_directories(stale);
  std::ofstream(stale + "/rank-5.json") << "{}";
  const struct {
    std::string dir, what;
  } bad[] = {
      {file, "it is not a directory"},
      {"/proc/collcheck-dumps", "cannot make the directory"},
      {stale, "it holds 1 dump(s) of an earlier run (rank-5.json)"},
  };
  for (const auto& b : bad) {
    const auto r = collcheck("replay " + scenario + " --mode unguarded --dump-dir " + b.dir, 60);
    EXPECT_EQ(r.code, 2) << b.dir << "\n" << r.out;
    expect_has(r, b.what);
  }
  const std::string full = fresh("dumps-full");
  const auto r = testutil::run_command("bash -c 'trap \"\" XFSZ; ulimit -f 0; exec " + kBin + " replay " + scenario +
                                           " --mode unguarded --dump-dir " + full + "'",
                                       120);
  EXPECT_EQ(r.code, 5) << r.out;  // the verdict held; the dumps asked for did not land
  expect_has(r, "flight-recorder dumps: NOT all written to " + full);
  expect_has(r, "extra_call [rank 0] [call #4]");
  // Without --dump-dir the dumps are temporary, and removed.
  const auto t = collcheck("replay " + scenario + " --mode unguarded", 60);
  expect_has(t, "written, read and removed at the end");
}

// A soak unit shrinking a hang kept a 20 s soak running for 126 s, and
// SIGTERM took 98 s. Now both stop it at the next case, within a deadline.
TEST(Bounds, DurationAndSigtermEndASoakShrinkingAHang) {
  const std::string plan = fresh("hang.yaml");
  std::ofstream(plan) << "implementations: [plugin:" << kPlugins << "/never_returns.so]\ntimeout: 1\n"
                      << "workloads: {verify: {weight: 1, cases: 50}, faults: {weight: 0}, perf: {weight: 0}}\n";
  auto t0 = Clock::now();
  auto r = collcheck("soak --duration 6 --plan " + plan + " --results " + fresh("hang.jsonl"), 120);
  const double took = seconds_since(t0);
  EXPECT_EQ(r.code, 1) << r.out;  // the hang, found
  EXPECT_LT(took, 20) << r.out;
  std::printf("[ bound    ] --duration 6 ended after %.1f s\n", took);
  const std::string log = fresh("hang.log"), results = fresh("hang-term.jsonl");
  Process soak(kBin + " soak --duration 300 --plan " + plan + " --results " + results, log);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  kill(soak.pid, SIGTERM);
  t0 = Clock::now();
  int status = 0;
  ASSERT_TRUE(wait_until(20, [&] { return waitpid(soak.pid, &status, WNOHANG) == soak.pid; })) << slurp(log);
  soak.pid = -1;
  std::printf("[ bound    ] SIGTERM ended the soak after %.1f s\n", seconds_since(t0));
  ASSERT_TRUE(WIFEXITED(status)) << slurp(log);
  // 1: the hang was found before the signal (the unit stopped shrinking it);
  // 143: the signal cut the first hanging case short. Never 0.
  const int code = WEXITSTATUS(status);
  EXPECT_TRUE(code == 1 || code == 143) << code << "\n" << slurp(log);
  const std::string text = slurp(results);
  EXPECT_NE(text.find("\"interrupted\":true"), std::string::npos) << text;
  EXPECT_NE(text.find("\"reason\":\"SIGTERM\""), std::string::npos) << text;
}

// SIGTERM waited for the case in flight: one large case kept a stopped soak
// running for 30.6 s, and a scheduler's SIGKILL follows by about 30 s. Now
// the isolated child running the case is killed at once, and the unit is
// written as interrupted, with no verdict on that case.
TEST(Bounds, SigtermCutsTheCaseInFlightShort) {
  const std::string plan = fresh("hang20.yaml");
  std::ofstream(plan) << "implementations: [plugin:" << kPlugins << "/never_returns.so]\ntimeout: 20\n"
                      << "workloads: {verify: {weight: 1, cases: 50}, faults: {weight: 0}, perf: {weight: 0}}\n";
  const std::string log = fresh("hang20.log"), results = fresh("hang20.jsonl");
  Process soak(kBin + " soak --duration 300 --plan " + plan + " --results " + results, log);
  // The first unit's hang: every call of 3 or more elements never returns,
  // found only after its 20 s deadline.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  kill(soak.pid, SIGTERM);
  const auto t0 = Clock::now();
  int status = 0;
  ASSERT_TRUE(wait_until(40, [&] { return waitpid(soak.pid, &status, WNOHANG) == soak.pid; })) << slurp(log);
  soak.pid = -1;
  const double took = seconds_since(t0);
  std::printf("[ bound    ] SIGTERM ended the soak %.1f s after it was sent, a case in flight\n", took);
  EXPECT_LT(took, 5) << slurp(log);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 143) << slurp(log);  // stopped, nothing found: never 0
  const std::string text = slurp(results);
  EXPECT_NE(text.find("\"interrupted\":true"), std::string::npos) << text;
  EXPECT_NE(text.find("\"reason\":\"SIGTERM\""), std::string::npos) << text;
}

// A soak killed by SIGKILL while an isolated case ran left that case's child
// process running; it had inherited the locked results file, and the
// requeued soak's --resume was refused ("another collcheck soak is writing
// this file"), found by the 30-minute chaos run. The child now dies with the
// process that forked it.
TEST(Bounds, AKilledSoakLeavesNoChildHoldingItsResultsFile) {
  const std::string plan = fresh("hang-kill.yaml");
  std::ofstream(plan) << "implementations: [plugin:" << kPlugins << "/never_returns.so]\ntimeout: 20\n"
                      << "workloads: {verify: {weight: 1, cases: 50}, faults: {weight: 0}, perf: {weight: 0}}\n";
  const std::string results = fresh("hang-kill.jsonl");
  {
    Process soak(kBin + " soak --duration 300 --plan " + plan + " --results " + results, fresh("hang-kill-1.log"));
    std::this_thread::sleep_for(std::chrono::seconds(4));  // an isolated case of a never-returning call in flight
    kill(soak.pid, SIGKILL);
    int status = 0;
    waitpid(soak.pid, &status, 0);
    soak.pid = -1;
  }
  const std::string log = fresh("hang-kill-2.log");
  Process resumed(kBin + " soak --duration 300 --resume --results " + results, log);
  // The lock is free at once (a held one is waited for 5 s, then refused).
  std::this_thread::sleep_for(std::chrono::seconds(7));
  int status = 0;
  const bool ended = waitpid(resumed.pid, &status, WNOHANG) == resumed.pid;
  EXPECT_EQ(slurp(log).find("another collcheck soak is writing this file"), std::string::npos) << slurp(log);
  EXPECT_FALSE(ended) << "the resumed soak ended early:\n" << slurp(log);
  if (!ended) {
    kill(resumed.pid, SIGTERM);
    ASSERT_TRUE(wait_until(20, [&] { return waitpid(resumed.pid, &status, WNOHANG) == resumed.pid; })) << slurp(log);
  }
  resumed.pid = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143) << status << "\n" << slurp(log);
}

// gate --budget 10 on a deadlocking plugin ran for 596 s, silent.
TEST(Bounds, GateBudgetIsATotalBudget) {
  const auto t0 = Clock::now();
  const auto r = collcheck("gate --impl plugin:" + kPlugins + "/never_returns.so --budget 10 --timeout 1", 120);
  const double took = seconds_since(t0);
  EXPECT_EQ(r.code, 1) << r.out;
  expect_has(r, "call-completes");
  // The budget, plus the case in flight (its run limit: 5 calls of 1 s, plus slack) and a fault row's.
  EXPECT_LT(took, 40) << r.out;
  std::printf("[ bound    ] gate --budget 10 ended after %.1f s\n", took);
}
