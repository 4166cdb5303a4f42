// kvrt tokenize PATH --text TEXT | --decode IDS: encodes text to a JSON list of ids, or
// decodes a comma-separated id list to text, with the tokenizer.json at PATH (or in
// the checkpoint directory PATH).
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"
#include "flags.h"
#include "kvrt/generation/tokenizer.h"

namespace {

struct TokenizeOptions {
  std::string path;
  std::string text;
  std::string decode;
  bool no_special = false;
  bool skip_special = false;
};

kvrt::Result<std::vector<int32_t>> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int32_t id = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return kvrt::invalid_argument("--decode: '", item, "' is not a token id");
    }
    ids.push_back(id);
    pos = end + 1;
  }
  return ids;
}

kvrt::Status run(const TokenizeOptions& options, bool decode_mode) {
  KVRT_ASSIGN_OR_RETURN(std::string path, kvrt::cli::resolve_model_path(options.path));
  KVRT_ASSIGN_OR_RETURN(kvrt::Tokenizer tokenizer, kvrt::Tokenizer::load(path));
  if (decode_mode) {
    KVRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(options.decode));
    KVRT_ASSIGN_OR_RETURN(std::string text, tokenizer.decode(ids, options.skip_special));
    std::printf("%s\n", text.c_str());
    return kvrt::Status();
  }
  KVRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        tokenizer.encode(options.text, !options.no_special));
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  out += "]";
  std::printf("%s\n", out.c_str());
  return kvrt::Status();
}

const bool registered = kvrt::cli::register_command(
    {"tokenize", "Encode text to token ids, or decode ids to text, with a tokenizer.json",
     [](CLI::App& sub) {
       auto options = std::make_shared<TokenizeOptions>();
       sub.add_option("path", options->path,
                      "tokenizer.json, a checkpoint directory, or org/name from the Hugging Face "
                      "cache")
           ->required();
       auto* text = sub.add_option("--text", options->text, "text to encode");
       auto* decode = sub.add_option("--decode", options->decode, "ids to decode, e.g. 1,2,3");
       text->excludes(decode);
       sub.add_flag("--no-special", options->no_special,
                    "encode without the special tokens (BOS) of the post-processor");
       sub.add_flag("--skip-special", options->skip_special, "drop special tokens when decoding");
       sub.footer(
           "Encoding prints a JSON list of ids; decoding prints the text.\n\n"
           "Examples:\n"
           "  kvrt tokenize models/fortune-llama --text \"Hello\"\n"
           "  kvrt tokenize models/fortune-llama --decode 1,450,6222\n"
           "  kvrt tokenize Qwen/Qwen2.5-0.5B --text \"Hello\" --no-special");
       sub.callback([options, text, decode] {
         if (text->count() == 0 && decode->count() == 0) {
           std::fprintf(stderr, "error: give --text TEXT or --decode IDS\n");
           kvrt::cli::set_exit_code(2);
           return;
         }
         kvrt::Status status = run(*options, decode->count() > 0);
         if (!status.ok()) {
           std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
           kvrt::cli::set_exit_code(1);
         }
       });
     }});

}  // namespace
