#include "kvrt/api/model_ref.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace kvrt {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// "~/x" as the shell would expand it: huggingface_hub applies expanduser to HF_HOME.
fs::path expand_home(const std::string& path) {
  if (path == "~" || path.starts_with("~/")) {
    const std::string home = env("HOME");
    if (!home.empty()) return fs::path(home) / path.substr(path.size() > 1 ? 2 : 1);
  }
  return path;
}

bool is_repo_part(std::string_view part) {
  if (part.empty() || part == "." || part == ".." || part.starts_with('-')) return false;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// "org/name" or "org/name@revision"; the revision may itself hold slashes (refs/pr/1).
bool parse_hub_reference(const std::string& reference, std::string* repo, std::string* revision) {
  const size_t at = reference.find('@');
  *repo = reference.substr(0, at);
  *revision = at == std::string::npos ? "main" : reference.substr(at + 1);
  const size_t slash = repo->find('/');
  if (slash == std::string::npos || revision->empty()) return false;
  return is_repo_part(std::string_view(*repo).substr(0, slash)) &&
         is_repo_part(std::string_view(*repo).substr(slash + 1));
}

std::string read_first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  return line;
}

// A "models--org--name" folder of the hub cache: the snapshot `revision` points to.
Result<ModelLocation> snapshot_of(const fs::path& repo_dir, const std::string& revision,
                                  const std::string& reference) {
  std::error_code error;
  const fs::path ref_file = repo_dir / "refs" / revision;
  std::string sha = revision;  // a commit sha names its snapshot directly
  if (fs::is_regular_file(ref_file, error)) sha = read_first_line(ref_file);
  const fs::path snapshot = repo_dir / "snapshots" / sha;
  if (sha.empty() || sha.find('/') != std::string::npos || !fs::is_directory(snapshot, error)) {
    std::vector<std::string> present;
    for (const auto& entry : fs::directory_iterator(repo_dir / "snapshots", error)) {
      present.push_back(entry.path().filename().string());
    }
    std::string list;
    for (const std::string& name : present) list += (list.empty() ? "" : ", ") + name;
    return not_found("'", reference, "': revision '", revision, "' has no snapshot in '",
                     repo_dir.string(), "' (looked for ", ref_file.string(), " and ",
                     snapshot.string(), "; snapshots present: ", list.empty() ? "none" : list, ")");
  }
  // "models--org--name" is org/name. (Built by parts: GCC 12 misreads a replace()
  // here as an overlapping copy.)
  const std::string name = repo_dir.filename().string().substr(std::string("models--").size());
  const size_t dashes = name.find("--");
  const std::string id =
      dashes == std::string::npos ? name : name.substr(0, dashes) + "/" + name.substr(dashes + 2);
  return ModelLocation{snapshot.string(), false, id + "@" + sha};
}

bool is_hub_repo_folder(const fs::path& dir) {
  std::error_code error;
  fs::path normal = dir.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  return normal.filename().string().starts_with("models--") &&
         fs::is_directory(dir / "snapshots", error);
}

}  // namespace

std::string hub_cache_dir() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    if (std::string value = env(name); !value.empty()) return expand_home(value).string();
  }
  if (std::string home = env("HF_HOME"); !home.empty()) {
    return (expand_home(home) / "hub").string();
  }
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) {
    return (fs::path(xdg) / "huggingface" / "hub").string();
  }
  return (expand_home("~") / ".cache" / "huggingface" / "hub").string();
}

Result<ModelLocation> resolve_model(const std::string& reference) {
  if (reference.empty()) return invalid_argument("no model given (a path or org/name)");
  std::error_code error;
  if (fs::is_directory(reference, error)) {
    if (is_hub_repo_folder(reference)) {
      fs::path dir = fs::path(reference).lexically_normal();
      if (dir.filename().empty()) dir = dir.parent_path();
      return snapshot_of(dir, "main", reference);
    }
    return ModelLocation{reference, false, ""};
  }
  if (fs::exists(reference, error)) return ModelLocation{reference, true, ""};

  std::string repo, revision;
  if (!parse_hub_reference(reference, &repo, &revision)) {
    return not_found("model '", reference,
                     "' does not exist (not a file or directory, nor a hub reference "
                     "org/name[@revision])");
  }
  const fs::path cache = hub_cache_dir();
  const size_t slash = repo.find('/');
  const std::string folder = "models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1);
  const fs::path repo_dir = cache / folder;
  if (!fs::is_directory(repo_dir / "snapshots", error)) {
    return not_found("model '", reference,
                     "' is neither a path nor in the Hugging Face cache: ", "looked in '",
                     repo_dir.string(),
                     "' (the cache is $HF_HUB_CACHE, else $HF_HOME/hub, else "
                     "~/.cache/huggingface/hub; kvrt never downloads: "
                     "`huggingface-cli download ",
                     repo, "` fetches it)");
  }
  return snapshot_of(repo_dir, revision, reference);
}

}  // namespace kvrt
