#include "harness/history/torch_scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace collcheck {

namespace {

struct Mapped {
  Collective coll = Collective::AllReduce;
  bool exact = true;  // false: written as an all_reduce of the same size (collcheck has no such collective)
};

std::string op_of(const TorchEntry& e) { return e.op.starts_with("nccl:") ? e.op.substr(5) : e.op; }

Mapped map_collective(const std::string& op) {
  static const std::map<std::string, Collective> table = {
      {"all_reduce", Collective::AllReduce},         {"allreduce", Collective::AllReduce},
      {"broadcast", Collective::Broadcast},          {"_all_gather_base", Collective::AllGather},
      {"all_gather", Collective::AllGather},         {"all_gather_into_tensor", Collective::AllGather},
      {"allgather", Collective::AllGather},          {"_reduce_scatter_base", Collective::ReduceScatter},
      {"reduce_scatter", Collective::ReduceScatter}, {"reduce_scatter_tensor", Collective::ReduceScatter},
      {"all_to_all", Collective::AllToAll},          {"alltoall", Collective::AllToAll},
      {"alltoall_base", Collective::AllToAll},       {"all_to_allv", Collective::AllToAll},
      {"barrier", Collective::Barrier},
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

uint64_t numel(const std::vector<int64_t>& dims) {
  uint64_t n = 1;
  for (const int64_t d : dims) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

// [A-Za-z0-9_-]{1,32}, as scenario group names must be.
std::string group_name(const std::string& pg) {
  std::string n = "pg";
  for (const char c : pg) n += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return n.substr(0, 32);
}

}  // namespace

TorchScenario torch_scenario(const std::vector<TorchDump>& dumps, const std::string& source,
                             const TorchScenarioOptions& o) {
  if (dumps.empty()) throw TorchTraceError("no dumps to write as a scenario");
  TorchScenario out;
  Scenario& s = out.scenario;
  // The groups: pg_config of every dump together (a rank lists the groups it is in).
  std::map<std::string, TorchGroup> groups;
  int world = 0;
  for (const auto& d : dumps) {
    world = std::max(world, d.rank + 1);
    for (const auto& [name, g] : d.groups) {
      auto [it, fresh] = groups.emplace(name, g);
      if (!fresh && it->second.ranks != g.ranks)
        throw TorchTraceError(fmt::format("{}: pg_config[{}].ranks [{}] differ from another dump's [{}]", d.file, name,
                                          fmt::join(g.ranks, ", "), fmt::join(it->second.ranks, ", ")));
      for (const int r : g.ranks) world = std::max(world, r + 1);
    }
  }
  // Per group, per rank: the collective sequence numbers its buffer holds.
  std::map<std::string, std::map<int, std::pair<int64_t, int64_t>>> held;  // pg -> rank -> (first, last)
  size_t p2p = 0;
  std::set<std::string> unknown_groups;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      if (e.p2p) {
        ++p2p;
        continue;
      }
      if (!groups.count(e.pg_name)) {
        unknown_groups.insert(e.pg_name);
        continue;
      }
      auto [it, fresh] = held[e.pg_name].emplace(d.rank, std::make_pair(e.collective_seq, e.collective_seq));
      if (!fresh) {
        it->second.first = std::min(it->second.first, e.collective_seq);
        it->second.second = std::max(it->second.second, e.collective_seq);
      }
    }
  for (const auto& g : unknown_groups)
    out.notes.push_back(fmt::format("process group {} is in entries but in no dump's pg_config: its calls are left out", g));
  if (p2p)
    out.notes.push_back(fmt::format(
        "{} point-to-point entries left out: a rank's buffer does not say which send the other side's oldest receive "
        "pairs with",
        p2p));
  // Each group starts at the first sequence number every member with a dump still holds.
  std::set<int> have;
  for (const auto& d : dumps) have.insert(d.rank);
  for (const auto& [pg, by_rank] : held) {
    const TorchGroup& g = groups.at(pg);
    int64_t start = 0;
    for (const auto& [r, fl] : by_rank) start = std::max(start, fl.first);
    out.first_seq[pg] = start;
    const std::string name = group_name(pg);
    out.group_of_pg[pg] = name;
    GroupSpec spec;
    spec.name = name;
    spec.ranks = g.ranks;
    std::sort(spec.ranks.begin(), spec.ranks.end());
    s.groups.push_back(spec);
    std::vector<int> silent;
    for (const int r : g.ranks)
      if (have.count(r) && !by_rank.count(r)) silent.push_back(r);
    if (!silent.empty())
      out.notes.push_back(fmt::format("{} ({}): ranks {} recorded no collective of it; they join none of its calls", name,
                                      g.desc, fmt::join(silent, ", ")));
  }
  std::vector<int> no_dump;
  for (int r = 0; r < world; ++r)
    if (!have.count(r)) no_dump.push_back(r);
  if (!no_dump.empty())
    out.notes.push_back(fmt::format("ranks {} have no dump: their programs are empty", fmt::join(no_dump, ", ")));

  // The programs: each rank's collectives from its groups' starts, in its issue order.
  std::set<std::string> approximated, bytes_typed;
  bool uneven = false;
  struct Placed {
    int rank;
    size_t index;
    std::string pg;
    int64_t seq;
  };
  std::vector<Placed> placed;
  for (const auto& d : dumps) {
    Program& prog = s.overrides[d.rank];
    for (const auto& e : d.entries) {
      if (e.p2p || !groups.count(e.pg_name) || e.collective_seq < out.first_seq.at(e.pg_name)) continue;
      const TorchGroup& g = groups.at(e.pg_name);
      const auto gp = static_cast<uint64_t>(g.ranks.size());
      const std::string op = op_of(e);
      const Mapped m = map_collective(op);
      if (!m.exact) approximated.insert(op);
      Step step;
      step.kind = Step::Call;
      CallStep& c = step.call;
      c.coll = m.coll;
      c.group = out.group_of_pg.at(e.pg_name);
      c.tag = fmt::format("{}#{}", op, e.collective_seq);
      const std::string dtype = e.input_dtypes.empty() ? "Float" : e.input_dtypes.front();
      const MappedType t = map_dtype(dtype);
      if (t.bytes == 0)
        throw TorchTraceError(fmt::format("{}: entry {} ({}): dtype '{}' has no size collcheck knows", d.file,
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
      if (c.coll == Collective::Broadcast) c.peer = g.ranks.front();  // the dump does not record the root
      c.async = true;
      c.wait = WaitAt::End;
      placed.push_back({d.rank, prog.size(), e.pg_name, e.collective_seq});
      prog.push_back(std::move(step));
    }
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
    const auto gp = static_cast<uint64_t>(groups.at(p.pg).ranks.size());
    uint64_t want = a2a.at({p.pg, p.seq});
    if (want % gp) want += gp - want % gp;
    if (want != c.count) {
      uneven = true;
      c.count = want;
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
        const auto gp = static_cast<uint64_t>(groups.at(p.pg).ranks.size());
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
  if (uneven)
    out.notes.push_back("all_to_all with uneven splits (the ranks' inputs differ): every rank sends the largest, "
                        "rounded up to a multiple of the group's size");
  if (factor > 1)
    out.notes.push_back(fmt::format("counts are the dumps' divided by {} (rounded up; distinct counts stay distinct), "
                                    "so that the largest call moves at most {} elements; --emit-max-count 0 keeps them",
                                    factor, o.max_count));
  if (!bytes_typed.empty())
    out.notes.push_back(fmt::format("dtypes collcheck does not have, written as bytes (uint8): {}", fmt::join(bytes_typed, ", ")));
  out.notes.push_back("reduction ops are not in the dumps: sum is used; broadcasts' roots neither: the group's first rank");

  s.ranks = world;
  s.name = "flight-recorder";
  std::string groups_text;
  for (const auto& [pg, name] : out.group_of_pg)
    groups_text += fmt::format("{}{} = process group {} ({}) from #{}", groups_text.empty() ? "" : "; ", name, pg,
                               groups.at(pg).desc, out.first_seq.at(pg));
  s.description = fmt::format(
      "Written by collcheck analyze --emit-scenario from the PyTorch Flight Recorder dumps in {} (format {}): each "
      "rank's collectives as its dump recorded them, async and waited at the end. Tags are <collective>#<the dump's "
      "sequence number>. Groups: {}.",
      source, dumps.front().version, groups_text);
  s.deadline_s = 5.0;
  return out;
}

std::optional<uint64_t> scenario_seq(const TorchScenario& t, const std::string& pg, int64_t seq) {
  const auto it = t.first_seq.find(pg);
  if (it == t.first_seq.end() || seq < it->second) return std::nullopt;
  return static_cast<uint64_t>(seq - it->second + 1);
}

}  // namespace collcheck
