#include "harness/model/scenario_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "harness/model/size.h"

namespace collcheck {

Scenario ScenarioParser::scenario(const YAML::Node& root) {
  Scenario s;
  s.file = file_;
  if (!root.IsMap()) fail(root, "scenario", "expected a mapping at the top level");
  only_keys(root, "scenario",
            {"name", "description", "world", "impl", "deadline", "mode", "groups", "program", "ranks", "faults",
             "expect"});
  s.name = root["name"] ? scalar<std::string>(root["name"], "name", "a string") : file_;
  if (root["description"]) s.description = scalar<std::string>(root["description"], "description", "a string");
  if (!root["world"]) fail(root, "world", "missing; e.g. world: {ranks: 4}");
  only_keys(root["world"], "world", {"ranks", "kind"});
  if (!root["world"]["ranks"]) fail(root["world"], "world.ranks", "missing");
  s.ranks = integer(root["world"]["ranks"], "world.ranks", 1, 4096);
  if (root["world"]["kind"]) {
    s.world = one_of(root["world"]["kind"], "world.kind", "world", {{"threads"}, {"mpi"}}) == 0 ? "threads" : "mpi";
  }
  if (root["impl"]) s.impl = scalar<std::string>(root["impl"], "impl", "an implementation name");
  if (root["deadline"]) s.deadline_s = number(root["deadline"], "deadline", 0.001, 86400);
  if (root["mode"]) s.guarded = one_of(root["mode"], "mode", "mode", {{"guarded"}, {"unguarded"}}) == 0;
  if (root["groups"]) {
    const YAML::Node g = root["groups"];
    if (!g.IsMap()) fail(g, "groups", "expected a mapping from a group's name to its ranks, such as {tp: [0, 1]}");
    std::set<std::string> seen;
    for (const auto& kv : g) {
      GroupSpec spec;
      spec.name = key(kv.first, "groups", seen);
      spec.line = kv.first.Mark().line + 1;
      const auto f = "groups." + spec.name;
      const bool name_ok = !spec.name.empty() && spec.name.size() <= 32 &&
                           std::all_of(spec.name.begin(), spec.name.end(), [](char ch) {
                             return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
                           });
      if (!name_ok) fail(kv.first, f, "a group's name is 1 to 32 letters, digits, '_' or '-'");
      if (spec.name == "world") fail(kv.first, f, "'world' is every rank already; calls without a group use it");
      // A list of ranks, or {ranks: [...], progress: stream | caller, matching: any | mpi}.
      // (A YAML::Node's operator= writes into the node it refers to: each
      // node here is bound once, at construction.)
      const bool as_map = kv.second.IsMap();
      if (as_map) only_keys(kv.second, f, {"ranks", "progress", "matching"});
      if (as_map && !kv.second["ranks"]) fail(kv.second, f + ".ranks", "missing: the group's world ranks");
      const YAML::Node ranks_node = as_map ? kv.second["ranks"] : kv.second;
      const std::string rf = as_map ? f + ".ranks" : f;
      if (as_map) {
        if (kv.second["progress"])
          spec.caller_progress = one_of(kv.second["progress"], f + ".progress", "progress rule",
                                        {{"stream", "the device's, NCCL"},
                                         {"caller", "only inside the rank's calls of the group, MPI"}}) == 1;
        if (kv.second["matching"])
          spec.mpi_matching = one_of(kv.second["matching"], f + ".matching", "matching rule",
                                     {{"any", "a sync and an async call match, NCCL"},
                                      {"mpi", "a blocking call never matches a non-blocking one"}}) == 1;
      }
      if (!ranks_node.IsSequence() || ranks_node.size() == 0)
        fail(ranks_node, rf, "expected a non-empty list of ranks, or {ranks: [...], progress: stream | caller, matching: any | mpi}");
      spec.ranks = int_list(ranks_node, rf, 0, s.ranks - 1);
      std::vector<int> sorted = spec.ranks;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
        fail(ranks_node, rf, "a rank is listed twice");
      spec.ranks = sorted;
      s.groups.push_back(std::move(spec));
    }
    if (s.groups.size() > 1000) fail(g, "groups", "more than 1000 groups");
  }
  if (!root["program"]) fail(root, "program", "missing: the list of calls every rank makes");
  s.defaults = program(root["program"], "program", s);
  // Rank-dependent choices: each rank an `if` lists gets its program; the
  // others share the default, their branches taken.
  if (has_conds(s.defaults)) {
    std::set<int> listed;
    for (const auto& set : cond_sets_) listed.insert(set.begin(), set.end());
    for (const int r : listed) {
      s.overrides[r] = chosen(s.defaults, r);
      steps_ += s.overrides[r].size();
      check_steps(root["program"], "program");
    }
    s.defaults = chosen(s.defaults, -1);
  }
  if (root["ranks"]) {
    const YAML::Node r = root["ranks"];
    if (!r.IsMap()) fail(r, "ranks", "expected a mapping from rank to {program: [...]}");
    std::set<int> said;
    for (const auto& kv : r) {
      const int rank = integer(kv.first, "ranks", 0, s.ranks - 1);
      const auto f = fmt::format("ranks.{}", rank);
      if (!said.insert(rank).second) fail(kv.first, "ranks", fmt::format("duplicate key '{}': say each rank once", rank));
      if (!kv.second.IsMap())
        fail(kv.second, f, "expected {program: [...]}, or edits of the default program: {skip: [calls], insert: "
                           "{after: <call>, steps: [...]}}");
      only_keys(kv.second, f, {"program", "skip", "insert"});
      if (!kv.second["program"] && !kv.second["skip"] && !kv.second["insert"])
        fail(kv.second, f, "expected program, skip or insert");
      if (kv.second["program"])
        s.overrides[rank] = program(kv.second["program"], f + ".program", s);
      else if (!s.overrides.count(rank))
        s.overrides[rank] = s.defaults;
      if (kv.second["skip"] || kv.second["insert"]) s.overrides[rank] = edited(kv.second, f, s.overrides[rank], s);
      s.overrides[rank] = chosen(s.overrides[rank], rank);
    }
  }
  // Exceptions: each `raise` leaves out the rest of its block, per rank.
  s.defaults = raised(std::move(s.defaults));
  for (auto& [rank, prog] : s.overrides) prog = raised(std::move(prog));
  // Each handle is waited once, after its call and before the handle is
  // used again; a call that is never waited says wait: never.
  for (int r = 0; r < s.ranks; ++r) {
    std::map<std::string, int> open;  // handle -> the line of its call
    for (const auto& st : s.program(r)) {
      if (st.kind == Step::Call && !st.call.handle.empty()) {
        if (auto it = open.find(st.call.handle); it != open.end())
          throw ScenarioError(fmt::format("{}:{}: {}.handle: rank {}'s handle '{}' (the call at line {}) is not "
                                          "waited yet; wait it first or name this one differently",
                                          file_, st.line, collective_name(st.call.coll), r, st.call.handle,
                                          it->second));
        open[st.call.handle] = st.line;
      } else if (st.kind == Step::Wait) {
        if (!open.erase(st.handle))
          throw ScenarioError(fmt::format("{}:{}: wait: rank {} has no pending async call with handle '{}' here; "
                                          "pending: {}",
                                          file_, st.line, r, st.handle, open_handles(open)));
      }
    }
    if (!open.empty())
      throw ScenarioError(fmt::format("{}:{}: handle: rank {} never waits handle '{}'; add a step wait: {} (or give "
                                      "the call wait: never to leave it unwaited)",
                                      file_, open.begin()->second, r, open.begin()->first, open.begin()->first));
  }
  // A rank cannot send to or receive from itself.
  for (int r = 0; r < s.ranks; ++r)
    for (const auto& st : s.program(r))
      if (st.kind == Step::Call && is_p2p(st.call.coll) && st.call.peer == r)
        throw ScenarioError(fmt::format("{}:{}: {}.peer: rank {} would {} itself; give rank {} its own program under "
                                        "ranks: {{{}: {{program: [...]}}}}",
                                        file_, st.line, collective_name(st.call.coll), r,
                                        st.call.coll == Collective::Send ? "send to" : "receive from", r, r));
  if (root["faults"]) {
    const YAML::Node fs = root["faults"];
    if (!fs.IsSequence()) fail(fs, "faults", "expected a list of faults");
    for (size_t i = 0; i < fs.size(); ++i) {
      const auto f = fmt::format("faults[{}]", i);
      const YAML::Node& fn = fs[i];
      if (!fn.IsMap() || fn.size() != 1) fail(fn, f, "expected one fault: <kind>: {...}");
      FaultSpec spec;
      std::set<std::string> kinds;
      spec.kind = key(fn.begin()->first, f, kinds);
      spec.line = fn.Mark().line + 1;
      const YAML::Node body = fn.begin()->second;
      if (!body.IsMap()) fail(body, f + "." + spec.kind, "expected a mapping of parameters");
      std::set<std::string> seen;
      for (const auto& kv : body) {
        const auto key = this->key(kv.first, f + "." + spec.kind, seen);
        const auto kf = fmt::format("{}.{}.{}", f, spec.kind, key);
        if (key == "ranks" || key == "rank") {
          spec.ranks = int_list(kv.second, kf, 0, s.ranks - 1);
        } else if (key == "calls" || key == "call") {
          spec.calls = int_list(kv.second, kf, 0, 1 << 20);
        } else if (kv.second.IsScalar()) {
          spec.fields[key] = kv.second.Scalar();
        } else {
          fail(kv.second, kf, "expected a single value");
        }
      }
      s.faults.push_back(std::move(spec));
    }
  }
  if (root["expect"]) {
    // One expectation (the run's first finding), or a list: the first is
    // the first finding, each other one some finding of the run.
    const YAML::Node e = root["expect"];
    if (e.IsSequence()) {
      if (e.size() == 0) fail(e, "expect", "expected a mapping such as {diagnosis: missing_rank}, or a non-empty list of them");
      for (size_t i = 0; i < e.size(); ++i) {
        ExpectSpec x = expectation(e[i], fmt::format("expect[{}]", i), s);
        if (i == 0) s.expect = x;
        else s.also_expect.push_back(x);
      }
      if (e.size() > 1)
        for (size_t i = 0; i < e.size(); ++i)
          if ((i == 0 ? s.expect->diagnosis : s.also_expect[i - 1].diagnosis) == "none")
            fail(e[i], fmt::format("expect[{}].diagnosis", i), "'none' cannot be listed with other findings");
    } else {
      s.expect = expectation(e, "expect", s);
    }
  }
  return s;
}

ExpectSpec ScenarioParser::expectation(const YAML::Node& e, const std::string& f, const Scenario& s) {
  if (!e.IsMap()) fail(e, f, "expected a mapping such as {diagnosis: missing_rank, ranks: [3]}");
  only_keys(e, f, {"diagnosis", "ranks", "seq", "edge", "fields", "group"});
  ExpectSpec x;
  if (!e["diagnosis"]) fail(e, f + ".diagnosis", "missing");
  x.diagnosis = scalar<std::string>(e["diagnosis"], f + ".diagnosis", "a diagnosis name");
  if (e["ranks"]) x.ranks = int_list(e["ranks"], f + ".ranks", 0, s.ranks - 1);
  if (e["seq"]) x.seq = static_cast<uint64_t>(integer(e["seq"], f + ".seq", 1, 1 << 30));
  if (e["group"]) {
    const std::string g = scalar<std::string>(e["group"], f + ".group", "a group name");
    if (g != "world" && !s.group(g)) {
      std::vector<std::string> names{"world"};
      for (const auto& gs : s.groups) names.push_back(gs.name);
      fail(e["group"], f + ".group", fmt::format("unknown group '{}'; allowed: {}", g, fmt::join(names, ", ")));
    }
    x.group = g == "world" ? "" : g;
  }
  if (e["edge"]) {
    const auto v = int_list(e["edge"], f + ".edge", 0, s.ranks - 1);
    if (v.size() != 2) fail(e["edge"], f + ".edge", "expected [from, to]");
    x.edge = std::make_pair(v[0], v[1]);
  }
  if (e["fields"]) {
    const YAML::Node fl = e["fields"];
    if (!fl.IsSequence()) fail(fl, f + ".fields", "expected a list such as [count]");
    for (size_t i = 0; i < fl.size(); ++i)
      x.fields.push_back(scalar<std::string>(fl[i], fmt::format("{}.fields[{}]", f, i), "a field name"));
  }
  return x;
}

Scenario parse_scenario(const std::string& text, const std::string& file, const InputLimits& limits) {
  return parse_yaml_input<Scenario, ScenarioError>(text, file, limits.max_depth,
                                    [&](const YAML::Node& root) { return ScenarioParser(file, limits).scenario(root); });
}

Scenario load_scenario(const std::string& path, const InputLimits& limits) {
  return parse_scenario(read_input_file<ScenarioError>(path, limits.max_bytes, "a scenario file, such as examples/bugs/slow_nic.yaml",
                                        "--max-input-bytes"),
                        path, limits);
}

}  // namespace collcheck
