#include "train/memory_profile.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cuda/cuda_entry.h"
#include "io/atomic_file.h"
#include "prof/memory_timeline_svg.h"
#include "train/memory_check.h"

namespace tinyllama {

std::string memory_plot_path(const std::string& json_path) {
  const std::string ext = ".json";
  if (json_path.size() > ext.size() &&
      json_path.compare(json_path.size() - ext.size(), ext.size(), ext) == 0) {
    return json_path.substr(0, json_path.size() - ext.size()) + ".svg";
  }
  return json_path + ".svg";
}

MemoryProfile::MemoryProfile(const TrainOptions& opts, bool writer)
    : opts_(opts), enabled_(writer && !opts.memory_profile.empty()) {}

void MemoryProfile::sample(const std::string& point) {
  if (!enabled_ || opts_.plan.device != DeviceKind::Cuda) return;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (!cuda_memory_info(&free_bytes, &total_bytes)) return;
  samples_.push_back({point, static_cast<std::int64_t>(total_bytes - free_bytes)});
}

std::string MemoryProfile::write() const {
  const prof::MemoryTimeline tl = prof::trace_memory_timeline(opts_.model, opts_.shape, opts_.plan);
  const std::string note =
      opts_.plan.device == DeviceKind::Cuda
          ? "cudaMemGetInfo (total - free) after setup and after each step: every allocation of "
            "the process, the CUDA context and the libraries' included"
          : "none on the cpu: the driver's count is a CUDA device's";
  nlohmann::json j = prof::memory_timeline_json(tl, samples_, note);
  const ModelConfig& m = opts_.model;
  const std::string title =
      "memory of one step | D" + std::to_string(m.hidden_dim) + " L" +
      std::to_string(m.num_layers) + " B" + std::to_string(opts_.shape.batch) + " S" +
      std::to_string(opts_.shape.seq) + " | " + opts_.plan.level + " " +
      precision_name(opts_.plan.precision) + " " + device_name(opts_.plan.device);
  j["title"] = title;
  const std::string text = j.dump(1) + "\n";
  write_atomically("--enable-memory-profiling", opts_.memory_profile,
                   [&](FileSink& out) { out.write(text); });
  const std::string svg_path = memory_plot_path(opts_.memory_profile);
  std::int64_t driver_max = -1;
  for (const prof::DriverSample& s : samples_) driver_max = std::max(driver_max, s.used_bytes);
  const std::string svg = prof::memory_timeline_svg(tl, title, driver_max);
  write_atomically("--enable-memory-profiling", svg_path, [&](FileSink& out) { out.write(svg); });
  const std::string peak_op =
      tl.peak_op >= 0 ? tl.ops[static_cast<std::size_t>(tl.peak_op)].name : std::string("none");
  return "memory timeline | " + std::to_string(tl.ops.size()) + " ops | peak live activations " +
         format_bytes(tl.peak_live_bytes) + " at " + peak_op + " (arena " +
         format_bytes(tl.arena_bytes) + ") | wrote " + opts_.memory_profile + " and " + svg_path +
         "\n";
}

}  // namespace tinyllama
