// Scenarios: a run as pure data (DESIGN.md, "the pipeline"). The world, the
// implementation, the per-call deadline, what every rank calls (a default
// program plus per-rank overrides), the faults to inject, and optionally the
// diagnosis the run is expected to produce. Read from YAML (JSON is accepted:
// it is a subset of YAML). The format is documented in examples/bugs/README.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "impl/collective.h"
#include "impl/semantics.h"

namespace collcheck {

// A malformed scenario: the message is "file:line: field: what is wrong; allowed: ...".
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The scenario is fine, but this machine cannot run its implementation (NCCL
// without a GPU): a skip, not a pass and not bad input.
class ScenarioUnavailable : public ScenarioError {
 public:
  using ScenarioError::ScenarioError;
};

// Where an async call's wait() happens.
enum class WaitAt : uint8_t {
  Call,   // a sync call (no Work)
  Next,   // right before the rank's next call (or at the end)
  End,    // after the rank's last call
  Never,  // the Work is dropped without wait()
  Handle, // at the program's `wait: <handle>` step (CallStep::handle)
};
std::string_view wait_at_name(WaitAt w);

struct CallStep {
  Collective coll = Collective::AllReduce;
  std::string group;  // the process group ("" for the whole world)
  int peer = -1;      // broadcast: the root; send/recv: the other rank (world ranks)
  std::string tag;  // what the call reduces ("grad_bucket_0"); part of the fingerprint
  bool default_tag = false;  // no tag was written: call<i>, i its number in the program
  std::vector<size_t> shape;  // as written (PyTorch's dims), when given; count is their product
  size_t count = 1024;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  double scalar = 1.0;
  bool async = false;
  WaitAt wait = WaitAt::Call;
  std::string handle;  // WaitAt::Handle: the name a later `wait: <handle>` step waits on
  int wait_before = -1;  // while parsing `wait: {before: k}`: the call k it is waited before
  bool read_before_wait = false;  // the program reads the output before wait()
  bool write_before_wait = false;  // the program writes the call's buffer before wait() (OpenNMT-py #2295)
  // The output buffer is the input too (PyTorch's dist.all_reduce(t)):
  // all_reduce and broadcast only.
  bool in_place = false;
};

struct Step {
  // Synchronize: the device-wide sync (cuda.synchronize(), .tolist()): waits
  // until every call this rank issued, in every group, has finished.
  // Wait: waits the async call of this rank whose handle is `handle`.
  // Exit: the rank's program ends here (an early exit, ElasticDL #1895): no
  // later step runs and nothing pending is waited.
  // Raise: an exception caught around the current block (one pass of the
  // innermost `repeat`, the whole program at the top): the rest of that pass
  // was left out when the file was read; the step stays as a marker.
  enum Kind : uint8_t { Call, Sleep, Stall, Synchronize, Wait, Exit, Raise } kind = Call;
  CallStep call;
  double sleep_ms = 0;  // Sleep
  std::string handle;   // Wait
  int line = 0;         // where it was written, for messages
  // The passes of `repeat` blocks the step is in, outermost first (unique
  // ids); what a Raise leaves out. Steps inserted by an edit get the blocks
  // of the call they are inserted at.
  std::vector<uint32_t> blocks;
  // `if: {ranks: [...], then: [...], else: [...]}` while reading: conditions
  // the step needs (k + 1: the rank is in condition set k; -(k + 1): it is
  // not). Resolved into each rank's program before the scenario is returned.
  std::vector<int32_t> conds;
};
using Program = std::vector<Step>;

// One fault, as written. Which fields matter depends on `kind` (faults/).
struct FaultSpec {
  std::string kind;
  std::vector<int> ranks;
  std::vector<int> calls;      // indices into the program's calls (not steps), from 0
  std::map<std::string, std::string> fields;  // the rest: count, dtype, op, mode, latency_ms, ...
  int line = 0;
};

struct ExpectSpec {
  std::string diagnosis;  // a DiagnosisKind name, "none" for a clean run
  std::vector<int> ranks;
  std::optional<uint64_t> seq;
  std::optional<std::pair<int, int>> edge;
  std::vector<std::string> fields;
  std::optional<std::string> group;  // the process group the diagnosis names ("" for the world)
};

// A process group: a named subset of the world's ranks with its own
// communicator and its own sequence numbers (torch.distributed.new_group).
struct GroupSpec {
  std::string name;
  std::vector<int> ranks;  // world ranks, ascending; the group's rank i is ranks[i]
  // How the group's async calls progress. false: on the rank's device stream,
  // whatever the rank does (NCCL). true (`progress: caller`): only while the
  // rank is inside a call of the group, a wait or test of one of its calls
  // included (MPI without a progress thread, above its eager limit): an
  // isend issued and then left alone while the rank blocks elsewhere never
  // moves.
  bool caller_progress = false;
  // How calls match (`matching: any | mpi`). false (any): a sync and an async
  // call of one collective match, as in NCCL and PyTorch. true (mpi): a
  // blocking collective never matches a non-blocking one (MPI-3, 5.12), so
  // the ranks' calls differ in "blocking".
  bool mpi_matching = false;
  int line = 0;
};

struct Scenario {
  std::string file;  // for messages
  std::string name;
  std::string description;
  int ranks = 2;
  std::string world = "threads";
  std::string impl = "ring";
  double deadline_s = 5.0;  // per call
  bool guarded = true;
  Program defaults;
  std::map<int, Program> overrides;
  std::vector<FaultSpec> faults;
  std::optional<ExpectSpec> expect;     // the run's first finding
  std::vector<ExpectSpec> also_expect;  // expect: [first, ...]: findings the run must also produce, anywhere
  std::vector<GroupSpec> groups;  // besides the world; their order numbers them (transfer tags)

  // The group a call names ("" is the world, every rank); nullptr if none.
  const GroupSpec* group(const std::string& name) const;
  // The world ranks of a group ("" is the world), and its number (0 for the world).
  std::vector<int> members(const std::string& group) const;
  int group_size(const std::string& group) const;
  bool in_group(const std::string& group, int rank) const;
  uint64_t group_id(const std::string& group) const;

  const Program& program(int rank) const;
  Program& mutable_program(int rank);  // makes an override for `rank` if it has none
};

// What a scenario file may hold. Each limit is named in its error, with the
// replay flag that raises it.
struct InputLimits {
  size_t max_bytes = size_t{16} << 20;  // the file (--max-input-bytes)
  size_t max_steps = 200000;            // steps of every program together, aliases expanded (--max-steps)
  int max_depth = 64;                   // nesting of lists and mappings
};

Scenario load_scenario(const std::string& path, const InputLimits& limits = {});
Scenario parse_scenario(const std::string& text, const std::string& file, const InputLimits& limits = {});
// Back to YAML (the detection property writes the scenarios it generates).
std::string scenario_to_yaml(const Scenario& s);

}  // namespace collcheck
