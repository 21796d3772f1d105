// collcheck's dtypes and ops in NCCL's numbering, mapped one by one: impl/dtype.h
// has its own order (BFloat16 = 7, Float32 = 8, Float64 = 9), where nccl.h has
// ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9, so a cast would hand NCCL
// the wrong type. tests/nccl_types_test.cc pins every entry to nccl.h.
#pragma once

#include <nccl.h>

#include "impl/semantics.h"

namespace collcheck {

inline ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::Int8: return ncclInt8;
    case DType::Uint8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Uint32: return ncclUint32;
    case DType::Int64: return ncclInt64;
    case DType::Uint64: return ncclUint64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Fp8E4M3: return ncclFloat8e4m3;
    case DType::Fp8E5M2: return ncclFloat8e5m2;
  }
  return ncclNumTypes;  // unreachable: every DType is listed
}

// The built-in op; premulsum has none (ncclRedOpCreatePreMulSum makes it).
inline ncclRedOp_t nccl_builtin_op(RedOp op) {
  switch (op) {
    case RedOp::Sum: return ncclSum;
    case RedOp::Prod: return ncclProd;
    case RedOp::Max: return ncclMax;
    case RedOp::Min: return ncclMin;
    case RedOp::Avg: return ncclAvg;
    case RedOp::PreMulSum: break;
  }
  return ncclNumOps;
}

}  // namespace collcheck
