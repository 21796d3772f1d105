// Property cases in the MPI world. Rank 0 drives: it generates and shrinks
// (RapidCheck runs only there), sends each case to every rank as its replay
// token (seeded inputs are rebuilt locally, explicit ones travel in the
// token), runs its own part, gathers every rank's buffers and outcome, and
// checks them with the same code as the thread world. The other ranks serve
// cases until rank 0 says stop, and then exit with the code it sends, so the
// exit code is the same on every rank.
//
// Every wait has a deadline. A rank whose part never returns, or that never
// answers, is named by rank 0 once the case's deadline has passed; the case
// cannot be shrunk any further (its world is lost), so rank 0 prints the
// report and ends the job with MPI_Abort.
#pragma once

#include <stdexcept>

#include "harness/world/mpi_world.h"
#include "properties/executor.h"

namespace collcheck {

// Thrown by MpiCaseExecutor::run when a rank never answered: the report it
// carries is final and the job must end.
class MpiWorldLost : public std::runtime_error {
 public:
  MpiWorldLost(const std::string& what, CaseOutcome o) : std::runtime_error(what), outcome(std::move(o)) {}
  CaseOutcome outcome;
};

class MpiCaseExecutor final : public CaseExecutor {
 public:
  MpiCaseExecutor(MpiWorld& world, RunConfig cfg);
  CaseOutcome run(const Case& c) override;
  // Tells every other rank to exit with `code`.
  void stop(int code);
  const Case& last_case() const { return last_; }

 private:
  MpiWorld& world_;
  RunConfig cfg_;
  uint64_t epoch_ = 0;
  Case last_;
};

// The loop of ranks 1..n-1: serve cases until rank 0 says stop. Returns the
// exit code rank 0 sent. Ends the job if rank 0 goes silent for longer than
// any case could take.
int serve_mpi_cases(MpiWorld& world, const RunConfig& cfg);

}  // namespace collcheck
