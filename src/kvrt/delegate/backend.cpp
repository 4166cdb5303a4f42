// The backend registry: program files name their delegates' backends; the runtime
// looks them up here. The engine delegate is always registered.
#include <map>
#include <mutex>
#include <string>

#include "kvrt/delegate/backend.h"
#include "kvrt/delegate/engine_delegate.h"

namespace kvrt::delegate {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const Backend>, std::less<>> backends;
};

Registry& registry() {
  static Registry* instance = [] {
    auto* r = new Registry;
    std::shared_ptr<const Backend> engine = make_engine_backend();
    r->backends.emplace(std::string(engine->name()), engine);
    return r;
  }();
  return *instance;
}

}  // namespace

Status register_backend(std::shared_ptr<const Backend> backend) {
  if (!backend || backend->name().empty()) {
    return invalid_argument("a backend needs a non-empty name");
  }
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.backends[std::string(backend->name())] = std::move(backend);
  return Status();
}

Result<std::shared_ptr<const Backend>> find_backend(std::string_view name) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.backends.find(name);
  if (it == reg.backends.end()) return not_found("no delegate backend named '", name, "'");
  return it->second;
}

}  // namespace kvrt::delegate
