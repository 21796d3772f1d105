#include "harness/soak/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>

#include "harness/model/size.h"
#include "harness/model/yaml_input.h"
#include "harness/soak/algorithms.h"

namespace collcheck {

namespace {

class PlanParser : public YamlFields<PlanError> {
 public:
  using YamlFields<PlanError>::YamlFields;

  Plan plan(const YAML::Node& root) const {
    Plan p;
    p.file = file_;
    if (root.IsNull()) return p;  // an empty file: the default plan
    if (!root.IsMap()) fail(root, "plan", "expected a mapping at the top level (seed, implementations, dtypes, ops, "
                                          "ranks, timeout, workloads)");
    only_keys(root, "plan", {"seed", "implementations", "dtypes", "ops", "ranks", "timeout", "workloads"});
    if (const auto n = root["seed"]) {
      const auto text = scalar<std::string>(n, "seed", "a seed (decimal or 0x hex)");
      try {
        size_t used = 0;
        const bool hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0;
        if (text.empty() || text[0] == '-') throw std::invalid_argument("negative");
        p.seed = std::stoull(hex ? text.substr(2) : text, &used, hex ? 16 : 10);
        if (used != text.size() - (hex ? 2 : 0)) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        fail(n, "seed", fmt::format("expected a non-negative integer, decimal or 0x hex, below 2^64; got '{}'", text));
      }
    }
    if (const auto n = root["implementations"]) {
      if (!n.IsSequence() || n.size() == 0)
        fail(n, "implementations", "expected a non-empty list, such as [ring, {impl: gloo:ring, against: ring}]");
      p.impls.clear();
      for (size_t i = 0; i < n.size(); ++i) {
        const auto f = fmt::format("implementations[{}]", i);
        PlanImpl x;
        x.line = n[i].Mark().line + 1;
        if (n[i].IsScalar()) {
          x.impl = scalar<std::string>(n[i], f, "an implementation");
        } else {
          only_keys(n[i], f, {"impl", "against"});
          if (!n[i]["impl"]) fail(n[i], f + ".impl", "missing; e.g. impl: ring");
          x.impl = scalar<std::string>(n[i]["impl"], f + ".impl", "an implementation");
          if (n[i]["against"]) x.against = list_text(n[i]["against"], f + ".against");
        }
        if (x.impl.empty()) fail(n[i], f, "empty; allowed: ring, tree, dbtree, gloo:<algo>, mpi, nccl, plugin:<path.so>");
        for (const std::string* v : {&x.impl, &x.against})
          for (unsigned char ch : *v)
            if (ch < 0x21 || ch > 0x7e)
              fail(n[i], f, "an implementation is printable ASCII without spaces, such as ring or plugin:./build/libx.so");
        p.impls.push_back(x);
      }
    }
    if (const auto n = root["dtypes"]) p.dtypes = dtypes(n, "dtypes");
    if (const auto n = root["ops"]) {
      p.ops.clear();
      for (const auto& name : names(n, "ops")) {
        if (name.first == "all") {
          p.ops.assign(kAllOps.begin(), kAllOps.end());
          continue;
        }
        const auto op = parse_op(name.first);
        if (!op) fail(name.second, "ops", fmt::format("unknown op '{}'; allowed: {}, or all", name.first, op_choices()));
        p.ops.push_back(*op);
      }
    }
    if (const auto n = root["ranks"]) {
      only_keys(n, "ranks", {"min", "max"});
      if (n["min"]) p.min_ranks = integer(n["min"], "ranks.min", 1, 512);
      if (n["max"]) p.max_ranks = integer(n["max"], "ranks.max", 1, 512);
      if (p.min_ranks > p.max_ranks)
        fail(n, "ranks", fmt::format("min ({}) is more than max ({})", p.min_ranks, p.max_ranks));
    }
    if (const auto n = root["timeout"]) p.timeout_s = number(n, "timeout", 0.001, 86400);
    if (const auto w = root["workloads"]) {
      only_keys(w, "workloads", {"verify", "faults", "perf", "algorithms"});
      if (const auto n = w["verify"]) {
        only_keys(n, "workloads.verify", {"weight", "cases", "max_count", "large_bytes"});
        if (n["weight"]) p.verify.weight = number(n["weight"], "workloads.verify.weight", 0, 1e6);
        if (n["cases"]) p.verify.cases = static_cast<size_t>(integer(n["cases"], "workloads.verify.cases", 1, 100000));
        if (n["max_count"])
          p.verify.max_count = static_cast<size_t>(integer(n["max_count"], "workloads.verify.max_count", 0, 1 << 24));
        if (n["large_bytes"]) {
          p.verify.large_bytes = size(n["large_bytes"], "workloads.verify.large_bytes");
          if (p.verify.large_bytes > (size_t{1} << 28))
            fail(n["large_bytes"], "workloads.verify.large_bytes", fmt::format("at most 256M, got {}", p.verify.large_bytes));
        }
      }
      if (const auto n = w["faults"]) {
        only_keys(n, "workloads.faults", {"weight"});
        if (n["weight"]) p.faults.weight = number(n["weight"], "workloads.faults.weight", 0, 1e6);
      }
      if (const auto n = w["perf"]) {
        only_keys(n, "workloads.perf", {"weight", "min_bytes", "max_bytes", "dtypes", "iters", "warmup"});
        if (n["weight"]) p.perf.weight = number(n["weight"], "workloads.perf.weight", 0, 1e6);
        if (n["min_bytes"]) p.perf.min_bytes = size(n["min_bytes"], "workloads.perf.min_bytes");
        if (n["max_bytes"]) p.perf.max_bytes = size(n["max_bytes"], "workloads.perf.max_bytes");
        if (p.perf.min_bytes < 1) fail(n["min_bytes"], "workloads.perf.min_bytes", "must be at least 1");
        if (p.perf.min_bytes > p.perf.max_bytes)
          fail(n, "workloads.perf", fmt::format("min_bytes ({}) is more than max_bytes ({})", p.perf.min_bytes,
                                                p.perf.max_bytes));
        if (n["dtypes"]) p.perf.dtypes = dtypes(n["dtypes"], "workloads.perf.dtypes");
        if (n["iters"]) p.perf.iters = integer(n["iters"], "workloads.perf.iters", 1, 100000);
        if (n["warmup"]) p.perf.warmup = integer(n["warmup"], "workloads.perf.warmup", 0, 100000);
      }
      if (const auto n = w["algorithms"]) {
        only_keys(n, "workloads.algorithms", {"weight", "cases", "peers", "deadline"});
        if (n["weight"]) p.algorithms.weight = number(n["weight"], "workloads.algorithms.weight", 0, 1e6);
        if (n["cases"])
          p.algorithms.cases = static_cast<size_t>(integer(n["cases"], "workloads.algorithms.cases", 1, 1000000));
        if (n["deadline"]) p.algorithms.deadline_s = number(n["deadline"], "workloads.algorithms.deadline", 1, 86400);
        if (n["peers"]) {
          for (const auto& [name, at] : names(n["peers"], "workloads.algorithms.peers")) {
            if (const std::string why = check_algorithm_peer(name); !why.empty())
              fail(at, "workloads.algorithms.peers", fmt::format("'{}': allowed: {}", name, why));
            p.algorithms.peers.push_back(name);
          }
        }
      }
    }
    if (p.verify.weight + p.faults.weight + p.perf.weight + p.algorithms.weight <= 0)
      fail(root["workloads"], "workloads",
           "every weight is 0: give at least one workload (verify, faults, perf, algorithms) a weight");
    return p;
  }

 private:
  // A name or a list of names, each with its node (for the line).
  std::vector<std::pair<std::string, YAML::Node>> names(const YAML::Node& n, const std::string& field) const {
    std::vector<std::pair<std::string, YAML::Node>> out;
    if (n.IsScalar()) {
      out.emplace_back(scalar<std::string>(n, field, "a name"), n);
    } else if (n.IsSequence() && n.size() > 0) {
      for (size_t i = 0; i < n.size(); ++i)
        out.emplace_back(scalar<std::string>(n[i], fmt::format("{}[{}]", field, i), "a name"), n[i]);
    } else {
      fail(n, field, "expected a name, all, or a non-empty list of names");
    }
    return out;
  }

  std::vector<DType> dtypes(const YAML::Node& n, const std::string& field) const {
    std::vector<DType> out;
    for (const auto& [name, node] : names(n, field)) {
      if (name == "all") {
        out.assign(kAllDTypes.begin(), kAllDTypes.end());
        continue;
      }
      const auto t = parse_dtype(name);
      if (!t) fail(node, field, fmt::format("unknown dtype '{}'; allowed: {}, or all", name, dtype_choices()));
      out.push_back(*t);
    }
    return out;
  }

  std::string list_text(const YAML::Node& n, const std::string& field) const {
    std::vector<std::string> v;
    for (const auto& [name, node] : names(n, field)) v.push_back(name);
    return fmt::format("{}", fmt::join(v, ","));
  }

  size_t size(const YAML::Node& n, const std::string& field) const {
    const auto text = scalar<std::string>(n, field, "a size such as 4096, 64K or 32M");
    try {
      return parse_size_text(text, field);
    } catch (const std::invalid_argument& e) {
      fail(n, field, e.what());
    }
  }
};

}  // namespace

Plan default_plan() { return Plan{}; }

Plan parse_plan(const std::string& text, const std::string& file, const PlanLimits& limits) {
  return parse_yaml_input<Plan, PlanError>(text, file, limits.max_depth,
                                           [&](const YAML::Node& root) { return PlanParser(file).plan(root); });
}

Plan load_plan(const std::string& path, const PlanLimits& limits) {
  return parse_plan(read_input_file<PlanError>(path, limits.max_bytes, "a soak plan file, such as examples/soak/nightly.yaml",
                                               "--max-input-bytes"),
                    path, limits);
}

std::string plan_to_yaml(const Plan& p) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  if (p.seed) y << YAML::Key << "seed" << YAML::Value << fmt::format("{:#x}", *p.seed);
  y << YAML::Key << "implementations" << YAML::Value << YAML::BeginSeq;
  for (const auto& x : p.impls) {
    if (x.against.empty()) {
      y << x.impl;
    } else {
      y << YAML::Flow << YAML::BeginMap << YAML::Key << "impl" << YAML::Value << x.impl << YAML::Key << "against"
        << YAML::Value << x.against << YAML::EndMap;
    }
  }
  y << YAML::EndSeq;
  auto dts = [&](const std::vector<DType>& v) {
    y << YAML::Flow << YAML::BeginSeq;
    for (auto t : v) y << std::string(dtype_name(t));
    y << YAML::EndSeq;
  };
  y << YAML::Key << "dtypes" << YAML::Value;
  dts(p.dtypes);
  y << YAML::Key << "ops" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (auto op : p.ops) y << std::string(op_name(op));
  y << YAML::EndSeq;
  y << YAML::Key << "ranks" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "min" << YAML::Value
    << p.min_ranks << YAML::Key << "max" << YAML::Value << p.max_ranks << YAML::EndMap;
  y << YAML::Key << "timeout" << YAML::Value << p.timeout_s;
  y << YAML::Key << "workloads" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "verify" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "weight" << YAML::Value
    << p.verify.weight << YAML::Key << "cases" << YAML::Value << p.verify.cases << YAML::Key << "max_count"
    << YAML::Value << p.verify.max_count << YAML::Key << "large_bytes" << YAML::Value << p.verify.large_bytes
    << YAML::EndMap;
  y << YAML::Key << "faults" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "weight" << YAML::Value
    << p.faults.weight << YAML::EndMap;
  y << YAML::Key << "perf" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "weight" << YAML::Value
    << p.perf.weight << YAML::Key << "min_bytes" << YAML::Value << p.perf.min_bytes << YAML::Key << "max_bytes"
    << YAML::Value << p.perf.max_bytes << YAML::Key << "dtypes" << YAML::Value;
  dts(p.perf.dtypes);
  y << YAML::Key << "iters" << YAML::Value << p.perf.iters << YAML::Key << "warmup" << YAML::Value << p.perf.warmup
    << YAML::EndMap;
  y << YAML::Key << "algorithms" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "weight"
    << YAML::Value << p.algorithms.weight << YAML::Key << "cases" << YAML::Value << p.algorithms.cases << YAML::Key
    << "deadline" << YAML::Value << p.algorithms.deadline_s;
  if (!p.algorithms.peers.empty()) {
    y << YAML::Key << "peers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& s : p.algorithms.peers) y << s;
    y << YAML::EndSeq;
  }
  y << YAML::EndMap;
  y << YAML::EndMap << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

}  // namespace collcheck
