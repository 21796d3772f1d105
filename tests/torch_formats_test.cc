// What real Flight Recorder dumps hold beyond the tidy case (tests/fixtures/
// torch-gloo/README.md): torch 2.14's Gloo dumps (gloo: names, state left
// at scheduled, completion only in retired and pg_status, pg_status keyed by
// pg_id, pg_config's one '' key, frames), the JSON variant (counters as
// strings, zero times), the format versions this reader knows, and the sets
// that are not one whole job: one rank's dump, dumps of two jobs, a version
// it does not know. Each gets a clear outcome and its exit code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/check/torch_analysis.h"
#include "harness/history/torch_job.h"
#include "harness/history/torch_trace.h"
#include "tests/run_command.h"

using namespace collcheck;
using nlohmann::json;

namespace {

const std::string kSets = SOURCE_DIR "/tests/fixtures/torch-gloo/sets";
const std::string kGpu = SOURCE_DIR "/tests/data/torch-flight-recorder";

using testutil::slurp;

// A directory made of files copied from real sets: {source file, name here}.
std::string mixed(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string dir = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const auto& [from, to] : files) std::filesystem::copy_file(from, dir + "/" + to);
  return dir;
}

}  // namespace

TEST(TorchFormats, GlooNamesAndEveryVariantMapToOneCollective) {
  EXPECT_EQ(torch_collective("gloo:all_reduce"), "all_reduce");
  EXPECT_EQ(torch_collective("nccl:allreduce_coalesced"), "all_reduce");
  EXPECT_EQ(torch_collective("nccl:_allgather_base"), "all_gather");
  EXPECT_EQ(torch_collective("nccl:all_gather_into_tensor_coalesced"), "all_gather");
  EXPECT_EQ(torch_collective("nccl:_reduce_scatter_base"), "reduce_scatter");
  EXPECT_EQ(torch_collective("nccl:alltoall_base"), "all_to_all");
  EXPECT_EQ(torch_collective("gloo:barrier"), "barrier");
  EXPECT_EQ(torch_collective("nccl:_broadcast_oop"), "broadcast");
  EXPECT_EQ(torch_collective("nccl:send 0->3"), "send");
  EXPECT_EQ(torch_collective("gloo:recvAnySource"), "recv");
  EXPECT_EQ(torch_collective("nccl:frobnicate"), "");
}

TEST(TorchFormats, Gloo214DumpsAreReadForWhatTheyHold) {
  const auto dumps = load_torch_traces(kSets + "/rank_exits");
  ASSERT_EQ(dumps.size(), 3u);
  const TorchDump& d = dumps.at(0);
  EXPECT_EQ(d.version, "2.10");
  EXPECT_EQ(d.version_minor, 10);
  EXPECT_TRUE(d.has_status);
  ASSERT_TRUE(d.status.count(0));
  EXPECT_EQ(d.status.at(0).enqueued, 3);
  ASSERT_EQ(d.entries.size(), 3u);
  const TorchEntry& e = d.entries.back();
  EXPECT_EQ(e.op, "gloo:all_reduce");
  EXPECT_EQ(e.state, "scheduled");  // Gloo never moves it on
  EXPECT_EQ(e.retired, std::optional<bool>(true));
  EXPECT_FALSE(e.completed_ns.has_value());
  EXPECT_TRUE(torch_entry_ended(e));
  EXPECT_EQ(torch_call_site(e), "rank_exits.py:13 (main)");
  EXPECT_EQ(torch_entry_text(e), "all_reduce 300 Float");
  // pg_config's one '' key: the members come from the entries, and say so.
  const TorchJob job = torch_job(dumps, 3);
  ASSERT_NE(job.group("0"), nullptr);
  EXPECT_EQ(job.group("0")->members, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(job.gloo);
  EXPECT_NE(job.notes.front().find("pg_config has one group named ''"), std::string::npos);
}

TEST(TorchFormats, TheJsonVariantReadsLikeThePickle) {
  const auto from_json = analyze_torch(load_torch_traces(kSets + "/rank_exits_json"), 3);
  const auto from_pickle = analyze_torch(load_torch_traces(kSets + "/rank_exits"), 3);
  ASSERT_EQ(from_json.outcome, TorchOutcome::Diagnosis);
  ASSERT_EQ(from_pickle.outcome, TorchOutcome::Diagnosis);
  EXPECT_EQ(from_json.diagnoses.front().ranks, from_pickle.diagnoses.front().ranks);
  EXPECT_EQ(from_json.diagnoses.front().seq, from_pickle.diagnoses.front().seq);
  // A counter that is not a number is bad input naming the field.
  json d = json::parse(slurp(kSets + "/rank_exits_json/gloo_trace_rank_0.json"));
  d["pg_status"]["0"]["last_enqueued_collective"] = "three";
  EXPECT_THROW(
      {
        try {
          parse_torch_trace(d.dump(), "gloo_trace_rank_0.json");
        } catch (const TorchTraceError& e) {
          EXPECT_NE(std::string(e.what()).find("pg_status[0].last_enqueued_collective: expected an integer, got \"three\""),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      TorchTraceError);
}

TEST(TorchFormats, AVersionThisReaderDoesNotKnowIsRefusedByName) {
  for (const std::string v : {"3.0", "2.11", "1.9", "banana"}) {
    json d = json::parse(slurp(kSets + "/rank_exits_json/gloo_trace_rank_0.json"));
    d["version"] = v;
    const std::string dir = testing::TempDir() + "/fr_version";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/gloo_trace_rank_0.json") << d.dump();
    const auto r = testutil::collcheck("analyze " + dir, 60);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("version: format version '" + v + "' is not one this reader knows (known: 2.0 to 2.10"),
              std::string::npos)
        << r.out;
  }
}

TEST(TorchFormats, OneRanksDumpAloneCannotDecide) {
  const std::string dir = mixed("fr_one", {{kSets + "/correct_training/gloo_trace_rank_0", "gloo_trace_rank_0"}});
  const auto alone = testutil::collcheck("analyze " + dir, 60);
  EXPECT_EQ(alone.code, 4) << alone.out;
  EXPECT_NE(alone.out.find("outcome: cannot decide"), std::string::npos) << alone.out;
  const auto four = testutil::collcheck("analyze " + dir + " --world-size 4", 60);
  EXPECT_EQ(four.code, 4) << four.out;
  EXPECT_NE(four.out.find("ranks 1-3 left no dump"), std::string::npos) << four.out;
  const auto small = testutil::collcheck("analyze " + kSets + "/correct_training --world-size 2", 60);
  EXPECT_EQ(small.code, 2) << small.out;
  EXPECT_NE(small.out.find("--world-size 2 is too small: these dumps name rank 3"), std::string::npos) << small.out;
}

TEST(TorchFormats, DumpsOfTwoJobsAreRefused) {
  // Two torch 2.14 runs: the same call of the same group, minutes apart.
  const std::string two_runs = mixed("fr_two_runs", {{kSets + "/correct_training/gloo_trace_rank_0", "gloo_trace_rank_0"},
                                                     {kSets + "/correct_training/gloo_trace_rank_1", "gloo_trace_rank_1"},
                                                     {kSets + "/long_run_evicted/gloo_trace_rank_2", "gloo_trace_rank_2"}});
  const auto r = testutil::collcheck("analyze " + two_runs, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("these dumps are not one job's"), std::string::npos) << r.out;
  // An NCCL job's dump next to a Gloo job's: two formats.
  const std::string formats = mixed("fr_two_formats", {{kSets + "/rank_exits/gloo_trace_rank_0", "gloo_trace_rank_0"},
                                                       {kGpu + "/gpu_error_1st/_dump_1", "gloo_trace_rank_1"}});
  const auto f = testutil::collcheck("analyze " + formats, 60);
  EXPECT_EQ(f.code, 2) << f.out;
  EXPECT_NE(f.out.find("these dumps are not one job's"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("format 2.9"), std::string::npos) << f.out;
}

TEST(TorchFormats, ReportsCarryTheOutcome) {
  const std::string junit = testing::TempDir() + "/fr_undecided.xml";
  const auto r = testutil::collcheck(
      "analyze " + kSets + "/correct_training_rank3_lost --world-size 4 --report junit=" + junit, 60);
  EXPECT_EQ(r.code, 4) << r.out;
  const std::string x = slurp(junit);
  EXPECT_NE(x.find("<error"), std::string::npos) << x;  // neither a pass nor a failure
  EXPECT_NE(x.find("rank 3 left no dump"), std::string::npos) << x;
}
