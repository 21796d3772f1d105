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

// One frame of the Python stack a call was made from (`frames`, when the dump
// was taken with stack traces).
struct TorchFrame {
  std::string file, name;
  int64_t line = 0;
};

// One entry of a rank's trace buffer.
struct TorchEntry {
  uint64_t record_id = 0;
  int64_t pg_id = -1;   // the group's id in this process (pg_status's key); -1: not recorded (formats before 2.3)
  std::string pg_name;  // the process group's name (pg_config's key), "74"
  std::string pg_desc;  // "EXPERT_MODEL_PARALLEL_GROUP"
  int64_t collective_seq = 0;  // the group's collective sequence number
  int64_t p2p_seq = 0;
  bool p2p = false;
  std::string op;  // profiling_name: "nccl:all_to_all", "nccl:send 0->3", "gloo:barrier"
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string state;  // scheduled, started, completed
  std::optional<bool> retired;  // the work object is gone (Gloo: it ended, well or with an error)
  int64_t created_ns = 0;
  std::optional<int64_t> started_ns, completed_ns;  // time_discovered_*_ns (NCCL's watchdog saw it)
  int64_t timeout_ms = 0;
  std::vector<TorchFrame> frames;  // innermost first
};

// pg_status: per pg_id, the last collective the rank enqueued, started and
// completed (-1 or 0: none).
struct TorchGroupStatus {
  int64_t enqueued = -1, started = -1, completed = -1;
};

struct TorchGroup {
  std::string name, desc;
  std::vector<int> ranks;  // global ranks, in the group's order
};

struct TorchDump {
  std::string file;
  int rank = -1;  // global rank: the dump's `rank` when it has one, else the file name's number
  std::string version;
  int version_minor = 0;        // 2.<minor>
  std::string nccl_version;     // nccl_version, or comm_lib_version ("" for Gloo)
  std::map<std::string, TorchGroup> groups;  // pg_config, by name
  std::map<int64_t, TorchGroupStatus> status;  // pg_status, by pg_id
  bool has_status = false;                  // the dump has pg_status at all
  std::vector<TorchEntry> entries;           // in record order
  // collcheck's MPI interposer: why the rank was dumped ("finalize", "exit: ...",
  // "hang: ...", "signal: SIGTERM", "MPI_Abort", "guard: ..."); "" for PyTorch's dumps.
  std::string collcheck_reason;
};

// The format versions this reader knows: 2.0 to 2.10 (2.10 is what torch 2.14 writes; the
// NCCL dumps in tests/data are 2.9).
inline constexpr int kTorchTraceMaxMinor = 10;

// Whether `bytes` look like a Flight Recorder dump (a pickle, or a JSON
// object with `entries` or `pg_config` in its first 64 KiB), without reading
// it all.
bool looks_like_torch_trace(const std::string& bytes);

// One dump from its bytes; `file` names it in errors and gives the rank when
// the dump has none.
TorchDump parse_torch_trace(const std::string& bytes, const std::string& file);

// Every dump in `dir`: files whose name ends in the rank's number
// (nccl_trace_rank_3, _dump_3, rank_3.json) and whose content is a dump;
// other files are skipped. Throws TorchTraceError on a damaged dump, two dumps
// of one rank, or none.
std::vector<TorchDump> load_torch_traces(const std::string& dir);

// The collective of a profiling name, without its backend ("nccl:", "gloo:")
// or its peers ("send 0->3" -> "send"); "" for a name that is not a
// collective or point-to-point call this reader knows.
std::string torch_collective(const std::string& profiling_name);

// What else a call must agree on across ranks, from its name: for collcheck's
// MPI interposer's records, "nonblocking", "op=sum" and "root=0" (space
// separated, "" when none); "" for every other backend (their dumps do not
// record them).
std::string torch_call_attributes(const std::string& profiling_name);
// One of them by its key ("op", "root"): "sum", "0"; "" when the name has none.
std::string torch_call_attribute(const std::string& profiling_name, std::string_view key);

// "all_to_all 4027x5120 BFloat16": the op without its backend, the first
// input's shape and dtype.
std::string torch_entry_text(const TorchEntry& e);

// "train.py:42 (main)": the innermost frame outside torch itself, "" when the
// dump has no frames.
std::string torch_call_site(const TorchEntry& e);

}  // namespace collcheck
