#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "kvrt/frontend/safetensors.h"
#include "kvrt/frontend/safetensors_writer.h"
#include "test_util.h"

namespace kvrt::frontend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::raw_safetensors;
using testing::TempDir;
using testing::write_file;

// Writes `bytes` as a file and expects SafetensorsFile::open to fail with `code` and a
// message naming the file and containing every string in `parts`.
void expect_refused(const std::string& bytes, ErrorCode code,
                    std::initializer_list<std::string> parts) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_file(path, bytes);
  auto file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), code) << file.status().to_string();
  EXPECT_THAT(file.status().message(), HasSubstr(path));
  for (const std::string& part : parts) EXPECT_THAT(file.status().message(), HasSubstr(part));
}

TEST(Safetensors, ReadsWhatTheWriterWrites) {
  TempDir dir;
  const std::vector<float> weight = {1.0f, -2.0f, 3.5f, 4.0f, 5.0f, 6.0f};
  const std::vector<uint16_t> half = {f32_to_bf16(1.5f), f32_to_bf16(-0.25f)};
  const std::vector<int32_t> ids = {7, 8, 9};
  const std::vector<TensorToWrite> tensors = {
      {"z.weight", DType::kF32, {2, 3}, testing::as_bytes(weight)},
      {"a.half", DType::kBF16, {2}, std::as_bytes(std::span<const uint16_t>(half))},
      {"m.ids", DType::kI32, {3}, std::as_bytes(std::span<const int32_t>(ids))},
  };
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->tensors()[0].name, "a.half");  // sorted by name
  EXPECT_EQ(file->metadata().at("format"), "pt");

  auto view = file->view("z.weight");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->dtype(), DType::kF32);
  EXPECT_EQ(view->shape(), (Shape{2, 3}));
  EXPECT_EQ(view->data_as<const float>()[2], 3.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(view->data()) % 8, 0u);  // header padded to 8
  auto bf16 = file->view("a.half");
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16_to_f32(bf16->data_as<const uint16_t>()[1]), -0.25f);
  const TensorRecord* record = file->find("m.ids");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->nbytes, 12u);
  EXPECT_EQ(file->bytes(*record).size(), 12u);
  EXPECT_EQ(file->find("missing"), nullptr);
}

TEST(Safetensors, ViewPointsIntoTheMappingWithoutCopying) {
  TempDir dir;
  const std::vector<float> weight(1024, 1.0f);
  const std::vector<TensorToWrite> tensors = {
      {"w", DType::kF32, {1024}, testing::as_bytes(weight)}};
  ASSERT_TRUE(write_safetensors(dir.file("m.safetensors"), tensors).ok());
  auto file = SafetensorsFile::open(dir.file("m.safetensors"));
  ASSERT_TRUE(file.ok());
  auto a = file->view("w");
  auto b = file->view("w");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->data(), b->data());
  EXPECT_EQ(static_cast<const std::byte*>(a->data()), file->bytes(*file->find("w")).data());
}

TEST(Safetensors, EmptyTensorAndEmptyHeaderAreAccepted) {
  TempDir dir;
  write_file(dir.file("e.safetensors"),
             raw_safetensors(R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})"));
  auto file = SafetensorsFile::open(dir.file("e.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->tensors()[0].nbytes, 0u);
  write_file(dir.file("none.safetensors"), raw_safetensors("{}"));
  auto none = SafetensorsFile::open(dir.file("none.safetensors"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tensors().empty());
}

TEST(Safetensors, MissingFileIsNotFound) {
  auto file = SafetensorsFile::open("/nonexistent/kvrt/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), ErrorCode::kNotFound);
}

TEST(Safetensors, FileShorterThanEightBytesIsRejected) {
  expect_refused("abc", ErrorCode::kInvalidArgument, {"3 bytes, shorter than the 8-byte"});
}

TEST(Safetensors, HeaderLengthBeyondFileIsRejected) {
  expect_refused(raw_safetensors("{}", "", 100), ErrorCode::kInvalidArgument,
                 {"header length 100 exceeds the file"});
}

TEST(Safetensors, HugeHeaderLengthDoesNotOverflow) {
  expect_refused(raw_safetensors("{}", "", UINT64_MAX - 1), ErrorCode::kInvalidArgument,
                 {"exceeds the file"});
}

TEST(Safetensors, BadJsonIsRejected) {
  expect_refused(raw_safetensors("{\"w\": [1,"), ErrorCode::kInvalidArgument,
                 {"header is not valid JSON"});
}

TEST(Safetensors, NonObjectHeaderIsRejected) {
  expect_refused(raw_safetensors("[1, 2]"), ErrorCode::kInvalidArgument,
                 {"header must be a JSON object"});
}

TEST(Safetensors, DuplicateTensorNameIsRejected) {
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                 R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                 "ab"),
                 ErrorCode::kInvalidArgument, {"tensor 'w' appears twice"});
}

TEST(Safetensors, UnknownDtypeIsRejectedNamingTheTensor) {
  expect_refused(raw_safetensors(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "unknown dtype 'Q4'"});
}

TEST(Safetensors, KnownButUnsupportedDtypeIsNotSupported) {
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", "12345678"),
      ErrorCode::kNotSupported, {"tensor 'w'", "dtype 'F64' is not supported"});
}

TEST(Safetensors, OffsetsBeyondDataAreRejected) {
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "1234"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "extend beyond the data section"});
}

TEST(Safetensors, ReversedOffsetsAreRejected) {
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", "1234"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "end before begin"});
}

TEST(Safetensors, OffsetsNotMatchingDtypeTimesShapeAreRejected) {
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})", "12345678"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "hold 4 bytes", "needs 6"});
}

TEST(Safetensors, OverlappingTensorsAreRejected) {
  expect_refused(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                 "123456"),
                 ErrorCode::kInvalidArgument, {"tensor 'b' overlaps tensor 'a'"});
}

TEST(Safetensors, ShapeWhoseByteSizeOverflowsIsRejected) {
  expect_refused(
      raw_safetensors(
          R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "1234"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "overflows"});
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,4]}})",
                      "1234"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "byte size", "overflows"});
}

TEST(Safetensors, NegativeOrFractionalShapeIsRejected) {
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})"),
                 ErrorCode::kInvalidArgument, {"tensor 'w': shape", "non-negative integer"});
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w': shape"});
}

TEST(Safetensors, MalformedEntriesAreRejected) {
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":[1]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "missing field 'data_offsets'"});
  expect_refused(
      raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "a"),
      ErrorCode::kInvalidArgument, {"tensor 'w'", "unknown field 'x'"});
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "data_offsets must be [begin, end]"});
  expect_refused(raw_safetensors(R"({"w":{"dtype":5,"shape":[1],"data_offsets":[0,1]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "dtype must be a string"});
  expect_refused(raw_safetensors(R"({"w":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", "a"),
                 ErrorCode::kInvalidArgument, {"tensor 'w'", "shape must be an array"});
  expect_refused(raw_safetensors(R"({"w":[]})"), ErrorCode::kInvalidArgument,
                 {"tensor 'w'", "expected an object"});
  expect_refused(raw_safetensors(R"({"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})"),
                 ErrorCode::kInvalidArgument, {"empty name"});
}

TEST(Safetensors, NonStringMetadataIsRejected) {
  expect_refused(raw_safetensors(R"({"__metadata__":{"format":1}})"), ErrorCode::kInvalidArgument,
                 {"__metadata__ entry 'format' must be a string"});
  expect_refused(raw_safetensors(R"({"__metadata__":[]})"), ErrorCode::kInvalidArgument,
                 {"__metadata__ must be an object"});
}

TEST(Safetensors, GapsBetweenTensorsAreAllowed) {
  TempDir dir;
  write_file(dir.file("g.safetensors"),
             raw_safetensors(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", "xxxxab"));
  auto file = SafetensorsFile::open(dir.file("g.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(static_cast<char>(file->bytes(file->tensors()[0])[1]), 'b');
}

TEST(Safetensors, ViewOfUnknownTensorIsNotFound) {
  TempDir dir;
  write_file(dir.file("n.safetensors"), raw_safetensors("{}"));
  auto file = SafetensorsFile::open(dir.file("n.safetensors"));
  ASSERT_TRUE(file.ok());
  auto view = file->view("nope");
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(view.status().message(), HasSubstr("'nope'"));
}

TEST(Safetensors, ViewOfRankAboveSixIsRejected) {
  TempDir dir;
  write_file(
      dir.file("r.safetensors"),
      raw_safetensors(R"({"r":{"dtype":"U8","shape":[1,1,1,1,1,1,1],"data_offsets":[0,1]}})", "a"));
  auto file = SafetensorsFile::open(dir.file("r.safetensors"));
  ASSERT_TRUE(file.ok());
  auto view = file->view("r");
  ASSERT_FALSE(view.ok());
  EXPECT_THAT(view.status().message(), AllOf(HasSubstr("tensor 'r'"), HasSubstr("rank 7")));
}

TEST(SafetensorsWriter, DuplicateOrInvalidNamesAreRejected) {
  TempDir dir;
  const std::vector<float> one = {1.0f};
  std::vector<TensorToWrite> tensors = {{"w", DType::kF32, {1}, testing::as_bytes(one)},
                                        {"w", DType::kF32, {1}, testing::as_bytes(one)}};
  Status status = write_safetensors(dir.file("d.safetensors"), tensors);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'w' given twice"));
  tensors = {{"__metadata__", DType::kF32, {1}, testing::as_bytes(one)}};
  EXPECT_FALSE(write_safetensors(dir.file("d.safetensors"), tensors).ok());
}

TEST(SafetensorsWriter, DataSizeMismatchFailsBeforeCreatingTheFile) {
  TempDir dir;
  const std::vector<float> one = {1.0f};
  const std::vector<TensorToWrite> tensors = {{"w", DType::kF32, {2}, testing::as_bytes(one)}};
  Status status = write_safetensors(dir.file("s.safetensors"), tensors);
  EXPECT_THAT(status.message(), HasSubstr("data holds 4 bytes, its shape needs 8"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("s.safetensors")));
}

TEST(SafetensorsWriter, FillErrorIsReturnedNamingTheTensor) {
  TempDir dir;
  const std::vector<TensorToWrite> tensors = {{"w", DType::kF32, {2}, {}}};
  Status status = write_safetensors(
      dir.file("f.safetensors"), tensors,
      [](size_t, std::span<std::byte>) -> Status { return internal_error("generator failed"); });
  EXPECT_THAT(status.message(), AllOf(HasSubstr("'w'"), HasSubstr("generator failed")));
}

TEST(SafetensorsWriter, UnwritablePathIsAnError) {
  const std::vector<TensorToWrite> tensors;
  Status status = write_safetensors("/nonexistent/kvrt/x.safetensors", tensors);
  EXPECT_EQ(status.code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kvrt::frontend
