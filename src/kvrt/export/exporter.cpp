#include "kvrt/export/exporter.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kvrt/core/temp_file.h"
#include "kvrt/export/weight_convert.h"
#include "kvrt/format/program.h"
#include "kvrt/format/program_engine.h"

namespace kvrt::exporter {
namespace {

// Faults a mapped source range in with one call instead of one fault per page (page
// faults are the dominant cost of reading a mapping on some virtual machines).
void prefetch(std::span<const std::byte> bytes) {
#ifdef MADV_POPULATE_READ
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)bytes;
#endif
}

constexpr ExportFormat kFormats[] = {ExportFormat::kProgram, ExportFormat::kEngine,
                                     ExportFormat::kGraphJson};

// The checkpoint tensor behind each weight of the spec: its mapped bytes as they are
// when the dtype is kept (written straight from the mapping), else a converting filler.
Result<std::vector<format::WeightSource>> weight_sources(
    const frontend::Checkpoint& checkpoint, std::span<const format::WeightSpec> weights) {
  std::vector<format::WeightSource> sources;
  for (const format::WeightSpec& weight : weights) {
    const frontend::WeightEntry* entry = checkpoint.weights().find(weight.name);
    if (entry == nullptr) {
      return not_found("checkpoint '", checkpoint.dir(), "' has no tensor '", weight.name, "'");
    }
    KVRT_ASSIGN_OR_RETURN(std::span<const std::byte> bytes, checkpoint.weights().bytes(*entry));
    const DType from = entry->record.dtype;
    const DType to = weight.dtype;
    if (from == to) {
      sources.emplace_back(bytes);
      continue;
    }
    sources.emplace_back(format::WeightFiller([bytes, from, to](std::span<std::byte> out) {
      prefetch(bytes);
      return convert_weight(bytes, from, out, to);
    }));
  }
  return sources;
}

// --format engine has no instruction list: each method must be exactly one delegate
// call and nothing else, or the artifact could not run (and could not declare copies).
Status check_engine_expressible(const lowering::LoweredProgram& lowered) {
  for (const format::MethodSpec& method : lowered.spec.methods) {
    size_t calls = 0, other = 0;
    for (const format::Instruction& instruction : method.instructions) {
      (std::holds_alternative<format::DelegateCall>(instruction) ? calls : other) += 1;
    }
    if (calls != 1 || other != 0) {
      return not_supported(
          "--format engine needs every method to be one engine partition; "
          "method '",
          method.name, "' has ", calls, " partitions and ", other,
          " host instructions (use --format program)");
    }
  }
  return Status();
}

// Text written like the binary formats: temporary file in the same directory, renamed.
Status write_text_atomically(const std::string& path, const std::string& text) {
  KVRT_ASSIGN_OR_RETURN(TempFile file, TempFile::create(path));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(file.fd(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return invalid_argument("cannot write '", path, "': ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return file.commit();
}

nlohmann::json producer_json(const frontend::Checkpoint& checkpoint, const ExportOptions& options) {
  const frontend::ModelConfig& config = checkpoint.config();
  nlohmann::json generation = {{"eos_token_ids", checkpoint.generation().eos_token_ids},
                               {"config", frontend::to_json(checkpoint.generation())}};
  if (checkpoint.generation().bos_token_id) {
    generation["bos_token_id"] = *checkpoint.generation().bos_token_id;
  }
  return {{"tool", "kvrt export"},
          {"checkpoint", std::filesystem::path(checkpoint.dir()).filename().string()},
          // Where the program came from, so its tokenizer can be found from anywhere.
          {"checkpoint_dir", std::filesystem::weakly_canonical(checkpoint.dir()).string()},
          {"architecture", frontend::architecture_name(config.architecture)},
          {"vocab_size", config.vocab_size},
          {"num_hidden_layers", config.num_hidden_layers},
          {"cache_dtype", dtype_name(options.cache_dtype)},
          {"generation", generation}};
}

}  // namespace

std::string_view export_format_name(ExportFormat format) {
  switch (format) {
    case ExportFormat::kProgram:
      return "program";
    case ExportFormat::kEngine:
      return "engine";
    case ExportFormat::kGraphJson:
      return "graph-json";
  }
  return "invalid";
}

Result<ExportFormat> parse_export_format(std::string_view name) {
  for (ExportFormat format : kFormats) {
    if (export_format_name(format) == name) return format;
  }
  return invalid_argument("unknown format '", name, "' (program, engine or graph-json)");
}

Result<MethodGraphs> build_method_graphs(const frontend::Checkpoint& checkpoint,
                                         const ExportOptions& options) {
  if (options.weight_dtype && !is_floating(*options.weight_dtype)) {
    return invalid_argument("--dtype must be f32, f16 or bf16, not ",
                            dtype_name(*options.weight_dtype));
  }
  frontend::BuildOptions build;
  build.max_seq = options.max_seq;
  build.max_prompt = options.max_prompt;
  build.cache_dtype = options.cache_dtype;
  MethodGraphs graphs;
  build.method = frontend::MethodKind::kPrefill;
  KVRT_ASSIGN_OR_RETURN(graphs.prefill, checkpoint.build_graph(build));
  build.method = frontend::MethodKind::kDecode;
  KVRT_ASSIGN_OR_RETURN(graphs.decode, checkpoint.build_graph(build));
  if (options.weight_dtype) {
    for (graph::Graph* g : {&graphs.prefill, &graphs.decode}) {
      for (graph::Value& value : g->values) {
        if (value.kind == graph::ValueKind::kParameter && is_floating(value.dtype)) {
          value.dtype = *options.weight_dtype;
        }
      }
    }
  }
  return graphs;
}

nlohmann::json graphs_json(const MethodGraphs& graphs) {
  return {
      {"format", "kvrt-graphs"},
      {"version", 1},
      {"methods",
       {{"prefill", graph::to_json(graphs.prefill)}, {"decode", graph::to_json(graphs.decode)}}}};
}

// Export never writes into its own input: an output path that is the checkpoint
// directory or one of its files (weights, configs, tokenizer), under any name (a
// relative path, a symbolic or a hard link), would replace the source. Compared by
// device and inode, which every spelling of one file shares.
static Status check_output_is_not_an_input(const ExportOptions& options) {
  namespace fs = std::filesystem;
  struct stat output {};
  if (::stat(options.output_path.c_str(), &output) != 0) return Status();  // a new file
  auto same = [&output](const fs::path& path) {
    struct stat input {};
    return ::stat(path.c_str(), &input) == 0 && input.st_dev == output.st_dev &&
           input.st_ino == output.st_ino;
  };
  if (same(options.checkpoint_dir)) {
    return invalid_argument("output '", options.output_path,
                            "' is the checkpoint directory: export never writes into its input");
  }
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(options.checkpoint_dir, error)) {
    if (same(entry.path())) {
      return invalid_argument("output '", options.output_path, "' is the checkpoint's own file '",
                              entry.path().filename().string(),
                              "': export never writes into its input");
    }
  }
  return Status();
}

Status check_free_space(const std::string& output_path, uint64_t needed) {
  namespace fs = std::filesystem;
  fs::path dir = fs::absolute(output_path).parent_path();
  std::error_code error;
  // A directory still to be made is on the file system of its nearest existing parent.
  while (!fs::exists(dir, error) && dir.has_parent_path() && dir != dir.parent_path()) {
    dir = dir.parent_path();
  }
  const fs::space_info space = fs::space(dir, error);
  if (error) return Status();  // unknown: the write itself reports a full disk
  if (space.available < needed) {
    return invalid_argument("not enough disk space for '", output_path, "': it needs about ",
                            needed / 1000000, " MB and '", dir.string(), "' has ",
                            space.available / 1000000, " MB free");
  }
  return Status();
}

Result<ExportSummary> export_checkpoint(const ExportOptions& options) {
  if (options.output_path.empty()) return invalid_argument("no output path (-o)");
  KVRT_RETURN_IF_ERROR(check_output_is_not_an_input(options));
  // Temporaries of this destination that a killed export left behind (one stopped by
  // a catchable signal removes its own).
  remove_stale_temporaries(options.output_path);
  KVRT_ASSIGN_OR_RETURN(frontend::Checkpoint checkpoint,
                        frontend::Checkpoint::open(options.checkpoint_dir));
  KVRT_ASSIGN_OR_RETURN(MethodGraphs graphs, build_method_graphs(checkpoint, options));
  ExportSummary summary;
  summary.methods = 2;
  if (options.format == ExportFormat::kGraphJson) {
    std::string text;
    try {
      text = graphs_json(graphs).dump(1);
    } catch (const std::exception& e) {
      return invalid_argument("cannot serialize graphs: ", e.what());
    }
    KVRT_RETURN_IF_ERROR(write_text_atomically(options.output_path, text));
    summary.file_bytes = text.size();
    return summary;
  }

  lowering::LoweringOptions lowering_options;
  lowering_options.partition.force_host = options.force_host;
  lowering_options.target_device = options.target_device;
  lowering_options.producer = producer_json(checkpoint, options);
  const lowering::MethodGraph methods[] = {{"prefill", &graphs.prefill},
                                           {"decode", &graphs.decode}};
  KVRT_ASSIGN_OR_RETURN(lowering::LoweredProgram lowered,
                        lowering::lower_program(methods, lowering_options));
  KVRT_ASSIGN_OR_RETURN(std::vector<format::WeightSource> sources,
                        weight_sources(checkpoint, lowered.spec.weights));
  // The file is about its weights and blobs: a full disk is found now, not after
  // minutes of writing.
  uint64_t needed = 0;
  for (const format::WeightSpec& weight : lowered.spec.weights) needed += weight.nbytes;
  for (const auto& blob : lowered.blobs) needed += blob.size();
  KVRT_RETURN_IF_ERROR(check_free_space(options.output_path, needed));
  format::ProgramWriteOptions write_options;
  write_options.progress = options.progress;
  if (options.format == ExportFormat::kEngine) {
    KVRT_RETURN_IF_ERROR(check_engine_expressible(lowered));
    format::EngineFileSpec engine;
    engine.weights = lowered.spec.weights;
    engine.delegates = lowered.spec.delegates;
    engine.producer = lowered.spec.producer;
    KVRT_RETURN_IF_ERROR(format::write_engine_file(options.output_path, engine, lowered.blobs,
                                                   sources, write_options));
  } else {
    KVRT_RETURN_IF_ERROR(format::write_program(options.output_path, lowered.spec, lowered.blobs,
                                               sources, write_options));
  }
  for (const format::WeightSpec& weight : lowered.spec.weights)
    summary.weight_bytes += weight.nbytes;
  summary.weights = lowered.spec.weights.size();
  summary.delegates = lowered.spec.delegates.size();
  std::error_code error;
  summary.file_bytes = std::filesystem::file_size(options.output_path, error);
  return summary;
}

}  // namespace kvrt::exporter
