// The program file container: round trip, mapping without copies, atomic writes, and
// the header checks that make version skew fail closed.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include <sys/stat.h>

#include "kvrt/format/test/program_test_util.h"

namespace kvrt::format {
namespace {

using testing::error_of;
using testing::read_file_bytes;
using testing::sample_program;
using testing::TempDir;
using testing::with_metadata;
using testing::write_sample;

TEST(ProgramFile, RoundTripPreservesSpecBlobsAndWeights_F1) {
  TempDir dir;
  auto sample = sample_program();
  ASSERT_TRUE(write_sample(sample, dir.file("m.kvrt")).ok());
  auto program = ProgramFile::open(dir.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << error_of(program);
  const ProgramView& view = program->view();
  EXPECT_EQ(view.version_major, kProgramVersionMajor);
  ASSERT_EQ(view.spec.methods.size(), 1u);
  EXPECT_EQ(view.spec.methods[0].name, "decode");
  EXPECT_EQ(view.spec.required_features, std::vector<std::string>{"aliased_io"});
  EXPECT_EQ(view.spec.producer["tool"], "program_test");
  ASSERT_EQ(view.blobs.size(), 1u);
  EXPECT_TRUE(std::equal(view.blobs[0].begin(), view.blobs[0].end(), sample.blobs[0].begin(),
                         sample.blobs[0].end()));
  ASSERT_EQ(view.spec.weights.size(), 2u);
  auto bytes = view.weight_bytes(1);
  ASSERT_EQ(bytes.size(), 32u);
  for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], std::byte((2 + i) % 251));
  EXPECT_EQ(view.spec.weights[1].offset % kWeightAlignment, 0u);
  const auto& decode = view.spec.methods[0];
  EXPECT_EQ(std::get<DelegateCall>(decode.instructions[0]).args,
            (std::vector<ValueIndex>{0, 1, 2, 3, 4}));
  EXPECT_EQ(decode.values[3].storage.kind, StorageKind::kBuffer);
  EXPECT_EQ(decode.values[4].storage.nbytes, 64u);
}

TEST(ProgramFile, WeightsAreViewsIntoThePageAlignedMapping_F1) {
  TempDir dir;
  ASSERT_TRUE(write_sample(sample_program(), dir.file("m.kvrt")).ok());
  auto program = ProgramFile::open(dir.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << error_of(program);
  auto weight = program->view().weight("embed.weight");
  ASSERT_TRUE(weight.ok()) << error_of(weight);
  const auto* segment = program->view().weight_segment.data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(segment) % kWeightSegmentAlignment, 0u);
  EXPECT_EQ(static_cast<const std::byte*>(weight->data()), segment);
  EXPECT_EQ(weight->dtype(), DType::kBF16);
  EXPECT_EQ(weight->shape(), Shape({16, 8}));
  EXPECT_EQ(program->view().weight("missing").status().code(), ErrorCode::kNotFound);
}

TEST(ProgramFile, FailedFillerLeavesNoFileBehind) {
  TempDir dir;
  auto sample = sample_program();
  sample.fillers[1] = [](std::span<std::byte>) { return invalid_argument("shape mismatch"); };
  Status status = write_sample(sample, dir.file("m.kvrt"));
  EXPECT_NE(error_of(status).find("weight 'norm.weight'"), std::string::npos) << error_of(status);
  EXPECT_TRUE(dir.entries().empty());
}

// A write stopped by SIGINT, SIGTERM or SIGHUP (Ctrl-C, kill, a closed terminal) ends
// the process as the signal would, and leaves no temporary behind.
TEST(ProgramFileDeathTest, WriteStoppedBySignalLeavesNoTemporary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    testing::TempDir dir;
    auto program = sample_program();
    program.fillers[1] = [signal](std::span<std::byte>) {
      ::raise(signal);
      return Status();
    };
    EXPECT_EXIT((void)testing::write_sample(program, dir.file("m.kvrt")),
                ::testing::KilledBySignal(signal), "")
        << strsignal(signal);
    EXPECT_TRUE(dir.entries().empty()) << strsignal(signal) << ": " << dir.entries().front();
  }
}

TEST(ProgramFile, FailedWriteKeepsThePreviousFile) {
  TempDir dir;
  ASSERT_TRUE(write_sample(sample_program(), dir.file("m.kvrt")).ok());
  auto before = read_file_bytes(dir.file("m.kvrt"));
  auto sample = sample_program();
  sample.fillers[0] = [](std::span<std::byte>) { return invalid_argument("corrupt"); };
  EXPECT_FALSE(write_sample(sample, dir.file("m.kvrt")).ok());
  EXPECT_EQ(read_file_bytes(dir.file("m.kvrt")), before);
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(ProgramFile, UnwritableDirectoryIsAnErrorNamingThePath) {
  Status status = write_sample(sample_program(), "/nonexistent-dir/kvrt/m.kvrt");
  EXPECT_NE(error_of(status).find("/nonexistent-dir/kvrt/m.kvrt"), std::string::npos);
}

TEST(ProgramFile, WrittenFileHonoursUmask) {
  TempDir dir;
  ASSERT_TRUE(write_sample(sample_program(), dir.file("m.kvrt")).ok());
  struct stat info {};
  ASSERT_EQ(::stat(dir.file("m.kvrt").c_str(), &info), 0);
  EXPECT_NE(info.st_mode & S_IRUSR, 0u);
  EXPECT_NE(info.st_mode & S_IWUSR, 0u);
}

TEST(ProgramFile, ProgressReportsEveryWeightUpToTheTotal) {
  TempDir dir;
  auto sample = sample_program();
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  ProgramWriteOptions options;
  options.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  ASSERT_TRUE(
      write_program(dir.file("m.kvrt"), sample.spec, sample.blobs, sample.fillers, options).ok());
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls.back().first, calls.back().second);
}

TEST(ProgramFile, WeightsGivenAsBytesAreWrittenAsIs) {
  TempDir dir;
  auto sample = sample_program();
  std::vector<std::byte> embed(sample.spec.weights[0].nbytes);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = std::byte(i * 7 % 256);
  const std::vector<WeightSource> sources = {WeightSource(std::span<const std::byte>(embed)),
                                             WeightSource(sample.fillers[1])};
  ASSERT_TRUE(write_program(dir.file("m.kvrt"), sample.spec, sample.blobs, sources).ok());
  auto program = ProgramFile::open(dir.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << error_of(program);
  auto stored = program->view().weight_bytes(0);
  EXPECT_TRUE(std::equal(stored.begin(), stored.end(), embed.begin(), embed.end()));
}

TEST(ProgramFile, SourceOfTheWrongSizeIsRefused) {
  TempDir dir;
  auto sample = sample_program();
  std::vector<std::byte> short_bytes(sample.spec.weights[0].nbytes - 2);
  const std::vector<WeightSource> sources = {WeightSource(std::span<const std::byte>(short_bytes)),
                                             WeightSource(sample.fillers[1])};
  Status status = write_program(dir.file("m.kvrt"), sample.spec, sample.blobs, sources);
  EXPECT_NE(error_of(status).find("weight 'embed.weight'"), std::string::npos) << error_of(status);
  EXPECT_TRUE(dir.entries().empty());
}

class ProgramHeader : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_sample(sample_program(), dir_.file("m.kvrt")).ok());
    bytes_ = read_file_bytes(dir_.file("m.kvrt"));
  }
  std::string read_error() const { return error_of(read_program(bytes_)); }

  TempDir dir_;
  std::vector<std::byte> bytes_;
};

TEST_F(ProgramHeader, BadMagicFailsToLoad) {
  bytes_[3] = std::byte{'X'};
  EXPECT_NE(read_error().find("bad magic"), std::string::npos) << read_error();
}

TEST_F(ProgramHeader, OtherMajorVersionFailsClosed) {
  bytes_[8] = std::byte{2};
  EXPECT_NE(read_error().find("version 2.0 is not supported"), std::string::npos) << read_error();
}

TEST_F(ProgramHeader, NewerMinorVersionLoads) {
  bytes_[10] = std::byte{7};
  auto view = read_program(bytes_);
  ASSERT_TRUE(view.ok()) << error_of(view);
  EXPECT_EQ(view->version_minor, 7);
}

TEST_F(ProgramHeader, UnknownRequiredFeatureFailsClosed) {
  auto metadata = testing::metadata_of(bytes_);
  metadata["required_features"].push_back("paged_kv");
  auto error = error_of(read_program(with_metadata(bytes_, metadata)));
  EXPECT_NE(error.find("requires feature 'paged_kv'"), std::string::npos) << error;
}

TEST_F(ProgramHeader, MissingAliasedIoFeatureIsRejected) {
  auto metadata = testing::metadata_of(bytes_);
  metadata["required_features"] = nlohmann::json::array();
  auto error = error_of(read_program(with_metadata(bytes_, metadata)));
  EXPECT_NE(error.find("missing 'aliased_io'"), std::string::npos) << error;
}

TEST_F(ProgramHeader, TruncationIsRejectedAtEveryLength) {
  for (size_t size : {size_t{0}, size_t{10}, size_t{63}, size_t{64}, size_t{200}, bytes_.size() / 2,
                      bytes_.size() - 1}) {
    std::span<const std::byte> prefix(bytes_.data(), size);
    EXPECT_FALSE(read_program(prefix).ok()) << "size " << size;
  }
}

TEST_F(ProgramHeader, MetadataRangeOutsideFileIsRejected) {
  uint64_t huge = ~uint64_t{0} - 8;
  std::memcpy(bytes_.data() + 24, &huge, sizeof(huge));
  EXPECT_NE(read_error().find("metadata range"), std::string::npos) << read_error();
}

TEST_F(ProgramHeader, MisalignedWeightSegmentIsRejected) {
  uint64_t offset = testing::header_u64(bytes_, 48) + 64;
  std::memcpy(bytes_.data() + 48, &offset, sizeof(offset));
  EXPECT_NE(read_error().find("weight segment"), std::string::npos) << read_error();
}

TEST_F(ProgramHeader, InvalidJsonIsRejected) {
  const uint64_t at = testing::header_u64(bytes_, 16);
  bytes_[at] = std::byte{'['};
  EXPECT_NE(read_error().find("not valid JSON"), std::string::npos) << read_error();
}

TEST_F(ProgramHeader, DeeplyNestedJsonIsRejectedWithoutCrashing) {
  auto metadata = testing::metadata_of(bytes_);
  nlohmann::json deep = 1;
  for (int i = 0; i < 200; ++i) deep = nlohmann::json::array({deep});
  metadata["producer"] = deep;
  auto error = error_of(read_program(with_metadata(bytes_, metadata)));
  EXPECT_NE(error.find("nested too deeply"), std::string::npos) << error;
}

}  // namespace
}  // namespace kvrt::format
