// Gloo's allreduce algorithms as implementations: gloo:<algorithm>.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/peers/implementation.h"

namespace collcheck {

// "ring", "ring_chunked", "halving_doubling", "bcube", "allreduce", "allreduce_bcube".
ImplPtr make_gloo_implementation(std::string_view algo);
std::string gloo_algorithm_choices();
// Every <algorithm> of gloo:<algorithm>, in that order.
std::vector<std::string> gloo_algorithms();
// "0.5.0", from gloo/config.h.
std::string gloo_version();

}  // namespace collcheck
