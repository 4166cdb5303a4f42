// The CUDA engine on the H200 through the whole runtime (program file -> Module ->
// engine delegate -> CUDA engine), against the CPU reference engine on the same program:
// every fixture's teacher-forced logits (G2, the CPU engine as oracle; kvrt check holds
// the HF bf16 rule), the cache persisting between calls (G1), the KV cache bound in
// place (F2), weights uploaded once per program (F5), D2 on real memory, re-capture
// when bindings change, runs of greedy steps, failures injected around the launches (E2).
// Skips without a device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kvrt/delegate/backend.h"
#include "kvrt/engine/builtin_targets.h"
#include "kvrt/engine/common/engine_target.h"
#include "kvrt/engine/cuda/cuda_device_api.h"
#include "kvrt/engine/cuda/cuda_engine.h"
#include "kvrt/engine/cuda/kernels.h"
#include "kvrt/engine/cuda/weight_store.h"
#include "kvrt/export/exporter.h"
#include "kvrt/runtime/module.h"

namespace kvrt::engine::cuda {
namespace {

namespace fs = std::filesystem;
using runtime::Module;
using runtime::Program;

#define KVRT_SKIP_WITHOUT_DEVICE()                           \
  do {                                                       \
    std::string why_;                                        \
    if (!cuda_device_available(&why_)) GTEST_SKIP() << why_; \
    ASSERT_TRUE(register_builtin_targets().ok());            \
  } while (0)

// The repository root: the build's, or $KVRT_SOURCE_DIR when the binary runs elsewhere.
std::string source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? env : KVRT_SOURCE_DIR;
}

// Exports `dir` with the cache in `cache_dtype`; returns the program path.
std::string export_program(const std::string& dir, DType cache_dtype, const std::string& tag) {
  exporter::ExportOptions options;
  options.checkpoint_dir = dir;
  options.output_path = (fs::temp_directory_path() /
                         ("kvrt_cuda_test_" + tag + "_" + std::to_string(::getpid()) + ".kvrt"))
                            .string();
  options.cache_dtype = cache_dtype;
  Result<exporter::ExportSummary> summary = exporter::export_checkpoint(options);
  EXPECT_TRUE(summary.ok()) << summary.status().to_string();
  return options.output_path;
}

struct Reference {
  std::vector<int32_t> prompt, greedy;
};

Reference read_reference(const std::string& dir) {
  std::ifstream file(dir + "/reference.json");
  Reference r;
  if (!file) return r;
  const nlohmann::json json = nlohmann::json::parse(file);
  r.prompt = json.at("prompt_ids").get<std::vector<int32_t>>();
  r.greedy = json.at("greedy_ids").get<std::vector<int32_t>>();
  return r;
}

float max_abs(std::span<const float> a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::abs(v));
  return m;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

float top2_margin(std::span<const float> v) {
  std::vector<float> sorted(v.begin(), v.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  return sorted[0] - sorted[1];
}

// Teacher-forced logits: prefill of the prompt, then each greedy token decoded.
std::vector<std::vector<float>> run_steps(Module& module, const Reference& r) {
  std::vector<std::vector<float>> steps;
  Result<std::span<const float>> logits = module.prefill(r.prompt, 0);
  EXPECT_TRUE(logits.ok()) << logits.status().to_string();
  if (!logits.ok()) return steps;
  steps.emplace_back(logits->begin(), logits->end());
  for (size_t i = 0; i + 1 < r.greedy.size(); ++i) {
    logits = module.decode(r.greedy[i], static_cast<int32_t>(r.prompt.size() + i));
    EXPECT_TRUE(logits.ok()) << logits.status().to_string();
    if (!logits.ok()) break;
    EXPECT_EQ(module.last_stats().total_buffer_bytes(), 0) << "the cache must be bound in place";
    steps.emplace_back(logits->begin(), logits->end());
  }
  return steps;
}

// n greedy tokens after `prompt`, the token chosen on the device and each step queued
// before the previous token is read (the generation loop's pipeline).
std::vector<int32_t> greedy_queued(Module& module, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  Status status = module.submit_greedy("prefill", prompt, 0);
  EXPECT_TRUE(status.ok()) << status.to_string();
  for (int i = 0; status.ok() && i < n; ++i) {
    if (i + 1 < n)
      status = module.submit_greedy_continuation(static_cast<int32_t>(prompt.size()) + i);
    Result<int32_t> token = module.wait_token();
    EXPECT_TRUE(token.ok()) << token.status().to_string();
    if (!token.ok()) break;
    out.push_back(*token);
  }
  EXPECT_TRUE(status.ok()) << status.to_string();
  return out;
}

// The same through runs of the engine's longest run of steps: one graph launch each.
std::vector<int32_t> greedy_in_runs(Module& module, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  Status status = module.submit_greedy("prefill", prompt, 0);
  EXPECT_TRUE(status.ok()) << status.to_string();
  int32_t position = static_cast<int32_t>(prompt.size());
  for (int queued = 1; status.ok() && queued < n;) {
    const int steps = std::min(module.max_greedy_steps(), n - queued);
    status = module.submit_greedy_continuation(position, steps);
    position += steps;
    queued += steps;
  }
  EXPECT_TRUE(status.ok()) << status.to_string();
  while (module.queued_tokens() > 0) {
    Result<int32_t> token = module.wait_token();
    EXPECT_TRUE(token.ok()) << token.status().to_string();
    if (!token.ok()) break;
    out.push_back(*token);
  }
  return out;
}

// n greedy tokens after `prompt` through the host: logits copied back, argmax here.
std::vector<int32_t> greedy_on_host(Module& module, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  auto logits = module.prefill(prompt, 0);
  for (int i = 0; i < n && logits.ok(); ++i) {
    out.push_back(argmax(*logits));
    if (i + 1 < n) logits = module.decode(out.back(), static_cast<int32_t>(prompt.size()) + i);
  }
  EXPECT_TRUE(logits.ok()) << logits.status().to_string();
  return out;
}

class CudaFixture : public ::testing::TestWithParam<std::string> {};

// The device's argmax and the pipelined loop change nothing: the same launches produce
// the same logits, so the tokens equal the host's argmax of them, step for step.
TEST_P(CudaFixture, QueuedGreedyEqualsTheHostArgmaxOfTheSameLogits) {
  KVRT_SKIP_WITHOUT_DEVICE();
  const std::string dir = source_dir() + "/" + GetParam();
  const Reference reference = read_reference(dir);
  if (reference.prompt.empty()) GTEST_SKIP() << "no reference.json in " << dir;
  const std::string path =
      export_program(dir, DType::kBF16, fs::path(dir).filename().string() + "_greedy");
  auto program = Program::load(path);
  fs::remove(path);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto a = Module::create(*program, {.device = Device::cuda(0)});
  auto b = Module::create(*program, {.device = Device::cuda(0)});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*b)->has_device_greedy());
  const std::vector<int32_t> host = greedy_on_host(**a, reference.prompt, 24);
  const std::vector<int32_t> queued = greedy_queued(**b, reference.prompt, 24);
  EXPECT_EQ(queued, host);
  EXPECT_EQ((*b)->last_stats().total_buffer_bytes(), 0);
  // Runs of steps, one graph each, decode the same tokens (a run of 8, 8, then 7).
  ASSERT_TRUE((*b)->reset().ok());
  ASSERT_GT((*b)->max_greedy_steps(), 1);
  EXPECT_EQ(greedy_in_runs(**b, reference.prompt, 24), host);
  EXPECT_EQ((*b)->last_stats().total_buffer_bytes(), 0);
}

// The CUDA engine computes in bf16, the CPU engine in f32 over the same bf16 cache: the
// logits agree to bf16 accuracy, and greedy picks agree wherever the choice is clear.
TEST_P(CudaFixture, MatchesTheCpuEngineOnTheSameProgram_G2) {
  KVRT_SKIP_WITHOUT_DEVICE();
  const std::string dir = source_dir() + "/" + GetParam();
  const Reference reference = read_reference(dir);
  if (reference.prompt.empty()) GTEST_SKIP() << "no reference.json in " << dir;
  const std::string path = export_program(dir, DType::kBF16, fs::path(dir).filename().string());
  auto program = Program::load(path);
  fs::remove(path);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  auto cpu = Module::create(*program, {.device = Device::cpu()});
  auto gpu = Module::create(*program, {.device = Device::cuda(0)});
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const auto expected = run_steps(**cpu, reference);
  const auto got = run_steps(**gpu, reference);
  ASSERT_EQ(got.size(), expected.size());
  float worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, max_abs_diff(got[i], expected[i]));
    scale = std::max(scale, max_abs(expected[i]));
    const float margin = top2_margin(expected[i]);
    if (margin > 0.05f * scale) {
      EXPECT_EQ(argmax(got[i]), argmax(expected[i])) << "step " << i << ", margin " << margin;
    }
  }
  std::printf("[ figures  ] %s: max |cuda - cpu| = %.4g over %zu steps, max |logit| %.4g\n",
              GetParam().c_str(), worst, got.size(), scale);
  EXPECT_LE(worst, 0.04f * scale + 0.02f) << "beyond bf16 accuracy";
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CudaFixture,
    ::testing::Values("tests/fixtures/llama_gqa", "tests/fixtures/llama_sharded",
                      "tests/fixtures/llama_untied", "tests/fixtures/qwen2_bias",
                      "models/fortune-llama",
                      // The other families: the composed layers.
                      "tests/fixtures/qwen3_norms", "tests/fixtures/mistral_window",
                      "tests/fixtures/phi3_partial", "tests/fixtures/gemma_geglu",
                      "tests/fixtures/gemma3_local"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      return fs::path(info.param).filename().string() == "fortune-llama"
                 ? std::string("fortune_llama")
                 : fs::path(info.param).filename().string();
    });

class CudaEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_device_available(&why)) GTEST_SKIP() << why;
    ASSERT_TRUE(register_builtin_targets().ok());
    path_ = export_program(source_dir() + "/tests/fixtures/llama_gqa", DType::kBF16, "gqa");
    auto program = Program::load(path_);
    fs::remove(path_);
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    program_ = *program;
  }
  std::string path_;
  std::shared_ptr<const Program> program_;
};

// G1 on the GPU: a decode at 1 after a decode at 0 differs from one on a fresh cache,
// and equals a prefill of both tokens (to bf16 accuracy).
TEST_F(CudaEngine, CacheUpdatePersistsAcrossCalls_G1) {
  auto a = Module::create(program_, {.device = Device::cuda(0)});
  auto b = Module::create(program_, {.device = Device::cuda(0)});
  auto c = Module::create(program_, {.device = Device::cuda(0)});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto la = (*a)->decode(5, 1);
  ASSERT_TRUE(la.ok()) << la.status().to_string();
  const std::vector<float> fresh(la->begin(), la->end());
  ASSERT_TRUE((*b)->decode(3, 0).ok());
  auto lb = (*b)->decode(5, 1);
  ASSERT_TRUE(lb.ok());
  const std::vector<float> carried(lb->begin(), lb->end());
  const std::vector<int32_t> both = {3, 5};
  auto lc = (*c)->prefill(both, 0);
  ASSERT_TRUE(lc.ok()) << lc.status().to_string();
  EXPECT_GT(max_abs_diff(fresh, carried), 0.0f) << "the cache update did not persist";
  EXPECT_LE(max_abs_diff(carried, *lc), 0.04f * max_abs(carried) + 0.02f);
  // A reset clears it: the decode at 1 is the fresh one again, bit for bit.
  ASSERT_TRUE((*b)->reset().ok());
  lb = (*b)->decode(5, 1);
  ASSERT_TRUE(lb.ok());
  EXPECT_EQ(std::vector<float>(lb->begin(), lb->end()), fresh);
}

// A bad token id or position is refused before anything runs; the cache is unchanged.
TEST_F(CudaEngine, RejectedInputsChangeNothing) {
  auto module = Module::create(program_, {.device = Device::cuda(0)});
  auto twin = Module::create(program_, {.device = Device::cuda(0)});
  ASSERT_TRUE(module.ok() && twin.ok());
  const std::vector<int32_t> prompt = {1, 2, 3};
  ASSERT_TRUE((*module)->prefill(prompt, 0).ok());
  ASSERT_TRUE((*twin)->prefill(prompt, 0).ok());
  const auto vocab = static_cast<int32_t>((*module)->vocab_size());
  const auto max_seq = static_cast<int32_t>((*module)->max_seq_len());
  EXPECT_EQ((*module)->decode(vocab, 3).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*module)->decode(-1, 3).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*module)->decode(1, max_seq).status().code(), ErrorCode::kInvalidArgument);
  auto after = (*module)->decode(4, 3);
  ASSERT_TRUE(after.ok());
  const std::vector<float> got(after->begin(), after->end());
  auto expected = (*twin)->decode(4, 3);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(got, std::vector<float>(expected->begin(), expected->end()));
}

// F5: prefill and decode share one device copy of the weights.
TEST_F(CudaEngine, WeightsAreUploadedOncePerProgram_F5) {
  auto module = Module::create(program_, {.device = Device::cuda(0)});
  ASSERT_TRUE(module.ok()) << module.status().to_string();
  auto store = WeightStore::of(*program_, 0);
  ASSERT_TRUE(store.ok());
  size_t stored_elements = 0;
  for (const auto& weight : program_->spec().weights) {
    auto view = program_->weight(weight.name);
    ASSERT_TRUE(view.ok());
    stored_elements += static_cast<size_t>(*view->numel());
  }
  EXPECT_EQ((*store)->device_bytes(), 2 * stored_elements)
      << "each weight once, in bf16, whatever the number of methods";
  const size_t uploads = (*store)->uploads();
  auto second = Module::create(program_, {.device = Device::cuda(0)});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*store)->uploads(), uploads) << "a second module of the program uploads nothing";
}

// A program whose cache is f32 is refused at init, naming the cache.
TEST_F(CudaEngine, F32CacheIsNotSupported) {
  const std::string path =
      export_program(source_dir() + "/tests/fixtures/llama_gqa", DType::kF32, "gqa32");
  auto module = Module::load(path, {.device = Device::cuda(0)});
  fs::remove(path);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), ErrorCode::kNotSupported) << module.status().to_string();
  EXPECT_NE(module.status().message().find("cache 'k_cache.0'"), std::string::npos)
      << module.status().to_string();
}

// Two modules on two threads on one GPU, each its own sequence: both match the result
// of running alone.
TEST_F(CudaEngine, TwoModulesOnTwoThreads_D6) {
  auto greedy = [&](Module& module, std::vector<int32_t>& out) {
    std::vector<int32_t> prompt = {1, 7, 9};
    auto logits = module.prefill(prompt, 0);
    for (int i = 0; i < 16 && logits.ok(); ++i) {
      out.push_back(argmax(*logits));
      logits = module.decode(out.back(), static_cast<int32_t>(prompt.size()) + i);
    }
  };
  std::vector<int32_t> alone;
  {
    auto module = Module::create(program_, {.device = Device::cuda(0)});
    ASSERT_TRUE(module.ok());
    greedy(**module, alone);
  }
  auto m1 = Module::create(program_, {.device = Device::cuda(0)});
  auto m2 = Module::create(program_, {.device = Device::cuda(0)});
  ASSERT_TRUE(m1.ok() && m2.ok());
  std::vector<int32_t> r1, r2;
  std::thread t1([&] { greedy(**m1, r1); });
  std::thread t2([&] { greedy(**m2, r2); });
  t1.join();
  t2.join();
  EXPECT_EQ(r1, alone);
  EXPECT_EQ(r2, alone);
  // The queued pipeline too, two sequences at once on one GPU.
  const std::vector<int32_t> prompt = {1, 7, 9};
  std::vector<int32_t> q1, q2;
  std::thread t3([&] { q1 = greedy_queued(**m1, prompt, 16); });
  std::thread t4([&] { q2 = greedy_queued(**m2, prompt, 16); });
  t3.join();
  t4.join();
  EXPECT_EQ(q1, alone);
  EXPECT_EQ(q2, alone);
}

// The decode delegate of the program, bound directly to device memory.
class CudaDecodeDelegate : public CudaEngine {
 protected:
  void SetUp() override {
    CudaEngine::SetUp();
    if (IsSkipped() || !program_) return;
    const format::MethodSpec* decode = program_->find_method("decode");
    ASSERT_NE(decode, nullptr);
    const auto* call = std::get_if<format::DelegateCall>(&decode->instructions.at(0));
    ASSERT_NE(call, nullptr);
    auto backend = delegate::find_backend(program_->spec().delegates.at(call->delegate).backend);
    ASSERT_TRUE(backend.ok());
    delegate::DelegateOptions options;
    options.device = Device::cuda(0);
    auto handle =
        (*backend)->init(program_->blob(static_cast<size_t>(call->delegate)), *program_, options);
    ASSERT_TRUE(handle.ok()) << handle.status().to_string();
    handle_ = std::move(handle).value();
    const format::BlobMetadata& sig = handle_->signature();
    for (const auto* side : {&sig.inputs, &sig.outputs}) {
      for (const format::BindingSpec& b : *side) {
        std::vector<int64_t> dims;
        for (const graph::Dim& d : b.shape) dims.push_back(d.is_dynamic() ? 1 : d.size);
        Shape shape = *Shape::from_span(dims);
        const size_t bytes = static_cast<size_t>(*shape.numel()) * dtype_size(b.dtype);
        void* ptr = nullptr;
        ASSERT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemset(ptr, 0, bytes), cudaSuccess);
        storage_.push_back(ptr);
        args_.emplace_back(ptr, b.dtype, shape, Device::cuda(0));
      }
    }
    // Aliased outputs share their input's storage, as the runtime binds them (D3).
    for (const format::AliasSpec& alias : sig.aliases) {
      const int in = format::find_input(sig, alias.input);
      const int out = format::find_output(sig, alias.output);
      args_[sig.inputs.size() + static_cast<size_t>(out)] = args_[static_cast<size_t>(in)];
    }
    token_ = format::find_input(sig, "tokens");
    position_ = format::find_input(sig, "position");
    ASSERT_GE(token_, 0);
    ASSERT_GE(position_, 0);
  }
  void TearDown() override {
    handle_.reset();
    for (void* ptr : storage_) cudaFree(ptr);
  }
  void set_input(int index, int32_t value) {
    ASSERT_EQ(
        cudaMemcpy(args_[static_cast<size_t>(index)].data(), &value, 4, cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  std::vector<float> logits() {
    const format::BlobMetadata& sig = handle_->signature();
    const int out = format::find_output(sig, "logits");
    const TensorView& view = args_[sig.inputs.size() + static_cast<size_t>(out)];
    std::vector<float> host(static_cast<size_t>(*view.numel()));
    EXPECT_EQ(cudaMemcpy(host.data(), view.data(), host.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  int first_cache() const {
    const format::BlobMetadata& sig = handle_->signature();
    return format::find_input(sig, sig.aliases.at(0).input);
  }

  std::unique_ptr<delegate::DelegateHandle> handle_;
  std::vector<void*> storage_;
  std::vector<TensorView> args_;
  int token_ = -1, position_ = -1;
};

// E1/E3: with a caller stream and all I/O on the device, execute returns without a host
// sync; without one it runs on the handle's stream and drains.
TEST_F(CudaDecodeDelegate, CallerStreamFastPathAndOwnStream_E1_E3) {
  set_input(token_, 3);
  set_input(position_, 0);
  ASSERT_TRUE(handle_->execute(args_).ok());
  EXPECT_TRUE(handle_->last_stats().host_synchronized);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  set_input(token_, 5);
  set_input(position_, 1);
  delegate::ExecuteOptions options;
  options.stream = stream;
  ASSERT_TRUE(handle_->execute(args_, options).ok());
  EXPECT_FALSE(handle_->last_stats().host_synchronized) << "E3: no host sync on the fast path";
  EXPECT_EQ(handle_->last_stats().total_bytes(), 0) << "F2: nothing staged, nothing reflected";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> carried = logits();
  // The same decode on zeroed caches: different, so the row written at 0 was read at 1.
  const format::BlobMetadata& sig = handle_->signature();
  for (const format::AliasSpec& alias : sig.aliases) {
    const TensorView& cache = args_[static_cast<size_t>(format::find_input(sig, alias.input))];
    ASSERT_EQ(cudaMemset(cache.data(), 0, static_cast<size_t>(*cache.nbytes())), cudaSuccess);
  }
  ASSERT_TRUE(handle_->execute(args_, options).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_NE(logits(), carried) << "position 1 must see the row written at position 0";
  cudaStreamDestroy(stream);
}

// D2 on real memory: an aliased cache in pageable host memory, pinned host memory, with
// zero bytes, or in managed memory is refused or accepted as it must be, naming the
// binding; the handle stays usable.
TEST_F(CudaDecodeDelegate, AliasedInputMustBeThisDevicesMemory_D2) {
  set_input(token_, 3);
  set_input(position_, 0);
  const int cache = first_cache();
  const std::string name = handle_->signature().inputs[static_cast<size_t>(cache)].name;
  const TensorView good = args_[static_cast<size_t>(cache)];
  const size_t bytes = static_cast<size_t>(*good.nbytes());
  std::vector<std::byte> pageable(bytes);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, bytes), cudaSuccess);
  const int out = static_cast<int>(handle_->signature().inputs.size()) +
                  format::find_output(handle_->signature(), name + ".updated");
  for (void* host : {static_cast<void*>(pageable.data()), pinned}) {
    std::vector<TensorView> args = args_;
    args[static_cast<size_t>(cache)] =
        TensorView(host, good.dtype(), good.shape(), Device::cuda(0));  // a lying device tag
    args[static_cast<size_t>(out)] = args[static_cast<size_t>(cache)];
    const Status status = handle_->execute(args);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
    EXPECT_NE(status.message().find("aliased input '" + name + "' must be device memory"),
              std::string::npos)
        << status.to_string();
  }
  std::vector<TensorView> empty = args_;
  Shape zero = good.shape();
  zero[1] = 0;
  empty[static_cast<size_t>(cache)] = TensorView(good.data(), good.dtype(), zero, Device::cuda(0));
  EXPECT_FALSE(handle_->execute(empty).ok());
  cudaFreeHost(pinned);
  // Still usable.
  EXPECT_TRUE(handle_->execute(args_).ok());
}

// New bindings are captured anew, never replayed with stale pointers: a decode on a
// second, zeroed set of caches equals the first decode on the first set.
TEST_F(CudaDecodeDelegate, NewBindingsAreCapturedAnew) {
  set_input(token_, 3);
  set_input(position_, 0);
  ASSERT_TRUE(handle_->execute(args_).ok());
  const std::vector<float> first = logits();
  set_input(position_, 1);
  ASSERT_TRUE(handle_->execute(args_).ok());  // writes row 1 of the first caches
  // Fresh caches for every aliased pair.
  std::vector<TensorView> args = args_;
  const format::BlobMetadata& sig = handle_->signature();
  std::vector<void*> fresh;
  for (const format::AliasSpec& alias : sig.aliases) {
    const size_t in = static_cast<size_t>(format::find_input(sig, alias.input));
    const size_t out =
        sig.inputs.size() + static_cast<size_t>(format::find_output(sig, alias.output));
    void* ptr = nullptr;
    const size_t bytes = static_cast<size_t>(*args[in].nbytes());
    ASSERT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(ptr, 0, bytes), cudaSuccess);
    fresh.push_back(ptr);
    args[in] = TensorView(ptr, args[in].dtype(), args[in].shape(), Device::cuda(0));
    args[out] = args[in];
  }
  set_input(position_, 0);
  ASSERT_TRUE(handle_->execute(args).ok());
  EXPECT_EQ(logits(), first);
  for (void* ptr : fresh) cudaFree(ptr);
}

// The real CUDA DeviceApi with failures injected on request (E2 on the GPU): the Nth
// copy from now, or every event record.
class FaultyApi final : public DeviceApi {
 public:
  explicit FaultyApi(DeviceApi& real) : real_(real) {}
  int fail_copy_in = 0;  // > 0: the copy that brings it to 0 fails
  bool fail_events = false;
  int injected = 0;

  Device device() const override { return real_.device(); }
  Result<Device> current_device() const override { return real_.current_device(); }
  Status set_current_device(Device device) override { return real_.set_current_device(device); }
  bool is_engine_accessible(const TensorView& view) const override {
    return real_.is_engine_accessible(view);
  }
  Result<void*> allocate(size_t bytes) override { return real_.allocate(bytes); }
  void free(void* ptr) override { real_.free(ptr); }
  Result<void*> allocate_host(size_t bytes) override { return real_.allocate_host(bytes); }
  void free_host(void* ptr) override { real_.free_host(ptr); }
  Status fill_zero(void* ptr, size_t bytes) override { return real_.fill_zero(ptr, bytes); }
  Result<StreamHandle> create_stream() override { return real_.create_stream(); }
  void destroy_stream(StreamHandle stream) override { real_.destroy_stream(stream); }
  Status copy_async(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (fail_copy_in > 0 && --fail_copy_in == 0) {
      ++injected;
      return internal_error("injected copy failure");
    }
    return real_.copy_async(dst, src, bytes, stream);
  }
  Status write_i32_async(int32_t* dst, int32_t value, StreamHandle stream) override {
    return real_.write_i32_async(dst, value, stream);
  }
  Result<EventHandle> record_event(StreamHandle stream) override {
    if (fail_events) {
      ++injected;
      return internal_error("injected event failure");
    }
    return real_.record_event(stream);
  }
  Result<EventHandle> record_timing_event(StreamHandle stream) override {
    return real_.record_timing_event(stream);
  }
  Status wait_event(EventHandle event) override { return real_.wait_event(event); }
  Status stream_wait_event(StreamHandle stream, EventHandle event) override {
    return real_.stream_wait_event(stream, event);
  }
  void destroy_event(EventHandle event) override { real_.destroy_event(event); }
  Status synchronize(StreamHandle stream) override { return real_.synchronize(stream); }
  Result<float> elapsed_ms(EventHandle start, EventHandle end) override {
    return real_.elapsed_ms(start, end);
  }

 private:
  DeviceApi& real_;
};

std::vector<std::byte> to_host(const TensorView& view) {
  std::vector<std::byte> host(static_cast<size_t>(*view.nbytes()));
  EXPECT_EQ(cudaMemcpy(host.data(), view.data(), host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// The rows before `position` of a [KVH, S, D] cache: what a sequence at `position` reads.
std::vector<std::byte> rows_before(const TensorView& cache, int64_t position) {
  const std::vector<std::byte> all = to_host(cache);
  const size_t row = static_cast<size_t>(cache.dim(2)) * dtype_size(cache.dtype());
  std::vector<std::byte> rows;
  for (int64_t head = 0; head < cache.dim(0); ++head) {
    const size_t first = static_cast<size_t>(head * cache.dim(1)) * row;
    rows.insert(rows.end(), all.begin() + static_cast<ptrdiff_t>(first),
                all.begin() + static_cast<ptrdiff_t>(first + static_cast<size_t>(position) * row));
  }
  return rows;
}

// E2 on the GPU: a failure after the engine's launches were submitted (a reflect copy
// that fails, an event that cannot be recorded) or before them (a staged copy that
// fails) returns with nothing left running on the stream and the handle usable. The
// cache is as it was for every row the sequence holds (the rows before the call's
// position); a call that failed after its launches may have written its own row, which
// is exactly what a clean call writes there and is rewritten by the next call at that
// position before anything reads it.
TEST_F(CudaDecodeDelegate, FailuresAroundTheLaunchLeaveNothingInFlight_E2) {
  auto real = cuda_device_api(0);
  ASSERT_TRUE(real.ok());
  FaultyApi faulty(**real);
  EngineTarget target = cuda_engine_target();
  target.device_api = [&faulty](int) -> Result<DeviceApi*> { return &faulty; };
  ASSERT_TRUE(register_engine_target(target).ok());
  const format::MethodSpec* decode = program_->find_method("decode");
  const auto& call = std::get<format::DelegateCall>(decode->instructions.at(0));
  auto backend = delegate::find_backend(program_->spec().delegates.at(call.delegate).backend);
  ASSERT_TRUE(backend.ok());
  delegate::DelegateOptions options;
  options.device = Device::cuda(0);
  auto made =
      (*backend)->init(program_->blob(static_cast<size_t>(call.delegate)), *program_, options);
  ASSERT_TRUE(register_engine_target(cuda_engine_target()).ok());  // the others get the real one
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  std::unique_ptr<delegate::DelegateHandle> handle = std::move(made).value();

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  delegate::ExecuteOptions on_stream;
  on_stream.stream = stream;
  const format::BlobMetadata& sig = handle->signature();
  const size_t cache = static_cast<size_t>(first_cache());
  const size_t updated = sig.inputs.size() + static_cast<size_t>(format::find_output(
                                                 sig, sig.inputs[cache].name + ".updated"));
  set_input(token_, 3);
  set_input(position_, 0);
  ASSERT_TRUE(handle->execute(args_, on_stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  // 1. The reflect copy after the launches fails: the engine's work is drained, the
  //    cache holds exactly the row a clean call writes, and the next call works.
  void* other = nullptr;
  const size_t bytes = static_cast<size_t>(*args_[cache].nbytes());
  ASSERT_EQ(cudaMalloc(&other, bytes), cudaSuccess);
  std::vector<TensorView> reflect = args_;
  reflect[updated] = TensorView(other, args_[cache].dtype(), args_[cache].shape(), Device::cuda(0));
  set_input(token_, 5);
  set_input(position_, 1);
  const std::vector<std::byte> held = rows_before(args_[cache], 1);
  faulty.fail_copy_in = 1;
  Status status = handle->execute(reflect, on_stream);
  EXPECT_EQ(status.code(), ErrorCode::kInternal) << status.to_string();
  EXPECT_EQ(faulty.injected, 1);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "work left running after the failure";
  EXPECT_EQ(rows_before(args_[cache], 1), held) << "the failed call changed a held row";
  const std::vector<std::byte> after_failure = to_host(args_[cache]);
  std::vector<float> failed_logits = logits();
  // The same call through a clean handle (the fixture's, real API) rewrites row 1: a
  // partly written row would change here.
  ASSERT_TRUE(handle_->execute(args_).ok());
  EXPECT_EQ(to_host(args_[cache]), after_failure) << "the failed call left another cache";
  EXPECT_EQ(logits(), failed_logits);
  set_input(position_, 2);
  ASSERT_TRUE(handle->execute(args_, on_stream).ok()) << "the handle must stay usable";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  // 2. The completion event cannot be recorded: execute drains instead, leaving nothing
  //    running, and reports success (the work is complete).
  faulty.fail_events = true;
  set_input(position_, 3);
  status = handle->execute(args_, on_stream);
  faulty.fail_events = false;
  EXPECT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(faulty.injected, 2);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);

  // 3. The staged copy of a host input fails before the launches: the cache is untouched.
  const std::vector<std::byte> before = to_host(args_[cache]);
  int32_t host_token = 7;
  std::vector<TensorView> staged = args_;
  staged[static_cast<size_t>(token_)] = TensorView(&host_token, DType::kI32, {1, 1});
  set_input(position_, 4);
  faulty.fail_copy_in = 1;
  status = handle->execute(staged, on_stream);
  EXPECT_EQ(status.code(), ErrorCode::kInternal) << status.to_string();
  EXPECT_EQ(faulty.injected, 3);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(to_host(args_[cache]), before) << "a call that never launched wrote the cache";
  ASSERT_TRUE(handle->execute(staged, on_stream).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_NE(to_host(args_[cache]), before) << "the retried call must write row 4";

  handle.reset();
  cudaFree(other);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace kvrt::engine::cuda
