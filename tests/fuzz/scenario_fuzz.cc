// libFuzzer over the scenario parser's real entry point (parse_scenario, what
// `collcheck replay FILE` calls after reading the file). The contract: any
// text either parses or throws ScenarioError (exit 2 with file:line); nothing
// else escapes, nothing crashes, and a scenario that parses writes out as YAML
// that parses again to the same YAML.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/model/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  collcheck::Scenario s;
  try {
    s = collcheck::parse_scenario(text, "fuzz.yaml");
  } catch (const collcheck::ScenarioError&) {
    return 0;
  }
  const std::string yaml = collcheck::scenario_to_yaml(s);
  const std::string again = collcheck::scenario_to_yaml(collcheck::parse_scenario(yaml, "fuzz-again.yaml"));
  if (again != yaml) std::abort();  // the round trip changed the scenario
  return 0;
}
