// `kvrt bench MODEL`: prompt processing (pp) and token generation (tg) at batch 1 at
// each cache depth, in the spirit of llama-bench and with its flag names. Each figure is
// the median of -r repetitions after a warm-up, timed end to end through the runtime
// (Module -> delegate -> engine). tg is greedy generation as `kvrt run` does it: on a
// device the token is chosen there and each step is queued before the host waits for
// the previous token. On a GPU the times come from CUDA events on the module's stream
// (the host clock on the CPU). tg also reports the bytes a step must read (weights + the live
// cache) per second and their share of a device-to-device copy measured in the same run.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "flags.h"
#include "kvrt/api/export_cache.h"
#include "kvrt/delegate/engine_delegate.h"
#include "kvrt/engine/builtin_targets.h"
#include "kvrt/export/exporter.h"
#include "kvrt/runtime/module.h"

namespace {

namespace fs = std::filesystem;
using kvrt::Result;
using kvrt::Status;
using kvrt::runtime::Module;
using Clock = std::chrono::steady_clock;

struct BenchArgs {
  kvrt::cli::ModelArg model_arg;
  std::string model;  // resolved from model_arg
  int prompt = 512;
  int generate = 128;
  std::string depths = "0,4096";
  int repetitions = 3;
  std::string device = "auto";
  int steps_per_launch = 0;  // 0: the most the engine runs
  bool json = false;
};

struct Row {
  std::string test;  // "pp512", "tg128"
  int depth = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double tokens_per_second = 0;
  double gb_per_second = 0;  // tg: bytes a step reads / time
  double share_of_copy = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device-to-device copy bandwidth (read + write counted), GB/s; 0 on the host.
double copy_bandwidth(kvrt::Device device) {
  if (!device.is_cuda()) return 0;
  Result<kvrt::engine::DeviceApi*> api = kvrt::delegate::device_api_for(device);
  if (!api.ok()) return 0;
  const size_t bytes = size_t{1} << 30;
  auto a = (*api)->allocate(bytes);
  auto b = (*api)->allocate(bytes);
  auto stream = (*api)->create_stream();
  std::vector<double> gbs;
  for (int i = 0; a.ok() && b.ok() && stream.ok() && i < 11; ++i) {
    auto start = (*api)->record_timing_event(*stream);
    (void)(*api)->copy_async(*b, *a, bytes, *stream);
    auto end = (*api)->record_timing_event(*stream);
    if (!start.ok() || !end.ok() || !(*api)->wait_event(*end).ok()) break;
    auto ms = (*api)->elapsed_ms(*start, *end);
    (*api)->destroy_event(*start);
    (*api)->destroy_event(*end);
    if (ms.ok() && i > 0) gbs.push_back(2.0 * bytes / (*ms * 1e-3) / 1e9);
  }
  if (a.ok()) (*api)->free(*a);
  if (b.ok()) (*api)->free(*b);
  if (stream.ok()) (*api)->destroy_stream(*stream);
  return median(gbs);
}

// MODEL itself, or the cached program of the checkpoint (exported on first use).
Result<std::string> program_for(const BenchArgs& args, kvrt::Device device, int64_t max_seq) {
  if (!fs::is_directory(args.model)) return args.model;
  kvrt::ExportRequest request;
  request.checkpoint_dir = args.model;
  request.max_seq = max_seq;
  request.max_prompt = std::min<int64_t>(max_seq, 512);
  request.cache_dtype = device.is_cuda() ? kvrt::DType::kBF16 : kvrt::DType::kF32;
  request.progress = [&args, max_seq, said = false](uint64_t, uint64_t) mutable {
    if (said) return;
    said = true;
    std::fprintf(stderr, "exporting %s (max_seq %lld) into the cache\n", args.model.c_str(),
                 static_cast<long long>(max_seq));
  };
  KVRT_ASSIGN_OR_RETURN(uint64_t limit, kvrt::ExportCache::default_limit());
  return kvrt::ExportCache({}, limit).get_or_export(request);
}

// Times a stretch of the module's work: events on its stream where the device keeps
// timestamps (from when the stream reaches `start` until it reaches `stop`), else the
// host clock.
class StretchTimer {
 public:
  explicit StretchTimer(Module& module) : module_(module) {}
  ~StretchTimer() { release(); }
  StretchTimer(const StretchTimer&) = delete;
  StretchTimer& operator=(const StretchTimer&) = delete;

  Status start() {
    release();
    host_start_ = Clock::now();
    KVRT_ASSIGN_OR_RETURN(start_, module_.device_api().record_timing_event(module_.stream()));
    return Status();
  }
  // Milliseconds since start(), once everything queued so far has run.
  Result<double> stop() {
    KVRT_ASSIGN_OR_RETURN(stop_, module_.device_api().record_timing_event(module_.stream()));
    KVRT_RETURN_IF_ERROR(module_.device_api().wait_event(stop_));
    const double host_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - host_start_).count();
    Result<float> device_ms = module_.device_api().elapsed_ms(start_, stop_);
    release();
    return device_ms.ok() ? static_cast<double>(*device_ms) : host_ms;
  }

 private:
  void release() {
    module_.device_api().destroy_event(start_);
    module_.device_api().destroy_event(stop_);
    start_ = stop_ = nullptr;
  }
  Module& module_;
  Clock::time_point host_start_;
  kvrt::engine::EventHandle start_ = nullptr, stop_ = nullptr;
};

// n greedy tokens after `token` at `position`: queued on the device when the program
// chooses its tokens there (as the generation loop does: runs of up to `run` steps per
// submission, one run queued beyond the token being waited for), else through the host
// logits.
Status generate(Module& module, int32_t token, int32_t position, int n, int run) {
  if (n <= 0) return Status();
  if (module.has_device_greedy()) {
    KVRT_RETURN_IF_ERROR(module.submit_greedy(kvrt::runtime::kDecodeMethod,
                                              std::span<const int32_t>(&token, 1), position));
    int queued = 1;
    int32_t next_step = position + 1;
    for (int taken = 0; taken < n; ++taken) {
      while (queued <= run) {
        const int steps = std::min(run, n - (taken + queued));
        if (steps <= 0) break;
        KVRT_RETURN_IF_ERROR(module.submit_greedy_continuation(next_step, steps));
        next_step += steps;
        queued += steps;
      }
      KVRT_RETURN_IF_ERROR(module.wait_token().status());
      --queued;
    }
    return Status();
  }
  for (int i = 0; i < n; ++i) {
    KVRT_ASSIGN_OR_RETURN(std::span<const float> logits, module.decode(token, position + i));
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return Status();
}

// Runs `tokens` at `position` in chunks of the prefill method's largest call.
Status prefill(Module& module, const std::vector<int32_t>& tokens, int32_t position) {
  KVRT_ASSIGN_OR_RETURN(int64_t chunk, module.max_tokens(kvrt::runtime::kPrefillMethod));
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(chunk)) {
    const size_t n = std::min(tokens.size() - i, static_cast<size_t>(chunk));
    KVRT_RETURN_IF_ERROR(
        module
            .run(n == 1 ? kvrt::runtime::kDecodeMethod : kvrt::runtime::kPrefillMethod,
                 std::span<const int32_t>(tokens.data() + i, n), position + static_cast<int32_t>(i))
            .status());
  }
  return Status();
}

Result<std::vector<Row>> bench(const BenchArgs& args, Module& module, double copy_gbs,
                               const std::vector<int>& depths) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(module.vocab_size() - 1));
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& v : t) v = id(rng);
    return t;
  };
  // Bytes a decode step reads: every weight once (bf16 on CUDA, as stored on the CPU)
  // and the live K and V rows of every layer.
  double weight_bytes = 0, row_bytes = 0;
  const kvrt::format::ProgramSpec& spec = module.program().spec();
  for (const auto& weight : spec.weights) {
    auto view = module.program().weight(weight.name);
    if (!view.ok()) continue;
    weight_bytes += static_cast<double>(*view->numel()) * 2.0;
  }
  for (const auto& buffer : spec.buffers) {
    double per_row = static_cast<double>(kvrt::dtype_size(buffer.dtype));
    for (size_t d = 0; d < buffer.shape.size(); ++d) {
      if (d != 1) per_row *= static_cast<double>(buffer.shape[d]);
    }
    row_bytes += per_row;
  }
  std::vector<Row> rows;
  for (int depth : depths) {
    KVRT_RETURN_IF_ERROR(module.reset());
    KVRT_RETURN_IF_ERROR(prefill(module, random_tokens(depth), 0));
    const std::vector<int32_t> prompt = random_tokens(args.prompt);
    std::vector<double> pp_ms, tg_ms;
    StretchTimer timer(module);
    for (int rep = 0; rep <= args.repetitions; ++rep) {  // rep 0 warms up
      KVRT_RETURN_IF_ERROR(timer.start());
      if (args.prompt > 0) KVRT_RETURN_IF_ERROR(prefill(module, prompt, depth));
      KVRT_ASSIGN_OR_RETURN(double pp, timer.stop());
      KVRT_RETURN_IF_ERROR(timer.start());
      const int32_t token = prompt.empty() ? 1 : prompt.back();
      const int run = args.steps_per_launch > 0
                          ? std::min(args.steps_per_launch, module.max_greedy_steps())
                          : module.max_greedy_steps();
      KVRT_RETURN_IF_ERROR(generate(module, token, depth, args.generate, run));
      KVRT_ASSIGN_OR_RETURN(double tg, timer.stop());
      if (rep == 0) continue;
      pp_ms.push_back(pp);
      tg_ms.push_back(tg);
    }
    auto row = [&](std::string test, const std::vector<double>& ms, int tokens) {
      Row r;
      r.test = std::move(test);
      r.depth = depth;
      r.median_ms = median(ms);
      r.min_ms = *std::min_element(ms.begin(), ms.end());
      r.max_ms = *std::max_element(ms.begin(), ms.end());
      r.tokens_per_second = r.median_ms > 0 ? tokens / (r.median_ms * 1e-3) : 0;
      return r;
    };
    if (args.prompt > 0)
      rows.push_back(row("pp" + std::to_string(args.prompt), pp_ms, args.prompt));
    if (args.generate > 0) {
      Row tg = row("tg" + std::to_string(args.generate), tg_ms, args.generate);
      const double mean_live = depth + (args.generate + 1) / 2.0;
      const double step_bytes = weight_bytes + row_bytes * mean_live;
      tg.gb_per_second = step_bytes * tg.tokens_per_second / 1e9;
      tg.share_of_copy = copy_gbs > 0 ? tg.gb_per_second / copy_gbs : 0;
      rows.push_back(tg);
    }
  }
  return rows;
}

int run_bench(const BenchArgs& args) {
  auto fail = [](const Status& status) {
    std::fprintf(stderr, "kvrt bench: %s\n", status.to_string().c_str());
    return 2;
  };
  std::vector<int> depths;
  std::stringstream list(args.depths);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      depths.push_back(std::stoi(item));
    } catch (...) {
      return fail(kvrt::invalid_argument("-d: '", item, "' is not a depth"));
    }
    if (depths.back() < 0) return fail(kvrt::invalid_argument("-d: depths must be >= 0"));
  }
  std::string why;
  Result<kvrt::Device> device = kvrt::engine::resolve_device(args.device, &why);
  if (!device.ok()) return fail(device.status());
  const int max_depth = depths.empty() ? 0 : *std::max_element(depths.begin(), depths.end());
  const int64_t max_seq = max_depth + args.prompt + args.generate + 1;
  Result<std::string> path = program_for(args, *device, max_seq);
  if (!path.ok()) return fail(path.status());
  const auto load_start = Clock::now();
  auto module = Module::load(*path, {.device = *device});
  if (!module.ok()) return fail(module.status());
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  if ((*module)->max_seq_len() < max_seq) {
    return fail(kvrt::invalid_argument("the program holds ", (*module)->max_seq_len(),
                                       " positions, the benchmark needs ", max_seq));
  }
  const double copy_gbs = copy_bandwidth(*device);
  Result<std::vector<Row>> rows = bench(args, **module, copy_gbs, depths);
  const int max_run = (*module)->has_device_greedy() ? (*module)->max_greedy_steps() : 1;
  const int steps_per_launch =
      args.steps_per_launch > 0 ? std::min(args.steps_per_launch, max_run) : max_run;
  if (!rows.ok()) return fail(rows.status());
  if (args.json) {
    nlohmann::json out = {{"model", args.model},  {"device", why},
                          {"load_s", load_s},     {"steps_per_launch", steps_per_launch},
                          {"copy_gbs", copy_gbs}, {"rows", nlohmann::json::array()}};
    for (const Row& r : *rows) {
      out["rows"].push_back({{"test", r.test},
                             {"depth", r.depth},
                             {"median_ms", r.median_ms},
                             {"min_ms", r.min_ms},
                             {"max_ms", r.max_ms},
                             {"tokens_per_second", r.tokens_per_second},
                             {"gb_per_second", r.gb_per_second},
                             {"share_of_copy", r.share_of_copy}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model %s, device %s, load %.2f s, copy %.0f GB/s, tg %d step(s) per launch\n\n",
              args.model.c_str(), why.c_str(), load_s, copy_gbs, steps_per_launch);
  std::printf("| test | depth | t/s | ms (median) | ms (min-max) | GB/s | share of copy |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Row& r : *rows) {
    std::printf(
        "| %s | %d | %.1f | %.3f | %.3f-%.3f | %s | %s |\n", r.test.c_str(), r.depth,
        r.tokens_per_second, r.median_ms, r.min_ms, r.max_ms,
        r.gb_per_second > 0 ? std::to_string(static_cast<int>(r.gb_per_second)).c_str() : "-",
        r.share_of_copy > 0
            ? (std::to_string(static_cast<int>(100 * r.share_of_copy + 0.5)) + "%").c_str()
            : "-");
  }
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"bench", "Benchmark prompt processing and token generation at cache depths",
     [](CLI::App& sub) {
       auto args = std::make_shared<BenchArgs>();
       kvrt::cli::add_model_arg(sub, args->model_arg);
       sub.add_option("-p,--n-prompt", args->prompt, "prompt tokens (pp)")
           ->capture_default_str()
           ->check(CLI::Range(0, 1 << 24));
       sub.add_option("-n,--n-gen", args->generate, "generated tokens (tg)")
           ->capture_default_str()
           ->check(CLI::Range(0, 1 << 24));
       sub.add_option("-d,--n-depth", args->depths, "cache depths, comma-separated")
           ->capture_default_str();
       sub.add_option("-r,--repetitions", args->repetitions, "timed repetitions (after a warm-up)")
           ->capture_default_str()
           ->check(CLI::Range(1, 1000));
       sub.add_option("--device", args->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
       sub.add_option("--steps-per-launch", args->steps_per_launch,
                      "greedy decode steps per device submission in tg (0: the most the engine "
                      "runs; 1: one launch per token)")
           ->capture_default_str()
           ->check(CLI::Range(0, 64));
       sub.add_flag("--json", args->json, "print JSON instead of a table");
       sub.footer(
           "Like llama-bench: ppN is a prompt of N tokens, tgN N generated tokens, each at\n"
           "every cache depth -d, the median of -r repetitions after a warm-up. tg also\n"
           "reports the bytes a step reads (weights and live cache) per second. A checkpoint\n"
           "directory is exported once into the cache (kvrt cache list). docs/performance.md.\n\n"
           "Examples:\n"
           "  kvrt bench models/fortune-llama -p 64 -n 32 -d 0,256\n"
           "  kvrt bench model.kvrt --device cuda -p 512 -n 128 -d 0,4096 --json");
       sub.callback([args] {
         auto path = kvrt::cli::model_path_or_report(args->model_arg, "bench");
         if (!path) return kvrt::cli::set_exit_code(1);
         args->model = *path;
         kvrt::cli::set_exit_code(run_bench(*args));
       });
     }});

}  // namespace
