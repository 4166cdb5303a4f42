// Running the built `kvrt` as a user would, for the subprocess tests: a command line
// through the shell, in a working directory, with extra environment, stdout and
// stderr captured apart. Each test gets its own temporary directory, which holds the
// export cache (XDG_CACHE_HOME) and the Hugging Face cache unless a test sets others.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kvrt::cli_test {

namespace fs = std::filesystem;

inline std::string source_dir() {
  const char* env = std::getenv("KVRT_SOURCE_DIR");
  return env ? env : KVRT_SOURCE_DIR;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

inline std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A temporary directory per test, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    work_ = fs::temp_directory_path() / (std::string("kvrt_cli_") + info->test_suite_name() + "_" +
                                         info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  // `env`: "NAME=value ..." prefixed to the command (already quoted as needed).
  CliResult kvrt(const std::string& args, const std::string& env = "", const fs::path& cwd = {},
                 const std::string& stdin_text = "") const {
    const fs::path err = work_ / "stderr.txt";
    const fs::path in = work_ / "stdin.txt";
    std::ofstream(in, std::ios::binary) << stdin_text;
    const std::string command = "cd " + quoted((cwd.empty() ? work_ : cwd).string()) +
                                " && XDG_CACHE_HOME=" + quoted((work_ / "cache").string()) +
                                " HF_HUB_CACHE= HF_HOME= " + env + " " + quoted(KVRT_CLI_PATH) +
                                " " + args + " 2>" + quoted(err.string()) + " <" +
                                quoted(in.string());
    CliResult result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    std::array<char, 4096> buffer{};
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
      result.out.append(buffer.data(), n);
    }
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.err = read_text(err);
    return result;
  }

  fs::path model_dir() const { return fs::path(source_dir()) / "models/fortune-llama"; }
  fs::path fixture(const std::string& name) const {
    return fs::path(source_dir()) / "tests/fixtures" / name;
  }
  fs::path cache_dir() const { return work_ / "cache" / "kvrt"; }

  size_t programs_in_cache() const {
    size_t count = 0;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(cache_dir(), error)) {
      if (entry.path().extension() == ".kvrt") ++count;
    }
    return count;
  }

  fs::path work_;
};

}  // namespace kvrt::cli_test
