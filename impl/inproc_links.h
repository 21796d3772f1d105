// The in-process transport: ranks are threads of one process. A transfer is a
// zero-copy rendezvous: nothing is buffered, the bytes move with one memcpy from
// the sender's span into the receiver's span when both are posted. Memory use is
// therefore bounded by what the algorithms themselves allocate.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "impl/links.h"

namespace collcheck {

class InProcFabric {
 public:
  explicit InProcFabric(int size);
  ~InProcFabric();
  InProcFabric(const InProcFabric&) = delete;
  InProcFabric& operator=(const InProcFabric&) = delete;

  int size() const;
  // The links of one rank. The fabric must outlive them.
  std::unique_ptr<Links> links(int rank);
  // Fails every pending and future wait with LinkAborted(reason) until reset().
  // With `from_call` > 0 only transfers of that call and later ones of process
  // group `group` fail, and every transfer of the other groups (a tag's call
  // number is call_of_tag(tag), its group group_of_tag(tag)): a rank that
  // failed in call k took part in every earlier call, so the others finish
  // those and reach call k, and the flight recorders show what every rank
  // called there.
  void abort(const std::string& reason, uint64_t from_call = 0, uint64_t group = 0);
  // Sizes as NCCL runs them (on) instead of checked (off, the default): a
  // send and a receive of different sizes match without an error; a longer
  // send is cut to the receive (wrong data, both complete), a shorter one
  // leaves the receive waiting for the rest until its deadline (a hang).
  // What production shows of a size mismatch.
  void set_sizes_as_nccl(bool on);
  // A simulated world's cost of a message (impl/sched.h): a matched transfer
  // completes α + β·bytes of virtual time after it matched. Set between runs.
  void set_link_model(std::optional<LinkModel> m);
  // Every user of this fabric runs on the calling OS thread (a simulated
  // world's fibers, which switch only where they park): its mailboxes are
  // then not locked. Set before any rank's links are used.
  void set_one_thread();
  // True once any abort happened (scoped or not).
  bool aborted() const;
  std::string abort_reason() const;
  // Clears an abort and drops every unmatched transfer (between runs).
  void reset();
  // Number of posted transfers not yet matched, for diagnostics and tests.
  size_t pending() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace collcheck
