// The properties every all-reduce implementation must satisfy, checked on one
// case. One CaseRunner call executes the case on a thread world (four calls per
// rank: the call, the same call again, the other placement, and async + wait),
// runs the peers on the same inputs, and checks, in this order:
//
//   call-completes               every rank returns without error, before its deadline
//   count-zero-is-noop           count 0 writes nothing and completes
//   no-write-outside-count       the canary bytes around every output are intact
//   input-untouched              an out-of-place call leaves its input as it was
//   agrees-with-oracle           bitwise where the order does not matter, else within the bound
//   ranks-identical              every rank holds identical bits
//   deterministic                the same call again gives the same bits
//   inplace-equals-out-of-place  the other placement gives the same bits
//   async-wait-equals-sync       all_reduce_async + wait() gives the same bits
//   peers-agree                  each peer (the other reference algorithms) agrees:
//                                bitwise where the oracle is bitwise, both within
//                                the bound elsewhere
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/peers/implementation.h"
#include "harness/check/oracle.h"
#include "harness/check/output_check.h"
#include "properties/case.h"

namespace collcheck {

// Every property a failure can name: call-completes, then the table's, in order.
std::vector<std::string> property_names();

struct Failure {
  std::string property;  // one of property_names()
  std::string detail;    // readable, multi-line: what differs, where, expected/got/bound
};



struct CaseOutcome {
  bool ok = true;
  Failure failure;
  size_t by_kind[4] = {0, 0, 0, 0};  // elements checked per CheckKind
  size_t order_checked = 0;          // float sum/prod elements replayed in the implementation's declared order
  double max_err_units = 0;          // worst |result - exact| / bound over bound-checked elements
  double max_peer_diff_units = 0;    // worst |result - peer| / bound over bound-checked elements
  bool world_broken = false;         // a rank never returned: the runner cannot be reused
  // Elements accepted only under a documented deviation, by its name (the
  // implementation's, a peer's, or the placement's order).
  std::map<std::string, size_t> deviant;
  // The harness could not run the case (no thread or memory to be had: the
  // machine's limits, not the implementation). Not a verdict: `failure`
  // says what ran out, and verify retries the case or stops with exit 3.
  bool harness_error = false;
  // The run's end (a soak's duration, SIGTERM) came while the case ran and
  // the executor cut it short: no verdict either way. Never a pass: ok is false.
  bool interrupted = false;
  // The properties that failed besides `failure`'s, in the order of the rows
  // (check_execution goes on past the first failure; what later rows found
  // where an earlier one failed is what they could judge, never more).
  std::vector<std::string> also_failed;
};

// Whether a shrink candidate that came out as `now` still shows the failure
// `was`: it fails the same property, first or behind an earlier one
// (also_failed: a smaller world may show the same bug through an earlier
// property too), or one that implies it. A result outside every order's
// bound (agrees-with-oracle) is not the declared order's result either (the
// oracle accepts every order's), so it keeps a matches-declared-order
// failure: without this, a smaller case whose error grew past the bound
// would be refused, and the shrink would stop at a larger one.
bool shrink_keeps(const CaseOutcome& now, const Failure& was);

struct RunConfig {
  ImplPtr impl;
  std::vector<ImplPtr> peers;  // compared with impl on every case
  std::chrono::milliseconds timeout{10000};  // per call
  // Each world rank's node, where the world has nodes of its own (the MPI
  // world: MpiWorld::nodes()); empty: one node. A case's ranks_per_node
  // overrides it.
  std::vector<int> world_nodes;
  // How a case's world is made (Session::worlds()); threads by default.
  WorldFactory make_world = thread_worlds();
  // The simulated world: each case runs under this many schedules (the case's
  // seed mixed with 0, 1, ...; --schedules), and fails on the first that
  // fails. Other worlds run a case once.
  int schedules = 1;
  int schedule = 0;  // the one a run_case call uses
  // Cases run side by side, each in a world of its own on a thread of its
  // own (verify --jobs): for implementations whose cases share no state (the
  // reference algorithms), in a world whose outcome is the case's alone (the
  // simulated one). 1: one case at a time.
  int parallel = 1;
  // Said after "the implementation never returned" where a case got no
  // answer at all (the isolated executor's wall-clock backstop): a plugin
  // run as fibers because it declared it may be blocks their one thread.
  std::string hang_hint = {};
};

// The nodes of a case's ranks as the implementation sees them (node_map()
// numbering), or empty for one node.
std::vector<int> case_nodes(const Case& c, const RunConfig& cfg);

// ---- one case, executed: what every world (threads, MPI) produces and the
// checks consume. Worlds differ only in where the rank bodies run.

// failed_phase of a rank on which the harness itself ran out of a resource
// (a thread could not start, memory could not be had).
inline constexpr int kHarnessFailed = -2;
// The calls each rank makes per case, before the rest of the sequence
// (Case::then: bufs[rank][kNumCalls + k] is call k of `then`) and the peers' calls.
enum CallKind { kPrimary, kRepeat, kOtherPlacement, kAsync, kNumCalls };

// Buffers of one call on one rank, each framed by canaries.
struct CallBuffers {
  bool inplace = false;
  std::vector<std::byte> send;  // out-of-place only
  std::vector<std::byte> recv;
  std::byte* send_data() { return send.data() + kCanary; }
  std::byte* recv_data() { return recv.data() + kCanary; }
  const std::byte* send_data() const { return send.data() + kCanary; }
  const std::byte* recv_data() const { return recv.data() + kCanary; }
};

// Everything one run touches, kept on the heap: when a rank hangs, its thread
// may still write here, so a hung run's state is deliberately never freed.
struct CaseExecution {
  // [call][rank]: every rank's input of the first call, then of each call of
  // c.then (generated once: the buffers are filled from it, the checks read it).
  std::vector<std::vector<std::vector<std::byte>>> inputs;
  std::vector<std::vector<CallBuffers>> bufs;                 // [rank][call]: kNumCalls, then c.then
  std::vector<std::vector<std::vector<std::byte>>> peer_out;  // [peer][rank], in-place
  std::vector<RankOutcome> ranks;                             // [rank]
  std::vector<int> failed_phase;  // [rank]: -1 none, 0 the implementation, 1 + i peer i, kHarnessFailed
  bool hung = false;
  std::chrono::milliseconds limit{0};  // what the world allowed the rank bodies
  World::RankFn fn;
};

// The buffers of every rank, inputs and canaries in place.
std::shared_ptr<CaseExecution> prepare_execution(const Case& c, size_t npeers);
// One rank's part of a case on `links`: the implementation's four calls, then
// one call of each peer. Throws (after setting failed_phase[rank]) on failure.
void execute_rank(const Case& c, CaseExecution& st, const RunConfig& cfg, Links& links);
// The properties, in order, over a finished execution: call-completes, then
// every row of property_checks().
CaseOutcome check_execution(const Case& c, const CaseExecution& st, const RunConfig& cfg);

// What one peer's result on the first call came to, judged element by element
// against the same expectations as the implementation's (computed once per
// element, in the oracle's pass, and read by the peers-agree check).
struct PeerJudgement {
  std::optional<size_t> first_rejected;  // the first element the oracle rejects
  std::string expected_there;            // the oracle's expectation at that element, described
  double max_diff_units = 0;             // worst |impl - peer| / bound before it, over bound-checked elements
  std::map<std::string, size_t> deviant;  // elements accepted only under the peer's documented deviations, before it
};

// The properties as a table: a new property is one check function and one
// row. A row's check sees the finished execution (every call completed on
// every rank) and returns the first failure it finds; a row that judges
// several properties names the others that fail after it in `also`
// (CaseOutcome::also_failed).
struct CheckContext {
  const Case& c;
  const CaseExecution& st;
  const RunConfig& cfg;
  CaseOutcome& out;  // counters a check may add to (elements by kind, worst error)
  const std::vector<std::vector<std::byte>>& inputs;  // every rank's input of the first call
  Reduction red;                                      // the first call's reduction
  const Case* call = nullptr;  // the call a failure is about (a later one of a sequence); the first by default
  // [peer], filled by the oracle's pass over the first call; empty until then.
  std::vector<PeerJudgement> peers;
  std::vector<std::string> also;
};
struct PropertyCheck {
  std::vector<std::string> properties;  // the names its failures carry (new ones join property_names())
  std::function<std::optional<Failure>(CheckContext&)> check;
};
const std::vector<PropertyCheck>& property_checks();
// Adds a row (tests add a throwaway property this way; built-in rows are in
// properties.cc). Not thread-safe: register before any case runs.
void register_property_check(PropertyCheck row);
bool unregister_property_check(std::string_view property);  // removes the row that names it
// How long a world may let the rank bodies of one case run.
std::chrono::milliseconds case_limit(const Case& c, const RunConfig& cfg);
// ...and the case with the longest sequence a token allows.
std::chrono::milliseconds case_limit(const RunConfig& cfg);
// One rank's buffers and outcome as bytes, and back (for the MPI world's gather).
std::string pack_rank(const CaseExecution& st, int rank);
// Throws std::runtime_error if the bytes do not fit the case's buffers.
void unpack_rank(CaseExecution& st, int rank, std::string_view bytes);

// The peers a verify run uses by default: the reference algorithms other than
// `impl` (ring for a plugin), less those that follow the nodes (hierarchical)
// unless `impl` is one of them.
std::vector<ImplPtr> default_peers(const Implementation& impl);

// Thread worlds a CaseRunner keeps for reuse, in rank threads all told: more
// would hold thousands of idle threads in a long run over p up to 64, and
// several runs side by side on one machine would run out of them.
inline constexpr int kMaxCachedWorldThreads = 128;

// One case on the first c.p ranks of `world` (which has at least c.p): every
// process runs the ranks it holds, and the root gathers the others' buffers
// and outcomes and checks them all (check_execution). Elsewhere the outcome is
// no verdict (ok, unchecked). A rank that never returned leaves the world
// broken (world_broken), and the case's state is then never freed: the stuck
// rank may still write to it. *ranks_ok: whether every rank's calls succeeded.
CaseOutcome run_case(World& world, const Case& c, const RunConfig& cfg, bool* ranks_ok = nullptr);

// Cases in process: a thread world of each size, kept for reuse; and one case
// in four of p <= kSharedThreadRanks runs instead on a shared world whose rank
// r is always the same OS thread, whatever p (shared_threads(c)): state an
// implementation keeps per thread, keyed without the communicator or its
// size, then meets a second world size, as it does in a long-lived MPI rank
// or NCCL proxy thread (issue 31).
inline constexpr int kSharedThreadRanks = 16;
bool shared_threads(const Case& c);
class CaseRunner {
 public:
  explicit CaseRunner(RunConfig cfg);
  ~CaseRunner();
  CaseOutcome run(const Case& c);
  const RunConfig& config() const { return cfg_; }
  // Rank threads of the worlds kept for reuse.
  int cached_threads() const {
    int n = 0;
    for (const auto& [p, w] : worlds_) n += p;
    return n + (shared_ ? kSharedThreadRanks : 0);
  }

 private:
  World& world(int p);
  RunConfig cfg_;
  std::map<int, std::unique_ptr<World>> worlds_;
  std::unique_ptr<World> shared_;  // kSharedThreadRanks rank threads, for cases of any p up to that
  std::map<int, uint64_t> last_used_;  // world size -> when it last ran a case
  uint64_t clock_ = 0;
};

}  // namespace collcheck
