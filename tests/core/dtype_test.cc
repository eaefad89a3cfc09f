#include "refit/core/dtype.h"

#include <gtest/gtest.h>

#include "error_code.h"

#include "refit/core/tensor_spec.h"

namespace refit {
namespace {

TEST(DType, SizesAndNamesRoundTrip) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kFP8E4M3), 1);
  EXPECT_EQ(dtype_size(DType::kFP64), 8);
  EXPECT_EQ(dtype_size(DType::kInt32), 4);
  EXPECT_EQ(dtype_size(DType::kFP8E8M0), 1);
  EXPECT_EQ(all_dtypes().size(), 11u);
  for (DType t : all_dtypes()) EXPECT_EQ(parse_dtype(dtype_name(t)).value(), t);
}

TEST(DType, AcceptsTorchSpellings) {
  EXPECT_EQ(parse_dtype("bfloat16").value(), DType::kBF16);
  EXPECT_EQ(parse_dtype("torch.float32").value(), DType::kFP32);
  EXPECT_EQ(parse_dtype("float8_e4m3fn").value(), DType::kFP8E4M3);
  EXPECT_EQ(parse_dtype("float8_e8m0fnu").value(), DType::kFP8E8M0);
  EXPECT_EQ(parse_dtype("F8_E8M0").value(), DType::kFP8E8M0);  // safetensors
}

TEST(DType, UnknownNameIsNamedInTheError) {
  auto r = parse_dtype("complex32");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("complex32"), std::string::npos);
  EXPECT_TRUE(r.error().is_bad_input());
}

TEST(TensorSpec, BytesAreElementsTimesDtypeSize) {
  // 8192 x 4096 bf16 = 33554432 elements x 2 bytes.
  auto t = make_tensor_spec("q_proj", {8192, 4096}, DType::kBF16);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->bytes(), Bytes{67108864});
}

TEST(TensorSpec, RejectsBadShapesNamingTheTensor) {
  EXPECT_EQ(testing::error_code(make_tensor_spec("w", {}, DType::kBF16)), ErrorCode::kOutOfRange);
  EXPECT_EQ(testing::error_code(make_tensor_spec("w", Shape(9, 1), DType::kBF16)), ErrorCode::kOutOfRange);
  EXPECT_EQ(testing::error_code(make_tensor_spec("", {4}, DType::kBF16)), ErrorCode::kInvalidArgument);
  auto neg = make_tensor_spec("w", {4, -1}, DType::kBF16);
  ASSERT_FALSE(neg);
  EXPECT_EQ(neg.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(neg.error().message.find("'w'"), std::string::npos);
  EXPECT_NE(neg.error().message.find("shape[1]"), std::string::npos);
}

}  // namespace
}  // namespace refit
