// What one call is, as every rank must agree on it: the fingerprint the guard
// exchanges, the flight recorder records and the diagnosis compares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/history/flight_recorder.h"
#include "impl/collective.h"
#include "impl/semantics.h"

namespace collcheck {

struct CallFingerprint {
  uint64_t seq = 0;  // per-communicator sequence number, from 1 (point-to-point calls: their own)
  Collective coll = Collective::AllReduce;
  int peer = -1;     // broadcast: the root; send/recv: the other rank (in the communicator's ranks)
  std::string tag;   // what the call reduces, when the caller says (scenarios do)
  size_t count = 0;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  std::string algorithm;
  bool async = false;
  bool blocking_matters = false;  // MPI's matching rule: `async` must agree too (CallRecord::blocking_matters)
  std::string describe() const;
};

// The flight recorder's record of a call with this fingerprint (state Scheduled).
CallRecord record_of(const CallFingerprint& f);

// The fingerprint as one line of JSON, and back (the MPI world's guard sends it).
std::string fingerprint_to_json(const CallFingerprint& f);
CallFingerprint fingerprint_from_json(const std::string& text);

}  // namespace collcheck
