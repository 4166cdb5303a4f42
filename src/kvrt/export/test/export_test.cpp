// export_checkpoint on the reference fixtures: the program it writes, dtype conversion,
// sharded checkpoints, and every refusal (one line, naming the culprit, no file left).
#include "kvrt/export/exporter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "kvrt/core/temp_file.h"
#include "kvrt/export/test/export_test_util.h"
#include "kvrt/format/program.h"
#include "kvrt/frontend/checkpoint.h"

namespace kvrt::exporter {
namespace {

using testing::copy_checkpoint;
using testing::options_for;
using testing::ScratchDir;

TEST(Export, FixtureBecomesAProgramWithPrefillDecodeAndWeightsOnce_F1) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  uint64_t last_done = 0, last_total = 0;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  };
  auto summary = export_checkpoint(options);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(last_done, last_total);
  auto program = format::ProgramFile::open(out.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const format::ProgramSpec& spec = program->spec();
  ASSERT_EQ(spec.methods.size(), 2u);
  EXPECT_EQ(spec.methods[0].name, "prefill");
  EXPECT_EQ(spec.methods[1].name, "decode");
  EXPECT_EQ(spec.delegates.size(), 2u);
  // Every checkpoint tensor exactly once, bytes identical (f32 stays f32).
  auto checkpoint = frontend::Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(spec.weights.size(), checkpoint->weights().size());
  for (size_t i = 0; i < spec.weights.size(); ++i) {
    auto original = checkpoint->weights().bytes(spec.weights[i].name);
    ASSERT_TRUE(original.ok()) << spec.weights[i].name;
    auto stored = program->view().weight_bytes(i);
    EXPECT_TRUE(std::equal(stored.begin(), stored.end(), original->begin(), original->end()))
        << spec.weights[i].name;
  }
  EXPECT_EQ(summary->file_bytes, std::filesystem::file_size(out.file("m.kvrt")));
  EXPECT_EQ(out.entries(), std::vector<std::string>{"m.kvrt"});
  EXPECT_EQ(spec.producer["generation"]["eos_token_ids"], nlohmann::json::array({2}));
}

TEST(Export, ShardedCheckpointExportsLikeASingleFile) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_sharded");
  ScratchDir out;
  auto summary = export_checkpoint(options_for(dir, out.file("m.kvrt")));
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  auto program = format::ProgramFile::open(out.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto checkpoint = frontend::Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok());
  ASSERT_EQ(checkpoint->weights().files().size(), 2u);
  EXPECT_EQ(program->spec().weights.size(), checkpoint->weights().size());
  EXPECT_GE(program->view().find_weight("lm_head.weight"), 0);
}

TEST(Export, WeightsAreConvertedWhileWriting) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");  // stored f32
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.weight_dtype = DType::kBF16;
  options.cache_dtype = DType::kBF16;
  ASSERT_TRUE(export_checkpoint(options).ok());
  auto program = format::ProgramFile::open(out.file("m.kvrt"));
  ASSERT_TRUE(program.ok());
  auto checkpoint = frontend::Checkpoint::open(dir);
  ASSERT_TRUE(checkpoint.ok());
  for (size_t i = 0; i < program->spec().weights.size(); ++i) {
    const auto& weight = program->spec().weights[i];
    EXPECT_EQ(weight.dtype, DType::kBF16);
    auto original = checkpoint->weights().view(weight.name);
    ASSERT_TRUE(original.ok());
    const auto stored = program->view().weight_bytes(i);
    const float* source = original->data_as<const float>();
    for (size_t k = 0; k < stored.size() / 2; k += 97) {
      uint16_t bits;
      std::memcpy(&bits, stored.data() + 2 * k, 2);
      ASSERT_EQ(bits, f32_to_bf16(source[k])) << weight.name << "[" << k << "]";
    }
  }
  for (const auto& buffer : program->spec().buffers) EXPECT_EQ(buffer.dtype, DType::kBF16);
}

TEST(Export, ForcedHostNodesGiveAMultiPartitionProgram) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.force_host = {"final_norm", "layers.0.attn.attention"};
  ASSERT_TRUE(export_checkpoint(options).ok());
  auto program = format::ProgramFile::open(out.file("m.kvrt"));
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  EXPECT_EQ(program->spec().delegates.size(), 6u);  // 3 engine runs per method
  const int k0 = program->view().find_buffer("k_cache.0");
  ASSERT_GE(k0, 0);
  EXPECT_GT(program->spec().buffers[static_cast<size_t>(k0)].copy_bytes_per_step.at("decode"), 0u);
}

// Each refusal: the expected message, one line, and nothing left in the output dir.
void expect_refusal(const ExportOptions& options, const ScratchDir& out,
                    const std::vector<std::string>& fragments) {
  auto summary = export_checkpoint(options);
  ASSERT_FALSE(summary.ok());
  const std::string message = summary.status().to_string();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(options.output_path)) << options.output_path;
  for (const auto& name : out.entries()) {
    EXPECT_EQ(name.find(".tmp."), std::string::npos) << "temporary file left: " << name;
  }
}

TEST(ExportRefuses, MissingCheckpointDirectory) {
  ScratchDir out;
  expect_refusal(options_for(out.file("nope"), out.file("m.kvrt")), out,
                 {"nope", "not a directory"});
}

TEST(ExportRefuses, MissingConfig) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt")).ok());
  std::filesystem::remove(out.file("ckpt/config.json"));
  expect_refusal(options_for(out.file("ckpt"), out.file("m.kvrt")), out, {"config.json"});
}

TEST(ExportRefuses, CorruptedSafetensors) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt")).ok());
  const std::string weights = out.file("ckpt/model.safetensors");
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);
  expect_refusal(options_for(out.file("ckpt"), out.file("m.kvrt")), out, {"model.safetensors"});
}

TEST(ExportRefuses, MissingTensor) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt"), [](frontend::TensorToWrite& tensor) {
                return tensor.name != "model.layers.1.mlp.up_proj.weight";
              }).ok());
  expect_refusal(options_for(out.file("ckpt"), out.file("m.kvrt")), out,
                 {"model.layers.1.mlp.up_proj.weight"});
}

TEST(ExportRefuses, ShapeMismatch) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt"), [](frontend::TensorToWrite& tensor) {
                if (tensor.name == "model.layers.0.self_attn.k_proj.weight") {
                  tensor.shape[0] /= 2;
                  tensor.data = tensor.data.first(tensor.data.size() / 2);
                }
                return true;
              }).ok());
  expect_refusal(options_for(out.file("ckpt"), out.file("m.kvrt")), out,
                 {"model.layers.0.self_attn.k_proj.weight"});
}

TEST(ExportRefuses, UnwritableOutputPath) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  std::ofstream(out.file("file")) << "x";  // a file where a directory should be
  ExportOptions options = options_for(dir, out.file("file/m.kvrt"));
  auto summary = export_checkpoint(options);
  ASSERT_FALSE(summary.ok());
  const std::string message = summary.status().to_string();
  EXPECT_NE(message.find("file/m.kvrt"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_EQ(out.entries(), std::vector<std::string>{"file"});
}

TEST(ExportRefuses, UnknownForceHostName) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.force_host = {"final-norm"};
  expect_refusal(options, out, {"final-norm", "matches no node"});
}

TEST(ExportRefuses, NonFloatingWeightDtype) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ExportOptions options = options_for(dir, out.file("m.kvrt"));
  options.weight_dtype = DType::kI32;
  expect_refusal(options, out, {"--dtype"});
}

TEST(ExportRefuses, OutputThatIsOneOfTheCheckpointsFiles) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt")).ok());
  const std::string weights = out.file("ckpt/model.safetensors");
  const auto before = std::filesystem::file_size(weights);
  // Spelled through "..", it is still the source's own weights.
  const Status status =
      export_checkpoint(options_for(out.file("ckpt"), out.file("ckpt/../ckpt/model.safetensors")))
          .status();
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("never writes into its input"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(weights), before);
  EXPECT_TRUE(export_checkpoint(options_for(out.file("ckpt"), weights + ".kvrt")).ok());
}

// Every other name of a source file (a hard link, a symbolic link) and the checkpoint
// directory itself are the input too.
TEST(ExportRefuses, OutputThatIsALinkToTheCheckpointOrItsDirectory) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt")).ok());
  const std::string weights = out.file("ckpt/model.safetensors");
  const auto before = std::filesystem::file_size(weights);
  std::filesystem::create_hard_link(weights, out.file("hard.kvrt"));
  std::filesystem::create_symlink(weights, out.file("soft.kvrt"));
  for (const std::string& output :
       {out.file("hard.kvrt"), out.file("soft.kvrt"), out.file("ckpt"), out.file("ckpt/")}) {
    const Status status = export_checkpoint(options_for(out.file("ckpt"), output)).status();
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << output << ": " << status.to_string();
    EXPECT_NE(status.message().find("never writes into its input"), std::string::npos)
        << status.to_string();
  }
  EXPECT_EQ(std::filesystem::file_size(weights), before);
}

// A temporary left by an export killed outright (SIGKILL) is removed by the next export
// to the same destination; a temporary that a live writer holds is not.
TEST(Export, RemovesStaleTemporariesOfItsDestination) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  std::ofstream(out.file("m.kvrt.tmp.AbC123")) << "stale";
  std::ofstream(out.file("other.kvrt.tmp.AbC123")) << "another destination's";
  std::ofstream(out.file("m.kvrt.tmp.notours")) << "not a temporary name";
  auto live = TempFile::create(out.file("m.kvrt"));
  ASSERT_TRUE(live.ok()) << live.status().to_string();
  ASSERT_TRUE(export_checkpoint(options_for(dir, out.file("m.kvrt"))).ok());
  const std::string live_name = std::filesystem::path(live->path()).filename().string();
  std::vector<std::string> expected = {"m.kvrt", "m.kvrt.tmp.notours", "other.kvrt.tmp.AbC123",
                                       live_name};
  std::sort(expected.begin(), expected.end());
  std::vector<std::string> entries = out.entries();
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, expected);
}

TEST(ExportRefuses, FailedExportKeepsThePreviousFile) {
  KVRT_REQUIRE_FIXTURE(dir, "llama_gqa");
  ScratchDir out;
  ASSERT_TRUE(export_checkpoint(options_for(dir, out.file("m.kvrt"))).ok());
  const auto before = std::filesystem::file_size(out.file("m.kvrt"));
  ASSERT_TRUE(copy_checkpoint(dir, out.file("ckpt"), [](frontend::TensorToWrite& tensor) {
                return tensor.name != "model.norm.weight";
              }).ok());
  EXPECT_FALSE(export_checkpoint(options_for(out.file("ckpt"), out.file("m.kvrt"))).ok());
  EXPECT_EQ(std::filesystem::file_size(out.file("m.kvrt")), before);
}

}  // namespace
}  // namespace kvrt::exporter

namespace kvrt::exporter {
namespace {

// Export checks free space before writing weights; the check names the output and
// the directory, with both sizes.
TEST(ExportRefuses, NotEnoughDiskSpaceNamesTheOutput) {
  const std::string output = (std::filesystem::temp_directory_path() / "x" / "m.kvrt").string();
  const Status status = check_free_space(output, uint64_t{1} << 62);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("not enough disk space for '" + output + "'"), std::string::npos)
      << status.to_string();
  EXPECT_NE(status.message().find("MB free"), std::string::npos);
  EXPECT_TRUE(check_free_space(output, 1).ok());
}

}  // namespace
}  // namespace kvrt::exporter
