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

  Step call(const YAML::Node& n, const std::string& field, int index, Collective coll, const Scenario& sc) const {
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

  std::string handle_name(const YAML::Node& n, const std::string& field) const {
    const auto h = scalar<std::string>(n, field, "a handle name");
    if (h.empty() || h.size() > 64 || !std::all_of(h.begin(), h.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
        }))
      fail(n, field, fmt::format("'{}' is not a handle name: 1 to 64 letters, digits, '_', '-' or '.'", h));
    return h;
  }

  static std::string open_handles(const std::map<std::string, int>& open) {
    std::string h;
    for (const auto& [name, line] : open) h += (h.empty() ? "" : ", ") + name;
    return h.empty() ? "none" : h;
  }

  static std::string group_choices(const Scenario& sc) {
    std::string g;
    for (const auto& x : sc.groups) g += (g.empty() ? "" : ", ") + x.name;
    return g.empty() ? "none: declare groups: {name: [ranks]} first" : g;
  }

  static std::string step_choices() {
    return collective_choices() + ", sleep, stall, synchronize, wait, exit, raise, if";
  }

  Program program(const YAML::Node& n, const std::string& field, const Scenario& sc, int first_call = 0) {
    Program p;
    int calls = first_call;
    steps_into(p, n, field, sc, calls);
    return waits_before_placed(std::move(p), field);
  }

  // Each `wait: {before: k}` becomes a handle and a wait step right before
  // call k of the list it was written in (calls counted from 0).
  Program waits_before_placed(Program p, const std::string& field) const {
    std::multimap<int, Step> waits;  // call index -> the wait steps before it
    int ci = 0;
    const int n = calls_of(p);
    for (Step& st : p) {
      if (st.kind != Step::Call) continue;
      CallStep& c = st.call;
      if (c.wait_before >= 0) {
        if (c.wait_before <= ci || c.wait_before >= n)
          throw ScenarioError(fmt::format("{}:{}: {}.wait.before: call {} is not a later call of this list; allowed: "
                                          "{}",
                                          file_, st.line, field, c.wait_before,
                                          ci + 1 < n ? fmt::format("{} to {}", ci + 1, n - 1) : "none (it is the last call)"));
        c.handle = fmt::format("before{}_of{}", c.wait_before, ci);
        Step w;
        w.kind = Step::Wait;
        w.line = st.line;
        w.handle = c.handle;
        waits.emplace(c.wait_before, w);
        c.wait_before = -1;
      }
      ++ci;
    }
    if (waits.empty()) return p;
    Program out;
    ci = 0;
    for (Step& st : p) {
      if (st.kind == Step::Call) {
        auto [a, b] = waits.equal_range(ci++);
        for (auto it = a; it != b; ++it) out.push_back(it->second);
      }
      out.push_back(std::move(st));
    }
    return out;
  }

  // Appends the steps of list `n` to `p`; `calls` numbers the calls (default tags call<i>).
  void steps_into(Program& p, const YAML::Node& n, const std::string& field, const Scenario& sc, int& calls) {
    if (!n.IsSequence()) fail(n, field, fmt::format("expected a list of steps ({})", step_choices()));
    steps_ += n.size();  // an alias used as several programs counts each time
    check_steps(n, field);
    for (size_t i = 0; i < n.size(); ++i) {
      const auto f = fmt::format("{}[{}]", field, i);
      const YAML::Node& st = n[i];
      if (!st.IsMap() || st.size() != 1)
        fail(st, f, "expected one step: <collective>: {...}, repeat: {times: N, steps: [...]}, sleep: <ms>, stall: "
                    "true or synchronize: true");
      std::set<std::string> seen;
      const auto key = this->key(st.begin()->first, f, seen);
      const YAML::Node v = st.begin()->second;
      if (auto coll = parse_collective(key)) {
        p.push_back(call(v, f + "." + key, calls++, *coll, sc));
      } else if (key == "repeat") {
        // A block of steps N times (PyTorch #140563 restated 38 identical calls).
        const auto rf = f + ".repeat";
        if (!v.IsMap()) fail(v, rf, "expected a mapping such as {times: 38, steps: [...]}");
        only_keys(v, rf, {"times", "steps"});
        if (!v["times"]) fail(v, rf + ".times", "missing");
        if (!v["steps"]) fail(v, rf + ".steps", "missing");
        const auto times = static_cast<size_t>(integer(v["times"], rf + ".times", 0, 1 << 20));
        Program once;
        steps_into(once, v["steps"], rf + ".steps", sc, calls);
        for (const Step& x : once)
          if (x.kind == Step::Call && x.call.wait_before >= 0)
            throw ScenarioError(fmt::format("{}:{}: {}.steps: wait: {{before: <call>}} inside a repeat; give the call "
                                            "a handle and a step wait: <handle> in the block instead",
                                            file_, x.line, rf));
        // Each copy counts against the step limit, before it is made.
        steps_ += once.size() * (times > 0 ? times - 1 : 0);
        check_steps(v, rf);
        for (size_t t = 0; t < times; ++t) {
          // Each pass is a block of its own, and so is each pass of a repeat
          // inside it (fresh ids, so that no two passes share one).
          const uint32_t pass = next_block_++;
          std::map<uint32_t, uint32_t> fresh;
          for (const Step& x : once) {
            p.push_back(x);
            Step& y = p.back();
            if (y.kind == Step::Call && t > 0 && !explicit_tag(x)) y.call.tag = fmt::format("call{}", calls++);
            for (uint32_t& b : y.blocks) {
              if (t == 0) continue;
              auto it = fresh.find(b);
              if (it == fresh.end()) it = fresh.emplace(b, next_block_++).first;
              b = it->second;
            }
            y.blocks.insert(y.blocks.begin(), pass);
          }
        }
      } else if (key == "if") {
        // A rank-dependent choice (`if rank in (...)`): the then-steps on the
        // listed ranks, the else-steps on the others.
        const auto fi = f + ".if";
        if (!v.IsMap()) fail(v, fi, "expected a mapping such as {ranks: [0], then: [...], else: [...]}");
        only_keys(v, fi, {"ranks", "then", "else"});
        if (!v["ranks"]) fail(v, fi + ".ranks", "missing: the ranks that take the then-steps");
        if (!v["then"]) fail(v, fi + ".then", "missing: the steps of the listed ranks (else: those of the others)");
        std::vector<int> rs = int_list(v["ranks"], fi + ".ranks", 0, sc.ranks - 1);
        std::sort(rs.begin(), rs.end());
        rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
        const auto k = static_cast<int32_t>(cond_sets_.size());
        cond_sets_.push_back(std::move(rs));
        // Both branches number their calls from here (a rank takes one of
        // them): the same call in both has the same default tag.
        const int at = calls;
        int after = calls;
        for (const bool then : {true, false}) {
          const char* branch = then ? "then" : "else";
          if (!v[branch]) continue;
          Program part;
          int counted = at;
          steps_into(part, v[branch], fi + "." + branch, sc, counted);
          after = std::max(after, counted);
          for (Step& x : part) {
            x.conds.insert(x.conds.begin(), then ? k + 1 : -(k + 1));
            p.push_back(std::move(x));
          }
        }
        calls = after;
      } else if (key == "exit" || key == "raise") {
        Step s;
        s.kind = key == "exit" ? Step::Exit : Step::Raise;
        s.line = st.Mark().line + 1;
        if (!scalar<bool>(v, f + "." + key, "true")) fail(v, f + "." + key, "expected true");
        p.push_back(s);
      } else if (key == "wait") {
        Step s;
        s.kind = Step::Wait;
        s.line = st.Mark().line + 1;
        s.handle = handle_name(v, f + ".wait");
        p.push_back(s);
      } else if (key == "sleep" || key == "stall" || key == "synchronize") {
        Step s;
        s.kind = key == "sleep" ? Step::Sleep : key == "stall" ? Step::Stall : Step::Synchronize;
        s.line = st.Mark().line + 1;
        if (s.kind == Step::Sleep)
          s.sleep_ms = number(v, f + ".sleep", 0, 3.6e6);
        else if (!scalar<bool>(v, f + "." + key, "true"))
          fail(v, f + "." + key, "expected true");
        p.push_back(s);
      } else {
        fail(st.begin()->first, f, fmt::format("unknown step '{}'; allowed: {}, repeat", key, step_choices()));
      }
    }
  }

  void check_steps(const YAML::Node& n, const std::string& field) {
    if (steps_ > limits_.max_steps)
      fail(n, field, fmt::format("the programs hold more than {} steps in all, the input limit (--max-steps raises it)",
                                 limits_.max_steps));
  }

  static int calls_of(const Program& p) {
    return static_cast<int>(std::count_if(p.begin(), p.end(), [](const Step& x) { return x.kind == Step::Call; }));
  }

  // A default tag (call<i>) is renumbered in each copy of a repeated block.
  static bool explicit_tag(const Step& x) { return !x.call.default_tag; }

  // A rank's edits of the default program (or of its own): skip calls, insert
  // steps before or after a call. Call numbers are the program's calls from 0,
  // as faults count them; inserts and skips refer to the program as written.
  Program edited(const YAML::Node& e, const std::string& f, const Program& base, const Scenario& sc) {
    const int n = calls_of(base);
    std::set<int> skip;
    if (e["skip"]) {
      const auto v = int_list(e["skip"], f + ".skip", 0, std::max(0, n - 1));
      if (n == 0) fail(e["skip"], f + ".skip", "the program has no calls to skip");
      skip.insert(v.begin(), v.end());
    }
    std::map<int, std::vector<Program>> before, after;
    int calls = n;
    if (e["insert"]) {
      const YAML::Node ins = e["insert"];
      std::vector<YAML::Node> items;
      if (ins.IsMap()) items.push_back(ins);
      else if (ins.IsSequence())
        for (size_t i = 0; i < ins.size(); ++i) items.push_back(ins[i]);
      else
        fail(ins, f + ".insert", "expected {after: <call>, steps: [...]} or a list of them");
      for (size_t i = 0; i < items.size(); ++i) {
        const auto fi = ins.IsMap() ? f + ".insert" : fmt::format("{}.insert[{}]", f, i);
        const YAML::Node& it = items[i];
        if (!it.IsMap()) fail(it, fi, "expected {after: <call>, steps: [...]} or {before: <call>, steps: [...]}");
        only_keys(it, fi, {"after", "before", "steps"});
        if (!it["steps"]) fail(it, fi + ".steps", "missing");
        if (!!it["after"] == !!it["before"]) fail(it, fi, "give one of after: <call> or before: <call>");
        const char* where = it["after"] ? "after" : "before";
        if (n == 0) fail(it[where], fmt::format("{}.{}", fi, where), "the program has no calls to insert at");
        const int k = integer(it[where], fmt::format("{}.{}", fi, where), 0, n - 1);
        Program steps;
        steps_into(steps, it["steps"], fi + ".steps", sc, calls);
        steps = waits_before_placed(std::move(steps), fi + ".steps");
        (it["after"] ? after : before)[k].push_back(std::move(steps));
      }
    }
    Program out;
    int ci = 0;
    for (const Step& x : base) {
      if (x.kind != Step::Call) {
        out.push_back(x);
        continue;
      }
      // Inserted steps are in the blocks of the call they are inserted at.
      auto put = [&](const Program& block) {
        for (Step y : block) {
          y.blocks.insert(y.blocks.begin(), x.blocks.begin(), x.blocks.end());
          out.push_back(std::move(y));
        }
      };
      for (const auto& block : before[ci]) put(block);
      if (!skip.count(ci)) out.push_back(x);
      for (const auto& block : after[ci]) put(block);
      ++ci;
    }
    return out;
  }

  static bool has_conds(const Program& p) {
    return std::any_of(p.begin(), p.end(), [](const Step& x) { return !x.conds.empty(); });
  }

  // The steps rank r takes (-1: a rank no `if` lists), conditions dropped.
  Program chosen(const Program& p, int r) const {
    Program out;
    for (const Step& x : p) {
      bool take = true;
      for (const int32_t c : x.conds) {
        const auto& set = cond_sets_[static_cast<size_t>(std::abs(c) - 1)];
        const bool in = r >= 0 && std::binary_search(set.begin(), set.end(), r);
        take = take && (c > 0 ? in : !in);
      }
      if (!take) continue;
      out.push_back(x);
      out.back().conds.clear();
    }
    return out;
  }

  // Each Raise leaves out the rest of its block (the innermost repeat pass it
  // is in; the rest of the program at the top). A wait left out makes its
  // call never waited; a call left out takes its later wait step with it.
  static Program raised(Program p) {
    if (std::none_of(p.begin(), p.end(), [](const Step& x) { return x.kind == Step::Raise; })) return p;
    Program out;
    std::set<std::string> gone;  // handles whose call was left out
    for (size_t i = 0; i < p.size(); ++i) {
      Step& x = p[i];
      if (x.kind == Step::Wait && gone.count(x.handle)) continue;
      out.push_back(x);
      if (x.kind != Step::Raise) continue;
      const bool top = x.blocks.empty();
      const uint32_t b = top ? 0 : x.blocks.back();
      size_t j = i + 1;
      for (; j < p.size() && (top || std::find(p[j].blocks.begin(), p[j].blocks.end(), b) != p[j].blocks.end()); ++j) {
        const Step& y = p[j];
        if (y.kind == Step::Call && !y.call.handle.empty()) gone.insert(y.call.handle);
        if (y.kind == Step::Wait && !gone.count(y.handle)) {
          for (auto it = out.rbegin(); it != out.rend(); ++it)
            if (it->kind == Step::Call && it->call.handle == y.handle) {
              it->call.wait = WaitAt::Never;
              it->call.handle.clear();
              break;
            }
        }
      }
      i = j - 1;
    }
    return out;
  }

  Scenario scenario(const YAML::Node& root) {
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
        // A list of ranks, or {ranks: [...], progress: stream | caller}.
        // (A YAML::Node's operator= writes into the node it refers to: each
        // node here is bound once, at construction.)
        const bool as_map = kv.second.IsMap();
        if (as_map) only_keys(kv.second, f, {"ranks", "progress"});
        if (as_map && !kv.second["ranks"]) fail(kv.second, f + ".ranks", "missing: the group's world ranks");
        const YAML::Node ranks_node = as_map ? kv.second["ranks"] : kv.second;
        const std::string rf = as_map ? f + ".ranks" : f;
        if (as_map) {
          if (kv.second["progress"]) {
            const auto pr = scalar<std::string>(kv.second["progress"], f + ".progress", "stream or caller");
            if (pr != "stream" && pr != "caller")
              fail(kv.second["progress"], f + ".progress",
                   fmt::format("unknown progress rule '{}'; allowed: stream (the device's, NCCL), caller (only inside "
                               "the rank's calls of the group, MPI)",
                               pr));
            spec.caller_progress = pr == "caller";
          }
        }
        if (!ranks_node.IsSequence() || ranks_node.size() == 0)
          fail(ranks_node, rf, "expected a non-empty list of ranks, or {ranks: [...], progress: stream | caller}");
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

  ExpectSpec expectation(const YAML::Node& e, const std::string& f, const Scenario& s) {
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

 private:
  InputLimits limits_;
  size_t steps_ = 0;
  std::vector<std::vector<int>> cond_sets_;  // the rank sets of `if` steps (Step::conds)
  uint32_t next_block_ = 0;                  // ids of repeat passes (Step::blocks)
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
      if (g.caller_progress)
        y << YAML::Flow << YAML::BeginMap << YAML::Key << "ranks" << YAML::Value << YAML::Flow << g.ranks
          << YAML::Key << "progress" << YAML::Value << "caller" << YAML::EndMap;
      else
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
