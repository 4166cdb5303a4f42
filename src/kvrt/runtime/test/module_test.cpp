// The runtime end to end on the tiny random Llama: lowered, written, loaded, run.
#include "kvrt/runtime/module.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <variant>

#include "kvrt/format/blob.h"
#include "kvrt/runtime/module_model.h"
#include "kvrt/runtime/test/runtime_test_util.h"

namespace kvrt::runtime {
namespace {

using testing::max_abs_diff;
using testing::write_tiny_program;

std::vector<float> copy(std::span<const float> logits) {
  return {logits.begin(), logits.end()};
}

class ModuleTest : public ::testing::Test {
 protected:
  std::unique_ptr<Module> load(const testing::TinyProgramOptions& options = {},
                               const std::string& name = "tiny.kvrt") {
    Result<std::string> path = write_tiny_program(model, name, options);
    EXPECT_TRUE(path.ok()) << path.status().to_string();
    if (!path.ok()) return nullptr;
    paths_.push_back(*path);
    Result<std::unique_ptr<Module>> module = Module::load(*path);
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    return module.ok() ? std::move(module).value() : nullptr;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

  kvrt::testing::TinyModel model = kvrt::testing::make_tiny_model({.layers = 2, .max_seq = 16});
  std::vector<std::string> paths_;
};

TEST_F(ModuleTest, PrefillAndDecodeMatchAnIndependentReference) {
  std::unique_ptr<Module> module = load();
  ASSERT_TRUE(module);
  EXPECT_EQ(module->vocab_size(), model.config.vocab);
  EXPECT_EQ(module->max_seq_len(), model.config.max_seq);
  EXPECT_EQ(*module->max_tokens("prefill"), 8);
  std::vector<int32_t> tokens = {3, 14, 15, 9, 26};
  Result<std::span<const float>> logits = module->prefill(tokens, 0);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  EXPECT_LT(max_abs_diff(*logits, model.reference_logits(tokens)), 1e-4);
  for (int32_t next : {5, 31, 0, 7}) {
    logits = module->decode(next, static_cast<int32_t>(tokens.size()));
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    tokens.push_back(next);
    EXPECT_LT(max_abs_diff(*logits, model.reference_logits(tokens)), 1e-4);
  }
}

TEST_F(ModuleTest, PrefillOfTThenDecodeEqualsPrefillOfTPlusOne) {
  std::unique_ptr<Module> a = load({}, "a.kvrt");
  std::unique_ptr<Module> b = load({}, "b.kvrt");
  ASSERT_TRUE(a && b);
  const std::vector<int32_t> prompt = {2, 7, 1, 8, 28, 18};
  ASSERT_TRUE(a->prefill(std::span(prompt).first(5), 0).ok());
  Result<std::span<const float>> stepped = a->decode(prompt[5], 5);
  Result<std::span<const float>> whole = b->prefill(prompt, 0);
  ASSERT_TRUE(stepped.ok() && whole.ok());
  EXPECT_EQ(copy(*stepped), copy(*whole));  // one summation order per element: exact
}

TEST_F(ModuleTest, CacheIsBoundInPlaceWithZeroBytesCopiedPerDecodeStep_F2) {
  std::unique_ptr<Module> module = load();
  ASSERT_TRUE(module);
  const std::vector<int32_t> prompt = {4, 5, 6};
  ASSERT_TRUE(module->prefill(prompt, 0).ok());
  EXPECT_EQ(module->last_stats().total_buffer_bytes(), 0);
  ASSERT_TRUE(module->decode(9, 3).ok());
  const StepStats& stats = module->last_stats();
  ASSERT_EQ(stats.buffer_names.size(), model.buffer_names().size());
  for (const std::string& buffer : model.buffer_names()) EXPECT_EQ(stats.bytes_for(buffer), 0);
  EXPECT_EQ(stats.copy_instruction_bytes, 0);
}

TEST_F(ModuleTest, ForcedHostAttentionTakesTheCountedCopyPath_F3) {
  std::unique_ptr<Module> module = load({.force_host = {"layers.0.attention"}});
  ASSERT_TRUE(module);
  const std::vector<int32_t> prompt = {4, 5, 6};
  ASSERT_TRUE(module->prefill(prompt, 0).ok());
  Result<std::span<const float>> logits = module->decode(9, 3);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  EXPECT_LT(max_abs_diff(*logits, model.reference_logits({4, 5, 6, 9})), 1e-4);
  const StepStats& stats = module->last_stats();
  const format::ProgramSpec& spec = module->program().spec();
  const format::MethodSpec& decode = *module->program().find_method("decode");
  const int64_t cache_bytes = model.config.kv_heads * model.config.max_seq * model.config.head_dim *
                              static_cast<int64_t>(sizeof(float));
  for (const format::BufferSpec& buffer : spec.buffers) {
    // The measured bytes are what the program file declares for the buffer.
    EXPECT_EQ(stats.bytes_for(buffer.name),
              static_cast<int64_t>(format::buffer_copy_bytes(decode, buffer.name)))
        << buffer.name;
  }
  EXPECT_GE(stats.bytes_for("k_cache.0"), cache_bytes);
  EXPECT_GE(stats.bytes_for("v_cache.0"), cache_bytes);
  EXPECT_EQ(stats.bytes_for("k_cache.1"), 0);
}

TEST_F(ModuleTest, ForcedHostCacheWriteRunsOnTheHostAndCountsBothCopies_F3) {
  std::unique_ptr<Module> module = load({.force_host = {"layers.1.k_write"}});
  ASSERT_TRUE(module);
  std::vector<int32_t> tokens = {8, 1, 30};
  Result<std::span<const float>> logits = module->prefill(tokens, 0);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  EXPECT_LT(max_abs_diff(*logits, model.reference_logits(tokens)), 1e-4);
  for (int32_t next : {2, 19}) {
    logits = module->decode(next, static_cast<int32_t>(tokens.size()));
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    tokens.push_back(next);
    EXPECT_LT(max_abs_diff(*logits, model.reference_logits(tokens)), 1e-4);
  }
  const format::MethodSpec& decode = *module->program().find_method("decode");
  const StepStats& stats = module->last_stats();
  EXPECT_EQ(stats.bytes_for("k_cache.1"),
            static_cast<int64_t>(format::buffer_copy_bytes(decode, "k_cache.1")));
  EXPECT_GT(stats.bytes_for("k_cache.1"), 0);
  EXPECT_EQ(stats.bytes_for("v_cache.1"), 0);
}

TEST_F(ModuleTest, DecodeFromAFreshLoadSeesZeroBuffersAndResetClearsThem_F4) {
  std::unique_ptr<Module> module = load();
  ASSERT_TRUE(module);
  Result<std::span<const float>> fresh = module->decode(11, 1);
  ASSERT_TRUE(fresh.ok());
  const std::vector<float> fresh_logits = copy(*fresh);
  ASSERT_TRUE(module->decode(12, 0).ok());
  ASSERT_TRUE(module->decode(11, 1).ok());
  ASSERT_TRUE(module->reset().ok());
  Result<std::span<const float>> again = module->decode(11, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(copy(*again), fresh_logits);
}

TEST_F(ModuleTest, DecodePersistsTheCacheAcrossCalls_G1) {
  // A: fresh, decode at 1 (row 0 still zero). B: fresh, decode at 0 then at 1.
  std::unique_ptr<Module> a = load({}, "g1a.kvrt");
  std::unique_ptr<Module> b = load({}, "g1b.kvrt");
  ASSERT_TRUE(a && b);
  Result<std::span<const float>> logits_a = a->decode(17, 1);
  ASSERT_TRUE(b->decode(23, 0).ok());
  Result<std::span<const float>> logits_b = b->decode(17, 1);
  ASSERT_TRUE(logits_a.ok() && logits_b.ok());
  EXPECT_GT(max_abs_diff(*logits_a, *logits_b), 1e-3) << "the update did not persist";
  EXPECT_LT(max_abs_diff(*logits_b, model.reference_logits({23, 17})), 1e-4);
}

TEST_F(ModuleTest, PrefillWritesTheCacheThatDecodeReads) {
  std::unique_ptr<Module> module = load();
  ASSERT_TRUE(module);
  ASSERT_TRUE(module->prefill(std::vector<int32_t>{1, 2}, 0).ok());
  Result<std::span<const float>> logits = module->decode(3, 2);
  ASSERT_TRUE(logits.ok());
  EXPECT_LT(max_abs_diff(*logits, model.reference_logits({1, 2, 3})), 1e-4);
}

// Swaps layer 0's and layer 1's key/value cache bindings (inputs and their updates)
// inside the decode blob of a written program file. The blob stays self-consistent
// and its aliases still pair each update with its own cache, so only the argument
// names reveal that blob binding 2 is no longer the value at argument 2. The writer
// refuses to produce such a file, so it is forged in place.
Status swap_decode_cache_bindings(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "r+b");
  if (file == nullptr) return not_found(path);
  std::vector<std::byte> bytes;
  std::byte chunk[65536];
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) {
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  Result<format::ProgramView> view = format::read_program(bytes);
  if (!view.ok()) return view.status();
  size_t patched = 0;
  for (size_t d = 0; d < view->spec.delegates.size(); ++d) {
    if (view->spec.delegates[d].method != "decode") continue;
    KVRT_ASSIGN_OR_RETURN(format::Blob blob, format::read_blob(view->blobs[d]));
    const size_t begin = static_cast<size_t>(view->blobs[d].data() - bytes.data());
    const size_t end = static_cast<size_t>(blob.payload.data() - bytes.data());
    const std::string_view needle = "\"name\":\"k_cache.";
    std::string_view text(reinterpret_cast<const char*>(bytes.data()) + begin, end - begin);
    for (size_t at = text.find(needle); at != std::string_view::npos;
         at = text.find(needle, at + 1)) {
      std::byte& digit = bytes[begin + at + needle.size()];
      if (digit == std::byte{'0'} || digit == std::byte{'1'}) {
        digit = digit == std::byte{'0'} ? std::byte{'1'} : std::byte{'0'};
        ++patched;
      }
    }
  }
  std::fseek(file, 0, SEEK_SET);
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  return patched == 4 ? Status() : internal_error("patched ", patched, " names, expected 4");
}

TEST_F(ModuleTest, BlobWithBindingsInAnotherOrderIsCaughtAtLoad) {
  Result<std::string> path = write_tiny_program(model, "swapped.kvrt");
  ASSERT_TRUE(path.ok()) << path.status().to_string();
  paths_.push_back(*path);
  ASSERT_TRUE(swap_decode_cache_bindings(*path).ok());
  Result<std::unique_ptr<Module>> module = Module::load(*path);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), ErrorCode::kInvalidProgram) << module.status().to_string();
  EXPECT_NE(module.status().message().find("k_cache.1"), std::string::npos)
      << module.status().to_string();
}

TEST_F(ModuleTest, RejectedInputsChangeNothing) {
  std::unique_ptr<Module> module = load();
  std::unique_ptr<Module> twin = load({}, "twin.kvrt");
  ASSERT_TRUE(module && twin);
  ASSERT_TRUE(module->prefill(std::vector<int32_t>{1, 2, 3}, 0).ok());
  ASSERT_TRUE(twin->prefill(std::vector<int32_t>{1, 2, 3}, 0).ok());
  const std::vector<int32_t> too_long(9, 1);
  EXPECT_EQ(module->prefill(too_long, 3).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->decode(static_cast<int32_t>(model.config.vocab), 3).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->decode(1, static_cast<int32_t>(model.config.max_seq)).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(module->run("train", std::vector<int32_t>{1}, 0).status().code(), ErrorCode::kNotFound);
  Result<std::span<const float>> after = module->decode(4, 3);
  Result<std::span<const float>> expected = twin->decode(4, 3);
  ASSERT_TRUE(after.ok() && expected.ok());
  EXPECT_EQ(copy(*after), copy(*expected));
}

// A size near 2^64 (a memory plan from a hostile file) is refused, never rounded up
// into a small allocation that zeroing would overrun.
TEST(Allocation, SizeNear2To64IsRefusedNotWrapped) {
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 10, SIZE_MAX - 63}) {
    Result<Allocation> allocation = Allocation::create(bytes, nullptr);
    EXPECT_EQ(allocation.status().code(), ErrorCode::kMemoryAllocationFailed) << bytes;
  }
}

TEST_F(ModuleTest, ModuleModelServesTheGenerationLoop) {
  std::unique_ptr<Module> module = load();
  ASSERT_TRUE(module);
  ModuleModel lm(std::move(module));
  EXPECT_EQ(lm.max_context(), model.config.max_seq);
  EXPECT_EQ(lm.max_chunk(), 8);
  ASSERT_TRUE(lm.forward(std::vector<int32_t>{5, 6}, 0).ok());
  Result<std::span<const float>> logits = lm.forward(std::vector<int32_t>{7}, 2);
  ASSERT_TRUE(logits.ok());
  EXPECT_LT(max_abs_diff(*logits, model.reference_logits({5, 6, 7})), 1e-4);
  EXPECT_EQ(lm.cache_bytes_copied_last_call(), 0u);
}

}  // namespace
}  // namespace kvrt::runtime
