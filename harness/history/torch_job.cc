#include "harness/history/torch_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>


namespace collcheck {

namespace {

// pg_config[''] on a rank: the ranks of the last group it made (torch 2.14's
// Gloo dumps), when that list holds the rank itself.
std::optional<std::vector<int>> last_made(const TorchDump& d) {
  const auto it = d.groups.find("");
  if (it == d.groups.end() || std::find(it->second.ranks.begin(), it->second.ranks.end(), d.rank) == it->second.ranks.end())
    return std::nullopt;
  return it->second.ranks;
}

// A group of DETAIL's fingerprint checks: unnamed, and every call it recorded
// on any rank an all_gather of int64 (the wrapper gathers each call's
// fingerprint, serialized as a Long tensor, before it issues the call).
bool detail_helper(const std::string& key, const std::vector<const TorchEntry*>& calls) {
  if (!key.starts_with("pg_id") || calls.empty()) return false;
  for (const TorchEntry* e : calls)
    if (torch_collective(e->op) != "all_gather" || e->input_dtypes != std::vector<std::string>{"Long"}) return false;
  return true;
}

// p from an all_gather whose output is the input with a leading dim of p
// (Gloo's list all_gather: [[256]] -> [[4, 256]]).
std::optional<int> gathered_ranks(const TorchEntry& e) {
  if (torch_collective(e.op) != "all_gather" || e.input_sizes.size() != 1 || e.output_sizes.size() != 1) return {};
  const auto& in = e.input_sizes.front();
  const auto& out = e.output_sizes.front();
  if (out.size() != in.size() + 1 || !std::equal(in.begin(), in.end(), out.begin() + 1)) return {};
  if (out.front() < 1 || out.front() > 1'000'000) return {};
  return static_cast<int>(out.front());
}

}  // namespace

std::string torch_group_key(const TorchDump& d, const TorchEntry& e) {
  if (!e.pg_name.empty()) return e.pg_name;
  if (e.pg_id < 0) return "pg_id ?";
  if (e.pg_id == 0) return "pg_id 0";  // the default group, made first everywhere
  const auto made = last_made(d);
  return made ? fmt::format("pg_id {} of {}", e.pg_id, fmt::join(*made, ", ")) : fmt::format("pg_id {}", e.pg_id);
}

bool torch_entry_ended(const TorchEntry& e) {
  return e.state == "completed" || e.completed_ns.has_value() || e.retired.value_or(false);
}

std::string torch_group_text(const TorchGroupModel& g) {
  const std::string name = g.key.starts_with("pg_id") ? g.key : "process group " + g.key;
  return g.desc.empty() || g.desc == "undefined" ? name : fmt::format("{} ({})", name, g.desc);
}

const TorchGroupModel* TorchJob::group(const std::string& key) const {
  for (const auto& g : groups)
    if (g.key == key) return &g;
  return nullptr;
}

TorchJob torch_job(const std::vector<TorchDump>& dumps, std::optional<int> world_size) {
  if (dumps.empty()) throw TorchTraceError("no Flight Recorder dumps");
  TorchJob job;
  job.version = dumps.front().version;
  for (const auto& d : dumps) {
    job.dumps[d.rank] = &d;
    if (d.version != job.version)
      throw TorchTraceError(fmt::format("these dumps are not one job's: {} is format {}, {} is format {}",
                                        dumps.front().file, job.version, d.file, d.version));
    if (!d.nccl_version.empty()) job.comm_lib = d.nccl_version;
    if (d.entries.empty()) job.empty.push_back(d.rank);
    for (const auto& e : d.entries) job.gloo = job.gloo || e.op.starts_with("gloo:");
  }
  // One job: the ranks that recorded one call of one group entered it within
  // its timeout of each other (a rank that waits longer fails). Dumps of two
  // runs put the same call minutes or days apart.
  {
    std::map<std::pair<std::string, int64_t>, std::pair<const TorchDump*, const TorchEntry*>> first;
    for (const auto& d : dumps)
      for (const auto& e : d.entries) {
        if (e.p2p || e.created_ns <= 0) continue;
        const auto [it, fresh] = first.emplace(std::make_pair(torch_group_key(d, e), e.collective_seq), std::make_pair(&d, &e));
        if (fresh || it->second.first == &d) continue;
        const int64_t apart = std::abs(e.created_ns - it->second.second->created_ns);
        const int64_t limit = 2 * std::max(e.timeout_ms, it->second.second->timeout_ms) * 1'000'000 + int64_t{60'000'000'000};
        if (apart > limit)
          throw TorchTraceError(fmt::format(
              "these dumps are not one job's: {} and {} entered call #{} of group {} {:.0f} s apart, more than twice "
              "its timeout ({} ms) plus a minute; analyze each job's dumps on their own",
              it->second.first->file, d.file, e.collective_seq, torch_group_key(d, e), static_cast<double>(apart) / 1e9,
              std::max(e.timeout_ms, it->second.second->timeout_ms)));
      }
  }
  // Every entry by group; the pg_id of each group as the entries name it.
  std::map<std::string, std::vector<const TorchEntry*>> calls;
  std::map<std::string, std::string> desc;
  std::map<int, std::map<int64_t, std::string>> own;  // per rank: its own entries' pg_ids
  std::set<std::string> unknown_ops;
  bool named = false;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      if (torch_collective(e.op).empty()) unknown_ops.insert(e.op.substr(0, 60));
      const std::string k = torch_group_key(d, e);
      named = named || !e.pg_name.empty();
      if (e.p2p) continue;
      calls[k].push_back(&e);
      if (!e.pg_desc.empty()) desc[k] = e.pg_desc;
      if (e.pg_id >= 0) {
        own[d.rank][e.pg_id] = k;
      }
    }
  for (const auto& op : unknown_ops)
    job.notes.push_back(fmt::format("profiling name '{}' is not a collective this reader knows: its calls are "
                                    "compared by that name only",
                                    op));
  // pg_config, where it is sound: a key that names a group (torch 2.14's Gloo
  // dumps have one key, '', whose ranks each new group overwrites).
  std::map<std::string, TorchGroup> config;
  bool broken_config = false;
  for (const auto& d : dumps)
    for (const auto& [name, g] : d.groups) {
      if (name.empty()) {
        broken_config = true;
        continue;
      }
      auto [it, fresh] = config.emplace(name, g);
      if (!fresh && (it->second.ranks != g.ranks || it->second.desc != g.desc))
        throw TorchTraceError(fmt::format(
            "these dumps are not one job's: {} says process group {} is '{}' with ranks [{}], another dump says '{}' "
            "with ranks [{}]",
            d.file, name, g.desc, fmt::join(g.ranks, ", "), it->second.desc, fmt::join(it->second.ranks, ", ")));
      if (!fresh) continue;
      if (!desc.count(name)) desc[name] = g.desc;
    }
  if (broken_config)
    job.notes.push_back("pg_config has one group named '' (torch 2.14's Gloo dumps overwrite its ranks with each new "
                        "group): each group's members come from the ranks whose entries or pg_status name it");
  job.detail = !calls.empty() && !named;
  if (job.detail)
    job.notes.push_back("the entries leave every group's name empty (TORCH_DISTRIBUTED_DEBUG=DETAIL), and pg_ids are "
                        "numbered in each process: groups are told apart by pg_id and by the ranks pg_config[''] lists "
                        "on each rank");
  // Every rank's status keys, as group keys.
  auto status_key = [&](int rank, int64_t id) -> std::optional<std::string> {
    if (const auto o = own[rank].find(id); o != own[rank].end()) return o->second;
    // pg_ids are numbered in each process (a rank makes only the groups it
    // is in, in NCCL and in DETAIL's wrapper alike): another rank's pg_id
    // says nothing here.
    return std::nullopt;
  };
  std::set<std::string> keys;
  for (const auto& [k, _] : calls) keys.insert(k);
  for (const auto& [k, _] : config) keys.insert(k);
  std::map<int, std::vector<int64_t>> unnamed;  // rank -> pg_ids its pg_status names and its entries do not
  for (const auto& d : dumps)
    for (const auto& [id, st] : d.status) {
      if (st.enqueued <= 0) continue;
      if (const auto k = status_key(d.rank, id)) keys.insert(*k);
      else unnamed[d.rank].push_back(id);
    }
  if (!unnamed.empty()) {
    std::string list;
    for (const auto& [r, ids] : unnamed) list += fmt::format("{}rank {}: {}", list.empty() ? "" : "; ", r, fmt::join(ids, ", "));
    job.notes.push_back(fmt::format("pg_status names groups by pg_id whose calls are in none of that rank's entries, "
                                    "so which group each is cannot be told (pg_ids are numbered in each process); "
                                    "they are not judged: {}",
                                    list.size() > 300 ? list.substr(0, 300) + " ..." : list));
  }
  // The world.
  int highest = -1;
  for (const auto& d : dumps) highest = std::max(highest, d.rank);
  for (const auto& [_, g] : config)
    for (const int r : g.ranks) highest = std::max(highest, r);
  for (const auto& d : dumps)
    for (const auto& [_, g] : d.groups)
      for (const int r : g.ranks) highest = std::max(highest, r);
  if (world_size) {
    if (*world_size <= highest)
      throw TorchTraceError(fmt::format("--world-size {} is too small: these dumps name rank {}", *world_size, highest));
    job.world = *world_size, job.world_known = true, job.world_from = "--world-size";
  } else {
    for (const auto& [name, g] : config)
      if (g.desc == "default_pg" || name == "0")
        job.world = static_cast<int>(g.ranks.size()), job.world_known = true, job.world_from = "pg_config";
    // The default group's size, from an all_gather's output: the largest such
    // p that is not below a rank the dumps name.
    if (!job.world_known)
      for (const auto& [k, cs] : calls)
        if (desc[k] == "default_pg")
          for (const TorchEntry* e : cs)
            if (const auto p = gathered_ranks(*e); p && *p > highest && *p > job.world) {
              job.world = *p, job.world_known = true;
              job.world_from = fmt::format("the default group's all_gather (its output is {} times its input)", *p);
            }
    if (!job.world_known) {
      job.world = highest + 1;
      job.world_from = "the highest rank these dumps name";
    }
  }
  for (int r = 0; r < job.world; ++r)
    if (!job.dumps.count(r)) job.no_dump.push_back(r);

  // The groups, their members and every member's progress.
  for (const auto& k : keys) {
    TorchGroupModel g;
    g.key = k;
    g.desc = desc.count(k) ? desc[k] : "";
    for (const TorchEntry* e : calls[k])
      if (e->pg_id >= 0) g.pg_ids.insert(e->pg_id);
    g.helper = detail_helper(k, calls[k]);
    std::set<int> members;
    if (const auto c = config.find(k); c != config.end()) {
      members.insert(c->second.ranks.begin(), c->second.ranks.end());
      g.members_from = "pg_config";
    } else if (g.is_default() || (job.detail && k == "pg_id 0")) {
      for (int r = 0; r < job.world; ++r) members.insert(r);
      g.members_from = "the world";
      g.members_complete = job.world_known;
    } else {
      g.members_from = "the ranks whose entries or pg_status name it";
      g.members_complete = job.no_dump.empty() && job.world_known;
    }
    for (const auto& d : dumps) {
      TorchRankInGroup mine;
      bool named_here = false;
      for (const auto& e : d.entries) {
        if (e.p2p || torch_group_key(d, e) != k) continue;
        named_here = true;
        mine.calls[e.collective_seq] = &e;
        mine.enqueued = std::max(mine.enqueued, e.collective_seq);
        if (torch_entry_ended(e)) mine.ended = std::max(mine.ended, e.collective_seq);
      }
      for (const auto& [id, st] : d.status) {
        if (status_key(d.rank, id) != k) continue;
        if (st.enqueued > 0) named_here = true;
        if (st.enqueued > mine.enqueued) mine.enqueued = st.enqueued, mine.from_status = true;
        mine.ended = std::max(mine.ended, st.completed);
      }
      if (named_here) members.insert(d.rank);
      if (members.count(d.rank)) g.ranks[d.rank] = mine;
    }
    g.members.assign(members.begin(), members.end());
    // One job at one moment: a collective ends only when every member has
    // joined it, so no rank can have ended two calls that another member
    // never issued (one can fail on a timeout, and a rank that goes on may
    // fail the next; more is another job, or dumps taken far apart).
    for (const auto& [r, mine] : g.ranks)
      for (const auto& [q, theirs] : g.ranks) {
        if (q == r || (theirs.enqueued == 0 && !job.dumps.at(q)->has_status)) continue;
        size_t ended_beyond = 0;
        for (const auto& [seq, e] : mine.calls) ended_beyond += seq > theirs.enqueued && torch_entry_ended(*e);
        if (ended_beyond >= 3)
          throw TorchTraceError(fmt::format(
              "these dumps are not one job's at one moment: {} ended {} calls of group {} (up to #{}) that {} never "
              "issued (it shows #{} as its last); analyze each job's dumps on their own",
              job.dumps.at(r)->file, ended_beyond, k, mine.ended, job.dumps.at(q)->file, theirs.enqueued));
      }
    if (g.members_from.starts_with("the ranks")) {
      // Any rank without a dump may be a member, and so may a rank with one
      // that never recorded a call of the group.
      for (int r = 0; r < job.world; ++r) g.maybe_members.push_back(r);
    } else {
      g.maybe_members = g.members;
    }
    job.groups.push_back(std::move(g));
  }
  return job;
}

}  // namespace collcheck
