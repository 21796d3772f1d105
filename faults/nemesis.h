// Nemeses: the faults collcheck injects, one file each, registered in
// faults/nemesis.cc. A nemesis is a scenario mutator (it rewrites what ranks
// call), a link wrapper (it changes how bytes move, on any transport: threads,
// MPI, plugins), or both. A nemesis never knows about checkers: `expected`
// only states what a correct diagnosis must name, for the detection property
// and `collcheck faults` to compare from outside.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/model/scenario.h"
#include "impl/links.h"

namespace collcheck {

// The links a link-wrapping nemesis returns: they count what they saw and
// what they changed, so a run can say a fault never fired instead of reading
// like a missed diagnosis.
class FaultLinks : public LinksDecorator {
 public:
  using LinksDecorator::LinksDecorator;
  uint64_t seen() const { return seen_; }    // transfers the fault applies to
  uint64_t fired() const { return fired_; }  // ...and those it changed

 protected:
  std::atomic<uint64_t> seen_{0}, fired_{0};
};

// One fault's effect over a run, every rank's summed.
struct FaultTally {
  uint64_t seen = 0, fired = 0;
};

struct NemesisInfo {
  std::string_view name;
  std::string_view summary;
  // Throws ScenarioError ("file:line: faults[i].<name>.<field>: ...") for bad parameters.
  void (*validate)(const Scenario& s, const FaultSpec& f);
  // Rewrites programs; may be null.
  void (*mutate)(Scenario& s, const FaultSpec& f);
  // Wraps one rank's links; returns null when this rank is untouched. May be null.
  std::unique_ptr<FaultLinks> (*wrap)(Links& inner, const FaultSpec& f, int rank);
  // The diagnosis a correct checker must produce for this fault.
  ExpectSpec (*expected)(const Scenario& s, const FaultSpec& f);
  // A random instance for a clean scenario (the detection property).
  FaultSpec (*random)(const Scenario& s, uint64_t r);
  // The deterministic instance `collcheck faults` injects into its training
  // step (fault_table_scenario in properties/detection.h).
  FaultSpec (*table_instance)(const Scenario& s);
  // Whether a random instance is attributable in this clean scenario (a shape
  // or order fault needs a strict majority of good ranks); null: always.
  bool (*fits)(const Scenario& s) = nullptr;
  // Adapts the clean scenario before a random instance is drawn (a link fault
  // needs an edge the implementation is sure to use); null: as it is.
  void (*adapt)(Scenario& s) = nullptr;
  // Seconds a run with this fault may take beyond its sleeps and the usual
  // margin (a stalled rank makes the others wait one deadline); null: none.
  double (*extra_time)(const Scenario& s) = nullptr;
  // How much longer one call of `s` can take with this fault in it, when
  // nothing is wrong but the fault's own delays (a slow link: every step of a
  // ring waits on it); a run's per-call deadline must leave room for it. null: 0.
  double (*call_delay)(const Scenario& s, const FaultSpec& f) = nullptr;
  // Why a link fault changed nothing in a run (its tally): "the ring never
  // sends from rank 0 to rank 2". null: a generic sentence.
  std::string (*unfired)(const Scenario& s, const FaultSpec& f, const FaultTally& t) = nullptr;
};

std::span<const NemesisInfo> nemeses();
const NemesisInfo* find_nemesis(std::string_view name);
std::string nemesis_choices();

// Validates every fault of `s` (unknown kinds included) and applies the
// mutators. Link wrappers are applied per rank by the runner (wrap_links).
Scenario apply_mutators(const Scenario& s);
// Wraps `inner` with every link-wrapping fault of `s` that touches `rank`.
// `keep` owns the wrappers; the returned reference is the outermost.
Links& wrap_links(const Scenario& s, int rank, Links& inner, std::vector<std::unique_ptr<Links>>& keep);
// This rank's tally of every fault of `s` (zeros for the faults that are not
// link wrappers or do not touch it), from the wrappers wrap_links kept.
std::vector<FaultTally> fault_tallies(const Scenario& s, const std::vector<std::unique_ptr<Links>>& keep);
// One line per link fault that never fired over the run (tallies summed over
// ranks), saying why; empty when every link fault fired.
std::vector<std::string> unfired_faults(const Scenario& s, const std::vector<FaultTally>& total);

// ---- shared helpers for the nemesis files ----
[[noreturn]] void fault_error(const Scenario& s, const FaultSpec& f, std::string_view field, const std::string& what);
// The index in `p` of the program's call number `call` (0-based among calls), or -1.
int step_of_call(const Program& p, int call);
int calls_in(const Program& p);
double fault_number(const Scenario& s, const FaultSpec& f, const std::string& key, double lo, double hi, double dflt);
int fault_rank(const Scenario& s, const FaultSpec& f, const std::string& key);
// Checks `ranks` (some, not all) and `call` (one call of the world that each
// of those ranks has) for a nemesis that adds or removes a call; `what` says
// what the ranks do ("issue the extra call").
void validate_one_world_call(const Scenario& s, const FaultSpec& f, std::string_view what);
// What the analysis names when `with_more` issued one call, at world call
// number `seq`, that the other ranks did not: an extra call on them, unless
// they are a strict majority; then the others skipped it.
ExpectSpec one_call_more(const Scenario& s, const std::vector<int>& with_more, uint64_t seq);

// The nemeses are one file each, declared beside their rows in nemesis.cc;
// find_nemesis reaches one by name.

}  // namespace collcheck
