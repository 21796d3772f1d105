// libFuzzer over the JSON variant of PyTorch Flight Recorder dumps
// (_dump_fr_trace_json, _dump_nccl_trace_json), the way the pickle fuzzer
// covers the pickle path: the bytes are rank 1's dump next to a fixed real
// rank 0 (torch 2.14, Gloo), and the pair goes through everything `analyze
// --emit-scenario` runs: the job model, the analysis (lags, cycles, the
// DETAIL and Gloo rules) and the scenario writer. Any bytes either give a
// verdict or throw TorchTraceError (exit 2, naming the file and the field).
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/check/torch_analysis.h"
#include "harness/history/torch_scenario.h"
#include "harness/history/torch_trace.h"

namespace {
// rank 0 of tests/fixtures/torch-gloo/sets/rank_exits_json, cut to its first entry.
const char* kRank0 =
    R"({"comm_lib_version": "", "pg_config": {"": {"desc": "", "name": "", "ranks": "[0, 1, 2]"}},)"
    R"( "pg_status": {"0": {"last_completed_collective": "1", "last_enqueued_collective": "1",)"
    R"( "last_started_collective": "-1"}}, "version": "2.10", "entries": [{"collective_seq_id": 1,)"
    R"( "input_dtypes": ["Float"], "input_sizes": [[300]], "is_p2p": false, "op_id": 1,)"
    R"( "output_dtypes": ["Float"], "output_sizes": [[300]], "p2p_seq_id": 0, "pg_id": 0,)"
    R"( "process_group": ["0", "default_pg"], "profiling_name": "gloo:all_reduce", "record_id": 0,)"
    R"( "retired": true, "state": "scheduled", "time_created_ns": 1796291115000000000,)"
    R"( "time_discovered_completed_ns": 0, "time_discovered_started_ns": 0, "timeout_ms": 12000}]})";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto one = collcheck::parse_torch_trace(bytes, "gloo_trace_rank_1.json");
    if (one.rank > 64) return 0;  // the world size follows the rank: keep the analysis small
    (void)collcheck::analyze_torch({one});
    const auto zero = collcheck::parse_torch_trace(kRank0, "gloo_trace_rank_0.json");
    if (one.rank == 0) return 0;
    std::vector<collcheck::TorchDump> both{zero, one};
    (void)collcheck::analyze_torch(both);
    (void)collcheck::analyze_torch(both, 3);
    collcheck::TorchScenarioOptions o;
    o.max_count = 4096;
    (void)collcheck::torch_scenario(both, "fuzz", o);
  } catch (const collcheck::TorchTraceError&) {
  }
  return 0;
}
