// Reports (harness/report): every command writes its verdicts through the one
// shared --report flag, and a new format is one sink plus one registration.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "harness/report/report.h"
#include "tests/run_command.h"

namespace collcheck {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp(const std::string& name) { return ::testing::TempDir() + "/report-" + name; }

// A throwaway format through the registry alone: --report knows it at once,
// and write_reports renders with it. Removing the row removes it.
TEST(ReportFormats, AThrowawayFormatTakesOneRow) {
  register_report_format({"count", "the number of failed verdicts", [](const Report& r) {
                            return std::to_string(r.count(ReportCase::Status::Failed)) + "\n";
                          }});
  EXPECT_NE(report_format_choices().find("count"), std::string::npos) << report_format_choices();
  const std::string path = temp("count.txt");
  const ReportRequest q = parse_report_request("count=" + path);
  Report r;
  r.cases = {{"a", ReportCase::Status::Passed, "", "", 0}, {"b", ReportCase::Status::Failed, "wrong", "", 0}};
  write_reports({q}, r);
  EXPECT_EQ(slurp(path), "1\n");
  EXPECT_THROW(register_report_format({"count", "again", nullptr}), std::invalid_argument);
  unregister_report_format("count");
  EXPECT_EQ(report_format_choices().find("count"), std::string::npos) << report_format_choices();
  EXPECT_THROW(parse_report_request("count=" + path), std::invalid_argument);
}

TEST(ReportFormats, JunitEscapesAndCountsEveryStatus) {
  Report r;
  r.command = "verify";
  r.suite = "collcheck verify <plugin:a&b>";
  r.cases = {{"ok", ReportCase::Status::Passed, "", "", 0.5},
             {"bad", ReportCase::Status::Failed, "x < y", "body \"quoted\"\n", 0},
             {"harness", ReportCase::Status::Error, "no memory", "", 0},
             {"gpu", ReportCase::Status::Skipped, "no GPU: error 35", "", 0}};
  const auto& formats = report_formats();
  const auto junit = std::find_if(formats.begin(), formats.end(), [](const ReportFormat& f) { return f.name == "junit"; });
  ASSERT_NE(junit, formats.end());
  const std::string x = junit->render(r);
  EXPECT_NE(x.find("name=\"collcheck verify &lt;plugin:a&amp;b&gt;\" tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            std::string::npos) << x;
  EXPECT_NE(x.find("<testcase classname=\"collcheck.verify\" name=\"ok\" time=\"0.500\"></testcase>"), std::string::npos) << x;
  EXPECT_NE(x.find("<failure message=\"x &lt; y\">body &quot;quoted&quot;\n</failure>"), std::string::npos) << x;
  EXPECT_NE(x.find("<error message=\"no memory\">"), std::string::npos) << x;
  EXPECT_NE(x.find("<skipped message=\"no GPU: error 35\"/>"), std::string::npos) << x;
}

// Every command takes --report, as a user runs it: a passing and a failing
// verdict each, in JUnit and text.
TEST(ReportCli, EveryCommandWritesItsVerdicts) {
  const std::string j = temp("cmd.xml"), t = temp("cmd.txt");
  const std::string both = " --report junit=" + j + " --report text=" + t;

  auto r = testutil::collcheck("verify --cases 30 --seed 4" + both);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(j).find("<testsuite name=\"collcheck verify ring\" tests=\"11\" failures=\"0\""), std::string::npos)
      << slurp(j);
  EXPECT_NE(slurp(t).find("PASS  agrees-with-oracle"), std::string::npos) << slurp(t);

  r = testutil::collcheck("faults --mode guarded" + both, 300);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(j).find("failures=\"0\""), std::string::npos) << slurp(j);
  EXPECT_NE(slurp(j).find("name=\"stalled_rank guarded\""), std::string::npos) << slurp(j);
  EXPECT_NE(slurp(j).find("name=\"skipped_call guarded\""), std::string::npos) << slurp(j);
  // One verdict per nemesis in guarded mode: as many as the JUnit file's test cases, all passed.
  const std::string junit = slurp(j);
  size_t cases = 0;
  for (size_t at = junit.find("<testcase"); at != std::string::npos; at = junit.find("<testcase", at + 1)) ++cases;
  EXPECT_GE(cases, 8u) << junit;
  const std::string verdicts = std::to_string(cases);
  EXPECT_NE(slurp(t).find(verdicts + " verdicts: " + verdicts + " passed, 0 failed"), std::string::npos) << slurp(t);

  // A scenario whose expectation does not hold: a failed verdict with its why.
  const std::string wrong = temp("wrong-expectation.yaml");
  {
    std::ifstream in(std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string y = ss.str();
    const auto at = y.find("diagnosis: order_mismatch");
    ASSERT_NE(at, std::string::npos) << y;
    y.replace(at, std::string("diagnosis: order_mismatch").size(), "diagnosis: shape_mismatch");
    std::ofstream(wrong) << y;
  }
  r = testutil::collcheck("replay " + wrong + both, 120);
  ASSERT_EQ(r.code, 1) << r.out;
  EXPECT_NE(slurp(j).find("<failure message=\"expected shape_mismatch, got order_mismatch first\">"), std::string::npos)
      << slurp(j);
  EXPECT_NE(slurp(t).find("FAIL  expected: shape_mismatch: expected shape_mismatch, got order_mismatch first"),
            std::string::npos) << slurp(t);

  const std::string dumps = temp("dumps");
  std::filesystem::remove_all(dumps);
  r = testutil::collcheck("replay " + std::string(SOURCE_DIR) + "/examples/bugs/swapped_buckets.yaml --mode unguarded "
                          "--dump-dir " + dumps, 120);
  ASSERT_EQ(r.code, 0) << r.out;
  r = testutil::collcheck("analyze " + dumps + both);
  ASSERT_EQ(r.code, 1) << r.out;
  EXPECT_NE(slurp(j).find("<failure message=\"order_mismatch\">order_mismatch [rank 2]"), std::string::npos) << slurp(j);

  r = testutil::collcheck("sweep -e 4K -d float32,int8" + both);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(j).find("tests=\"4\" failures=\"0\""), std::string::npos) << slurp(j);
  EXPECT_NE(slurp(t).find("PASS  ring int8 sum 4096 B"), std::string::npos) << slurp(t);
  r = testutil::collcheck("sweep -e 1K -c 0" + both);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp(j).find("<skipped message=\"not checked (-c 0)\"/>"), std::string::npos) << slurp(j);
}

TEST(ReportCli, BadRequestsAreUsageErrorsBeforeTheRun) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"faults --report xml=/tmp/x", "--report: unknown format 'xml'; formats: junit, text, markdown"},
           {"sweep --report junit", "--report: 'junit' is not FORMAT=PATH; formats: junit, text, markdown"},
           {"verify --report text=", "--report: text= needs a file name"},
           {"analyze /nonexistent --report junit=/nonexistent-dir/x.xml", "--report: cannot write '/nonexistent-dir/x.xml'"},
       }) {
    const auto r = testutil::collcheck(args, 60);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace collcheck
