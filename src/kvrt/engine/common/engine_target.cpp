#include "kvrt/engine/common/engine_target.h"

#include <mutex>
#include <vector>

namespace kvrt::engine {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<EngineTarget> targets;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

Status register_engine_target(EngineTarget target) {
  if (!target.build || !target.device_api) {
    return invalid_argument("engine target '", target.name, "' lacks a builder or device api");
  }
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  for (EngineTarget& existing : reg.targets) {
    if (existing.device_type == target.device_type) {
      existing = std::move(target);
      return Status();
    }
  }
  reg.targets.push_back(std::move(target));
  return Status();
}

void unregister_engine_target(DeviceType type) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  std::erase_if(reg.targets, [type](const EngineTarget& t) { return t.device_type == type; });
}

Result<EngineTarget> find_engine_target(DeviceType type) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  for (const EngineTarget& target : reg.targets) {
    if (target.device_type == type) return target;
  }
  return not_found("no engine target is registered for device type ", Device{type, 0}.to_string());
}

}  // namespace kvrt::engine

namespace kvrt::engine {

Result<std::shared_ptr<SharedState>> WeightProvider::shared_state(
    const std::string& key, const SharedStateFactory& make) const {
  std::lock_guard lock(shared_mutex_);
  auto found = shared_.find(key);
  if (found != shared_.end()) return found->second;
  KVRT_ASSIGN_OR_RETURN(std::shared_ptr<SharedState> state, make());
  shared_.emplace(key, state);
  return state;
}

}  // namespace kvrt::engine

namespace kvrt::engine {

Result<int> Engine::tensor_index(std::string_view name) const {
  const std::span<const TensorInfo> in = inputs(), out = outputs();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].name == name) return static_cast<int>(i);
  }
  for (size_t o = 0; o < out.size(); ++o) {
    if (out[o].name == name) return static_cast<int>(in.size() + o);
  }
  return not_found("the engine has no tensor '", name, "'");
}

Status Engine::set_tensor(int index, void* data, const Shape& shape) {
  const std::span<const TensorInfo> in = inputs(), out = outputs();
  const auto i = static_cast<size_t>(index);
  if (index < 0 || i >= in.size() + out.size()) {
    return invalid_argument("the engine has no tensor ", index);
  }
  return set_tensor(i < in.size() ? in[i].name : out[i - in.size()].name, data, shape);
}

}  // namespace kvrt::engine

namespace kvrt::engine {

Status Engine::enqueue_steps(StreamHandle stream, int steps) {
  if (steps == 1) return enqueue(stream);
  return not_supported("this engine runs one step per call, asked for ", steps);
}

}  // namespace kvrt::engine
