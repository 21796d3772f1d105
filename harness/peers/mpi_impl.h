// What MPI_Allreduce covers natively and what collcheck adds (mpi_impl.cc).
#pragma once

#include <string>
#include <string_view>

#include "impl/dtype.h"
#include "impl/semantics.h"

namespace collcheck {

enum class MpiSupport : uint8_t {
  Native,       // an MPI type and an MPI op
  UserDefined,  // no MPI type: contiguous bytes and an MPI_Op_create'd op with NCCL semantics
  Composed,     // avg, premulsum: collcheck's pre-multiply / post-divide around an MPI sum
};
MpiSupport mpi_support(DType t, RedOp op);

// "Open MPI v4.1.4" (the first line of MPI_Get_library_version).
std::string mpi_library_version();

}  // namespace collcheck
