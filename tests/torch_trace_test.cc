// PyTorch Flight Recorder dumps in: the pickle reader (plain data only,
// nothing executed, bounded), the dump parser (pickle and JSON), and the
// per-process-group diagnosis, checked against the two real 16-rank dump
// sets in tests/data/torch-flight-recorder/ and their reference analyzer's
// output (reference_output.txt, read here, not restated).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/check/torch_analysis.h"
#include "harness/history/torch_scenario.h"
#include "harness/history/torch_trace.h"
#include "harness/model/pickle.h"
#include "tests/run_command.h"

using namespace collcheck;
using nlohmann::json;

namespace {

const std::string kFixtures = SOURCE_DIR "/tests/data/torch-flight-recorder";

using testutil::slurp;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

// The reference analyzer's row: PGID, description, op, size, dtype, missing ranks.
struct ReferenceRow {
  std::string pgid, desc, op, size, dtype;
  std::vector<int> missing;
};

ReferenceRow reference_row(const std::string& set) {
  std::istringstream in(slurp(kFixtures + "/" + set + "/reference_output.txt"));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  std::vector<std::string> cols;
  std::stringstream rs(row);
  for (std::string c; std::getline(rs, c, '|');) {
    const auto a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
    cols.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
  }
  EXPECT_EQ(cols.size(), 6u) << row;
  ReferenceRow r{cols.at(0), cols.at(1), cols.at(2), cols.at(3), cols.at(4), {}};
  std::stringstream ms(cols.at(5));
  for (std::string m; std::getline(ms, m, ',');) r.missing.push_back(std::stoi(m));
  return r;
}

}  // namespace

TEST(Pickle, ReadsPlainDataOfEveryProtocolOpcode) {
  // {'a': [1, -2, 300, 70000], 't': (None, True, False), 'f': 1.5, 'b': b'xy', 'big': 2**63, 'neg': -2**40}
  // written by hand with protocol 2 opcodes (EMPTY_DICT, MARK, BINUNICODE, EMPTY_LIST, BININT1, BININT,
  // BININT2, APPENDS, TUPLE3, BINFLOAT, SHORT_BINBYTES, LONG1, SETITEMS).
  std::string p = bytes({0x80, 2, '}', '('});
  auto str = [&](const std::string& s) {
    p += 'X';
    for (int k = 0; k < 4; ++k) p.push_back(static_cast<char>((s.size() >> (8 * k)) & 0xff));
    p += s;
  };
  str("a");
  p += bytes({']', '(', 'K', 1, 'J', 0xfe, 0xff, 0xff, 0xff, 'M', 0x2c, 0x01, 'J', 0x70, 0x11, 0x01, 0x00, 'e'});
  str("t");
  p += bytes({'N', 0x88, 0x89, 0x87});
  str("f");
  p += bytes({'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0});
  str("b");
  p += bytes({'C', 2, 'x', 'y'});
  str("big");
  p += bytes({0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0});
  str("neg");
  p += bytes({0x8a, 6, 0, 0, 0, 0, 0, 0xff});
  p += bytes({'u', '.'});
  const json v = read_pickle(p);
  EXPECT_EQ(v["a"], json::parse("[1, -2, 300, 70000]"));
  EXPECT_EQ(v["t"], json::parse("[null, true, false]"));
  EXPECT_EQ(v["f"].get<double>(), 1.5);
  EXPECT_TRUE(v["b"].is_binary());
  EXPECT_EQ(v["big"].get<uint64_t>(), uint64_t{1} << 63);
  EXPECT_EQ(v["neg"].get<int64_t>(), -(int64_t{1} << 40));
}

TEST(Pickle, SharedContainersAreFilledThroughTheMemo) {
  // x = []; [x, x] with x filled after it was memoized: [[7], [7]], as Python reads it.
  const std::string p = bytes({0x80, 2, ']', 'q', 0, '(', ']', 'q', 1, 'h', 1, 'e', 'h', 1, 'K', 7, 'a', '0', '.'});
  // Stack: outer list (memo 0), MARK, inner (memo 1), get 1 -> APPENDS [inner, inner] to outer; then
  // inner.append(7) and POP, which leaves the outer list.
  const json v = read_pickle(p);
  EXPECT_EQ(v, json::parse("[[7], [7]]")) << v.dump();
}

TEST(Pickle, AnythingButPlainDataIsRefusedWithItsByte) {
  // os.system('id'): GLOBAL, then REDUCE. Refused at the GLOBAL, before anything else.
  const std::string evil = bytes({0x80, 2}) + "cos\nsystem\n" + bytes({'X', 2, 0, 0, 0, 'i', 'd', 0x85, 'R', '.'});
  try {
    read_pickle(evil);
    FAIL() << "a GLOBAL was read";
  } catch (const PickleError& e) {
    EXPECT_STREQ(e.what(), "byte 2: opcode GLOBAL (0x63) is not plain data; refused, nothing is ever executed");
  }
  for (const auto& [p, what] : std::vector<std::pair<std::string, std::string>>{
           {bytes({0x80, 2, ']'}), "byte 3: the pickle ends before its STOP opcode"},
           {bytes({0x80, 2, 'X', 9, 0, 0, 0, 'a', '.'}), "byte 7: 9 bytes wanted, 2 left: the pickle is truncated"},
           {bytes({0x80, 2, 'h', 5, '.'}), "byte 2: memo index 5 was never stored"},
           {bytes({0x80, 9, '.'}), "byte 0: pickle protocol 9; this reader knows 0 to 5"},
           {bytes({0x80, 2, 'N', 'N', '.'}), "byte 4: STOP with 2 values on the stack; a pickle ends with one"},
           {bytes({0x80, 2, 'X', 1, 0, 0, 0, 0xff, '.'}), "byte 2: a string is not valid UTF-8"},
           {bytes({0x80, 2, 'R', '.'}), "byte 2: opcode REDUCE (0x52) is not plain data; refused, nothing is ever executed"},
           {bytes({0x80, 2, 0xff, '.'}), "byte 2: 0xff is not a pickle opcode"},
       }) {
    try {
      read_pickle(p);
      ADD_FAILURE() << "read: " << what;
    } catch (const PickleError& e) {
      EXPECT_EQ(std::string(e.what()), what);
    }
  }
}

TEST(Pickle, ExpansionThroughTheMemoAndSelfReferenceAreBounded) {
  // Each level a list of the previous one ten times: 10^12 values from ~300 bytes.
  std::string p = bytes({0x80, 2, ']', 'q', 0, '0'});
  for (int level = 1; level <= 12; ++level) {
    p += '(';
    for (int k = 0; k < 10; ++k) p += bytes({'h', level - 1});
    p += bytes({'l', 'q', level});
    if (level < 12) p += '0';  // kept in the memo only
  }
  p += '.';
  try {
    read_pickle(p);
    FAIL() << "the expansion was read";
  } catch (const PickleError& e) {
    EXPECT_NE(std::string(e.what()).find("expands to more than 4194304 values"), std::string::npos) << e.what();
  }
  // A list that holds itself.
  const std::string self = bytes({0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'});
  try {
    read_pickle(self);
    FAIL() << "a self-holding list was read";
  } catch (const PickleError& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 64 deep (or a container holds itself)"), std::string::npos)
        << e.what();
  }
}

TEST(TorchTrace, RealDumpsParseWithTheirGroupsAndEntries) {
  const auto dumps = load_torch_traces(kFixtures + "/gpu_error_1st");
  ASSERT_EQ(dumps.size(), 16u);
  for (size_t r = 0; r < dumps.size(); ++r) EXPECT_EQ(dumps[r].rank, static_cast<int>(r));
  const TorchDump& d = dumps[12];
  EXPECT_EQ(d.version, "2.9");
  EXPECT_EQ(d.nccl_version, "2.27.3");
  EXPECT_EQ(d.entries.size(), 27u);
  EXPECT_EQ(d.groups.at("74").desc, "EXPERT_MODEL_PARALLEL_GROUP");
  EXPECT_EQ(d.groups.at("74").ranks, (std::vector<int>{12, 13, 14, 15}));
  const TorchEntry& e = d.entries[1];
  EXPECT_EQ(e.pg_name, "74");
  EXPECT_EQ(e.collective_seq, 20530);
  EXPECT_EQ(e.op, "nccl:all_to_all");
  EXPECT_EQ(e.input_sizes, (std::vector<std::vector<int64_t>>{{4096, 5120}}));
  EXPECT_EQ(e.output_sizes, (std::vector<std::vector<int64_t>>{{4183, 5120}}));
  EXPECT_EQ(e.input_dtypes, std::vector<std::string>{"BFloat16"});
  EXPECT_EQ(e.state, "scheduled");
  EXPECT_EQ(e.created_ns, 1758610505897823890);
  EXPECT_EQ(torch_entry_text(e), "all_to_all 4096x5120 BFloat16");
}

// Both real sets: the first finding names the reference's process group,
// collective, size, dtype and missing ranks, which are the ranks the faults
// were injected on that stopped first (fault_injection.log).
TEST(TorchTrace, BothRealSetsAreDiagnosedAsTheReferenceAnalyzerSays) {
  for (const std::string set : {"gpu_error_1st", "gpu_error_2nd"}) {
    SCOPED_TRACE(set);
    const ReferenceRow ref = reference_row(set);
    const auto a = analyze_torch(load_torch_traces(kFixtures + "/" + set));
    ASSERT_FALSE(a.diagnoses.empty());
    ASSERT_FALSE(a.lags.empty());
    const Diagnosis& d = a.diagnoses.front();
    EXPECT_EQ(d.kind, DiagnosisKind::MissingRank) << d.text;
    EXPECT_EQ(d.ranks, ref.missing) << d.text;
    const TorchGroupLag& l = a.lags.front();
    EXPECT_EQ(l.name, ref.pgid);
    EXPECT_EQ(ref.desc.rfind(l.desc, 0), 0u) << ref.desc << " vs " << l.desc;  // "EXPERT_MODEL_PARALLEL_GROUP,0"
    ASSERT_TRUE(l.stuck.has_value());
    EXPECT_EQ(l.stuck->op, ref.op);
    EXPECT_EQ(torch_entry_text(*l.stuck), ref.op.substr(5) + " " + ref.size + " " + ref.dtype);
    EXPECT_EQ(l.missing, ref.missing);
    // Every other group stuck on a missing rank is stuck on one of the same ranks.
    for (const auto& other : a.lags)
      for (int r : other.missing)
        EXPECT_NE(std::find(ref.missing.begin(), ref.missing.end(), r), ref.missing.end()) << other.name;
  }
}

TEST(TorchTrace, TheJsonVariantGivesTheSameDiagnosis) {
  const std::string dir = testing::TempDir() + "/fr_json";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (int r = 0; r < 16; ++r) {
    const json d = read_pickle(slurp(kFixtures + "/gpu_error_2nd/_dump_" + std::to_string(r)));
    std::ofstream(dir + "/nccl_trace_rank_" + std::to_string(r) + ".json") << d.dump(1);
  }
  std::ofstream(dir + "/notes.txt") << "not a dump\n";
  const auto from_json = analyze_torch(load_torch_traces(dir));
  const auto from_pickle = analyze_torch(load_torch_traces(kFixtures + "/gpu_error_2nd"));
  ASSERT_EQ(from_json.diagnoses.size(), from_pickle.diagnoses.size());
  for (size_t k = 0; k < from_json.diagnoses.size(); ++k)
    EXPECT_EQ(from_json.diagnoses[k].text, from_pickle.diagnoses[k].text);
}

// Dumps written for the test: 4 ranks in one group, each rank's last call.
namespace {
json entry(int seq, const std::string& op, const std::string& dtype, int64_t n, const std::string& state) {
  return json{{"record_id", seq}, {"pg_id", 0}, {"process_group", {"0", "default_pg"}}, {"collective_seq_id", seq},
              {"p2p_seq_id", 0}, {"op_id", seq}, {"profiling_name", "nccl:" + op}, {"input_sizes", {{n}}},
              {"output_sizes", {{n}}}, {"input_dtypes", {dtype}}, {"output_dtypes", {dtype}}, {"state", state},
              {"time_created_ns", 1000 + seq}, {"timeout_ms", 600000}, {"is_p2p", false}};
}
std::string write_set(const std::string& name, const std::vector<json>& last) {
  const std::string dir = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (size_t r = 0; r < last.size(); ++r) {
    json d{{"version", "2.9"},
           {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", "[0, 1, 2, 3]"}}}}},
           {"pg_status", json::object()},
           {"entries", {entry(1, "all_reduce", "Float", 8, "completed"), last[r]}}};
    std::ofstream(dir + "/rank_" + std::to_string(r) + ".json") << d.dump();
  }
  return dir;
}
}  // namespace

TEST(TorchTrace, MismatchedCollectivesAndDtypesAreNamedPerGroup) {
  const json ok = entry(2, "all_reduce", "Float", 8, "started");
  const auto dtype = analyze_torch(load_torch_traces(write_set(
      "fr_dtype", {ok, ok, entry(2, "all_reduce", "BFloat16", 8, "started"), ok})));
  ASSERT_FALSE(dtype.diagnoses.empty());
  EXPECT_EQ(dtype.diagnoses.front().kind, DiagnosisKind::ShapeMismatch) << dtype.diagnoses.front().text;
  EXPECT_EQ(dtype.diagnoses.front().ranks, std::vector<int>{2});
  EXPECT_EQ(dtype.diagnoses.front().fields, std::vector<std::string>{"dtype"});
  EXPECT_EQ(dtype.diagnoses.front().text,
            "mismatched shapes at call #2 of process group 0 (default_pg): ranks 0, 1, 3 called all_reduce 8 Float; "
            "rank 2 called all_reduce 8 BFloat16 (differs in: dtype)");
  const auto order = analyze_torch(load_torch_traces(write_set(
      "fr_order", {ok, entry(2, "broadcast", "Float", 8, "started"), ok, ok})));
  ASSERT_FALSE(order.diagnoses.empty());
  EXPECT_EQ(order.diagnoses.front().kind, DiagnosisKind::OrderMismatch);
  EXPECT_EQ(order.diagnoses.front().ranks, std::vector<int>{1});
  // all_to_all sizes may differ per rank: not a mismatch.
  const auto a2a = analyze_torch(load_torch_traces(write_set(
      "fr_a2a", {entry(2, "all_to_all", "Float", 8, "completed"), entry(2, "all_to_all", "Float", 9, "completed"),
                 entry(2, "all_to_all", "Float", 7, "completed"), entry(2, "all_to_all", "Float", 8, "completed")})));
  EXPECT_TRUE(a2a.diagnoses.empty()) << a2a.diagnoses.front().text;
  // Rank 3 stopped after call #1; the others are stuck in #2.
  const auto missing = analyze_torch(load_torch_traces(
      write_set("fr_missing", {ok, ok, ok, entry(1, "all_reduce", "Float", 8, "completed")})));
  ASSERT_FALSE(missing.diagnoses.empty());
  EXPECT_EQ(missing.diagnoses.front().text,
            "rank 3 never joined call #2 (all_reduce 8 Float) of process group 0 (default_pg), which ranks 0-2 joined "
            "and could not finish; rank 3's last call of it: #1; last collective per rank: 0-2: #2, 3: #1");
}

// nlohmann-json sorts keys: torch's dump_json and the MPI interposer write
// "entries" first, and a long run's pg_config lies megabytes in.
TEST(TorchTrace, ALongJsonDumpWithItsEntriesFirstIsRead) {
  const std::string dir = testing::TempDir() + "/fr_long";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  constexpr int kCalls = 3000;
  for (int r = 0; r < 4; ++r) {
    json entries = json::array();
    for (int k = 1; k < kCalls; ++k) entries.push_back(entry(k, "all_reduce", "Float", 8, "completed"));
    if (r != 3) entries.push_back(entry(kCalls, "all_reduce", "Float", 8, "started"));
    const json d{{"version", "2.10"},
                 {"pg_config", {{"0", {{"name", "0"}, {"desc", "default_pg"}, {"ranks", "[0, 1, 2, 3]"}}}}},
                 {"pg_status", json::object()},
                 {"entries", entries}};
    const std::string text = d.dump();
    ASSERT_GT(text.find("\"pg_config\""), size_t{1} << 16) << "the test's point: pg_config past the first 64 KiB";
    std::ofstream(dir + "/rank_" + std::to_string(r) + ".json") << text;
  }
  const auto dumps = load_torch_traces(dir);
  ASSERT_EQ(dumps.size(), 4u);
  EXPECT_EQ(dumps[0].entries.size(), static_cast<size_t>(kCalls));
  const auto a = analyze_torch(dumps);
  ASSERT_FALSE(a.diagnoses.empty());
  EXPECT_EQ(a.diagnoses.front().kind, DiagnosisKind::MissingRank) << a.diagnoses.front().text;
  EXPECT_EQ(a.diagnoses.front().ranks, std::vector<int>{3});
}

TEST(TorchTrace, DamagedDumpsAreBadInputNamingTheFileAndField) {
  json e = entry(2, "all_reduce", "Float", 8, "started");
  e["collective_seq_id"] = "two";
  const std::string dir = write_set("fr_bad", {e, e, e, e});
  const auto r = testutil::collcheck("analyze " + dir, 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("rank_0.json: entries[1].collective_seq_id: expected an integer, got string"), std::string::npos)
      << r.out;
  json s = entry(2, "all_reduce", "Float", 8, "stuck");
  const auto bad_state = testutil::collcheck("analyze " + write_set("fr_bad_state", {s, s, s, s}), 60);
  EXPECT_EQ(bad_state.code, 2) << bad_state.out;
  EXPECT_NE(bad_state.out.find("entries[1].state: 'stuck'; allowed: scheduled, started, completed"), std::string::npos)
      << bad_state.out;
  const std::string evil = testing::TempDir() + "/fr_evil";
  std::filesystem::create_directories(evil);
  std::ofstream(evil + "/_dump_0", std::ios::binary) << bytes({0x80, 2}) << "cos\nsystem\n" << bytes({'N', '.'});
  const auto refused = testutil::collcheck("analyze " + evil, 60);
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("_dump_0: not a Flight Recorder dump this reader takes: byte 2: opcode GLOBAL"),
            std::string::npos)
      << refused.out;
}

TEST(TorchTrace, AnalyzeOnTheRealDumpsFromTheCommandLine) {
  const auto r = testutil::collcheck("analyze " + kFixtures + "/gpu_error_1st", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing_rank [rank 12] [group 74 call #20537]: rank 12 never joined call #20537 (all_to_all "
                       "4027x5120 BFloat16) of process group 74 (EXPERT_MODEL_PARALLEL_GROUP), which ranks 13-15 "
                       "joined and could not finish"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  74        EXPERT_MODEL_PARALLEL_GROUP"), std::string::npos) << r.out;
}

// ---- a scenario out: analyze --emit-scenario, then replay ----

// Both real sets, as a user runs them: the emitted scenario replays, in both
// modes, to the reference's diagnosis (the missing ranks, the process group,
// the collective), which the file expects.
TEST(TorchScenario, EmittedScenariosReplayToTheReferenceDiagnosis) {
  for (const std::string set : {"gpu_error_1st", "gpu_error_2nd"}) {
    SCOPED_TRACE(set);
    const ReferenceRow ref = reference_row(set);
    const auto a = analyze_torch(load_torch_traces(kFixtures + "/" + set));
    ASSERT_FALSE(a.diagnoses.empty());
    const std::string tag = ref.op.substr(5) + "#" + std::to_string(*a.diagnoses.front().seq);  // all_to_all#20537
    const std::string out = testing::TempDir() + "/" + set + ".yaml";
    std::filesystem::remove(out);
    const auto w = testutil::collcheck("analyze " + kFixtures + "/" + set + " --emit-scenario " + out, 60);
    EXPECT_EQ(w.code, 1) << w.out;  // the analysis found the hang
    EXPECT_NE(w.out.find("scenario written: " + out + " (16 ranks"), std::string::npos) << w.out;
    const std::string text = slurp(out);
    std::string ranks;
    for (int r : ref.missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    EXPECT_NE(text.find("expect: {diagnosis: missing_rank, ranks: [" + ranks + "], seq: 1, group: pg" + ref.pgid + "}"),
              std::string::npos)
        << text.substr(text.size() > 400 ? text.size() - 400 : 0);
    for (const std::string mode : {"guarded", "unguarded"}) {
      SCOPED_TRACE(mode);
      const auto r = testutil::collcheck("replay " + out + " --mode " + mode, 120);
      EXPECT_EQ(r.code, 0) << r.out;
      const std::string first = std::string("missing_rank [rank") + (ref.missing.size() > 1 ? "s " : " ") + ranks +
                                "] [group pg" + ref.pgid + " call #1]";
      const auto at = r.out.find("diagnosis (");
      ASSERT_NE(at, std::string::npos) << r.out;
      EXPECT_EQ(r.out.find(first, at), r.out.find('\n', at) + 3) << "the first finding is not " << first << ":\n" << r.out;
      EXPECT_NE(r.out.find(tag), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("-> holds"), std::string::npos) << r.out;
      // No slow link was injected: 16 rank threads on few cores are no evidence of one.
      EXPECT_EQ(r.out.find("slow_link"), std::string::npos) << r.out;
    }
  }
}

// The scenario from synthetic dumps: each group starts where every member's
// buffer still holds it, sizes are scaled by one factor with distinct sizes
// kept distinct, all_to_all is a multiple of the group's size on every rank.
TEST(TorchScenario, WindowsScaleAndAllToAllAreAsDocumented) {
  auto entry = [](const std::string& op, int64_t seq, std::vector<int64_t> dims) {
    TorchEntry e;
    e.pg_name = "7";
    e.pg_desc = "TP";
    e.op = "nccl:" + op;
    e.collective_seq = seq;
    e.input_sizes = {dims};
    e.input_dtypes = {"BFloat16"};
    return e;
  };
  std::vector<TorchDump> dumps(3);
  for (int r = 0; r < 3; ++r) {
    dumps[r].rank = r;
    dumps[r].file = "_dump_" + std::to_string(r);
    dumps[r].version = "2.9";
    dumps[r].groups["7"] = TorchGroup{"7", "TP", {0, 1, 2}};
    // Rank 0's buffer holds #4 on; ranks 1 and 2 hold #5 on and went further.
    for (int64_t seq = r == 0 ? 4 : 5; seq <= (r == 0 ? 5 : 7); ++seq)
      dumps[r].entries.push_back(entry("all_reduce", seq, {1000000 + (seq == 6 && r == 2 ? 1 : 0)}));
    dumps[r].entries.push_back(entry("all_to_all", r == 0 ? 6 : 8, {3000001 + r}));
  }
  TorchScenarioOptions o;
  o.max_count = 1000;
  const TorchScenario t = torch_scenario(dumps, "synthetic", o);
  const Scenario& s = t.scenario;
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].name, "pg7");
  EXPECT_EQ(t.first_seq.at("7"), 5);
  EXPECT_EQ(scenario_seq(t, "7", 6), std::optional<uint64_t>(2));
  EXPECT_EQ(scenario_seq(t, "7", 4), std::nullopt);
  // Rank 0: #5 and its all_to_all (#4 is dropped); ranks 1, 2: #5-#7 and theirs.
  ASSERT_EQ(s.program(0).size(), 2u);
  ASSERT_EQ(s.program(1).size(), 4u);
  EXPECT_EQ(s.program(1)[0].call.tag, "all_reduce#5");
  EXPECT_GT(t.scale, 1u);
  for (int r = 0; r < 3; ++r)
    for (const Step& st : s.program(r)) {
      EXPECT_TRUE(st.call.async);
      EXPECT_EQ(st.call.wait, WaitAt::End);
      EXPECT_LE(st.call.count, 1100u) << st.call.tag;
      if (st.call.coll == Collective::AllToAll) {
        EXPECT_EQ(st.call.count % 3, 0u) << st.call.tag;
      }
    }
  // 1,000,000 and 1,000,001 elements at #6 stay different sizes.
  EXPECT_NE(s.program(1)[1].call.count, s.program(2)[1].call.count);
  EXPECT_EQ(s.program(1)[0].call.count, s.program(2)[0].call.count);
  // The uneven all_to_all #8 of ranks 1 and 2: one size on both.
  EXPECT_EQ(s.program(1)[3].call.count, s.program(2)[3].call.count);
  // What parses back is what was written.
  const Scenario back = parse_scenario(scenario_to_yaml(s), "back.yaml");
  EXPECT_EQ(scenario_to_yaml(back), scenario_to_yaml(s));
}

TEST(TorchScenario, BadFlagsAreBadInput) {
  const std::string set = kFixtures + "/gpu_error_1st";
  auto r = testutil::collcheck("analyze " + set + " --emit-scenario x.yaml --emit-max-count -3", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--emit-max-count must be a non-negative integer, got '-3'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("collcheck analyze: PyTorch"), std::string::npos) << "bad input printed an analysis:\n" << r.out;
  r = testutil::collcheck("analyze " + set + " --emit-scenario /nonexistent/dir/out.yaml", 60);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--emit-scenario: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/dir/out.yaml"), std::string::npos) << r.out;
}
