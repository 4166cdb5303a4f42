// Embedding kvrt in an application: load a model, stream a greedy continuation, print
// the numbers. Build against an installed kvrt with find_package(kvrt).
//   kvrt_embed_example MODEL_DIR_OR_PROGRAM "prompt" [max_new_tokens]
#include <kvrt/api/kvrt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  kvrt::LoadOptions load;
  load.device = "cpu";
  auto llm = kvrt::Llm::load(argv[1], load);
  if (!llm.ok()) {
    std::fprintf(stderr, "error: %s\n", llm.status().to_string().c_str());
    return 1;
  }
  kvrt::GenerateOptions options;
  options.max_new_tokens = argc > 3 ? std::atoi(argv[3]) : 32;
  options.sampling.temperature = 0.0f;  // greedy

  std::printf("%s", argv[2]);
  auto result = (*llm)->generate(argv[2], options, [](std::string_view text, int32_t) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;  // false would stop generation here
  });
  if (!result.ok()) {
    std::fprintf(stderr, "\nerror: %s\n", result.status().to_string().c_str());
    return 1;
  }
  std::printf("\n%d tokens, %.1f tok/s decode, %llu KV-cache bytes copied per step\n",
              result->stats.generated_tokens, result->stats.decode_tokens_per_second,
              static_cast<unsigned long long>(result->stats.cache_bytes_copied_per_step));
  return result->ids.empty() ? 1 : 0;
}
