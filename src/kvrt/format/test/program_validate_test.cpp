// The reader's semantic checks: each test breaks one field of a valid file and expects
// a load error naming that field. The writer runs the same checks, so a program that
// fails here can never be written either.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "kvrt/format/test/program_test_util.h"

namespace kvrt::format {
namespace {

using nlohmann::json;
using testing::error_of;

class ProgramValidate : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::write_sample(testing::sample_program(), dir_.file("m.kvrt")).ok());
    bytes_ = testing::read_file_bytes(dir_.file("m.kvrt"));
    metadata_ = testing::metadata_of(bytes_);
  }
  json& decode() { return metadata_["methods"][0]; }
  // The load error of the file with the edited metadata ("ok" if it loads).
  std::string load_error() const {
    return error_of(read_program(testing::with_metadata(bytes_, metadata_)));
  }
  void expect_error(std::string_view field, std::string_view what) const {
    const std::string error = load_error();
    EXPECT_NE(error.find(field), std::string::npos) << error;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find("InvalidProgram"), std::string::npos) << error;
  }

  testing::TempDir dir_;
  std::vector<std::byte> bytes_;
  json metadata_;
};

TEST_F(ProgramValidate, UnmodifiedFileLoads) {
  EXPECT_EQ(load_error(), "ok");
}

TEST_F(ProgramValidate, PermutedInputArgumentsFailToLoad_B2) {
  decode()["instructions"][0]["args"] = {1, 0, 2, 3, 4};
  expect_error("methods[0].instructions[0].args[0]", "does not match blob binding 'tokens'");
}

TEST_F(ProgramValidate, SwappedOutputArgumentsFailToLoad_B3) {
  // The thread's bug: the cache mutation output and logits trade places.
  decode()["instructions"][0]["args"] = {0, 1, 2, 4, 3};
  expect_error("methods[0].instructions[0].args[3]",
               "'logits' does not match blob binding 'k_cache.0.updated'");
}

TEST_F(ProgramValidate, AliasedOutputInScratchStorageIsRejected_B1) {
  decode()["values"][3]["storage"] = "planned";
  decode()["values"][3]["arena"] = "device";
  decode()["values"][3]["offset"] = 0;
  decode()["values"][3]["nbytes"] = 256;
  decode()["memory_plan"]["device"] = 256;
  decode()["mutations"] = json::array();
  expect_error("args[3]", "not stored in the storage of 'k_cache.0'");
}

TEST_F(ProgramValidate, MutationDeclaredTwiceIsRejected_B5) {
  decode()["mutations"].push_back({{"buffer", "k_cache.0"}, {"value", 3}});
  expect_error("methods[0].mutations[1]", "declared twice");
}

TEST_F(ProgramValidate, UndeclaredMutationIsRejected_B5) {
  decode()["mutations"] = json::array();
  expect_error("methods[0].mutations", "'k_cache.0' is written but undeclared");
}

TEST_F(ProgramValidate, MutationOfUnwrittenValueIsRejected) {
  decode()["mutations"][0]["value"] = 2;
  expect_error("mutations[0].value", "not a write of buffer");
}

TEST_F(ProgramValidate, ArgumentCountMismatchIsRejected) {
  decode()["instructions"][0]["args"] = {0, 1, 2, 3};
  expect_error("instructions[0].args", "differs from the blob's bindings");
}

TEST_F(ProgramValidate, ValueIndexOutOfRangeIsRejected) {
  decode()["outputs"] = {9};
  expect_error("methods[0].outputs[0]", "out of range");
}

TEST_F(ProgramValidate, DelegateOfAnotherMethodIsRejected) {
  metadata_["delegates"][0]["method"] = "prefill";
  expect_error("delegates[0].method", "unknown method 'prefill'");
}

TEST_F(ProgramValidate, BlobRangeOutsideSegmentIsRejected) {
  metadata_["delegates"][0]["size"] = 1u << 30;
  expect_error("delegates[0]", "outside the blob segment");
}

TEST_F(ProgramValidate, CorruptBlobIsRejectedNamingTheDelegate) {
  metadata_["delegates"][0]["offset"] = 64;
  metadata_["delegates"][0]["size"] = 64;
  const std::string error = load_error();
  EXPECT_NE(error.find("delegates[0]"), std::string::npos) << error;
}

TEST_F(ProgramValidate, WeightSizeMustMatchShape) {
  metadata_["weights"][1]["nbytes"] = 31;
  expect_error("weights[1].nbytes", "differs from shape");
}

TEST_F(ProgramValidate, WeightOutsideSegmentIsRejected) {
  metadata_["weights"][1]["offset"] = 1u << 20;
  expect_error("weights[1].offset", "outside the weight segment");
}

TEST_F(ProgramValidate, OverlappingWeightsAreRejected) {
  metadata_["weights"][1]["offset"] = 64;
  expect_error("weights", "overlap");
}

TEST_F(ProgramValidate, DuplicateWeightNameIsRejected) {
  metadata_["weights"][1]["name"] = "embed.weight";
  expect_error("weights[1].name", "duplicate");
}

TEST_F(ProgramValidate, UnknownDtypeIsRejected) {
  metadata_["buffers"][0]["dtype"] = "f8";
  expect_error("buffers[0].dtype", "unknown dtype 'f8'");
}

TEST_F(ProgramValidate, BufferValueShapeMustMatchBufferSpec) {
  decode()["values"][2]["shape"] = {2, 8, 5};
  expect_error("methods[0].values[2]", "differ from buffer 'k_cache.0'");
}

TEST_F(ProgramValidate, UnknownBufferIsRejected) {
  decode()["values"][2]["storage"] = "buffer:v_cache.0";
  expect_error("methods[0].values[2].storage", "unknown buffer 'v_cache.0'");
}

TEST_F(ProgramValidate, PlannedRangeOutsideArenaIsRejected) {
  decode()["memory_plan"]["host"] = 32;
  expect_error("methods[0].values[4].offset", "outside the method's host arena");
}

TEST_F(ProgramValidate, PlannedSizeSmallerThanValueIsRejected) {
  decode()["values"][4]["nbytes"] = 32;
  expect_error("methods[0].values[4].nbytes", "smaller");
}

TEST_F(ProgramValidate, CopyBytesMustMatchCopyInstructions_F3) {
  metadata_["buffers"][0]["copy_bytes_per_step"]["decode"] = 256;
  expect_error("buffers[0].copy_bytes_per_step.decode", "differs from the method's copy");
}

TEST_F(ProgramValidate, UnknownInstructionKindIsRejected) {
  decode()["instructions"][0]["kind"] = "jump";
  expect_error("methods[0].instructions[0].kind", "unknown instruction kind 'jump'");
}

TEST_F(ProgramValidate, ReadBeforeWriteIsRejected) {
  // A host kernel reading logits before the delegate call writes it.
  json kernel = {
      {"kind", "host_kernel"}, {"op", "take_last"},        {"node", "n"},
      {"inputs", {4}},         {"outputs", json::array()}, {"attributes", json::object()}};
  decode()["instructions"].insert(decode()["instructions"].begin(), kernel);
  expect_error("methods[0].instructions[0].inputs[0]", "before it is written");
}

TEST_F(ProgramValidate, MissingFieldIsNamed) {
  decode()["values"][1].erase("dtype");
  expect_error("methods[0].values[1].dtype", "missing");
}

TEST_F(ProgramValidate, WrongFieldTypeIsNamed) {
  decode()["inputs"] = "tokens";
  expect_error("methods[0].inputs", "expected an array");
}

TEST_F(ProgramValidate, NegativeIndexIsNamed) {
  decode()["inputs"] = {-1, 1};
  expect_error("methods[0].inputs[0]", "out of range");
}

TEST(ProgramWrite, WriterRefusesWhatTheReaderWould) {
  testing::TempDir dir;
  auto sample = testing::sample_program();
  std::get<DelegateCall>(sample.spec.methods[0].instructions[0]).args = {0, 1, 2, 4, 3};
  Status status = testing::write_sample(sample, dir.file("m.kvrt"));
  EXPECT_NE(error_of(status).find("does not match blob binding"), std::string::npos)
      << error_of(status);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(ProgramWrite, BlobWithDroppedAliasIsRejected_B4) {
  testing::TempDir dir;
  auto sample = testing::sample_program();
  BlobMetadata metadata = testing::sample_blob_metadata();
  metadata.aliases.clear();  // the cache output still lands in the buffer
  auto blob = write_blob(metadata, {});
  ASSERT_TRUE(blob.ok());
  sample.blobs[0] = *blob;
  Status status = testing::write_sample(sample, dir.file("m.kvrt"));
  EXPECT_NE(error_of(status).find("stored in buffer 'k_cache.0' but the blob declares no alias"),
            std::string::npos)
      << error_of(status);
}

TEST(ProgramWrite, PlannedValuesLiveTogetherMustNotShareBytes) {
  testing::TempDir dir;
  auto sample = testing::sample_program();
  MethodSpec& method = sample.spec.methods[0];
  // logits copied to a second planned value at the same offset: both live at the copy.
  method.values.push_back({"copy",
                           DType::kF32,
                           testing::dims({1, 16}),
                           {StorageKind::kPlanned, Arena::kHost, 0, 64, ""}});
  const CopyInstruction copy{4, 5, 64};
  method.instructions.emplace_back(copy);
  EXPECT_NE(error_of(testing::write_sample(sample, dir.file("a.kvrt"))).find("overlap"),
            std::string::npos);
  method.values[5].storage.offset = 64;
  method.host_arena_bytes = 128;
  EXPECT_EQ(error_of(testing::write_sample(sample, dir.file("b.kvrt"))), "ok");
}

}  // namespace
}  // namespace kvrt::format

namespace kvrt::format {
namespace {

// The fixture's file with its header's minor version set to `minor`.
std::vector<std::byte> with_minor(std::vector<std::byte> bytes, uint16_t minor) {
  std::memcpy(bytes.data() + 10, &minor, sizeof(minor));
  return bytes;
}

// A key this reader does not know is a field it would silently not honour: refused in
// a file of its own minor version, as the blob reader does (A2), at every level.
TEST_F(ProgramValidate, UnknownKeyIsRefusedNamingIt) {
  const std::pair<std::function<void(json&)>, std::string> cases[] = {
      {[](json& m) { m["paged_cache"] = true; }, "paged_cache: unknown key"},
      {[](json& m) { m["weights"][0]["scale"] = 0.5; }, "weights[0].scale: unknown key"},
      {[](json& m) { m["buffers"][0]["ring"] = 4; }, "buffers[0].ring: unknown key"},
      {[](json& m) { m["delegates"][0]["device"] = 1; }, "delegates[0].device: unknown key"},
      {[](json& m) { m["methods"][0]["window"] = 8; }, "methods[0].window: unknown key"},
      {[](json& m) { m["methods"][0]["values"][0]["stride"] = 2; },
       "methods[0].values[0].stride: unknown key"},
      {[](json& m) { m["methods"][0]["instructions"][0]["stream"] = 1; },
       "methods[0].instructions[0].stream: unknown key"},
      {[](json& m) { m["methods"][0]["mutations"][0]["offset"] = 1; },
       "methods[0].mutations[0].offset: unknown key"},
      {[](json& m) { m["methods"][0]["memory_plan"]["pinned"] = 64; },
       "methods[0].memory_plan.pinned: unknown key"},
  };
  for (const auto& [edit, expected] : cases) {
    json metadata = metadata_;
    edit(metadata);
    const std::string error = error_of(read_program(testing::with_metadata(bytes_, metadata)));
    EXPECT_NE(error.find(expected), std::string::npos) << error;
    EXPECT_NE(error.find("InvalidProgram"), std::string::npos) << error;
  }
}

// A newer minor version may add optional keys: this reader skips them.
TEST_F(ProgramValidate, UnknownKeyOfANewerMinorVersionIsIgnored) {
  metadata_["paged_cache"] = true;
  decode()["window"] = 8;
  const auto bytes =
      with_minor(testing::with_metadata(bytes_, metadata_), kProgramVersionMinor + 1);
  EXPECT_EQ(error_of(read_program(bytes)), "ok");
}

// A memory plan near 2^64 is refused by the reader, naming the field, before any
// arithmetic rounds it into a small allocation that zeroing would overrun.
TEST_F(ProgramValidate, MemoryPlanNear2To64IsRefused) {
  for (uint64_t bytes : {UINT64_MAX, UINT64_MAX - 10, (uint64_t{1} << 48) + 1}) {
    decode()["memory_plan"]["host"] = bytes;
    expect_error("methods[0].memory_plan.host", "implausible");
  }
  decode()["memory_plan"]["host"] = 64;
  decode()["memory_plan"]["device"] = UINT64_MAX - 62;
  expect_error("methods[0].memory_plan.device", "implausible");
}

TEST_F(ProgramValidate, BufferOfImplausibleSizeIsRefused) {
  metadata_["buffers"][0]["shape"] = {uint64_t{1} << 30, uint64_t{1} << 20, 4};
  expect_error("buffers[0].shape", "implausible");
}

// copy_bytes_per_step has an entry for every method (0 = zero-copy, F3).
TEST_F(ProgramValidate, MissingPerMethodCopyEntryIsRefused) {
  metadata_["buffers"][0]["copy_bytes_per_step"] = json::object();
  expect_error("buffers[0].copy_bytes_per_step", "no entry for method 'decode'");
}

}  // namespace
}  // namespace kvrt::format
