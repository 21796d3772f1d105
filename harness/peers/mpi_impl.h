// What MPI_Allreduce covers natively and what collcheck adds (mpi_impl.cc).
#pragma once

#include <string>
#include <string_view>

#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

// Open MPI's coll/tuned allreduce algorithms (4.1), for --mpi-algo.
inline constexpr const char* kMpiAllreduceAlgos[] = {"default (tuned's decision rules)", "basic_linear", "nonoverlapping",
                                                     "recursive_doubling", "ring", "segmented_ring", "rabenseifner"};
// "0 default, 1 basic_linear, ..., 6 rabenseifner": for help and errors.
std::string mpi_algo_choices();
// Before MPI starts: Open MPI's coll/tuned told to run allreduce algorithm
// `algo` (-1: its own rules; both variables, or it silently ignores the
// choice). Out of range: std::invalid_argument naming --mpi-algo.
void choose_mpi_allreduce_algorithm(int algo);

enum class MpiSupport : uint8_t {
  Native,       // an MPI type and an MPI op
  UserDefined,  // no MPI type: contiguous bytes and an MPI_Op_create'd op with NCCL semantics
  Composed,     // avg, premulsum: collcheck's pre-multiply / post-divide around an MPI sum
};
MpiSupport mpi_support(DType t, RedOp op);

struct Deviation;
// The int8/uint8 sum deviation of Open MPI's op/avx under coll/tuned's
// allreduce algorithm (0: the default decision, -1: unknown): the uniform
// model for 1 to 5, the mixed one (each step saturates or wraps) otherwise.
const Deviation& mpi_int8_deviation(int algorithm);

// "Open MPI v4.1.4" (the first line of MPI_Get_library_version).
std::string mpi_library_version();

}  // namespace collcheck
