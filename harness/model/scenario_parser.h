// The scenario file's parser (parse_scenario), in three files: a call
// step (scenario_call.cc), programs and their steps (scenario_steps.cc),
// and the file's top level and expectations (scenario_parse.cc).
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "harness/model/scenario.h"
#include "harness/model/yaml_input.h"

namespace collcheck {

class ScenarioParser : public YamlFields<ScenarioError> {
 public:
  ScenarioParser(std::string file, const InputLimits& limits) : YamlFields<ScenarioError>(std::move(file)), limits_(limits) {}
  std::vector<int> int_list(const YAML::Node& n, const std::string& field, int lo, int hi) const;
  Step call(const YAML::Node& n, const std::string& field, int index, Collective coll, const Scenario& sc) const;
  std::string handle_name(const YAML::Node& n, const std::string& field) const;
  static std::string open_handles(const std::map<std::string, int>& open);
  static std::string group_choices(const Scenario& sc);
  static std::string step_choices();
  Program program(const YAML::Node& n, const std::string& field, const Scenario& sc, int first_call = 0);
  // Each `wait: {before: k}` becomes a handle and a wait step right before
  // call k of the list it was written in (calls counted from 0).
  Program waits_before_placed(Program p, const std::string& field) const;
  // Appends the steps of list `n` to `p`; `calls` numbers the calls (default tags call<i>).
  void steps_into(Program& p, const YAML::Node& n, const std::string& field, const Scenario& sc, int& calls);
  void check_steps(const YAML::Node& n, const std::string& field);
  static int calls_of(const Program& p);
  // A default tag (call<i>) is renumbered in each copy of a repeated block.
  static bool explicit_tag(const Step& x) { return !x.call.default_tag; }
  // A rank's edits of the default program (or of its own): skip calls, insert
  // steps before or after a call. Call numbers are the program's calls from 0,
  // as faults count them; inserts and skips refer to the program as written.
  Program edited(const YAML::Node& e, const std::string& f, const Program& base, const Scenario& sc);
  static bool has_conds(const Program& p);
  // The steps rank r takes (-1: a rank no `if` lists), conditions dropped.
  Program chosen(const Program& p, int r) const;
  // Each Raise leaves out the rest of its block (the innermost repeat pass it
  // is in; the rest of the program at the top). A wait left out makes its
  // call never waited; a call left out takes its later wait step with it.
  static Program raised(Program p);
  Scenario scenario(const YAML::Node& root);
  ExpectSpec expectation(const YAML::Node& e, const std::string& f, const Scenario& s);

 private:
  InputLimits limits_;
  size_t steps_ = 0;
  std::vector<std::vector<int>> cond_sets_;  // the rank sets of `if` steps (Step::conds)
  uint32_t next_block_ = 0;                  // ids of repeat passes (Step::blocks)
};

}  // namespace collcheck
