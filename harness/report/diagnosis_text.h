// Diagnoses and flight-recorder timelines as the text the commands print.
#pragma once

#include <string>
#include <vector>

#include "harness/check/diagnosis.h"

namespace collcheck {

// "order_mismatch [rank 2] [call #1]: collectives called in a different order ..."
std::string format_diagnosis(const Diagnosis& d);
// Per rank, per call: states and times, and what the rank is blocked on.
std::string format_timeline(const std::vector<RankDump>& dumps);

}  // namespace collcheck
