#include "harness/model/scenario.h"
#include "harness/model/size.h"
#include "harness/model/yaml_input.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace collcheck {

std::string_view wait_at_name(WaitAt w) {
  switch (w) {
    case WaitAt::Call: return "call";
    case WaitAt::Next: return "next";
    case WaitAt::End: return "end";
    case WaitAt::Never: return "never";
    case WaitAt::Handle: return "handle";
  }
  return "?";
}

const GroupSpec* Scenario::group(const std::string& g_name) const {
  for (const auto& g : groups)
    if (g.name == g_name) return &g;
  return nullptr;
}

std::vector<int> Scenario::members(const std::string& g_name) const {
  if (const GroupSpec* g = group(g_name)) return g->ranks;
  std::vector<int> all(static_cast<size_t>(std::max(ranks, 0)));
  for (int r = 0; r < ranks; ++r) all[static_cast<size_t>(r)] = r;
  return all;
}

int Scenario::group_size(const std::string& g_name) const {
  const GroupSpec* g = group(g_name);
  return g ? static_cast<int>(g->ranks.size()) : ranks;
}

bool Scenario::in_group(const std::string& g_name, int rank) const {
  const GroupSpec* g = group(g_name);
  return g ? std::binary_search(g->ranks.begin(), g->ranks.end(), rank) : rank >= 0 && rank < ranks;
}

uint64_t Scenario::group_id(const std::string& g_name) const {
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].name == g_name) return i + 1;
  return 0;
}

const Program& Scenario::program(int rank) const {
  auto it = overrides.find(rank);
  return it == overrides.end() ? defaults : it->second;
}

Program& Scenario::mutable_program(int rank) {
  auto it = overrides.find(rank);
  if (it == overrides.end()) it = overrides.emplace(rank, defaults).first;
  return it->second;
}



namespace {
void emit_program(YAML::Emitter& y, const Program& p) {
  y << YAML::BeginSeq;
  for (const Step& s : p) {
    // A raise's effect (the rest of its block left out) is in the program
    // already: written back, the marker would leave out more.
    if (s.kind == Step::Raise) continue;
    y << YAML::BeginMap;
    if (s.kind == Step::Sleep) {
      y << YAML::Key << "sleep" << YAML::Value << s.sleep_ms;
    } else if (s.kind == Step::Stall) {
      y << YAML::Key << "stall" << YAML::Value << true;
    } else if (s.kind == Step::Synchronize) {
      y << YAML::Key << "synchronize" << YAML::Value << true;
    } else if (s.kind == Step::Exit) {
      y << YAML::Key << "exit" << YAML::Value << true;
    } else if (s.kind == Step::Wait) {
      y << YAML::Key << "wait" << YAML::Value << s.handle;
    } else {
      const CallStep& c = s.call;
      y << YAML::Key << std::string(collective_name(c.coll)) << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "tag" << YAML::Value << c.tag;
      if (!c.group.empty()) y << YAML::Key << "group" << YAML::Value << c.group;
      if (c.coll == Collective::Broadcast) y << YAML::Key << "root" << YAML::Value << c.peer;
      if (is_p2p(c.coll)) y << YAML::Key << "peer" << YAML::Value << c.peer;
      if (!c.shape.empty())
        y << YAML::Key << "shape" << YAML::Value << YAML::Flow << c.shape;
      else if (c.coll != Collective::Barrier)
        y << YAML::Key << "count" << YAML::Value << c.count;
      y << YAML::Key << "dtype" << YAML::Value << std::string(dtype_name(c.dtype));
      if (reduces(c.coll)) y << YAML::Key << "op" << YAML::Value << std::string(op_name(c.op));
      if (reduces(c.coll) && c.op == RedOp::PreMulSum) y << YAML::Key << "scalar" << YAML::Value << c.scalar;
      if (c.async) {
        y << YAML::Key << "async" << YAML::Value << true;
        if (c.wait == WaitAt::Handle)
          y << YAML::Key << "handle" << YAML::Value << c.handle;
        else
          y << YAML::Key << "wait" << YAML::Value << std::string(wait_at_name(c.wait));
        if (c.read_before_wait) y << YAML::Key << "read_before_wait" << YAML::Value << true;
        if (c.write_before_wait) y << YAML::Key << "write_before_wait" << YAML::Value << true;
      }
      if (c.in_place) y << YAML::Key << "in_place" << YAML::Value << true;
      y << YAML::EndMap;
    }
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}
}  // namespace

std::string scenario_to_yaml(const Scenario& s) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << s.name;
  if (!s.description.empty()) y << YAML::Key << "description" << YAML::Value << s.description;
  y << YAML::Key << "world" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "ranks" << YAML::Value
    << s.ranks << YAML::Key << "kind" << YAML::Value << s.world << YAML::EndMap;
  y << YAML::Key << "impl" << YAML::Value << s.impl;
  y << YAML::Key << "deadline" << YAML::Value << s.deadline_s;
  y << YAML::Key << "mode" << YAML::Value << (s.guarded ? "guarded" : "unguarded");
  if (!s.groups.empty()) {
    y << YAML::Key << "groups" << YAML::Value << YAML::BeginMap;
    for (const auto& g : s.groups) {
      y << YAML::Key << g.name << YAML::Value;
      if (g.caller_progress || g.mpi_matching) {
        y << YAML::Flow << YAML::BeginMap << YAML::Key << "ranks" << YAML::Value << YAML::Flow << g.ranks;
        if (g.caller_progress) y << YAML::Key << "progress" << YAML::Value << "caller";
        if (g.mpi_matching) y << YAML::Key << "matching" << YAML::Value << "mpi";
        y << YAML::EndMap;
      } else
        y << YAML::Flow << g.ranks;
    }
    y << YAML::EndMap;
  }
  y << YAML::Key << "program" << YAML::Value;
  emit_program(y, s.defaults);
  if (!s.overrides.empty()) {
    y << YAML::Key << "ranks" << YAML::Value << YAML::BeginMap;
    for (const auto& [r, p] : s.overrides) {
      y << YAML::Key << r << YAML::Value << YAML::BeginMap << YAML::Key << "program" << YAML::Value;
      emit_program(y, p);
      y << YAML::EndMap;
    }
    y << YAML::EndMap;
  }
  if (!s.faults.empty()) {
    y << YAML::Key << "faults" << YAML::Value << YAML::BeginSeq;
    for (const auto& f : s.faults) {
      y << YAML::BeginMap << YAML::Key << f.kind << YAML::Value << YAML::Flow << YAML::BeginMap;
      if (!f.ranks.empty()) y << YAML::Key << "ranks" << YAML::Value << YAML::Flow << f.ranks;
      if (!f.calls.empty()) y << YAML::Key << "calls" << YAML::Value << YAML::Flow << f.calls;
      for (const auto& [k, v] : f.fields) y << YAML::Key << k << YAML::Value << v;
      y << YAML::EndMap << YAML::EndMap;
    }
    y << YAML::EndSeq;
  }
  if (s.expect) {
    auto emit = [&](const ExpectSpec& e) {
      y << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "diagnosis" << YAML::Value << e.diagnosis;
      if (!e.ranks.empty()) y << YAML::Key << "ranks" << YAML::Value << YAML::Flow << e.ranks;
      if (e.seq) y << YAML::Key << "seq" << YAML::Value << *e.seq;
      if (e.edge) y << YAML::Key << "edge" << YAML::Value << YAML::Flow << std::vector<int>{e.edge->first, e.edge->second};
      if (!e.fields.empty()) y << YAML::Key << "fields" << YAML::Value << YAML::Flow << e.fields;
      if (e.group) y << YAML::Key << "group" << YAML::Value << (e.group->empty() ? std::string("world") : *e.group);
      y << YAML::EndMap;
    };
    y << YAML::Key << "expect" << YAML::Value;
    if (s.also_expect.empty()) {
      emit(*s.expect);
    } else {
      y << YAML::BeginSeq;
      emit(*s.expect);
      for (const auto& e : s.also_expect) emit(e);
      y << YAML::EndSeq;
    }
  }
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace collcheck
