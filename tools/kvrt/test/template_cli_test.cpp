// `kvrt template` as a user runs it: exactly the rendered bytes on stdout, the raised
// message on stderr with a non-zero exit, and usage errors with exit code 2.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path fixtures() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return fs::path(env ? env : KVRT_SOURCE_DIR) / "tests/fixtures/chat_templates";
}

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Output run_template(const std::string& args) {
  // One file per process: ctest runs the cases of this binary side by side.
  const fs::path err_file =
      fs::temp_directory_path() / ("kvrt_template_cli_test." + std::to_string(getpid()) + ".err");
  const std::string command =
      "'" KVRT_CLI_PATH "' template " + args + " 2>'" + err_file.string() + "'";
  Output output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  std::array<char, 4096> buffer{};
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    output.out.append(buffer.data(), count);
  }
  const int status = pclose(pipe);
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream in(err_file);
    std::ostringstream err;
    err << in.rdbuf();
    output.err = err.str();
  }
  std::error_code ignored;
  fs::remove(err_file, ignored);
  return output;
}

// Built in place: "'" + s + "'" trips a false -Wrestrict positive of GCC 12.
std::string quoted(const fs::path& path) {
  std::string out = path.string();
  out.insert(out.begin(), '\'');
  out.push_back('\'');
  return out;
}

TEST(KvrtTemplate, PrintsExactlyTheRenderedText) {
  const Output o =
      run_template(quoted(fixtures() / "Qwen-Qwen2.5-7B-Instruct.jinja") + " --messages " +
                   quoted(fixtures() / "messages/single_user.json") + " --add-generation-prompt");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(KvrtTemplate, ReadsAModelDirectoryAndTakesOverridesAndVariables) {
  const fs::path dir = fs::temp_directory_path() / "kvrt_template_cli_model";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": {"content": "</s>"},
             "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ tag }}"})";
  const std::string messages = quoted(fixtures() / "messages/single_user.json");
  Output o = run_template(quoted(dir) + " --messages " + messages);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "<s>Hello!</s>");
  o = run_template(quoted(dir / "tokenizer_config.json") + " --messages " + messages +
                   " --bos '[B]' --var 'tag=\"!\"'");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "[B]Hello!</s>!");
  fs::remove_all(dir);
}

TEST(KvrtTemplate, ARaisingTemplatePrintsItsMessageAndFails) {
  const Output o = run_template(quoted(fixtures() / "google-gemma-2-2b-it.jinja") + " --messages " +
                                quoted(fixtures() / "messages/system_user.json"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("System role not supported"), std::string::npos) << o.err;
}

TEST(KvrtTemplate, BadInputIsAUsageError) {
  const std::string tmpl = quoted(fixtures() / "google-gemma-2-2b-it.jinja");
  EXPECT_EQ(run_template(tmpl + " --messages /nonexistent.json").exit_code, 2);
  const Output o =
      run_template(tmpl + " --messages " + quoted(fixtures() / "messages/single_user.json") +
                   " --var x=notjson");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--var"), std::string::npos) << o.err;
}

}  // namespace
