// Module's greedy pipeline: each step's token is chosen on the device (the methods'
// `next_token` output) into one of two device slots; the next decode step reads it from
// there, so the host queues step t+1 before it waits for token t, and only the 4-byte ids
// cross to the host (into a pinned ring slot, with an event per submission). Where the
// engine takes runs of steps, one submission holds up to kMaxSteps of them.
#include "kvrt/runtime/module.h"

namespace kvrt::runtime {

bool Module::has_device_greedy() const {
  for (const Outputs& io : outputs_) {
    if (io.next_token < 0) return false;
  }
  return !outputs_.empty();
}

Status Module::submit_greedy(std::string_view name, std::span<const int32_t> tokens,
                             int32_t position) {
  KVRT_ASSIGN_OR_RETURN(size_t m, method_index(name));
  if (outputs_[m].next_token < 0) {
    return invalid_state("method '", name, "' has no next_token output");
  }
  KVRT_RETURN_IF_ERROR(check_call(name, tokens, position));
  KVRT_RETURN_IF_ERROR(drain_queue());  // a new run of steps: earlier tokens are dropped
  int32_t* staged = host_staging();
  std::copy(tokens.begin(), tokens.end(), staged);
  KVRT_RETURN_IF_ERROR(
      api_->copy_async(device_tokens(), staged, tokens.size() * sizeof(int32_t), stream_));
  const TensorView input(device_tokens(), DType::kI32, {1, static_cast<int64_t>(tokens.size())},
                         device_);
  return submit(m, input, position, 1);
}

Status Module::submit_greedy_continuation(int32_t position, int steps) {
  KVRT_ASSIGN_OR_RETURN(size_t m, method_index(kDecodeMethod));
  if (submitted_ == 0) {
    return invalid_state("no greedy step was submitted since the last reset");
  }
  if (outputs_[m].next_token < 0) {
    return invalid_state("method 'decode' has no next_token output");
  }
  if (steps < 1 || steps > max_greedy_steps_) {
    return invalid_argument("method 'decode': a run of ", steps, " steps, this module queues 1 to ",
                            max_greedy_steps_);
  }
  KVRT_RETURN_IF_ERROR(check_call(kDecodeMethod, {}, position));
  const int64_t last = static_cast<int64_t>(position) + steps - 1;
  if (max_seq_len_ > 0 && last >= max_seq_len_) {
    return invalid_argument("method 'decode': position ", last, " does not fit the cache of ",
                            max_seq_len_, " positions");
  }
  const TensorView input(device_token_slot(token_slot_) + token_count_ - 1, DType::kI32, {1, 1},
                         device_);
  return submit(m, input, position, steps);
}

// Writes the position (a stream write, or through the next pinned ring slot), runs the
// method with its next_token output in the other device slot, and queues the tokens'
// copy home.
Status Module::submit(size_t m, const TensorView& tokens, int32_t position, int steps) {
  if (pending_.size() == kRing) {
    return invalid_state(kRing, " greedy steps are queued; wait_token() first");
  }
  const size_t ring = submitted_ % kRing;
  // The position goes in with the command where the device can (no copy), else from a
  // ring slot of pinned memory that outlives the copy.
  const Status written = api_->write_i32_async(device_position(), position, stream_);
  if (written.code() == ErrorCode::kNotSupported) {
    host_positions()[ring] = position;
    KVRT_RETURN_IF_ERROR(
        api_->copy_async(device_position(), &host_positions()[ring], sizeof(int32_t), stream_));
  } else {
    KVRT_RETURN_IF_ERROR(written);
  }
  const size_t slot = token_slot_ ^ 1;
  const TensorView inputs[] = {tokens, TensorView(device_position(), DType::kI32, {1}, device_)};
  std::vector<TensorView> outputs(static_cast<size_t>(outputs_[m].next_token) + 1);
  outputs.back() = TensorView(device_token_slot(slot), DType::kI32, {steps, 1}, device_);
  RunOptions options;
  options.outputs = outputs;
  options.synchronize = false;
  options.steps = steps;
  last_ = methods_[m].get();
  KVRT_RETURN_IF_ERROR(methods_[m]->execute(inputs, options).status());
  token_slot_ = slot;
  token_count_ = steps;
  ++submitted_;
  int32_t* home = &host_tokens()[ring * kMaxSteps];
  Status queued = api_->copy_async(home, device_token_slot(slot),
                                   static_cast<size_t>(steps) * sizeof(int32_t), stream_);
  Result<engine::EventHandle> done = queued.ok() ? api_->record_event(stream_) : queued;
  if (!done.ok()) {
    (void)api_->synchronize(stream_);  // nothing may run unseen
    return done.status();
  }
  pending_.push_back({*done, ring, steps, 0});
  return Status();
}

size_t Module::queued_tokens() const {
  size_t tokens = 0;
  for (const Pending& run : pending_) tokens += static_cast<size_t>(run.count - run.taken);
  return tokens;
}

Result<int32_t> Module::wait_token() {
  if (pending_.empty()) return invalid_state("no greedy step is queued");
  Pending& run = pending_.front();
  if (run.taken == 0) {
    const Status waited = api_->wait_event(run.done);
    if (!waited.ok()) {
      api_->destroy_event(run.done);
      pending_.pop_front();
      return waited;
    }
  }
  const int32_t token = host_tokens()[run.slot * kMaxSteps + static_cast<size_t>(run.taken)];
  if (++run.taken == run.count) {
    api_->destroy_event(run.done);
    pending_.pop_front();
  }
  return token;
}

Status Module::drain_queue() {
  if (api_ == nullptr) return Status();
  const Status synced = pending_.empty() ? Status() : api_->synchronize(stream_);
  for (const Pending& step : pending_) api_->destroy_event(step.done);
  pending_.clear();
  submitted_ = 0;
  return synced;
}

}  // namespace kvrt::runtime
