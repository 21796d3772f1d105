// libFuzzer over the pickle reader and the Flight Recorder dump parser (what
// `collcheck analyze DIR` runs on each PyTorch dump). Any bytes either read
// or throw PickleError / TorchTraceError (exit 2, naming the byte or field);
// a dump that parses is analyzed alone, which must finish without crashing.
// Memory stays bounded: the reader refuses a pickle that expands past its
// limits (shared values count each time they are used).
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/check/torch_analysis.h"
#include "harness/history/torch_trace.h"
#include "harness/model/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  collcheck::PickleLimits small;
  small.max_values = 1 << 16;
  small.max_text_bytes = 1 << 22;
  try {
    (void)collcheck::read_pickle(bytes, small);
  } catch (const collcheck::PickleError&) {
  }
  try {
    const auto d = collcheck::parse_torch_trace(bytes, "_dump_0");
    (void)collcheck::analyze_torch({d});
  } catch (const collcheck::TorchTraceError&) {
  }
  return 0;
}
