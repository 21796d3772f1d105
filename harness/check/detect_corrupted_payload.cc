// Bytes that changed on the link: a send and its receive with different checksums.
#include <fmt/format.h>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void corrupted_payload(const Dumps& dumps, const AnalysisOptions&, std::vector<Diagnosis>& out) {
  for (const auto& [key, p] : transfer_pairs(dumps)) {
    // A receive of another size than its send (a size mismatch run as NCCL
    // runs it: cut, or waiting for the rest) holds other bytes for that
    // reason, not because the link changed them.
    if (p.first && p.second && p.first->bytes == p.second->bytes && p.first->checksum != p.second->checksum) {
      Diagnosis dg;
      dg.kind = DiagnosisKind::CorruptedPayload;
      dg.edge = std::make_pair(p.first->src, p.first->dst);
      dg.seq = call_of_tag(p.first->tag);
      dg.ranks = {p.first->dst};
      dg.text = fmt::format("the payload of a transfer from rank {} to rank {} ({}, {} bytes) changed on the link: "
                            "checksum {:#018x} sent, {:#018x} received",
                            p.first->src, p.first->dst, describe_tag(p.first->tag), p.first->bytes,
                            p.first->checksum, p.second->checksum);
      out.push_back(dg);
      return;  // the first one: later ones follow from it
    }
  }
}

}  // namespace collcheck::detect
