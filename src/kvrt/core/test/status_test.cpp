#include <gtest/gtest.h>

#include <memory>

#include "kvrt/core/result.h"

namespace kvrt {
namespace {

Result<int> parse_positive(int value) {
  if (value <= 0) return invalid_argument("value ", value, " is not positive");
  return value;
}

Status double_into(int value, int* out) {
  KVRT_ASSIGN_OR_RETURN(int parsed, parse_positive(value));
  *out = parsed * 2;
  return Status();
}

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.to_string(), "Ok");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status status = invalid_argument("binding '", "k_cache_0", "' is wrong");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "binding 'k_cache_0' is wrong");
  EXPECT_EQ(status.to_string(), "InvalidArgument: binding 'k_cache_0' is wrong");
}

TEST(Status, EveryCodeHasAName) {
  for (ErrorCode code : {ErrorCode::kInvalidArgument, ErrorCode::kInvalidProgram,
                         ErrorCode::kInvalidState, ErrorCode::kNotSupported, ErrorCode::kNotFound,
                         ErrorCode::kMemoryAllocationFailed, ErrorCode::kInternal}) {
    EXPECT_NE(error_code_name(code), "Unknown");
    EXPECT_NE(error_code_name(code), "Ok");
  }
}

TEST(Status, WithContextKeepsCode) {
  Status status = not_found("tensor 'x'").with_context("file 'a.safetensors'");
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
  EXPECT_EQ(status.message(), "file 'a.safetensors': tensor 'x'");
}

TEST(Result, HoldsValueOrError) {
  Result<int> good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

TEST(Result, CannotBeOkWithoutValue) {
  Result<int> result{Status()};
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kInternal);
}

TEST(Result, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(double_into(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status status = double_into(0, &out);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(out, 8);  // unchanged on error
}

TEST(Result, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  ASSERT_TRUE(result.ok());
  std::unique_ptr<int> owned = std::move(result).value();
  EXPECT_EQ(*owned, 7);
}

}  // namespace
}  // namespace kvrt
