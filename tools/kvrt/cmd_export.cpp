// `kvrt export CHECKPOINT_DIR -o model.kvrt`: writes a program file (or an engine file
// or a graph dump) from a Hugging Face checkpoint. Progress goes to stderr; any
// failure is one line on stderr and exit code 1, with no output file left behind.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "flags.h"
#include "kvrt/api/preflight.h"
#include "kvrt/export/exporter.h"

namespace {

struct Args {
  std::string checkpoint;
  std::string output;
  std::string dtype;
  std::string cache_dtype = "auto";
  int64_t max_seq = 0;
  int64_t max_prompt = 0;
  std::vector<std::string> force_host;
  std::string format = "program";
  std::string target = "any";
  bool quiet = false;
};

// "2.20 GB", "363.8 KB", "512 B".
std::string human(uint64_t bytes) {
  char text[32];
  const double value = static_cast<double>(bytes);
  if (bytes >= 1000000000ull) {
    std::snprintf(text, sizeof(text), "%.2f GB", value / 1e9);
  } else if (bytes >= 1000000) {
    std::snprintf(text, sizeof(text), "%.1f MB", value / 1e6);
  } else if (bytes >= 1000) {
    std::snprintf(text, sizeof(text), "%.1f KB", value / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  }
  return text;
}

// One line per whole percent on a terminal (rewritten in place), every 10% otherwise.
class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}
  void operator()(uint64_t done, uint64_t total) {
    if (quiet_) return;
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    const int step = tty_ ? 1 : 10;
    if (percent / step == last_ / step) return;
    last_ = percent;
    std::fprintf(stderr, "%swriting weights: %3d%% (%s / %s)%s", tty_ ? "\r" : "", percent,
                 human(done).c_str(), human(total).c_str(), tty_ ? "" : "\n");
    if (tty_ && percent == 100) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool quiet_;
  bool tty_;
  int last_ = -1;
};

int run(const Args& args) {
  using namespace kvrt;
  auto fail = [](const Status& status) {
    std::fprintf(stderr, "kvrt export: error: %s\n", status.to_string().c_str());
    return 1;
  };
  auto checkpoint = kvrt::cli::resolve_model_path(args.checkpoint);
  if (!checkpoint.ok()) return fail(checkpoint.status());
  // The config and a tokenizer that does not fit the vocabulary fail now, not after
  // minutes of writing weights.
  if (auto checked = preflight_checkpoint(*checkpoint, "", false); !checked.ok()) {
    return fail(checked.status());
  }
  exporter::ExportOptions options;
  options.checkpoint_dir = *checkpoint;
  options.output_path = args.output;
  if (!args.dtype.empty()) {
    auto dtype = parse_dtype(args.dtype);
    if (!dtype.ok()) return fail(dtype.status());
    options.weight_dtype = *dtype;
  }
  // The CUDA engine keeps the cache in bf16; the CPU reference in f32.
  auto cache = parse_dtype(args.cache_dtype != "auto" ? args.cache_dtype
                           : args.target == "cuda"    ? "bf16"
                                                      : "f32");
  if (!cache.ok()) return fail(cache.status());
  options.cache_dtype = *cache;
  options.max_seq = args.max_seq;
  options.max_prompt = args.max_prompt;
  options.force_host.insert(args.force_host.begin(), args.force_host.end());
  auto format = exporter::parse_export_format(args.format);
  if (!format.ok()) return fail(format.status());
  options.format = *format;
  options.target_device = args.target;
  Progress progress(args.quiet);
  options.progress = [&progress](uint64_t done, uint64_t total) { progress(done, total); };

  const auto start = std::chrono::steady_clock::now();
  auto summary = exporter::export_checkpoint(options);
  if (!summary.ok()) return fail(summary.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.format == exporter::ExportFormat::kGraphJson) {
    std::printf("wrote %s: graphs of %zu methods (%s) in %.2f s\n", args.output.c_str(),
                summary->methods, human(summary->file_bytes).c_str(), seconds);
  } else {
    std::printf("wrote %s (%s): %zu methods, %zu delegates, %zu weights (%s), file %s in %.2f s\n",
                args.output.c_str(), std::string(exporter::export_format_name(*format)).c_str(),
                summary->methods, summary->delegates, summary->weights,
                human(summary->weight_bytes).c_str(), human(summary->file_bytes).c_str(), seconds);
  }
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"export", "Export a Hugging Face checkpoint directory to a kvrt program file",
     [](CLI::App& sub) {
       auto args = std::make_shared<Args>();
       sub.add_option("checkpoint", args->checkpoint,
                      "Checkpoint directory (config.json, *.safetensors) or org/name[@revision] "
                      "from the Hugging Face cache")
           ->required();
       sub.add_option("-o,--output", args->output, "output file")->required();
       sub.add_option("--dtype", args->dtype,
                      "weight dtype: f32, f16 or bf16 (default: as "
                      "stored)")
           ->check(CLI::IsMember({"f32", "f16", "bf16"}));
       sub.add_option("--cache-dtype", args->cache_dtype,
                      "KV cache dtype: f32, f16, bf16 or auto (bf16 for --target cuda, else f32; "
                      "the CUDA engine needs bf16)")
           ->check(CLI::IsMember({"auto", "f32", "f16", "bf16"}))
           ->capture_default_str();
       sub.add_option("-c,--ctx-size,--max-seq", args->max_seq,
                      "KV cache capacity: the longest sequence the program runs")
           ->default_str("min(max positions, 2048)")
           ->check(CLI::Range(1, 1 << 24));
       sub.add_option("--max-prompt", args->max_prompt, "largest prefill length")
           ->default_str("max-seq")
           ->check(CLI::Range(1, 1 << 24));
       sub.add_option("--force-host", args->force_host,
                      "node or op names to keep on the host (comma-separated)")
           ->delimiter(',');
       sub.add_option("--format", args->format, "program, engine or graph-json")
           ->check(CLI::IsMember({"program", "engine", "graph-json"}));
       sub.add_option("--target", args->target, "device the blobs are for: cpu, cuda or any")
           ->check(CLI::IsMember({"cpu", "cuda", "any"}));
       sub.add_flag("-q,--quiet", args->quiet, "no progress output");
       sub.footer(
           "Checked before any weight is written: config.json (architecture and every field\n"
           "kvrt reads), a tokenizer.json that fits the vocabulary, and free disk space for\n"
           "the output. The program records the checkpoint's directory, so `kvrt run FILE`\n"
           "finds the tokenizer there when none is beside the file.\n\n"
           "Examples:\n"
           "  kvrt export models/fortune-llama -o model.kvrt\n"
           "  kvrt export Qwen/Qwen2.5-0.5B -o qwen.kvrt --target cuda -c 4096\n"
           "  kvrt export models/fortune-llama -o graphs.json --format graph-json");
       sub.callback([args] { kvrt::cli::set_exit_code(run(*args)); });
     }});

}  // namespace
