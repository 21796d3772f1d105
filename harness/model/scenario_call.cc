#include "harness/model/scenario_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "harness/model/size.h"

namespace collcheck {

Step ScenarioParser::call(const YAML::Node& n, const std::string& field, int index, Collective coll, const Scenario& sc) const {
  Step s;
  s.kind = Step::Call;
  s.line = n.Mark().line + 1;
  CallStep& c = s.call;
  c.coll = coll;
  if (coll == Collective::Barrier && n.IsScalar()) {  // barrier: true
    if (!scalar<bool>(n, field, "true or a mapping")) fail(n, field, "expected true or a mapping such as {group: g}");
    c.tag = fmt::format("call{}", index);
    c.default_tag = true;
    c.count = 0;
    return s;
  }
  if (!n.IsMap()) fail(n, field, "expected a mapping such as {tag: grads, count: 1024}");
  std::vector<const char*> keys{"tag",   "count", "shape",           "dtype",
                                "async", "wait",  "read_before_wait", "write_before_wait", "group", "handle"};
  if (coll == Collective::AllReduce || coll == Collective::Broadcast) keys.push_back("in_place");
  if (reduces(coll)) keys.insert(keys.end(), {"op", "scalar"});
  if (coll == Collective::Broadcast) keys.push_back("root");
  if (is_p2p(coll)) keys.push_back("peer");
  only_keys(n, field, keys);
  c.tag = n["tag"] ? scalar<std::string>(n["tag"], field + ".tag", "a string") : fmt::format("call{}", index);
  c.default_tag = !n["tag"];
  if (n["group"]) {
    c.group = scalar<std::string>(n["group"], field + ".group", "a group name");
    if (!sc.group(c.group)) fail(n["group"], field + ".group", fmt::format("unknown group '{}'; allowed: {}", c.group,
                                                                           group_choices(sc)));
  }
  if (n["dtype"]) {
    const auto name = scalar<std::string>(n["dtype"], field + ".dtype", "a dtype");
    auto t = parse_dtype(name);
    if (!t) fail(n["dtype"], field + ".dtype", fmt::format("unknown dtype '{}'; allowed: {}", name, dtype_choices()));
    c.dtype = *t;
  }
  if (coll == Collective::Barrier) c.count = 0;
  if (n["count"] && n["shape"]) fail(n["shape"], field + ".shape", "give count or shape, not both");
  if (n["count"]) {
    const auto v = scalar<long long>(n["count"], field + ".count", "a non-negative integer");
    if (v < 0) fail(n["count"], field + ".count", fmt::format("expected a non-negative integer, got {}", v));
    c.count = static_cast<size_t>(v);
    if (auto why = count_problem(c.count, c.dtype); !why.empty()) fail(n["count"], field + ".count", why);
  }
  if (n["shape"]) {
    const YAML::Node& sh = n["shape"];
    if (!sh.IsSequence()) fail(sh, field + ".shape", "expected a list of dimensions, such as [4027, 5120]");
    size_t total = 1;
    for (size_t i = 0; i < sh.size(); ++i) {
      const auto d = scalar<long long>(sh[i], fmt::format("{}.shape[{}]", field, i), "a non-negative integer");
      if (d < 0) fail(sh[i], fmt::format("{}.shape[{}]", field, i), fmt::format("expected a non-negative integer, got {}", d));
      c.shape.push_back(static_cast<size_t>(d));
      const auto t = checked_mul(total, static_cast<size_t>(d));
      if (!t) fail(sh, field + ".shape", "the product of the dimensions overflows");
      total = *t;
    }
    c.count = total;
    if (auto why = count_problem(c.count, c.dtype); !why.empty()) fail(sh, field + ".shape", why);
  }
  if (auto why = count_fits(coll, c.count, sc.group_size(c.group)); !why.empty())
    fail(n["count"] ? n["count"] : n["shape"] ? n["shape"] : n, field + (n["shape"] ? ".shape" : ".count"), why);
  if (coll == Collective::Broadcast || is_p2p(coll)) {
    const char* k = coll == Collective::Broadcast ? "root" : "peer";
    if (!n[k]) fail(n, field + "." + k, fmt::format("missing: the {} (a world rank{})", coll == Collective::Broadcast ? "root" : "other rank",
                                                   c.group.empty() ? "" : " of group " + c.group));
    c.peer = integer(n[k], field + "." + k, 0, sc.ranks - 1);
    if (!sc.in_group(c.group, c.peer))
      fail(n[k], field + "." + k, fmt::format("rank {} is not in group {}; allowed: {}", c.peer, c.group,
                                              fmt::join(sc.members(c.group), ", ")));
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
  if (n["wait"] && n["wait"].IsMap()) {
    // wait: {before: k}: waited right before the program's call k (from 0).
    if (!c.async) fail(n["wait"], field + ".wait", "only an async call has a wait; add async: true");
    only_keys(n["wait"], field + ".wait", {"before"});
    if (!n["wait"]["before"]) fail(n["wait"], field + ".wait.before", "missing: the call (from 0) it is waited before");
    c.wait_before = integer(n["wait"]["before"], field + ".wait.before", 0, 1 << 24);
    c.wait = WaitAt::Handle;
  } else if (n["wait"]) {
    if (!c.async) fail(n["wait"], field + ".wait", "only an async call has a wait; add async: true");
    const auto w = scalar<std::string>(n["wait"], field + ".wait", "next, end, never or {before: <call>}");
    if (w == "next") {
      c.wait = WaitAt::Next;
    } else if (w == "end") {
      c.wait = WaitAt::End;
    } else if (w == "never") {
      c.wait = WaitAt::Never;
    } else {
      fail(n["wait"], field + ".wait", fmt::format("unknown wait '{}'; allowed: next, end, never, {{before: <call>}}", w));
    }
  }
  if (n["handle"]) {
    // Waited where the program says: a later step `wait: <handle>`.
    if (!c.async) fail(n["handle"], field + ".handle", "only an async call has a handle; add async: true");
    if (n["wait"]) fail(n["handle"], field + ".handle", "give either wait or handle, not both");
    c.handle = handle_name(n["handle"], field + ".handle");
    c.wait = WaitAt::Handle;
  }
  if (n["read_before_wait"]) {
    c.read_before_wait = scalar<bool>(n["read_before_wait"], field + ".read_before_wait", "true or false");
    if (c.read_before_wait && !c.async)
      fail(n["read_before_wait"], field + ".read_before_wait", "only an async call can be read before its wait");
  }
  if (n["write_before_wait"]) {
    c.write_before_wait = scalar<bool>(n["write_before_wait"], field + ".write_before_wait", "true or false");
    if (c.write_before_wait && !c.async)
      fail(n["write_before_wait"], field + ".write_before_wait", "only an async call can be written before its wait");
  }
  if (n["in_place"]) c.in_place = scalar<bool>(n["in_place"], field + ".in_place", "true or false");
  return s;
}

}  // namespace collcheck
