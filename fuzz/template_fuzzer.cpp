// libFuzzer target for the chat-template renderer (src/kvrt/jinja). The input is
// "TEMPLATE\0MESSAGES_JSON"; without valid messages a fixed conversation is used.
// Parsing and rendering either succeed or return a one-line Status.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "kvrt/jinja/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvrt;
  auto [source, messages_text] = fuzz::split_at_nul(data, size);
  auto tmpl = jinja::ChatTemplate::from_source(std::string(source));
  if (!tmpl.ok()) {
    fuzz::check_refusal(tmpl.status());
    return 0;
  }
  jinja::Json messages = jinja::Json::parse(messages_text, nullptr, /*allow_exceptions=*/false);
  if (messages.is_discarded() || !messages.is_array()) {
    messages = jinja::Json::parse(R"([{"role":"system","content":"Be brief."},
      {"role":"user","content":"Hi <b>there</b> \u00e9"},{"role":"assistant","content":"Hello"},
      {"role":"user","content":"Again"}])");
  }
  tmpl->set_bos_token("<s>");
  tmpl->set_eos_token("</s>");
  for (bool add_generation_prompt : {true, false}) {
    auto text = tmpl->render(messages, nullptr, add_generation_prompt);
    if (!text.ok() && !jinja::raised_message(text.status())) fuzz::check_refusal(text.status());
  }
  return 0;
}
