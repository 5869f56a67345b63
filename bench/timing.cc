#include "bench/timing.h"

#include <memory>

#include "core/errors.h"

namespace tinyllama::bench {
namespace {

// The slot of the backend's graph recorder the bench uses: the bench's
// backend runs no training step, so any slot is free.
constexpr int kGraphSlot = 0;

std::vector<double> read_samples(EventTimer& timer, int repeats) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(repeats));
  for (int i = 0; i < repeats; ++i) us.push_back(timer.elapsed_ms(i, i + 1) * 1e3);
  return us;
}

void enqueue_repetitions(EventTimer& timer, const std::function<void()>& run, int repeats) {
  timer.record(0);
  for (int i = 0; i < repeats; ++i) {
    run();
    timer.record(i + 1);
  }
}

}  // namespace

const char* timing_mode_name(TimingMode mode) {
  return mode == TimingMode::Graph ? "graph" : "eager";
}

Timing time_op(Backend& gpu, const std::function<void()>& run, const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) run();
  gpu.synchronize();
  // Mark i and i + 1 bracket repetition i.
  const std::unique_ptr<EventTimer> timer = gpu.make_timer(options.repeats + 1);
  Timing t;
  if (options.mode == TimingMode::Graph && !gpu.supports_graphs()) {
    t.note = "the backend records no graphs; timed eagerly";
  } else if (options.mode == TimingMode::Graph) {
    bool captured = false;
    try {
      gpu.begin_capture();
      try {
        enqueue_repetitions(*timer, run, options.repeats);
      } catch (...) {
        gpu.abort_capture();
        throw;
      }
      gpu.end_capture(/*instantiate=*/true, kGraphSlot);
      captured = true;
    } catch (const RuntimeFailure& e) {
      // The recording is discarded and the error state cleared (the
      // Backend contract), so the eager launches below start clean.
      t.note = std::string("graph capture failed (") + e.what() + "); timed eagerly";
    }
    if (captured) {
      // Errors from here on are the op's own: they propagate.
      gpu.replay(kGraphSlot);
      t.samples_us = read_samples(*timer, options.repeats);
      t.mode = TimingMode::Graph;
      return t;
    }
  }
  enqueue_repetitions(*timer, run, options.repeats);
  t.samples_us = read_samples(*timer, options.repeats);
  t.mode = TimingMode::Eager;
  return t;
}

}  // namespace tinyllama::bench
