#include "harness/model/scenario_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "harness/model/size.h"

namespace collcheck {

std::vector<int> ScenarioParser::int_list(const YAML::Node& n, const std::string& field, int lo, int hi) const {
  std::vector<int> out;
  if (n.IsScalar()) {
    out.push_back(integer(n, field, lo, hi));
    return out;
  }
  if (!n.IsSequence()) fail(n, field, "expected an integer or a list of integers");
  for (size_t i = 0; i < n.size(); ++i) out.push_back(integer(n[i], fmt::format("{}[{}]", field, i), lo, hi));
  return out;
}

std::string ScenarioParser::handle_name(const YAML::Node& n, const std::string& field) const {
  const auto h = scalar<std::string>(n, field, "a handle name");
  if (h.empty() || h.size() > 64 || !std::all_of(h.begin(), h.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
      }))
    fail(n, field, fmt::format("'{}' is not a handle name: 1 to 64 letters, digits, '_', '-' or '.'", h));
  return h;
}

std::string ScenarioParser::open_handles(const std::map<std::string, int>& open) {
  std::string h;
  for (const auto& [name, line] : open) h += (h.empty() ? "" : ", ") + name;
  return h.empty() ? "none" : h;
}

std::string ScenarioParser::group_choices(const Scenario& sc) {
  std::string g;
  for (const auto& x : sc.groups) g += (g.empty() ? "" : ", ") + x.name;
  return g.empty() ? "none: declare groups: {name: [ranks]} first" : g;
}

std::string ScenarioParser::step_choices() {
  return collective_choices() + ", sleep, stall, synchronize, wait, exit, raise, if";
}

Program ScenarioParser::program(const YAML::Node& n, const std::string& field, const Scenario& sc, int first_call) {
  Program p;
  int calls = first_call;
  steps_into(p, n, field, sc, calls);
  return waits_before_placed(std::move(p), field);
}

// Each `wait: {before: k}` becomes a handle and a wait step right before
// call k of the list it was written in (calls counted from 0).
Program ScenarioParser::waits_before_placed(Program p, const std::string& field) const {
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
void ScenarioParser::steps_into(Program& p, const YAML::Node& n, const std::string& field, const Scenario& sc, int& calls) {
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

void ScenarioParser::check_steps(const YAML::Node& n, const std::string& field) {
  if (steps_ > limits_.max_steps)
    fail(n, field, fmt::format("the programs hold more than {} steps in all, the input limit (--max-steps raises it)",
                               limits_.max_steps));
}

int ScenarioParser::calls_of(const Program& p) {
  return static_cast<int>(std::count_if(p.begin(), p.end(), [](const Step& x) { return x.kind == Step::Call; }));
}

// A rank's edits of the default program (or of its own): skip calls, insert
// steps before or after a call. Call numbers are the program's calls from 0,
// as faults count them; inserts and skips refer to the program as written.
Program ScenarioParser::edited(const YAML::Node& e, const std::string& f, const Program& base, const Scenario& sc) {
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

bool ScenarioParser::has_conds(const Program& p) {
  return std::any_of(p.begin(), p.end(), [](const Step& x) { return !x.conds.empty(); });
}

// The steps rank r takes (-1: a rank no `if` lists), conditions dropped.
Program ScenarioParser::chosen(const Program& p, int r) const {
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
Program ScenarioParser::raised(Program p) {
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

}  // namespace collcheck
