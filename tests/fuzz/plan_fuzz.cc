// libFuzzer over the soak plan parser's real entry point (parse_plan, what
// `collcheck soak --plan FILE` calls after reading the file). The contract:
// any text either parses or throws PlanError (exit 2 with file:line: field);
// nothing else escapes, nothing crashes, and a plan that parses writes out as
// YAML (the results file's header, what --resume reads) that parses again to
// the same YAML.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "harness/soak/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  collcheck::Plan p;
  try {
    p = collcheck::parse_plan(text, "fuzz.yaml");
  } catch (const collcheck::PlanError&) {
    return 0;
  }
  const std::string yaml = collcheck::plan_to_yaml(p);
  const std::string again = collcheck::plan_to_yaml(collcheck::parse_plan(yaml, "fuzz-again.yaml"));
  if (again != yaml) std::abort();  // the round trip changed the plan
  return 0;
}
