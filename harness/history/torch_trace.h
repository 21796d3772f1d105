// PyTorch Flight Recorder dumps (ProcessGroupNCCL's trace buffer, written on
// a watchdog timeout with TORCH_NCCL_DUMP_ON_TIMEOUT=1, or by
// _dump_nccl_trace / _dump_nccl_trace_json): one file per rank, a pickle
// (protocol 2) or its JSON variant, of a dict with `version`, `pg_config`
// (process group name -> desc, ranks), `pg_status` and `entries`, the ring
// buffer of the rank's most recent collectives and point-to-point calls.
//
// A file is read whole and checked: every field the analysis uses is present
// and of its type, or the error names the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace collcheck {

struct TorchTraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One entry of a rank's trace buffer.
struct TorchEntry {
  uint64_t record_id = 0;
  std::string pg_name;  // the process group's name (pg_config's key), "74"
  std::string pg_desc;  // "EXPERT_MODEL_PARALLEL_GROUP"
  int64_t collective_seq = 0;  // the group's collective sequence number
  int64_t p2p_seq = 0;
  bool p2p = false;
  std::string op;  // profiling_name: "nccl:all_to_all", "nccl:send 0->3"
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string state;  // scheduled, started, completed
  int64_t created_ns = 0;
  int64_t timeout_ms = 0;
};

struct TorchGroup {
  std::string name, desc;
  std::vector<int> ranks;  // global ranks, in the group's order
};

struct TorchDump {
  std::string file;
  int rank = -1;  // global rank: the dump's `rank` when it has one, else the file name's number
  std::string version;
  std::string nccl_version;
  std::map<std::string, TorchGroup> groups;  // by name
  std::vector<TorchEntry> entries;           // in record order
};

// Whether `bytes` look like a Flight Recorder dump (a pickle, or JSON with
// `entries` and `pg_config`), without reading it all.
bool looks_like_torch_trace(const std::string& bytes);

// One dump from its bytes; `file` names it in errors and gives the rank when
// the dump has none.
TorchDump parse_torch_trace(const std::string& bytes, const std::string& file);

// Every dump in `dir`: files whose name ends in the rank's number
// (nccl_trace_rank_3, _dump_3, rank_3.json) and whose content is a dump;
// other files are skipped. Throws TorchTraceError on a damaged dump, two dumps
// of one rank, or none.
std::vector<TorchDump> load_torch_traces(const std::string& dir);

// "all_to_all 4027x5120 BFloat16": the op without its "nccl:", the first
// input's shape and dtype.
std::string torch_entry_text(const TorchEntry& e);

}  // namespace collcheck
