// `kvrt check MODEL`: the end-to-end proofs on one model (SYSTEM.md G1, G2, F2).
//   persistence (G1)  A: fresh load, decode at position 1 from a zero cache;
//                     B: fresh load, decode at 0 then at 1; C: fresh load, prefill of
//                     both tokens at once (no cache carried between calls). B must
//                     differ from A and match C within --atol.
//   reference   (G2)  --reference reference.json (prompt_ids, greedy_ids, step_logits
//                     from HF transformers): prefill, then decode the greedy tokens one
//                     at a time; every step's logits within --atol, every argmax equal.
//   cache copies (F2) bytes copied per decode step for the mutable buffers.
// MODEL is a program file or a checkpoint directory (exported once into the cache).
// Exit status: 0 all checks pass, 1 a check fails, 2 the model could not be loaded.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "flags.h"
#include "kvrt/api/export_cache.h"
#include "kvrt/export/exporter.h"
#include "kvrt/runtime/module.h"

namespace {

namespace fs = std::filesystem;
using kvrt::Result;
using kvrt::Status;
using kvrt::runtime::Module;
using kvrt::runtime::Program;

struct CheckArgs {
  kvrt::cli::ModelArg model_arg;
  std::string model;  // resolved from model_arg
  std::string reference;
  std::string bf16_reference;  // HF's own bf16 error on the reference tokens (G2, GPU)
  double atol = -1;            // < 0: 1e-4 in f32, the bf16 rule on a CUDA device
  std::string device = "cpu";
  int threads = 0;
  int64_t max_seq = 0;
  int timing_steps = 32;
};

struct Reference {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
  std::vector<std::vector<float>> steps;
};

Result<Reference> read_reference(const std::string& path) {
  std::ifstream file(path);
  if (!file) return kvrt::not_found("cannot open reference '", path, "'");
  const nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  auto ints = [&](const char* key, std::vector<int32_t>& out) {
    auto it = json.find(key);
    if (it == json.end() || !it->is_array()) return false;
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return false;
      out.push_back(v.get<int32_t>());
    }
    return true;
  };
  Reference reference;
  auto steps = json.is_object() ? json.find("step_logits") : json.end();
  bool ok = json.is_object() && ints("prompt_ids", reference.prompt) &&
            ints("greedy_ids", reference.greedy) && steps != json.end() && steps->is_array();
  for (size_t i = 0; ok && i < steps->size(); ++i) {
    const nlohmann::json& row = (*steps)[i];
    ok = row.is_array();
    std::vector<float> logits;
    for (size_t j = 0; ok && j < row.size(); ++j) {
      ok = row[j].is_number();
      if (ok) logits.push_back(row[j].get<float>());
    }
    reference.steps.push_back(std::move(logits));
  }
  if (!ok || reference.prompt.empty() || reference.steps.size() != reference.greedy.size()) {
    return kvrt::invalid_argument("reference '", path,
                                  "' needs prompt_ids, greedy_ids and one step_logits row per "
                                  "greedy id");
  }
  return reference;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// A program file path for MODEL: itself, or the cached program of the checkpoint
// (exported on first use).
Result<std::string> program_path(const CheckArgs& args, kvrt::Device device) {
  if (!fs::is_directory(args.model)) return args.model;
  kvrt::ExportRequest request;
  request.checkpoint_dir = args.model;
  request.max_seq = args.max_seq;
  // The CUDA engine keeps the KV cache in bf16.
  request.cache_dtype = device.is_cuda() ? kvrt::DType::kBF16 : kvrt::DType::kF32;
  KVRT_ASSIGN_OR_RETURN(uint64_t limit, kvrt::ExportCache::default_limit());
  bool exported = false;
  KVRT_ASSIGN_OR_RETURN(std::string path,
                        kvrt::ExportCache({}, limit).get_or_export(request, &exported));
  std::printf("%s %s: %s\n", exported ? "exported" : "cached program of", args.model.c_str(),
              path.c_str());
  return path;
}

int64_t cache_bytes(const Module& module) {
  return module.last_stats().total_buffer_bytes();
}

// G1. Returns whether it passed.
Result<bool> check_persistence(const std::shared_ptr<const Program>& program,
                               const kvrt::runtime::ModuleOptions& options, int32_t first,
                               int32_t second, double atol) {
  KVRT_ASSIGN_OR_RETURN(auto a, Module::create(program, options));
  KVRT_ASSIGN_OR_RETURN(auto b, Module::create(program, options));
  KVRT_ASSIGN_OR_RETURN(auto c, Module::create(program, options));
  KVRT_ASSIGN_OR_RETURN(std::span<const float> logits_a, a->decode(second, 1));
  KVRT_RETURN_IF_ERROR(b->decode(first, 0).status());
  KVRT_ASSIGN_OR_RETURN(std::span<const float> logits_b, b->decode(second, 1));
  const std::vector<int32_t> both = {first, second};
  KVRT_ASSIGN_OR_RETURN(std::span<const float> logits_c, c->prefill(both, 0));
  const float moved = max_abs_diff(logits_a, logits_b);
  const float off = max_abs_diff(logits_b, logits_c);
  const bool pass = moved > 0.0f && std::isfinite(moved) && off <= atol;
  std::printf(
      "persistence (G1): %s  max |B - A| = %.6g (must be > 0), max |B - C| = %.6g (must be "
      "<= %g)  (A: fresh decode at 1; B: decode at 0, then at 1; C: prefill of both)\n",
      pass ? "PASS" : "FAIL", static_cast<double>(moved), static_cast<double>(off), atol);
  return pass;
}

// The G2 bound on a bf16 engine: 1.5x the largest |logit error| of HF transformers
// itself run in bf16 on the same tokens (reference_bf16.json, made on the GPU machine by
// scripts/reference/make_bf16_refs.py).
Result<double> bf16_bound(const std::string& path) {
  std::ifstream file(path);
  if (!file) return kvrt::not_found("cannot open bf16 reference '", path, "'");
  const nlohmann::json json = nlohmann::json::parse(file, nullptr, false);
  auto it = json.is_object() ? json.find("max_abs_diff") : json.end();
  if (it == json.end() || !it->is_number() || !(it->get<double>() > 0)) {
    return kvrt::invalid_argument("bf16 reference '", path, "' needs a positive max_abs_diff");
  }
  return 1.5 * it->get<double>();
}

// Top-2 gap of a row of logits.
float top2_margin(std::span<const float> logits) {
  float first = -INFINITY, second = -INFINITY;
  for (float v : logits) {
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return first - second;
}

// G2 against a reference. Returns whether it passed. With `margin_rule`, a greedy
// mismatch counts only where the reference's top-2 margin exceeds 2 x atol (bf16).
Result<bool> check_reference(const std::shared_ptr<const Program>& program,
                             const kvrt::runtime::ModuleOptions& options,
                             const Reference& reference, double atol, bool margin_rule) {
  KVRT_ASSIGN_OR_RETURN(auto module, Module::create(program, options));
  float worst = 0;
  int mismatches = 0;
  for (size_t i = 0; i < reference.steps.size(); ++i) {
    const int32_t position = static_cast<int32_t>(reference.prompt.size() + i - 1);
    Result<std::span<const float>> logits = i == 0
                                                ? module->prefill(reference.prompt, 0)
                                                : module->decode(reference.greedy[i - 1], position);
    if (!logits.ok()) return logits.status().with_context("step " + std::to_string(i));
    worst = std::max(worst, max_abs_diff(*logits, reference.steps[i]));
    const auto argmax = std::max_element(logits->begin(), logits->end()) - logits->begin();
    const bool decisive = !margin_rule || top2_margin(reference.steps[i]) > 2 * atol;
    mismatches += decisive && argmax != reference.greedy[i];
  }
  const bool pass = worst <= atol && mismatches == 0;
  std::printf(
      "reference (G2): %s  %zu steps, max |logit diff| %.3g (atol %.3g), greedy "
      "mismatches %d\n",
      pass ? "PASS" : "FAIL", reference.steps.size(), static_cast<double>(worst), atol, mismatches);
  return pass;
}

// Decode timing and the cache bytes copied per decode step (F2 / F3).
Status report_decode(const std::shared_ptr<const Program>& program,
                     const kvrt::runtime::ModuleOptions& options, int steps) {
  KVRT_ASSIGN_OR_RETURN(auto module, Module::create(program, options));
  steps = static_cast<int>(std::min<int64_t>(steps, module->max_seq_len()));
  const int64_t vocab = module->vocab_size();
  int32_t token = 1 % static_cast<int32_t>(std::max<int64_t>(vocab, 1));
  const auto start = std::chrono::steady_clock::now();
  int64_t copied = 0;
  for (int p = 0; p < steps; ++p) {
    KVRT_ASSIGN_OR_RETURN(std::span<const float> logits, module->decode(token, p));
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    copied = std::max(copied, cache_bytes(*module));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const kvrt::runtime::StepStats& stats = module->last_stats();
  std::printf("cache bytes copied per decode step: %lld", static_cast<long long>(copied));
  for (size_t b = 0; b < stats.buffer_names.size(); ++b) {
    if (stats.buffer_bytes[b] != 0) {
      std::printf("  %s %lld", stats.buffer_names[b].c_str(),
                  static_cast<long long>(stats.buffer_bytes[b]));
    }
  }
  std::printf("%s\n", copied == 0 ? " (bound in place)" : " (copy path)");
  if (steps > 0 && seconds > 0) {
    std::printf("decode: %.1f tok/s (%.3f ms/step over %d steps, %s)\n", steps / seconds,
                1e3 * seconds / steps, steps, options.device.to_string().c_str());
  }
  return Status();
}

int run_check(const CheckArgs& args) {
  Result<kvrt::Device> device = kvrt::parse_device(args.device);
  if (!device.ok()) {
    std::fprintf(stderr, "kvrt check: %s\n", device.status().to_string().c_str());
    return 2;
  }
  Result<std::string> path = program_path(args, *device);
  if (!path.ok()) {
    std::fprintf(stderr, "kvrt check: %s\n", path.status().to_string().c_str());
    return 2;
  }
  Result<std::shared_ptr<const Program>> program = Program::load(*path);
  if (!program.ok()) {
    std::fprintf(stderr, "kvrt check: %s\n", program.status().to_string().c_str());
    return 2;
  }
  kvrt::runtime::ModuleOptions options;
  options.device = *device;
  options.num_threads = args.threads;

  Reference reference;
  if (!args.reference.empty()) {
    Result<Reference> read = read_reference(args.reference);
    if (!read.ok()) {
      std::fprintf(stderr, "kvrt check: %s\n", read.status().to_string().c_str());
      return 2;
    }
    reference = std::move(read).value();
  }
  // Tolerances: f32 engines 1e-4; a CUDA (bf16) engine the bound HF bf16 defines.
  double atol = args.atol >= 0 ? args.atol : 1e-4;
  bool margin_rule = false;
  std::string bf16_path = args.bf16_reference;
  if (bf16_path.empty() && device->is_cuda() && !args.reference.empty()) {
    bf16_path = (fs::path(args.reference).parent_path() / "reference_bf16.json").string();
  }
  if (!bf16_path.empty() && args.atol < 0) {
    Result<double> bound = bf16_bound(bf16_path);
    if (!bound.ok()) {
      std::fprintf(stderr, "kvrt check: %s\n", bound.status().to_string().c_str());
      return 2;
    }
    atol = *bound;
    margin_rule = true;
    std::printf("bf16 bound (G2): %.4g = 1.5 x HF bf16's max |logit error| (%s)\n", atol,
                bf16_path.c_str());
  }
  const int32_t first = reference.prompt.size() >= 2 ? reference.prompt[0] : 1;
  const int32_t second = reference.prompt.size() >= 2 ? reference.prompt[1] : 2;
  bool pass = true;
  Result<bool> g1 = check_persistence(*program, options, first, second, atol);
  if (!g1.ok()) {
    std::fprintf(stderr, "kvrt check: %s\n", g1.status().to_string().c_str());
    return 2;
  }
  pass = pass && *g1;
  if (!args.reference.empty()) {
    Result<bool> g2 = check_reference(*program, options, reference, atol, margin_rule);
    if (!g2.ok()) {
      std::fprintf(stderr, "kvrt check: %s\n", g2.status().to_string().c_str());
      return 2;
    }
    pass = pass && *g2;
  }
  Status decode = report_decode(*program, options, args.timing_steps);
  if (!decode.ok()) {
    std::fprintf(stderr, "kvrt check: %s\n", decode.to_string().c_str());
    return 2;
  }
  std::printf("%s\n", pass ? "all checks passed" : "CHECK FAILED");
  return pass ? 0 : 1;
}

const bool registered = kvrt::cli::register_command(
    {"check", "Check a model end to end: cache persistence (G1), reference logits (G2)",
     [](CLI::App& sub) {
       auto args = std::make_shared<CheckArgs>();
       kvrt::cli::add_model_arg(sub, args->model_arg);
       sub.add_option("--reference", args->reference,
                      "reference.json with prompt_ids, greedy_ids, step_logits");
       sub.add_option("--atol", args->atol,
                      "largest accepted |logit difference| (default: 1e-4; on a CUDA device "
                      "1.5 x HF bf16's own error from the bf16 reference)")
           ->default_str("auto");
       sub.add_option("--bf16-reference", args->bf16_reference,
                      "HF bf16 error figures (default on CUDA: reference_bf16.json beside "
                      "--reference)");
       sub.add_option("--device", args->device, "cpu, cuda or cuda:N")->capture_default_str();
       sub.add_option("-t,--threads", args->threads, "CPU threads (0: default)")
           ->check(CLI::Range(0, 1024));
       sub.add_option("-c,--ctx-size,--max-seq", args->max_seq,
                      "cache capacity when exporting a checkpoint");
       sub.add_option("--timing-steps", args->timing_steps, "decode steps to time")
           ->capture_default_str();
       sub.footer(
           "persistence (G1): a decode at position 1 after one at 0 must differ from one on a\n"
           "fresh cache and match a prefill of both tokens. reference (G2): prefill, then\n"
           "each greedy step's logits within --atol of HF transformers' and every argmax\n"
           "equal. cache copies (F2): bytes copied per decode step (0 when bound in place).\n"
           "Exit status: 0 all checks pass, 1 a check fails, 2 the model could not be loaded.\n\n"
           "Examples:\n"
           "  kvrt check model.kvrt --reference reference.json\n"
           "  kvrt check tests/fixtures/llama_gqa --reference "
           "tests/fixtures/llama_gqa/reference.json\n"
           "  kvrt check MODEL --device cuda --reference reference.json   # the bf16 rule");
       sub.callback([args] {
         auto path = kvrt::cli::model_path_or_report(args->model_arg, "check");
         if (!path) return kvrt::cli::set_exit_code(2);  // could not be loaded
         args->model = *path;
         kvrt::cli::set_exit_code(run_check(*args));
       });
     }});

}  // namespace
