// Per-block timelines of decode_linear's ring kernel and of decode_attention: when each
// block entered, got past the PDL wait, had its input, saw its first and last weight
// slot (or cache tile) land, and ended — where a launch's time goes (docs/kernels-notes.md,
// "Where a launch's time goes"). Only a build configured with -DKVRT_KERNEL_TRACE=ON
// records anything; the kernels of every other build carry no trace code. For the
// benchmark (kernels_bench --trace).
#pragma once

#include <cstdint>

#include "kvrt/core/result.h"
#include "kvrt/core/status.h"

#ifndef KVRT_KERNEL_TRACE
#define KVRT_KERNEL_TRACE 0
#endif

namespace kvrt::engine::cuda {

// What a block records, one 64-bit slot each. kTraceEntry is the device's globaltimer
// (ns) at block entry, kTraceEntryClock the block's clock64 at the same moment; every
// other point is a clock64 value (ns = entry + (clock - entry clock) / trace_clock_ghz),
// so points of one block compare exactly and blocks compare to the timer's resolution.
// A point a kernel does not pass stays 0.
enum TracePoint : int {
  kTraceEntry,
  kTraceProducerDone,     // every copy of W (attention: of the history before the wait) issued
  kTraceWaitReturned,     // thread 0 is past griddepcontrol.wait
  kTraceInputReady,       // x (attention: q and the new K/V row) ready to use
  kTraceFirstSlotFull,    // the first W slot (attention: cache tile) has landed
  kTraceLastSlotFull,     // the last one has landed (attention: the last tile is scored)
  kTraceEnd,              // thread 0 has issued its last output store
  kTracePartialsWritten,  // attention: this block's split partials are stored
  kTraceCounterTaken,     // attention: it knows whether it is the group's last block
  kTraceMergeStart,       // attention, the last block: about to load the splits' partials
  kTraceMergeLoaded,      // attention, the last block: its first splits' partials loaded
  kTraceEntryClock,
  kTracePoints
};

struct KernelTrace {
  uint64_t* stamps = nullptr;  // device memory: [launch_slots][max_blocks][kTracePoints]
  int launch_slots = 0;
  int max_blocks = 0;
};

// Whether this build records timelines (-DKVRT_KERNEL_TRACE=ON).
bool kernel_trace_compiled();

// Later decode_linear ring and decode_attention launches record into `trace`: the k-th
// of them after this call into slot k % launch_slots (a launch captured in a graph keeps
// the slot it was captured with), one row per block; a launch with more blocks than
// max_blocks records nothing. A default value stops recording. NotSupported when the
// build does not trace. Not thread-safe with concurrent launches.
Status set_kernel_trace(const KernelTrace& trace);

// clock64 ticks per globaltimer nanosecond, measured on the current device over 2 ms.
Result<double> trace_clock_ghz();

}  // namespace kvrt::engine::cuda
