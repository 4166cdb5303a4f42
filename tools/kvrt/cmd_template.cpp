// kvrt template TEMPLATE --messages FILE.json [--add-generation-prompt] [--bos TEXT]
//   [--eos TEXT] [--var NAME=JSON]...: renders a chat template (a .jinja file, a
// tokenizer_config.json or a model directory) for {"messages": [...], "tools": [...]}
// and prints exactly the rendered text, with no newline added, so that templates can
// be debugged and outputs compared byte for byte.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "kvrt/jinja/chat_template.h"

namespace {

using kvrt::jinja::Json;

struct TemplateOptions {
  std::string path;
  std::string messages_file;
  bool add_generation_prompt = false;
  std::string bos;
  std::string eos;
  std::vector<std::string> vars;
};

kvrt::Result<Json> parse_vars(const std::vector<std::string>& vars) {
  Json extra = Json::object();
  for (const std::string& var : vars) {
    const size_t eq = var.find('=');
    if (eq == std::string::npos || eq == 0) {
      return kvrt::invalid_argument("--var '", var, "': expected NAME=JSON");
    }
    Json value = Json::parse(var.substr(eq + 1), nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return kvrt::invalid_argument("--var '", var,
                                    "': the value is not JSON (quote strings: ", var.substr(0, eq),
                                    "='\"text\"')");
    }
    extra[var.substr(0, eq)] = std::move(value);
  }
  return extra;
}

kvrt::Result<Json> read_messages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return kvrt::not_found("cannot read '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  Json json = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("messages")) {
    return kvrt::invalid_argument("'", path, "' must be a JSON object {\"messages\": [...]}");
  }
  return json;
}

// Exit codes: 0 rendered, 1 the template failed or raised, 2 bad input.
int run(const TemplateOptions& options, bool bos_given, bool eos_given) {
  auto fail = [](const kvrt::Status& status, int code) {
    std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
    return code;
  };
  kvrt::Result<Json> extra = parse_vars(options.vars);
  if (!extra.ok()) return fail(extra.status(), 2);
  kvrt::Result<Json> input = read_messages(options.messages_file);
  if (!input.ok()) return fail(input.status(), 2);
  auto tmpl = kvrt::jinja::ChatTemplate::load(options.path);
  if (!tmpl.ok()) return fail(tmpl.status(), 2);
  if (bos_given) tmpl->set_bos_token(options.bos);
  if (eos_given) tmpl->set_eos_token(options.eos);
  const Json tools = input->contains("tools") ? (*input)["tools"] : Json(nullptr);
  auto text = tmpl->render((*input)["messages"], tools, options.add_generation_prompt, *extra);
  if (!text.ok()) {
    if (auto message = kvrt::jinja::raised_message(text.status())) {
      std::fprintf(stderr, "error: the template raised an exception: %s\n", message->c_str());
      return 1;
    }
    return fail(text.status(), 1);
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fflush(stdout);
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"template", "Render a chat template for a list of messages, printing exactly its text",
     [](CLI::App& sub) {
       auto options = std::make_shared<TemplateOptions>();
       sub.add_option("template", options->path,
                      "a .jinja file, a tokenizer_config.json, or a model directory")
           ->required();
       sub.add_option("--messages", options->messages_file,
                      "JSON file {\"messages\": [...], \"tools\": [...]}")
           ->required();
       sub.add_flag("--add-generation-prompt", options->add_generation_prompt,
                    "end with the prompt that starts the assistant's turn");
       auto* bos =
           sub.add_option("--bos", options->bos, "bos_token (default: tokenizer_config.json)");
       auto* eos =
           sub.add_option("--eos", options->eos, "eos_token (default: tokenizer_config.json)");
       sub.add_option("--var", options->vars, "a template variable, NAME=JSON (repeatable)");
       sub.footer(
           "Prints exactly the rendered text, with no newline added, so that outputs can be\n"
           "compared byte for byte (docs/chat-templates.md).\n\n"
           "Examples:\n"
           "  kvrt template MODEL_DIR --messages chat.json --add-generation-prompt\n"
           "  kvrt template chat.jinja --messages chat.json --var 'enable_thinking=false'");
       sub.callback([options, bos, eos] {
         kvrt::cli::set_exit_code(run(*options, bos->count() > 0, eos->count() > 0));
       });
     }});

}  // namespace
