// What a set of PyTorch Flight Recorder dumps says about the job, before any
// verdict: its process groups (with where their members came from), every
// rank's progress in each group (from the ring buffer and from pg_status),
// which ranks left no dump or an empty buffer, and what the format can and
// cannot tell (Gloo records a call that failed as retired, like one that
// completed; DETAIL's wrapper leaves the group names empty and adds its own
// fingerprint all_gathers). torch_analysis.h turns it into verdicts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/history/torch_trace.h"

namespace collcheck {

// One rank's record of one process group.
struct TorchRankInGroup {
  std::map<int64_t, const TorchEntry*> calls;  // the group's collectives in the buffer, by sequence number
  int64_t enqueued = 0;  // the last collective it issued (buffer or pg_status); 0: none
  int64_t ended = 0;     // the last one that ended (completed; in Gloo: retired, which an error also gives)
  bool from_status = false;  // enqueued is known from pg_status only (the buffer does not hold it)
};

struct TorchGroupModel {
  std::string key;   // the group's name, or "pg_id N" when the entries leave the name empty (DETAIL)
  std::string desc;  // "EXPERT_MODEL_PARALLEL_GROUP", "default_pg"
  std::set<int64_t> pg_ids;
  std::vector<int> members;   // global ranks, sorted
  std::string members_from;   // "pg_config", "the world", or "the ranks whose entries or pg_status name it"
  bool members_complete = true;  // false: some rank without a dump may be a member too
  // The ranks that may be members: `members` when they are known, else every
  // rank of the world.
  std::vector<int> maybe_members;
  bool helper = false;  // TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint all_gathers
  std::map<int, TorchRankInGroup> ranks;  // the members with a dump
  bool is_default() const { return desc == "default_pg" || key == "0"; }
};

struct TorchJob {
  int world = 0;             // ranks 0..world-1
  bool world_known = false;  // false: at least `world` ranks, maybe more
  std::string world_from;    // where the size came from
  bool gloo = false;         // an ended call may have failed (Gloo's records)
  bool detail = false;       // TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper was on
  std::string version, comm_lib;
  std::map<int, const TorchDump*> dumps;  // by rank
  std::vector<int> no_dump;                // ranks of the world without a dump
  std::vector<int> empty;                  // ranks whose buffer holds no entry
  std::vector<TorchGroupModel> groups;
  std::vector<std::string> notes;          // what the dumps cannot tell, said once each
  const TorchGroupModel* group(const std::string& key) const;
};

// `world_size`: the job's size when the user knows it (--world-size).
// Throws TorchTraceError when the dumps cannot be one job (different format
// versions, or a world size below a rank that has a dump).
TorchJob torch_job(const std::vector<TorchDump>& dumps, std::optional<int> world_size = std::nullopt);

// "process group 74 (EXPERT_MODEL_PARALLEL_GROUP)".
std::string torch_group_text(const TorchGroupModel& g);

// The group an entry belongs to: its name; in DETAIL dumps, which leave names
// empty and number pg_ids per process, "pg_id N", and for N > 0 also the
// ranks pg_config[''] lists on the dump's rank ("pg_id 2 of 2, 3").
std::string torch_group_key(const TorchDump& d, const TorchEntry& e);

// Whether an entry ended: completed, seen completed, or retired.
bool torch_entry_ended(const TorchEntry& e);

}  // namespace collcheck
