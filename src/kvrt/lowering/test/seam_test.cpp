// B6, the seam test: lower a model with a user output (logits) and aliased cache
// outputs, write the program, read it back with read_program, take each delegate
// call's argument order from the program, and assert that the blob's binding names
// (read with read_blob) match it in order. No GPU, no engine: only the two files the
// runtime will trust.
#include <gtest/gtest.h>

#include <filesystem>

#include "kvrt/lowering/test/lowering_test_util.h"

namespace kvrt::lowering {
namespace {

using testing::arg_names;
using testing::binding_names;
using testing::calls_of;

struct SeamStats {
  size_t calls = 0;
  size_t calls_with_logits_and_alias = 0;
  size_t aliases = 0;
};

// Writes and reloads the program, then checks every delegate call against its blob.
SeamStats check_seam(const LoweredProgram& lowered, const std::string& name) {
  SeamStats stats;
  const std::string path = testing::temp_path(name);
  Status written =
      format::write_program(path, lowered.spec, lowered.blobs, testing::zero_fillers(lowered.spec));
  EXPECT_TRUE(written.ok()) << written.to_string();
  auto program = format::ProgramFile::open(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(program.ok()) << program.status().to_string();
  if (!program.ok()) return stats;
  const format::ProgramView& view = program->view();
  for (const format::MethodSpec& method : view.spec.methods) {
    for (const format::DelegateCall* call : calls_of(method)) {
      ++stats.calls;
      auto blob = format::read_blob(view.blobs[static_cast<size_t>(call->delegate)]);
      EXPECT_TRUE(blob.ok()) << blob.status().to_string();
      if (!blob.ok()) continue;
      const format::BlobMetadata& metadata = blob->metadata;
      // The seam itself: argument i is binding i.
      EXPECT_EQ(binding_names(metadata), arg_names(method, *call))
          << method.name << " delegate " << call->delegate;
      EXPECT_EQ(call->num_inputs, metadata.inputs.size());
      // Each alias binds one storage twice: the aliased output argument lives exactly
      // where the aliased input argument lives (a buffer).
      for (const format::AliasSpec& alias : metadata.aliases) {
        const int in = format::find_input(metadata, alias.input);
        const int out = format::find_output(metadata, alias.output);
        EXPECT_TRUE(in >= 0 && out >= 0) << alias.output << " -> " << alias.input;
        if (in < 0 || out < 0) continue;
        const auto& in_value =
            method.values[static_cast<size_t>(call->args[static_cast<size_t>(in)])];
        const auto& out_value = method.values[static_cast<size_t>(
            call->args[call->num_inputs + static_cast<size_t>(out)])];
        EXPECT_EQ(in_value.storage.kind, format::StorageKind::kBuffer) << alias.input;
        EXPECT_EQ(out_value.storage.kind, format::StorageKind::kBuffer) << alias.output;
        EXPECT_EQ(in_value.storage.name, out_value.storage.name) << alias.output;
        EXPECT_EQ(alias.output, alias.input + ".updated");
        EXPECT_EQ(alias.kind, format::AliasKind::kKvCacheUpdate);
        ++stats.aliases;
      }
      const bool has_logits = format::find_output(metadata, "logits") >= 0;
      if (has_logits && !metadata.aliases.empty()) ++stats.calls_with_logits_and_alias;
    }
  }
  return stats;
}

TEST(Seam, BlobBindingsMatchTheProgramsArgumentOrder_B6) {
  auto tiny = testing::lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const SeamStats stats = check_seam(*tiny.lowered, "seam_one.kvrt");
  EXPECT_EQ(stats.calls, 2u);                        // prefill, decode
  EXPECT_EQ(stats.calls_with_logits_and_alias, 2u);  // user output beside aliased caches
  EXPECT_EQ(stats.aliases, 8u);                      // 2 methods x 2 layers x (k, v)
}

TEST(Seam, ForcedTwoPartitionProgramMatchesToo_B6) {
  // Splits after layer 0's attention block: partition 0 updates layer 0's caches,
  // partition 1 updates layer 1's caches and produces logits.
  auto tiny = testing::lower_tiny({"layers.0.post_attention_norm"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  for (const auto& method : tiny.lowered->spec.methods) {
    EXPECT_EQ(calls_of(method).size(), 2u) << method.name;
  }
  const SeamStats stats = check_seam(*tiny.lowered, "seam_two.kvrt");
  EXPECT_EQ(stats.calls, 4u);
  EXPECT_EQ(stats.calls_with_logits_and_alias, 2u);
  EXPECT_EQ(stats.aliases, 8u);
}

TEST(Seam, ManyPartitionsWithHostKernelsMatch_B6) {
  auto tiny = testing::lower_tiny({"rms_norm", "layers.1.attn.attention"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const SeamStats stats = check_seam(*tiny.lowered, "seam_many.kvrt");
  EXPECT_EQ(stats.calls, 14u);  // 7 engine runs per method
  EXPECT_EQ(stats.aliases, 8u);
}

TEST(Seam, OrderHoldsEvenWhereTheEngineOrderDiffers_B6) {
  // The subgraph (engine) order puts logits first among outputs and reads inputs by first
  // use; the call puts cache updates first and inputs in method value order. The seam
  // holds because bindings are derived from the call, not from the subgraph.
  auto tiny = testing::lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok());
  const auto& blob_bytes = tiny.lowered->blobs[1];
  auto blob = format::read_blob(blob_bytes);
  ASSERT_TRUE(blob.ok());
  auto sub = graph::graph_from_json_text(
      std::string_view(reinterpret_cast<const char*>(blob->payload.data()), blob->payload.size()),
      "decode payload");
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  std::vector<std::string> engine_outputs;
  for (graph::ValueId v : sub->outputs)
    engine_outputs.push_back(sub->values[static_cast<size_t>(v)].name);
  std::vector<std::string> blob_outputs;
  for (const auto& binding : blob->metadata.outputs) blob_outputs.push_back(binding.name);
  EXPECT_EQ(engine_outputs.front(), "logits");
  EXPECT_EQ(blob_outputs.back(), "logits");
  EXPECT_NE(engine_outputs, blob_outputs);
  std::sort(engine_outputs.begin(), engine_outputs.end());
  std::sort(blob_outputs.begin(), blob_outputs.end());
  EXPECT_EQ(engine_outputs, blob_outputs);  // same set: nothing dropped (B4)
}

}  // namespace
}  // namespace kvrt::lowering
