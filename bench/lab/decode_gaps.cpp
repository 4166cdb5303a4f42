// Where the time between decode steps goes, end to end through the runtime: the same
// program's decode method driven four ways on one stream, timed with events over N
// steps after a warm-up, beside the host time each way spends per step.
//
//   graph only      Method::execute with device-resident I/O, nothing else queued
//   + position      + the 4-byte position copied in from pinned memory each step
//   + token out     + the 4-byte token copied out and an event recorded each step
//   pipelined       Module's greedy loop: queue step t+1, then wait for token t
//
//   decode_gaps PROGRAM.kvrt [--steps N] [--depth D]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kvrt/engine/builtin_targets.h"
#include "kvrt/runtime/module.h"

namespace {

using kvrt::DType;
using kvrt::Status;
using kvrt::TensorView;
using kvrt::runtime::Module;
using Clock = std::chrono::steady_clock;

struct Figures {
  double device_us = 0;  // per step, events
  double host_us = 0;    // per step, host clock of the submitting loop
};

int fail(const Status& status) {
  std::fprintf(stderr, "decode_gaps: %s\n", status.to_string().c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: decode_gaps PROGRAM.kvrt [--steps N] [--depth D]\n");
    return 2;
  }
  int steps = 256, depth = 4096;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    if (flag == "--depth") depth = std::atoi(argv[i + 1]);
  }
  if (Status s = kvrt::engine::register_builtin_targets(); !s.ok()) return fail(s);
  auto loaded = Module::load(argv[1], {.device = kvrt::Device::cuda(0)});
  if (!loaded.ok()) return fail(loaded.status());
  Module& module = **loaded;
  kvrt::engine::DeviceApi& api = module.device_api();
  const kvrt::engine::StreamHandle stream = module.stream();
  kvrt::runtime::Method* decode = module.method("decode");
  if (decode == nullptr) return fail(kvrt::not_found("no decode method"));
  const kvrt::Device device = kvrt::Device::cuda(0);

  auto slots = api.allocate(256 * 3);
  auto pinned = api.allocate_host(2 * sizeof(int32_t) * static_cast<size_t>(steps));
  if (!slots.ok() || !pinned.ok()) return fail(kvrt::allocation_failed("slots"));
  auto* slot = static_cast<int32_t*>(*slots);  // [0]: token a, [64]: token b, [128]: position
  auto* host = static_cast<int32_t*>(*pinned);
  int32_t one = 1;
  (void)api.copy_async(slot, &one, 4, stream);
  (void)api.copy_async(slot + 64, &one, 4, stream);
  (void)api.synchronize(stream);
  const int next_token = 1;  // output index of next_token in the frontend's graphs

  // mode 0: graph only, 1: + position in, 2: + token out and an event.
  auto drive = [&](int mode) -> Figures {
    std::vector<kvrt::engine::EventHandle> events;
    auto start = api.record_timing_event(stream);
    const auto host_start = Clock::now();
    for (int i = 0; i < steps; ++i) {
      int32_t* in = slot + 64 * (i % 2);
      int32_t* out = slot + 64 * ((i + 1) % 2);
      host[i] = depth + i;  // a pinned slot per step: none is rewritten while queued
      if (mode >= 1) (void)api.copy_async(slot + 128, &host[i], 4, stream);
      if (mode == 0 && i == 0) (void)api.copy_async(slot + 128, &host[0], 4, stream);
      const TensorView inputs[] = {TensorView(in, DType::kI32, {1, 1}, device),
                                   TensorView(slot + 128, DType::kI32, {1}, device)};
      TensorView outputs[2];
      outputs[next_token] = TensorView(out, DType::kI32, {1, 1}, device);
      kvrt::runtime::RunOptions options;
      options.outputs = outputs;
      options.synchronize = false;
      auto ran = decode->execute(inputs, options);
      if (!ran.ok()) {
        std::fprintf(stderr, "execute: %s\n", ran.status().to_string().c_str());
        break;
      }
      if (mode >= 2) {
        (void)api.copy_async(&host[steps + i], out, 4, stream);
        auto event = api.record_event(stream);
        if (event.ok()) events.push_back(*event);
        // Keep at most two steps ahead, as the generation loop does.
        if (events.size() >= 2) {
          (void)api.wait_event(events[events.size() - 2]);
        }
      }
    }
    const double host_us =
        std::chrono::duration<double, std::micro>(Clock::now() - host_start).count() / steps;
    auto stop = api.record_timing_event(stream);
    (void)api.wait_event(*stop);
    auto ms = api.elapsed_ms(*start, *stop);
    for (auto e : events) api.destroy_event(e);
    api.destroy_event(*start);
    api.destroy_event(*stop);
    return {ms.ok() ? *ms * 1000.0 / steps : 0.0, host_us};
  };
  // The generation loop's way: runs of `run` steps per submission, one run ahead.
  auto pipelined = [&](int run) -> Figures {
    auto start = api.record_timing_event(stream);
    const auto host_start = Clock::now();
    const int32_t first = 1;
    (void)module.submit_greedy("decode", std::span<const int32_t>(&first, 1), depth);
    int queued = 1, next_step = depth + 1;
    for (int taken = 0; taken < steps; ++taken) {
      while (queued <= run) {
        const int n = std::min(run, steps - (taken + queued));
        if (n <= 0) break;
        (void)module.submit_greedy_continuation(next_step, n);
        next_step += n;
        queued += n;
      }
      (void)module.wait_token();
      --queued;
    }
    const double host_us =
        std::chrono::duration<double, std::micro>(Clock::now() - host_start).count() / steps;
    auto stop = api.record_timing_event(stream);
    (void)api.wait_event(*stop);
    auto ms = api.elapsed_ms(*start, *stop);
    api.destroy_event(*start);
    api.destroy_event(*stop);
    return {ms.ok() ? *ms * 1000.0 / steps : 0.0, host_us};
  };

  const std::string runs =
      "pipelined (Module), runs of " + std::to_string(module.max_greedy_steps()) + " steps";
  const char* names[] = {"graph only", "+ position in", "+ token out, event",
                         "pipelined (Module), one step per launch", runs.c_str()};
  std::printf("| way | device µs/step | host µs/step (submitting loop) |\n|---|---|---|\n");
  for (int rep = 0; rep < 2; ++rep) {
    for (int mode = 0; mode < 5; ++mode) {
      const Figures f = mode < 3    ? drive(mode)
                        : mode == 3 ? pipelined(1)
                                    : pipelined(module.max_greedy_steps());
      if (rep == 1) std::printf("| %s | %.1f | %.1f |\n", names[mode], f.device_us, f.host_us);
    }
  }
  api.free(*slots);
  api.free_host(*pinned);
  return 0;
}
