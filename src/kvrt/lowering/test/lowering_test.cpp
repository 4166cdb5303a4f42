// Lowering contracts B1-B4 on the hand-built tiny Llama, plus its refusals.
#include "kvrt/lowering/lowering.h"

#include <gtest/gtest.h>

#include <map>

#include "kvrt/lowering/test/lowering_test_util.h"

namespace kvrt::lowering {
namespace {

using testing::calls_of;
using testing::lower_tiny;
using testing::method_named;

Result<graph::Graph> payload_graph(const std::vector<std::byte>& bytes) {
  KVRT_ASSIGN_OR_RETURN(format::Blob blob, format::read_blob(bytes));
  return graph::graph_from_json_text(
      std::string_view(reinterpret_cast<const char*>(blob.payload.data()), blob.payload.size()),
      "payload");
}

TEST(Lowering, ProgramHasPrefillAndDecodeSharingBuffersAndWeights_F1) {
  auto tiny = lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const format::ProgramSpec& spec = tiny.lowered->spec;
  ASSERT_EQ(spec.methods.size(), 2u);
  EXPECT_EQ(spec.methods[0].name, "prefill");
  EXPECT_EQ(spec.methods[1].name, "decode");
  EXPECT_EQ(spec.buffers.size(), 4u);  // k/v x 2 layers, once for both methods
  std::set<std::string> weight_names;
  for (const auto& weight : spec.weights) EXPECT_TRUE(weight_names.insert(weight.name).second);
  EXPECT_EQ(spec.weights.size(), 1u + 9u * 2 + 2u);  // embed, 9 per layer, norm, lm_head
  for (const auto& method : spec.methods) {
    std::set<std::string> buffers;
    for (const auto& value : method.values) {
      if (value.storage.kind == format::StorageKind::kBuffer) buffers.insert(value.storage.name);
    }
    EXPECT_EQ(buffers.size(), 4u) << method.name;
  }
}

TEST(Lowering, CachesStayProgramOwnedAndComeBackAliased_B1) {
  auto tiny = lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok());
  const auto& lowered = *tiny.lowered;
  for (size_t d = 0; d < lowered.blobs.size(); ++d) {
    auto blob = format::read_blob(lowered.blobs[d]);
    ASSERT_TRUE(blob.ok());
    auto sub = payload_graph(lowered.blobs[d]);
    ASSERT_TRUE(sub.ok()) << sub.status().to_string();
    for (const auto& buffer : lowered.spec.buffers) {
      EXPECT_GE(format::find_input(blob->metadata, buffer.name), 0) << buffer.name;
      EXPECT_GE(format::find_output(blob->metadata, buffer.name + ".updated"), 0);
      const auto id = sub->find_value(buffer.name);
      ASSERT_TRUE(id.has_value());
      // A buffer enters the engine as a buffer input, never as a weight or constant.
      EXPECT_EQ(sub->values[static_cast<size_t>(*id)].kind, graph::ValueKind::kBuffer);
      EXPECT_NE(std::find(sub->inputs.begin(), sub->inputs.end(), *id), sub->inputs.end());
    }
    EXPECT_EQ(blob->metadata.aliases.size(), lowered.spec.buffers.size());
    EXPECT_EQ(sub->mutations.size(), lowered.spec.buffers.size());
  }
  for (const auto& weight : lowered.spec.weights) {
    EXPECT_EQ(weight.name.find("_cache"), std::string::npos) << weight.name;
  }
}

TEST(Lowering, InputBindingsFollowCallOrderNotEngineOrder_B2) {
  auto tiny = lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok());
  const auto& decode = method_named(tiny.lowered->spec, "decode");
  const auto* call = calls_of(decode).at(0);
  auto blob = format::read_blob(tiny.lowered->blobs[static_cast<size_t>(call->delegate)]);
  auto sub = payload_graph(tiny.lowered->blobs[static_cast<size_t>(call->delegate)]);
  ASSERT_TRUE(blob.ok() && sub.ok());
  std::vector<std::string> engine_order, blob_order;
  for (graph::ValueId v : sub->inputs)
    engine_order.push_back(sub->values[static_cast<size_t>(v)].name);
  for (const auto& binding : blob->metadata.inputs) blob_order.push_back(binding.name);
  // Engine order is first use (tokens, position, caches as written); the call's is
  // method value order (program state first, then the caller's inputs).
  EXPECT_EQ(engine_order.front(), "tokens");
  EXPECT_EQ(blob_order.front(), "k_cache.0");
  EXPECT_EQ(blob_order.back(), "position");
  EXPECT_NE(engine_order, blob_order);
  const auto names = testing::arg_names(decode, *call);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + call->num_inputs), blob_order);
}

TEST(Lowering, BindingOrderCheckCatchesTheThreadsOutputSwap_B3) {
  // TRT inputs [tokens, k_cache_in], outputs [logits, k_cache_out]; the call passes the
  // mutation output before logits. Serializing the engine's order must fail.
  format::BlobMetadata blob;
  blob.inputs = {{"tokens", DType::kI32, {}}, {"k_cache.0", DType::kF32, {}}};
  blob.outputs = {{"logits", DType::kF32, {}}, {"k_cache.0.updated", DType::kF32, {}}};
  const std::vector<std::string> args = {"tokens", "k_cache.0", "k_cache.0.updated", "logits"};
  Status status = check_binding_order(args, 2, blob);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kInternal);
  EXPECT_NE(status.message().find("output binding 0 is 'logits'"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("B3"), std::string::npos);
  std::swap(blob.outputs[0], blob.outputs[1]);
  EXPECT_TRUE(check_binding_order(args, 2, blob).ok());
}

TEST(Lowering, BindingOrderCheckCatchesPermutedInputs_B2) {
  format::BlobMetadata blob;
  blob.inputs = {{"k_cache.0", DType::kF32, {}}, {"tokens", DType::kI32, {}}};
  blob.outputs = {{"k_cache.0.updated", DType::kF32, {}}};
  const std::vector<std::string> args = {"tokens", "k_cache.0", "k_cache.0.updated"};
  Status status = check_binding_order(args, 2, blob);
  EXPECT_NE(status.message().find("B2"), std::string::npos) << status.message();
  EXPECT_FALSE(check_binding_order(args, 1, blob).ok());  // arity
}

TEST(Lowering, OneOutputArgumentPerEngineOutputNoAliasDropped_B4) {
  // Both methods update every cache: each of their delegates carries its own aliased
  // output per buffer; nothing is deduplicated by buffer name across delegates.
  auto tiny = lower_tiny({"layers.0.post_attention_norm"});
  ASSERT_TRUE(tiny.lowered.ok());
  std::map<std::string, int> aliases_per_buffer;
  for (size_t d = 0; d < tiny.lowered->blobs.size(); ++d) {
    auto blob = format::read_blob(tiny.lowered->blobs[d]);
    auto sub = payload_graph(tiny.lowered->blobs[d]);
    ASSERT_TRUE(blob.ok() && sub.ok());
    EXPECT_EQ(blob->metadata.outputs.size(), sub->outputs.size());
    size_t writes = 0;
    for (const auto& node : sub->nodes) writes += node.op == "kv_cache_write";
    EXPECT_EQ(blob->metadata.aliases.size(), writes);
    for (const auto& alias : blob->metadata.aliases) ++aliases_per_buffer[alias.input];
  }
  ASSERT_EQ(aliases_per_buffer.size(), 4u);
  for (const auto& [buffer, count] : aliases_per_buffer) EXPECT_EQ(count, 2) << buffer;
}

TEST(Lowering, LaterPartitionReadsTheUpdatedCacheInPlace_B4) {
  // v_cache_write on the host splits layer 0: partition 0 writes k_cache.0, partition 1
  // reads k_cache.0.updated. Both arguments are the buffer itself; no copy for k_cache.0.
  auto tiny = lower_tiny({"layers.0.attn.v_cache_write"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const auto& decode = method_named(tiny.lowered->spec, "decode");
  const auto calls = calls_of(decode);
  ASSERT_EQ(calls.size(), 2u);
  const auto names = testing::arg_names(decode, *calls[1]);
  const auto it =
      std::find(names.begin(), names.begin() + calls[1]->num_inputs, "k_cache.0.updated");
  ASSERT_NE(it, names.begin() + calls[1]->num_inputs);
  const auto& value =
      decode.values[static_cast<size_t>(calls[1]->args[static_cast<size_t>(it - names.begin())])];
  EXPECT_EQ(value.storage.kind, format::StorageKind::kBuffer);
  EXPECT_EQ(value.storage.name, "k_cache.0");
  EXPECT_EQ(format::buffer_copy_bytes(decode, "k_cache.0"), 0u);
}

TEST(Lowering, CacheThatIsACallerInputIsRefused_B4) {
  graph::Graph decode = kvrt::testing::tiny_llama_graph({}, false);
  const auto cache = decode.find_value("k_cache.1");
  ASSERT_TRUE(cache.has_value());
  decode.values[static_cast<size_t>(*cache)].kind = graph::ValueKind::kInput;
  decode.inputs.push_back(*cache);
  const MethodGraph methods[] = {{"decode", &decode}};
  auto lowered = lower_program(methods, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().code(), ErrorCode::kInvalidProgram);
  EXPECT_NE(lowered.status().message().find("'k_cache.1'"), std::string::npos);
  EXPECT_NE(lowered.status().message().find("not a registered buffer"), std::string::npos);
  EXPECT_NE(lowered.status().message().find("B4"), std::string::npos);
}

TEST(Lowering, ForceHostNameMatchingNothingIsRefused) {
  auto tiny = lower_tiny({"layers.0.attn.qproj"});
  ASSERT_FALSE(tiny.lowered.ok());
  EXPECT_NE(tiny.lowered.status().message().find("'layers.0.attn.qproj' matches no node"),
            std::string::npos);
}

TEST(Lowering, BufferDisagreeingAcrossMethodsIsRefused) {
  graph::Graph prefill = kvrt::testing::tiny_llama_graph({}, true);
  kvrt::testing::TinyLlama other;
  other.max_seq = 32;
  graph::Graph decode = kvrt::testing::tiny_llama_graph(other, false);
  const MethodGraph methods[] = {{"prefill", &prefill}, {"decode", &decode}};
  auto lowered = lower_program(methods, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_NE(lowered.status().message().find("buffer 'k_cache.0'"), std::string::npos);
}

TEST(Lowering, DuplicateMethodNameIsRefused) {
  graph::Graph decode = kvrt::testing::tiny_llama_graph({}, false);
  const MethodGraph methods[] = {{"decode", &decode}, {"decode", &decode}};
  EXPECT_EQ(lower_program(methods, {}).status().code(), ErrorCode::kInvalidArgument);
}

TEST(Lowering, InvalidGraphIsRefusedNamingTheMethod) {
  graph::Graph decode = kvrt::testing::tiny_llama_graph({}, false);
  decode.mutations.pop_back();
  const MethodGraph methods[] = {{"decode", &decode}};
  auto lowered = lower_program(methods, {});
  ASSERT_FALSE(lowered.ok());
  EXPECT_NE(lowered.status().message().find("method 'decode'"), std::string::npos);
}

TEST(Lowering, EverythingOnTheHostIsAProgramWithoutDelegates) {
  auto tiny = lower_tiny({"embedding", "rms_norm", "linear", "rope", "kv_cache_write", "attention",
                          "silu_mul", "add", "take_last"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  EXPECT_TRUE(tiny.lowered->spec.delegates.empty());
  for (const auto& buffer : tiny.lowered->spec.buffers) {
    EXPECT_EQ(buffer.arena, format::Arena::kHost);
  }
}

TEST(Lowering, BlobsCarryTargetDeviceAndProvenance) {
  graph::Graph decode = kvrt::testing::tiny_llama_graph({}, false);
  const MethodGraph methods[] = {{"decode", &decode}};
  LoweringOptions options;
  options.target_device = "cuda";
  auto lowered = lower_program(methods, options);
  ASSERT_TRUE(lowered.ok());
  auto blob = format::read_blob(lowered->blobs[0]);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->metadata.target_device, "cuda");
  EXPECT_EQ(blob->metadata.producer["method"], "decode");
  EXPECT_EQ(blob->metadata.producer["first_node"], "embed_tokens");
  EXPECT_EQ(blob->metadata.producer["last_node"], "lm_head");
}

}  // namespace
}  // namespace kvrt::lowering
