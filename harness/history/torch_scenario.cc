#include "harness/history/torch_scenario.h"

#include "harness/history/torch_scenario_p2p.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

namespace collcheck {

namespace {

struct Mapped {
  Collective coll = Collective::AllReduce;
  bool exact = true;  // false: written as an all_reduce of the same size (collcheck has no such collective)
};

// The collective without its backend: "all_reduce" for nccl:allreduce and
// gloo:all_reduce alike; a name the reader does not know stays as it is.
std::string op_of(const TorchEntry& e) {
  const std::string c = torch_collective(e.op);
  return c.empty() ? e.op : c;
}

Mapped map_collective(const std::string& op) {
  // torch_collective()'s names; reduce, gather and scatter have no collcheck collective.
  static const std::map<std::string, Collective> table = {
      {"all_reduce", Collective::AllReduce},         {"broadcast", Collective::Broadcast},
      {"all_gather", Collective::AllGather},         {"reduce_scatter", Collective::ReduceScatter},
      {"all_to_all", Collective::AllToAll},          {"barrier", Collective::Barrier},
      {"comm_free", Collective::Barrier},  // MPI_Comm_free is collective: a barrier of its group (noted)
  };
  const auto it = table.find(op);
  if (it != table.end()) return {it->second, true};
  return {Collective::AllReduce, false};
}

// PyTorch's dtype names (c10::ScalarType) to collcheck's; a dtype collcheck
// does not have is written as bytes (uint8, its size times the count).
struct MappedType {
  DType type = DType::Uint8;
  size_t bytes = 1;  // the element size in the dump
  bool exact = true;
};
MappedType map_dtype(const std::string& t) {
  static const std::map<std::string, std::pair<DType, size_t>> table = {
      {"Float", {DType::Float32, 4}},       {"Double", {DType::Float64, 8}},   {"Half", {DType::Float16, 2}},
      {"BFloat16", {DType::BFloat16, 2}},   {"Long", {DType::Int64, 8}},       {"Int", {DType::Int32, 4}},
      {"Char", {DType::Int8, 1}},           {"Byte", {DType::Uint8, 1}},       {"Bool", {DType::Uint8, 1}},
      {"UInt32", {DType::Uint32, 4}},       {"UInt64", {DType::Uint64, 8}},    {"Float8_e4m3fn", {DType::Fp8E4M3, 1}},
      {"Float8_e5m2", {DType::Fp8E5M2, 1}},
  };
  static const std::map<std::string, size_t> bytes_only = {{"Short", 2}, {"UInt16", 2}, {"ComplexFloat", 8},
                                                           {"ComplexDouble", 16}, {"ComplexHalf", 4}};
  if (const auto it = table.find(t); it != table.end()) return {it->second.first, it->second.second, true};
  if (const auto it = bytes_only.find(t); it != bytes_only.end()) return {DType::Uint8, it->second, false};
  return {DType::Uint8, 0, false};
}

// collcheck's MPI interposer's records say more than PyTorch's: the op, the
// root, and whether the call blocked (then it is a sync call, as it ran) or
// was non-blocking (waited at the end, or never when no wait completed it
// before the rank reached MPI_Finalize or exit: `finished`).
void mpi_call_details(const TorchEntry& e, const std::vector<int>& members, bool finished, CallStep& c) {
  if (!e.op.starts_with("mpi:")) return;
  if (const auto op = parse_op(torch_call_attribute(e.op, "op"))) c.op = *op;
  const std::string root = torch_call_attribute(e.op, "root");
  size_t r = 0;
  // A root that is not a member's index (a hand-edited dump) keeps the group's first rank.
  if (c.coll == Collective::Broadcast && !root.empty() &&
      std::from_chars(root.data(), root.data() + root.size(), r).ec == std::errc() && r < members.size())
    c.peer = members[r];
  if (!torch_call_attributes(e.op).starts_with("nonblocking")) {
    c.async = false;
    c.wait = WaitAt::Call;
  } else if (!torch_entry_ended(e) && finished) {
    c.wait = WaitAt::Never;
  }
}

uint64_t numel(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (const int64_t d : dims) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

// [A-Za-z0-9_-]{1,32}, as scenario group names must be.
std::string group_name(const std::string& pg) {
  std::string n = "pg";
  if (pg.starts_with("pg_id ")) {  // "pg_id 2 of 2, 3" -> "pgid2_of_2_3"
    n = "pgid";
    for (const char c : pg.substr(6))
      if (std::isalnum(static_cast<unsigned char>(c))) n += c;
      else if (n.back() != '_') n += '_';
    return n.substr(0, 32);
  }
  for (const char c : pg) n += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return n.substr(0, 32);
}

// Dumps that collcheck's MPI interposer wrote (each says why it was written).
bool dumps_of_mpi(const std::vector<TorchDump>& dumps) {
  return std::any_of(dumps.begin(), dumps.end(), [](const TorchDump& d) { return !d.collcheck_reason.empty(); });
}

}  // namespace

TorchScenario torch_scenario(const std::vector<TorchDump>& dumps, const std::string& source,
                             const TorchScenarioOptions& o) {
  if (dumps.empty()) throw TorchTraceError("no dumps to write as a scenario");
  const TorchJob job = torch_job(dumps, o.world_size);
  TorchScenario out;
  Scenario& s = out.scenario;
  const int world = job.world;
  // The groups that hold calls (DETAIL's fingerprint checks left out), each
  // from the first sequence number every member with a dump still holds.
  std::map<std::string, const TorchGroupModel*> groups;
  size_t p2p = 0, checks = 0;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) p2p += e.p2p && d.collcheck_reason.empty();  // MPI's: torch_scenario_p2p.h
  for (const auto& g : job.groups) {
    if (g.helper) {
      for (const auto& [r, mine] : g.ranks) checks += mine.calls.size();
      continue;
    }
    int64_t start = 0;
    bool any = false;
    for (const auto& [r, mine] : g.ranks)
      if (!mine.calls.empty()) start = std::max(start, mine.calls.begin()->first), any = true;
    if (!any) continue;
    groups[g.key] = &g;
    out.first_seq[g.key] = start;
    const std::string name = group_name(g.key);
    out.group_of_pg[g.key] = name;
    GroupSpec spec;
    spec.name = name;
    spec.ranks = g.members;
    if (const auto x = o.extra_members.find(g.key); x != o.extra_members.end() &&
        !std::all_of(x->second.begin(), x->second.end(),
                     [&](int r) { return std::binary_search(g.members.begin(), g.members.end(), r); })) {
      spec.ranks.insert(spec.ranks.end(), x->second.begin(), x->second.end());
      std::sort(spec.ranks.begin(), spec.ranks.end());
      spec.ranks.erase(std::unique(spec.ranks.begin(), spec.ranks.end()), spec.ranks.end());
      out.notes.push_back(fmt::format("{} ({}): ranks {} added as members, as the analysis has them",
                                      name, torch_group_text(g), fmt::join(x->second, ", ")));
    }
    s.groups.push_back(spec);
    if (g.members_from != "pg_config" && g.members_from != "the world")
      out.notes.push_back(fmt::format("{} ({}): members from {}: ranks {}", name, torch_group_text(g), g.members_from,
                                      fmt::join(g.members, ", ")));
  }
  MpiP2pWriter p2p_writer(dumps);
  for (const auto& [k, members] : p2p_writer.groups()) {
    if (out.group_of_pg.count(k)) continue;
    out.group_of_pg[k] = group_name(k);
    GroupSpec spec;
    spec.name = group_name(k);
    spec.ranks = members;
    std::sort(spec.ranks.begin(), spec.ranks.end());
    s.groups.push_back(spec);
  }
  out.notes.insert(out.notes.end(), p2p_writer.notes.begin(), p2p_writer.notes.end());
  // MPI's progress rule (a request moves only while its rank is in MPI, and
  // pending point-to-point requests never wait on each other) and matching
  // rule (a blocking collective never matches a non-blocking one).
  if (dumps_of_mpi(dumps))
    for (auto& g : s.groups) g.caller_progress = g.mpi_matching = true;
  if (checks)
    out.notes.push_back(fmt::format("{} calls of TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint check left out (collcheck's "
                                    "guarded mode is the same check)",
                                    checks));
  if (p2p)
    out.notes.push_back(fmt::format(
        "{} point-to-point entries left out: a rank's buffer does not say which send the other side's oldest receive "
        "pairs with",
        p2p));
  for (const int r : job.empty)
    out.notes.push_back(fmt::format("rank {}'s buffer is empty: its program makes no call", r));
  for (const int r : job.no_dump)
    out.notes.push_back(fmt::format("rank {} left no dump: it makes the calls the other ranks of its groups show it "
                                    "made, then exits (a crash or an exit there)",
                                    r));
  // The programs: each rank's collectives from its groups' starts, in its issue order.
  std::set<std::string> approximated, bytes_typed;
  size_t frees = 0;
  bool uneven = false, uneven_counts = false;
  struct Placed {
    int rank;
    size_t index;
    std::string pg;
    int64_t seq;
  };
  std::vector<Placed> placed;
  // The dtype, count and shape of an entry's call (c.coll set; gp: the group's size).
  auto fill_size = [&](const TorchEntry& e, const std::string& file, uint64_t gp, CallStep& c) {
    const std::string dtype = e.input_dtypes.empty() ? "Float" : e.input_dtypes.front();
    const MappedType t = map_dtype(dtype);
    if (t.bytes == 0)
      throw TorchTraceError(fmt::format("{}: entry {} ({}): dtype '{}' has no size collcheck knows", file,
                                        e.record_id, torch_entry_text(e), dtype));
    if (!t.exact) bytes_typed.insert(dtype);
    c.dtype = t.type;
    const std::vector<int64_t> in = e.input_sizes.empty() ? std::vector<int64_t>{} : e.input_sizes.front();
    uint64_t count = numel(in) * (t.exact ? 1 : t.bytes);
    std::vector<size_t> shape(in.begin(), in.end());
    if (c.coll == Collective::ReduceScatter) {
      // collcheck's count is each rank's share; the input holds p of them.
      shape.clear();
      if (!e.output_sizes.empty() && t.exact) {
        shape.assign(e.output_sizes.front().begin(), e.output_sizes.front().end());
        count = numel(e.output_sizes.front());
      } else {
        count /= gp;
      }
    } else if (c.coll == Collective::Barrier) {
      shape.clear();
      count = 0;
    }
    if (!t.exact) shape.clear();
    c.shape = shape;
    c.count = count;
  };
  auto place = [&](int rank, Program& prog, const TorchEntry& e, const std::string& k, const std::string& file,
                   bool finished) {
    const TorchGroupModel& g = *groups.at(k);
    const std::string op = op_of(e);
    const Mapped m = map_collective(op);
    if (!m.exact) approximated.insert(op);
    frees += op == "comm_free";
    Step step;
    step.kind = Step::Call;
    CallStep& c = step.call;
    c.coll = m.coll;
    c.group = out.group_of_pg.at(k);
    c.tag = fmt::format("{}#{}", op, e.collective_seq);
    fill_size(e, file, static_cast<uint64_t>(g.members.size()), c);
    if (c.coll == Collective::Broadcast) c.peer = g.members.front();  // PyTorch's dumps do not record the root
    c.async = true;
    c.wait = WaitAt::End;
    mpi_call_details(e, g.members, finished, c);
    placed.push_back({rank, prog.size(), k, e.collective_seq});
    prog.push_back(std::move(step));
  };
  for (const auto& d : dumps) {
    Program& prog = s.overrides[d.rank];
    const bool finished = d.collcheck_reason == "finalize" || d.collcheck_reason.starts_with("exit");
    p2p_writer.start_rank(d.rank);
    for (const auto& e : d.entries) {
      const std::string k = torch_group_key(d, e);
      if (e.p2p && p2p_writer.writes(k)) {
        p2p_writer.waits_before(e.created_ns, prog);
        const size_t i = p2p_writer.place(d, e, out.group_of_pg.at(k), finished, prog,
                                          [&](CallStep& c) { fill_size(e, d.file, 1, c); });
        placed.push_back({d.rank, i, k, -e.p2p_seq});
        continue;
      }
      if (e.p2p || !groups.count(k) || e.collective_seq < out.first_seq.at(k)) continue;
      p2p_writer.waits_before(e.created_ns, prog);
      place(d.rank, prog, e, k, d.file, finished);
    }
    p2p_writer.end_rank(prog);
  }
  // A rank without a dump: the calls of its groups that the others show it
  // made (before the one the analysis says it never joined, else as far as
  // most of them got), in the order the others made them, then an exit.
  std::set<int> stopped;
  for (const auto& [rk, seq] : o.stopped_before) stopped.insert(rk.first);
  for (const int r : job.no_dump) {
    Program& prog = s.overrides[r];
    std::vector<std::pair<int64_t, std::pair<const TorchEntry*, std::string>>> known;  // created, entry, group
    for (const auto& [k, g] : groups) {
      const auto extra = o.extra_members.find(k);
      if (!std::binary_search(g->members.begin(), g->members.end(), r) &&
          (extra == o.extra_members.end() || std::find(extra->second.begin(), extra->second.end(), r) == extra->second.end()))
        continue;
      // A rank the analysis does not name went where most ranks with a dump
      // got to (ties: the further), the call they are stuck in included, so
      // that the replay names whom the analysis named. One it names as
      // stopped (in this group or another) made the calls all of them ended.
      int64_t end = INT64_MAX;
      if (stopped.count(r)) {
        for (const auto& [q, mine] : g->ranks) end = std::min(end, mine.ended);
      } else {
        std::map<int64_t, int> reached;
        for (const auto& [q, mine] : g->ranks) ++reached[mine.enqueued];
        int most = 0;
        for (const auto& [seq, n] : reached)
          if (n >= most) most = n, end = seq;
      }
      if (const auto it = o.stopped_before.find({r, k}); it != o.stopped_before.end()) end = it->second - 1;
      for (int64_t seq = out.first_seq.at(k); seq <= end && end != INT64_MAX; ++seq)
        for (const auto& [q, mine] : g->ranks)
          if (const auto c = mine.calls.find(seq); c != mine.calls.end()) {
            known.push_back({c->second->created_ns, {c->second, k}});
            break;
          }
    }
    std::stable_sort(known.begin(), known.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [t, ek] : known) {
      place(r, prog, *ek.first, ek.second, "rank " + std::to_string(r), false);
      prog.back().call.async = false;  // what it is known to have finished, it finished
      prog.back().call.wait = WaitAt::Call;
    }
    Step exit;
    exit.kind = Step::Exit;
    prog.push_back(std::move(exit));
  }
  auto call_at = [&](const Placed& p) -> CallStep& { return s.overrides.at(p.rank)[p.index].call; };
  // all_to_all with uneven splits (the ranks' inputs differ): collcheck's
  // all_to_all moves count / p to every rank, so every rank of the call sends
  // the largest input, rounded up to a multiple of p.
  std::map<std::pair<std::string, int64_t>, uint64_t> a2a;
  for (const auto& p : placed)
    if (call_at(p).coll == Collective::AllToAll) {
      auto& c = a2a[{p.pg, p.seq}];
      c = std::max(c, call_at(p).count);
    }
  for (const auto& p : placed) {
    CallStep& c = call_at(p);
    if (c.coll != Collective::AllToAll) continue;
    const auto gp = static_cast<uint64_t>(groups.at(p.pg)->members.size());
    uint64_t want = a2a.at({p.pg, p.seq});
    if (want % gp) want += gp - want % gp;
    if (want != c.count) {
      uneven = true;
      c.count = want;
      c.shape.clear();
    }
  }
  // Collectives whose counts may differ between ranks legitimately (the
  // v- and w-variants, gather, scatter, scan, the neighbourhood calls: the
  // analysis does not compare their counts) are written as an all_reduce, whose
  // counts must agree: every rank of such a call moves the largest count.
  static const std::set<std::string> same_count = {"all_reduce", "broadcast", "reduce", "all_gather",
                                                   "reduce_scatter", "all_to_all", "barrier", "comm_free"};
  auto op_of_tag = [](const CallStep& c) { return c.tag.substr(0, c.tag.rfind('#')); };
  std::map<std::pair<std::string, int64_t>, uint64_t> widest;
  for (const auto& p : placed)
    if (!is_p2p(call_at(p).coll) && !same_count.count(op_of_tag(call_at(p)))) {
      auto& w = widest[{p.pg, p.seq}];
      w = std::max(w, call_at(p).count);
    }
  for (const auto& p : placed) {
    CallStep& c = call_at(p);
    if (is_p2p(c.coll) || same_count.count(op_of_tag(c))) continue;
    if (const uint64_t w = widest.at({p.pg, p.seq}); w != c.count) {
      uneven_counts = true;
      c.count = w;
      c.shape.clear();
    }
  }
  // Scaled so that the largest call moves at most max_count elements: one
  // factor for every call, and distinct counts stay distinct (a size mismatch
  // in the dumps is one in the replay).
  uint64_t largest = 0;
  for (const auto& p : placed) largest = std::max(largest, call_at(p).count);
  const uint64_t factor = o.max_count && largest > o.max_count ? (largest + o.max_count - 1) / o.max_count : 1;
  out.scale = factor;
  if (factor > 1) {
    std::set<uint64_t> originals;
    for (const auto& p : placed) originals.insert(call_at(p).count);
    std::map<uint64_t, uint64_t> scaled;
    uint64_t last = 0;
    bool first = true;
    for (const uint64_t c : originals) {  // ascending
      uint64_t v = c == 0 ? 0 : std::max<uint64_t>(1, (c + factor - 1) / factor);
      if (!first && v <= last) v = last + 1;
      scaled[c] = v;
      last = v;
      first = false;
    }
    for (const auto& p : placed) {
      CallStep& c = call_at(p);
      uint64_t v = scaled.at(c.count);
      if (c.coll == Collective::AllToAll) {  // still a multiple of p, the same on every rank of the call
        const auto gp = static_cast<uint64_t>(groups.at(p.pg)->members.size());
        v = (v + gp - 1) / gp * gp;
      }
      c.count = v;
      c.shape.clear();
    }
  }
  for (int r = 0; r < world; ++r) s.overrides.emplace(r, Program{});  // every rank's program, empty when it has no dump
  if (!approximated.empty())
    out.notes.push_back(fmt::format("collectives collcheck does not have, written as an all_reduce of the same size: {}",
                                    fmt::join(approximated, ", ")));
  if (frees)
    out.notes.push_back(fmt::format("{} MPI_Comm_free calls written as a barrier of their group (MPI says a free is "
                                    "collective; an MPI that synchronizes in it waits as the barrier does)",
                                    frees));
  if (uneven_counts)
    out.notes.push_back("collectives whose counts may differ between ranks (v- and w-variants, gather, scatter, scan, "
                        "neighbourhood calls), written as an all_reduce: every rank of such a call moves the largest "
                        "count");
  if (uneven)
    out.notes.push_back("all_to_all with uneven splits (the ranks' inputs differ): every rank sends the largest, "
                        "rounded up to a multiple of the group's size");
  if (factor > 1)
    out.notes.push_back(fmt::format("counts are the dumps' divided by {} (rounded up; distinct counts stay distinct), "
                                    "so that the largest call moves at most {} elements; --emit-max-count 0 keeps them",
                                    factor, o.max_count));
  if (!bytes_typed.empty())
    out.notes.push_back(fmt::format("dtypes collcheck does not have, written as bytes (uint8): {}", fmt::join(bytes_typed, ", ")));
  const bool mpi = dumps_of_mpi(dumps);
  if (mpi)
    out.notes.push_back("point-to-point calls are paired in order per sender and receiver (MPI's tags are not "
                        "recorded); MPI's reduce, gather, scatter, scan, v-variants and neighbourhood collectives are "
                        "written as all_reduce of the same size");
  else
    out.notes.push_back("reduction ops are not in the dumps: sum is used; broadcasts' roots neither: the group's first rank");

  s.ranks = world;
  s.name = "flight-recorder";
  std::string groups_text;
  for (const auto& [pg, name] : out.group_of_pg)
    if (groups.count(pg))
      groups_text += fmt::format("{}{} = {} from #{}", groups_text.empty() ? "" : "; ", name,
                                 torch_group_text(*groups.at(pg)), out.first_seq.at(pg));
    else
      groups_text += fmt::format("{}{} = process group {} (point-to-point calls only)",
                                 groups_text.empty() ? "" : "; ", name, pg);
  s.description = fmt::format(
      "Written by collcheck analyze --emit-scenario from the {} in {} (format {}): each rank's collectives as its "
      "dump recorded them, {}. Tags are <collective>#<the dump's sequence number>. Groups: {}.",
      mpi ? "dumps of collcheck's MPI interposer" : "PyTorch Flight Recorder dumps", source, dumps.front().version,
      mpi ? "blocking calls as sync calls, non-blocking ones waited at the end (never, when no wait completed them)"
          : "async and waited at the end",
      groups_text);
  s.deadline_s = 5.0;
  return out;
}

std::optional<uint64_t> scenario_seq(const TorchScenario& t, const std::string& pg, int64_t seq) {
  const auto it = t.first_seq.find(pg);
  if (it == t.first_seq.end() || seq < it->second) return std::nullopt;
  return static_cast<uint64_t>(seq - it->second + 1);
}

}  // namespace collcheck
