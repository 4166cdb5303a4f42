// Buffer placement (F2), the explicit copy path (F3) and the memory plan.
#include <gtest/gtest.h>

#include "kvrt/lowering/test/lowering_test_util.h"

namespace kvrt::lowering {
namespace {

using testing::lower_tiny;
using testing::method_named;

// [kv_heads=1, max_seq=16, head_dim=4] f32.
constexpr uint64_t kCacheBytes = 1 * 16 * 4 * 4;

size_t count_copies(const format::MethodSpec& method) {
  size_t copies = 0;
  for (const auto& instruction : method.instructions) {
    copies += std::holds_alternative<format::CopyInstruction>(instruction);
  }
  return copies;
}

const format::BufferSpec& buffer_named(const format::ProgramSpec& spec, std::string_view name) {
  for (const auto& buffer : spec.buffers) {
    if (buffer.name == name) return buffer;
  }
  ADD_FAILURE() << "no buffer " << name;
  return spec.buffers.front();
}

TEST(Placement, EngineOnlyBuffersLiveOnDeviceWithZeroCopies_F2) {
  auto tiny = lower_tiny();
  ASSERT_TRUE(tiny.lowered.ok());
  for (const auto& buffer : tiny.lowered->spec.buffers) {
    EXPECT_EQ(buffer.arena, format::Arena::kDevice) << buffer.name;
    for (const auto& [method, bytes] : buffer.copy_bytes_per_step) {
      EXPECT_EQ(bytes, 0u) << buffer.name << " in " << method;
    }
  }
  for (const auto& method : tiny.lowered->spec.methods) EXPECT_EQ(count_copies(method), 0u);
}

TEST(Placement, HostAttentionReadsTheCacheThroughAnExplicitCopy_F3) {
  auto tiny = lower_tiny({"layers.0.attn.attention"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const auto& spec = tiny.lowered->spec;
  for (const char* name : {"k_cache.0", "v_cache.0"}) {
    const auto& buffer = buffer_named(spec, name);
    EXPECT_EQ(buffer.arena, format::Arena::kDevice);  // the engine still writes it
    EXPECT_EQ(buffer.copy_bytes_per_step.at("decode"), kCacheBytes) << name;  // one D2H
    EXPECT_EQ(buffer.copy_bytes_per_step.at("prefill"), kCacheBytes) << name;
  }
  EXPECT_EQ(buffer_named(spec, "k_cache.1").copy_bytes_per_step.at("decode"), 0u);
  const auto& decode = method_named(spec, "decode");
  EXPECT_EQ(count_copies(decode), 2u);
  for (const auto& instruction : decode.instructions) {
    if (const auto* copy = std::get_if<format::CopyInstruction>(&instruction)) {
      const auto& src = decode.values[static_cast<size_t>(copy->src)];
      const auto& dst = decode.values[static_cast<size_t>(copy->dst)];
      EXPECT_EQ(src.storage.kind, format::StorageKind::kBuffer);
      EXPECT_EQ(dst.storage.kind, format::StorageKind::kPlanned);
      EXPECT_EQ(dst.storage.arena, format::Arena::kHost);
    }
  }
}

TEST(Placement, HostCacheWriteCopiesInAndBack_F3) {
  auto tiny = lower_tiny({"layers.1.attn.k_cache_write"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const auto& spec = tiny.lowered->spec;
  EXPECT_EQ(buffer_named(spec, "k_cache.1").copy_bytes_per_step.at("decode"), 2 * kCacheBytes);
  const auto& decode = method_named(spec, "decode");
  // The mutation names the value written back into the buffer by the second copy.
  bool found = false;
  for (const auto& mutation : decode.mutations) {
    if (mutation.buffer != "k_cache.1") continue;
    found = true;
    const auto& value = decode.values[static_cast<size_t>(mutation.value)];
    EXPECT_EQ(value.name, "k_cache.1.updated");
    EXPECT_EQ(value.storage.kind, format::StorageKind::kBuffer);
  }
  EXPECT_TRUE(found);
}

TEST(Placement, BufferOnlyHostKernelsUseLivesOnTheHostWithoutCopies) {
  auto tiny = lower_tiny(
      {"layers.0.attn.k_cache_write", "layers.0.attn.v_cache_write", "layers.0.attn.attention"});
  ASSERT_TRUE(tiny.lowered.ok()) << tiny.lowered.status().to_string();
  const auto& spec = tiny.lowered->spec;
  EXPECT_EQ(buffer_named(spec, "k_cache.0").arena, format::Arena::kHost);
  EXPECT_EQ(buffer_named(spec, "k_cache.0").copy_bytes_per_step.at("decode"), 0u);
  EXPECT_EQ(buffer_named(spec, "k_cache.1").arena, format::Arena::kDevice);
  EXPECT_EQ(count_copies(method_named(spec, "decode")), 0u);
}

TEST(Placement, EveryMethodDeclaresEachMutationOnce_B5) {
  auto tiny = lower_tiny({"layers.1.attn.k_cache_write", "final_norm"});
  ASSERT_TRUE(tiny.lowered.ok());
  for (const auto& method : tiny.lowered->spec.methods) {
    std::map<std::string, int> declared;
    for (const auto& mutation : method.mutations) ++declared[mutation.buffer];
    EXPECT_EQ(declared.size(), 4u) << method.name;
    for (const auto& [buffer, count] : declared) EXPECT_EQ(count, 1) << buffer;
  }
}

TEST(Placement, BoundaryValuesBetweenEnginesStayOnDeviceHostUsesOnHost) {
  auto tiny = lower_tiny({"layers.0.post_attention_norm"});
  ASSERT_TRUE(tiny.lowered.ok());
  const auto& decode = method_named(tiny.lowered->spec, "decode");
  for (const auto& value : decode.values) {
    if (value.storage.kind != format::StorageKind::kPlanned) continue;
    // Every planned value here touches the host norm, except the outputs, which stay
    // where the engine wrote them (the caller copies what it needs).
    const bool output = value.name == "logits" || value.name == "next_token";
    EXPECT_EQ(value.storage.arena, output ? format::Arena::kDevice : format::Arena::kHost)
        << value.name;
  }
  auto many = lower_tiny({"layers.0.attn.q_rope", "layers.0.attn.k_rope"});
  ASSERT_TRUE(many.lowered.ok());
  size_t device_values = 0;
  for (const auto& value : method_named(many.lowered->spec, "decode").values) {
    device_values += value.storage.kind == format::StorageKind::kPlanned &&
                     value.storage.arena == format::Arena::kDevice;
  }
  EXPECT_GT(device_values, 0u);  // e.g. v_proj: engine to engine across the host ropes
}

TEST(Placement, MemoryPlanReusesBytesOfDeadValues) {
  auto tiny = lower_tiny({"rms_norm"});
  ASSERT_TRUE(tiny.lowered.ok());
  const auto& prefill = method_named(tiny.lowered->spec, "prefill");
  uint64_t total = 0;
  for (const auto& value : prefill.values) {
    if (value.storage.kind == format::StorageKind::kPlanned &&
        value.storage.arena == format::Arena::kHost) {
      total += value.storage.nbytes;
    }
  }
  EXPECT_GT(total, 0u);
  EXPECT_LT(prefill.host_arena_bytes, total);
  // Sizes use the dynamic T bound: the largest host value is [max_prompt=8, 8] f32.
  EXPECT_GE(prefill.host_arena_bytes, 8u * 8u * 4u);
  // The format's validator rejects overlapping live values; lowering ran it already,
  // and it must also accept the plan.
  EXPECT_TRUE(format::validate_program(tiny.lowered->spec, tiny.lowered->blobs).ok());
}

}  // namespace
}  // namespace kvrt::lowering
