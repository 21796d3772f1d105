#include "harness/model/scenario.h"
#include "harness/model/size.h"
#include "harness/model/yaml_input.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

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
  }
  return "?";
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

class Parser : public YamlFields<ScenarioError> {
 public:
  Parser(std::string file, const InputLimits& limits) : YamlFields<ScenarioError>(std::move(file)), limits_(limits) {}

  std::vector<int> int_list(const YAML::Node& n, const std::string& field, int lo, int hi) const {
    std::vector<int> out;
    if (n.IsScalar()) {
      out.push_back(integer(n, field, lo, hi));
      return out;
    }
    if (!n.IsSequence()) fail(n, field, "expected an integer or a list of integers");
    for (size_t i = 0; i < n.size(); ++i) out.push_back(integer(n[i], fmt::format("{}[{}]", field, i), lo, hi));
    return out;
  }

  Step call(const YAML::Node& n, const std::string& field, int index) const {
    Step s;
    s.kind = Step::Call;
    s.line = n.Mark().line + 1;
    only_keys(n, field, {"tag", "count", "dtype", "op", "scalar", "async", "wait", "read_before_wait"});
    CallStep& c = s.call;
    c.tag = n["tag"] ? scalar<std::string>(n["tag"], field + ".tag", "a string") : fmt::format("call{}", index);
    if (n["dtype"]) {
      const auto name = scalar<std::string>(n["dtype"], field + ".dtype", "a dtype");
      auto t = parse_dtype(name);
      if (!t) fail(n["dtype"], field + ".dtype", fmt::format("unknown dtype '{}'; allowed: {}", name, dtype_choices()));
      c.dtype = *t;
    }
    if (n["count"]) {
      const auto v = scalar<long long>(n["count"], field + ".count", "a non-negative integer");
      if (v < 0) fail(n["count"], field + ".count", fmt::format("expected a non-negative integer, got {}", v));
      c.count = static_cast<size_t>(v);
      if (auto why = count_problem(c.count, c.dtype); !why.empty()) fail(n["count"], field + ".count", why);
    }
    if (n["op"]) {
      const auto name = scalar<std::string>(n["op"], field + ".op", "an op");
      auto op = parse_op(name);
      if (!op) fail(n["op"], field + ".op", fmt::format("unknown op '{}'; allowed: {}", name, op_choices()));
      c.op = *op;
    }
    if (n["scalar"]) c.scalar = number(n["scalar"], field + ".scalar", -1e30, 1e30);
    if (n["async"]) c.async = scalar<bool>(n["async"], field + ".async", "true or false");
    c.wait = c.async ? WaitAt::Next : WaitAt::Call;
    if (n["wait"]) {
      if (!c.async) fail(n["wait"], field + ".wait", "only an async call has a wait; add async: true");
      const auto w = scalar<std::string>(n["wait"], field + ".wait", "next, end or never");
      if (w == "next") {
        c.wait = WaitAt::Next;
      } else if (w == "end") {
        c.wait = WaitAt::End;
      } else if (w == "never") {
        c.wait = WaitAt::Never;
      } else {
        fail(n["wait"], field + ".wait", fmt::format("unknown wait '{}'; allowed: next, end, never", w));
      }
    }
    if (n["read_before_wait"]) {
      c.read_before_wait = scalar<bool>(n["read_before_wait"], field + ".read_before_wait", "true or false");
      if (c.read_before_wait && !c.async)
        fail(n["read_before_wait"], field + ".read_before_wait", "only an async call can be read before its wait");
    }
    return s;
  }

  Program program(const YAML::Node& n, const std::string& field) {
    if (!n.IsSequence()) fail(n, field, "expected a list of steps (all_reduce, sleep, stall)");
    Program p;
    int calls = 0;
    steps_ += n.size();  // an alias used as several programs counts each time
    if (steps_ > limits_.max_steps)
      fail(n, field, fmt::format("the programs hold more than {} steps in all, the input limit (--max-steps raises it)",
                                 limits_.max_steps));
    for (size_t i = 0; i < n.size(); ++i) {
      const auto f = fmt::format("{}[{}]", field, i);
      const YAML::Node& st = n[i];
      if (!st.IsMap() || st.size() != 1) fail(st, f, "expected one of: all_reduce: {...}, sleep: <ms>, stall: true");
      std::set<std::string> seen;
      const auto key = this->key(st.begin()->first, f, seen);
      const YAML::Node v = st.begin()->second;
      if (key == "all_reduce") {
        p.push_back(call(v, f + ".all_reduce", calls++));
      } else if (key == "sleep") {
        Step s;
        s.kind = Step::Sleep;
        s.sleep_ms = number(v, f + ".sleep", 0, 3.6e6);
        s.line = st.Mark().line + 1;
        p.push_back(s);
      } else if (key == "stall") {
        if (!scalar<bool>(v, f + ".stall", "true")) fail(v, f + ".stall", "expected true");
        Step s;
        s.kind = Step::Stall;
        s.line = st.Mark().line + 1;
        p.push_back(s);
      } else {
        fail(st.begin()->first, f, fmt::format("unknown step '{}'; allowed: all_reduce, sleep, stall", key));
      }
    }
    return p;
  }

  Scenario scenario(const YAML::Node& root) {
    Scenario s;
    s.file = file_;
    if (!root.IsMap()) fail(root, "scenario", "expected a mapping at the top level");
    only_keys(root, "scenario",
              {"name", "description", "world", "impl", "deadline", "mode", "program", "ranks", "faults", "expect"});
    s.name = root["name"] ? scalar<std::string>(root["name"], "name", "a string") : file_;
    if (root["description"]) s.description = scalar<std::string>(root["description"], "description", "a string");
    if (!root["world"]) fail(root, "world", "missing; e.g. world: {ranks: 4}");
    only_keys(root["world"], "world", {"ranks", "kind"});
    if (!root["world"]["ranks"]) fail(root["world"], "world.ranks", "missing");
    s.ranks = integer(root["world"]["ranks"], "world.ranks", 1, 512);
    if (root["world"]["kind"]) {
      s.world = scalar<std::string>(root["world"]["kind"], "world.kind", "threads or mpi");
      if (s.world != "threads" && s.world != "mpi")
        fail(root["world"]["kind"], "world.kind", fmt::format("unknown world '{}'; allowed: threads, mpi", s.world));
    }
    if (root["impl"]) s.impl = scalar<std::string>(root["impl"], "impl", "an implementation name");
    if (root["deadline"]) s.deadline_s = number(root["deadline"], "deadline", 0.001, 86400);
    if (root["mode"]) {
      const auto m = scalar<std::string>(root["mode"], "mode", "guarded or unguarded");
      if (m != "guarded" && m != "unguarded")
        fail(root["mode"], "mode", fmt::format("unknown mode '{}'; allowed: guarded, unguarded", m));
      s.guarded = m == "guarded";
    }
    if (!root["program"]) fail(root, "program", "missing: the list of calls every rank makes");
    s.defaults = program(root["program"], "program");
    if (root["ranks"]) {
      const YAML::Node r = root["ranks"];
      if (!r.IsMap()) fail(r, "ranks", "expected a mapping from rank to {program: [...]}");
      for (const auto& kv : r) {
        const int rank = integer(kv.first, "ranks", 0, s.ranks - 1);
        const auto f = fmt::format("ranks.{}", rank);
        if (s.overrides.count(rank)) fail(kv.first, "ranks", fmt::format("duplicate key '{}': say each rank once", rank));
        only_keys(kv.second, f, {"program"});
        if (!kv.second["program"]) fail(kv.second, f + ".program", "missing");
        s.overrides[rank] = program(kv.second["program"], f + ".program");
      }
    }
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
      const YAML::Node e = root["expect"];
      only_keys(e, "expect", {"diagnosis", "ranks", "seq", "edge", "fields"});
      ExpectSpec x;
      if (!e["diagnosis"]) fail(e, "expect.diagnosis", "missing");
      x.diagnosis = scalar<std::string>(e["diagnosis"], "expect.diagnosis", "a diagnosis name");
      if (e["ranks"]) x.ranks = int_list(e["ranks"], "expect.ranks", 0, s.ranks - 1);
      if (e["seq"]) x.seq = static_cast<uint64_t>(integer(e["seq"], "expect.seq", 1, 1 << 30));
      if (e["edge"]) {
        const auto v = int_list(e["edge"], "expect.edge", 0, s.ranks - 1);
        if (v.size() != 2) fail(e["edge"], "expect.edge", "expected [from, to]");
        x.edge = std::make_pair(v[0], v[1]);
      }
      if (e["fields"]) {
        const YAML::Node fl = e["fields"];
        if (!fl.IsSequence()) fail(fl, "expect.fields", "expected a list such as [count]");
        for (size_t i = 0; i < fl.size(); ++i)
          x.fields.push_back(scalar<std::string>(fl[i], fmt::format("expect.fields[{}]", i), "a field name"));
      }
      s.expect = x;
    }
    return s;
  }

 private:
  InputLimits limits_;
  size_t steps_ = 0;
};

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& file, const InputLimits& limits) {
  return parse_yaml_input<Scenario, ScenarioError>(text, file, limits.max_depth,
                                    [&](const YAML::Node& root) { return Parser(file, limits).scenario(root); });
}

Scenario load_scenario(const std::string& path, const InputLimits& limits) {
  return parse_scenario(read_input_file<ScenarioError>(path, limits.max_bytes, "a scenario file, such as examples/bugs/slow_nic.yaml",
                                        "--max-input-bytes"),
                        path, limits);
}

namespace {
void emit_program(YAML::Emitter& y, const Program& p) {
  y << YAML::BeginSeq;
  for (const Step& s : p) {
    y << YAML::BeginMap;
    if (s.kind == Step::Sleep) {
      y << YAML::Key << "sleep" << YAML::Value << s.sleep_ms;
    } else if (s.kind == Step::Stall) {
      y << YAML::Key << "stall" << YAML::Value << true;
    } else {
      const CallStep& c = s.call;
      y << YAML::Key << "all_reduce" << YAML::Value << YAML::Flow << YAML::BeginMap;
      y << YAML::Key << "tag" << YAML::Value << c.tag << YAML::Key << "count" << YAML::Value << c.count;
      y << YAML::Key << "dtype" << YAML::Value << std::string(dtype_name(c.dtype));
      y << YAML::Key << "op" << YAML::Value << std::string(op_name(c.op));
      if (c.op == RedOp::PreMulSum) y << YAML::Key << "scalar" << YAML::Value << c.scalar;
      if (c.async) {
        y << YAML::Key << "async" << YAML::Value << true;
        y << YAML::Key << "wait" << YAML::Value << std::string(wait_at_name(c.wait));
        if (c.read_before_wait) y << YAML::Key << "read_before_wait" << YAML::Value << true;
      }
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
    const auto& e = *s.expect;
    y << YAML::Key << "expect" << YAML::Value << YAML::Flow << YAML::BeginMap;
    y << YAML::Key << "diagnosis" << YAML::Value << e.diagnosis;
    if (!e.ranks.empty()) y << YAML::Key << "ranks" << YAML::Value << YAML::Flow << e.ranks;
    if (e.seq) y << YAML::Key << "seq" << YAML::Value << *e.seq;
    if (e.edge) y << YAML::Key << "edge" << YAML::Value << YAML::Flow << std::vector<int>{e.edge->first, e.edge->second};
    if (!e.fields.empty()) y << YAML::Key << "fields" << YAML::Value << YAML::Flow << e.fields;
    y << YAML::EndMap;
  }
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace collcheck
