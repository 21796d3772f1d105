#include "properties/mpi_executor.h"

#include <fmt/format.h>

#include "harness/world/crash_handler.h"
#include "harness/world/watched.h"

#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace collcheck {

namespace {


// One rank's part runs on a thread of its own (harness/world/watched.h).
WatchedThread& watched() {
  static auto* w = new WatchedThread();  // never destroyed: its thread may be stuck
  return *w;
}

// One rank's part of a case; fills st for this rank.
void run_my_part(MpiWorld& world, const Case& c, CaseExecution& st, const RunConfig& cfg, uint64_t epoch) {
  const int r = world.rank();
  set_crash_context(fmt::format("running verify case {} on {} (replay it with --replay {})", case_summary(c),
                                cfg.impl->name(), encode_case(c)));
  MpiLinks& links = world.links(c.p);
  links.set_epoch(epoch);
  RankOutcome& o = st.ranks[static_cast<size_t>(r)];
  const bool returned = watched().run(
      [&] {
        try {
          execute_rank(c, st, cfg, links);
          o.ok = true;
        } catch (const std::exception& e) {
          o.error = fmt::format("rank {}: {}", r, e.what());
        }
      },
      case_limit(c, cfg));
  o.returned = returned;
  if (!returned) {
    o.ok = false;
    o.error = fmt::format("rank {} (pid {} on {}): its part did not return within {:.1f} s", r, ::getpid(),
                          world.host(), std::chrono::duration<double>(case_limit(c, cfg)).count());
  }
}

}  // namespace

MpiCaseExecutor::MpiCaseExecutor(MpiWorld& world, RunConfig cfg) : world_(world), cfg_(std::move(cfg)) {}

CaseOutcome MpiCaseExecutor::run(const Case& c) {
  if (c.p > world_.size())
    throw std::logic_error(fmt::format("a case of {} ranks in an MPI world of {}", c.p, world_.size()));
  ++epoch_;
  last_ = c;
  const auto limit = case_limit(c, cfg_);
  const Deadline send_by = Clock::now() + limit;
  const std::string cmd = fmt::format("C{}:{}", epoch_, encode_case(c));
  for (int r = 1; r < world_.size(); ++r) world_.send(r, control_tag::kCaseCommand, cmd, send_by);

  auto st = prepare_execution(c, cfg_.peers.size());
  st->limit = limit;
  run_my_part(world_, c, *st, cfg_, epoch_);
  // Rank 0's part is done (or abandoned); every other part has had as long.
  const Deadline answer_by = Clock::now() + limit + std::chrono::seconds(5);
  std::vector<int> silent;
  for (int r = 1; r < c.p; ++r) {
    auto bytes = world_.recv(r, control_tag::kCaseResult, answer_by);
    if (!bytes) {
      silent.push_back(r);
      st->ranks[static_cast<size_t>(r)].error = fmt::format("rank {}: sent no result within {:.1f} s of the case's "
                                                            "deadline (it hangs, or its process died)",
                                                            r, std::chrono::duration<double>(limit).count() + 5);
      continue;
    }
    unpack_rank(*st, r, *bytes);
  }
  for (const auto& o : st->ranks) st->hung |= !o.returned;
  const CaseOutcome out = check_execution(c, *st, cfg_);
  if (st->hung) {
    new std::shared_ptr<CaseExecution>(st);  // a stuck part may still write to it
    throw MpiWorldLost("a rank of the MPI world never returned or never answered", out);
  }
  return out;
}

void MpiCaseExecutor::stop(int code) {
  const Deadline by = Clock::now() + std::chrono::seconds(30);
  for (int r = 1; r < world_.size(); ++r) world_.send(r, control_tag::kCaseCommand, fmt::format("S{}", code), by);
}

int serve_mpi_cases(MpiWorld& world, const RunConfig& cfg) {
  // Between two commands rank 0 runs its own part and waits for everyone's
  // (two case limits at most), then checks and shrinks, which is quick.
  const auto idle = 2 * case_limit(cfg) + std::chrono::seconds(60);
  for (;;) {
    auto cmd = world.recv(0, control_tag::kCaseCommand, Clock::now() + idle);
    if (!cmd) {
      std::fprintf(stderr, "collcheck: rank %d: no command from rank 0 within %.0f s; ending the job\n", world.rank(),
                   std::chrono::duration<double>(idle).count());
      world.abort(1);
    }
    if (!cmd->empty() && (*cmd)[0] == 'S') return std::atoi(cmd->c_str() + 1);
    const size_t colon = cmd->find(':');
    if (cmd->empty() || (*cmd)[0] != 'C' || colon == std::string::npos) {
      std::fprintf(stderr, "collcheck: rank %d: malformed command from rank 0\n", world.rank());
      world.abort(1);
    }
    const uint64_t epoch = std::stoull(cmd->substr(1, colon - 1));
    const Case c = decode_case(std::string_view(*cmd).substr(colon + 1));
    if (world.rank() >= c.p) continue;
    auto st = prepare_execution(c, cfg.peers.size());
    run_my_part(world, c, *st, cfg, epoch);
    const std::string result = pack_rank(*st, world.rank());
    if (!st->ranks[static_cast<size_t>(world.rank())].returned) new std::shared_ptr<CaseExecution>(st);
    try {
      world.send(0, control_tag::kCaseResult, result, Clock::now() + idle);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "collcheck: rank %d: %s; ending the job\n", world.rank(), e.what());
      world.abort(1);
    }
  }
}

}  // namespace collcheck
