// Every collcheck dtype and op reaches NCCL as nccl.h numbers it. Compiled
// wherever nccl.h is found; needs no GPU. (impl/dtype.h orders bfloat16 before
// float32 and float64; nccl.h after them, so a cast would be wrong.)
#include <gtest/gtest.h>

#include "harness/peers/nccl_types.h"

using namespace collcheck;

TEST(NcclTypes, EveryDtypeMapsToNcclsValueOfTheSameWidth) {
  struct Row {
    DType t;
    int nccl_value;  // from nccl.h, written out
    size_t bytes;
  };
  const Row rows[] = {{DType::Int8, 0, 1},     {DType::Uint8, 1, 1},    {DType::Int32, 2, 4},
                      {DType::Uint32, 3, 4},   {DType::Int64, 4, 8},    {DType::Uint64, 5, 8},
                      {DType::Float16, 6, 2},  {DType::Float32, 7, 4},  {DType::Float64, 8, 8},
                      {DType::BFloat16, 9, 2}, {DType::Fp8E4M3, 10, 1}, {DType::Fp8E5M2, 11, 1}};
  ASSERT_EQ(std::size(rows), kAllDTypes.size());
  for (const Row& r : rows) {
    EXPECT_EQ(static_cast<int>(nccl_dtype(r.t)), r.nccl_value) << dtype_name(r.t);
    EXPECT_EQ(dtype_size(r.t), r.bytes) << dtype_name(r.t);
  }
  // And against nccl.h's own names.
  EXPECT_EQ(nccl_dtype(DType::BFloat16), ncclBfloat16);
  EXPECT_EQ(nccl_dtype(DType::Float32), ncclFloat32);
  EXPECT_EQ(nccl_dtype(DType::Float64), ncclFloat64);
  EXPECT_EQ(nccl_dtype(DType::Fp8E4M3), ncclFloat8e4m3);
  EXPECT_EQ(nccl_dtype(DType::Fp8E5M2), ncclFloat8e5m2);
  EXPECT_EQ(static_cast<int>(ncclNumTypes), 12);
}

TEST(NcclTypes, EveryBuiltinOpMapsToNcclsValue) {
  EXPECT_EQ(nccl_builtin_op(RedOp::Sum), ncclSum);
  EXPECT_EQ(nccl_builtin_op(RedOp::Prod), ncclProd);
  EXPECT_EQ(nccl_builtin_op(RedOp::Max), ncclMax);
  EXPECT_EQ(nccl_builtin_op(RedOp::Min), ncclMin);
  EXPECT_EQ(nccl_builtin_op(RedOp::Avg), ncclAvg);
  EXPECT_EQ(static_cast<int>(ncclSum), 0);
  EXPECT_EQ(static_cast<int>(ncclAvg), 4);
}
