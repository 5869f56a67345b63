#pragma once
// Times one op: warm-up calls, then N repetitions enqueued back to back,
// each between two marks of a Backend timer (CUDA events on the backend's
// stream), so every repetition has its own time and the summary can be a
// median.
//
// Two ways to enqueue the repetitions:
//  * graph (default): the N repetitions and their marks are recorded into
//    one CUDA graph, which is launched once. No host launch sits between
//    two kernels, so a 3 µs kernel is not measured as the 5 µs it takes
//    the host to launch it; this is also how the v2 training step runs
//    them (one graph per step). The event-record nodes between
//    repetitions add an overhead of their own, expected below a
//    microsecond but not yet measured.
//  * eager: plain launches, one after another. Ops shorter than their own
//    launch cost measure the host, not the GPU; kept for comparison.
//
// Nothing is flushed between repetitions: each one runs with the L2 cache
// as the previous one left it. On an H100 the 50 MB L2 holds every tensor of
// the workshop shape (B8 S128: a [1024, 512] bf16 activation is 1 MB), so
// its times are L2-warm, as in a training step, where the producer of an
// op's input ran just before it; GB/s above the HBM peak (and % of roof
// above 100) say so. At B32 S1024 and the 1 B config the tensors exceed
// the L2 and the figures are HBM-bound.
#include <functional>
#include <string>
#include <vector>

#include "model/backend.h"

namespace tinyllama::bench {

enum class TimingMode { Graph, Eager };

const char* timing_mode_name(TimingMode mode);  // "graph", "eager"

struct TimingOptions {
  int warmup = 5;  // eager calls first; the first one also tunes the GEMMs
  int repeats = 20;
  TimingMode mode = TimingMode::Graph;
};

struct Timing {
  std::vector<double> samples_us;       // one per repetition, in order
  TimingMode mode = TimingMode::Graph;  // how they were enqueued
  std::string note;                     // why graph mode fell back to eager launches; "" otherwise
};

// `run` enqueues the op once and must neither allocate nor wait for the
// device. Throws RuntimeFailure on a device error.
Timing time_op(Backend& gpu, const std::function<void()>& run, const TimingOptions& options);

}  // namespace tinyllama::bench
