#include "bench/runner.h"

#include <exception>
#include <new>

#include "bench/op_cost.h"
#include "bench/reference.h"
#include "bench/sample_stats.h"

namespace tinyllama::bench {
namespace {

// The choices the backend's workspaces were last prepared for.
struct Prepared {
  bool valid = false;
  ImplChoice impl;
};

OpResult run_one(const OpVariant& entry, Backend& gpu, const BenchShape& shape, Precision precision,
                 const Roof& roof, const BenchOptions& options, Prepared& prepared) {
  OpResult r;
  r.op = entry.op;
  r.variant = entry.variant;
  r.cost_path = entry.cost_path;
  try {
    // An attention the device cannot run here falls back in the plan: an
    // attention variant is skipped with the plan's reason rather than timed
    // as another. The other ops do not run attention, so they run under the
    // plan's fallback (at a head_dim the flash kernels lack, a norm or a
    // GEMM is still timed).
    const StepPlan plan = plan_for(shape.cfg, shape.batch, entry.impl, precision, gpu.caps());
    const bool attention_op = entry.op.rfind("attention.", 0) == 0;
    if (attention_op && plan.ops.attention != entry.impl.attention) {
      r.skipped = "the plan chose another attention";
      for (const Fallback& f : plan.fallbacks) {
        if (f.op == "attention") {
          r.skipped = f.reason;
          break;
        }
      }
      return r;
    }
    const prof::OpCost cost =
        cost_of(shape.cfg, shape.batch, entry.impl, precision, entry.cost_path);
    r.flops = cost.flops;
    r.bytes = cost.bytes;
    // prepare() sizes the workspaces (attention scratch, GEMM tuning space)
    // and takes the kernel families for the variant's choices; it
    // reallocates, so only when they change.
    if (!prepared.valid || !(prepared.impl == entry.impl)) {
      prepared.valid = false;
      gpu.prepare(shape.cfg, shape.batch, plan);
      prepared = {true, entry.impl};
    }
    BenchContext ctx{gpu, shape.cfg, shape.batch, precision};
    ctx.check_elements = options.check_elements;
    const std::unique_ptr<OpCase> op = entry.make(ctx);
    if (options.check) {
      r.check = op->check();
      r.checked = true;
      r.tolerance = tolerance(precision);
    }
    r.timing = time_op(
        gpu, [&] { op->run(); }, options.timing);
    r.median_us = median(r.timing.samples_us);
    r.min_us = minimum(r.timing.samples_us);
    r.rates = rates(r.flops, r.bytes, r.median_us, roof);
  } catch (const OpSkipped& e) {
    r.skipped = e.what();
  } catch (const std::bad_alloc&) {
    r.error = "out of host memory";
  } catch (const std::exception& e) {
    r.error = e.what();
    // The workspaces may be half made: prepare again before the next op.
    prepared.valid = false;
  }
  return r;
}

}  // namespace

BenchReport run_bench(const BenchOptions& options, const BackendFactory& make_backend,
                      const std::function<void(const BenchReport&, const RunResult&)>& on_run) {
  BenchReport report;
  report.timing = options.timing;
  report.check = options.check;
  for (const BenchShape& shape : options.shapes) {
    for (const Precision precision : options.precisions) {
      // A backend per precision: the CUDA backend is made for one.
      const std::unique_ptr<Backend> gpu = make_backend(precision);
      if (report.device.empty()) {
        report.device = gpu->device_description();
        report.peak = prof::find_device_peak(report.device);
      }
      RunResult run;
      run.shape = shape;
      run.precision = precision;
      if (report.peak) {
        run.roof = Roof{prof::peak_tflops(*report.peak, precision), report.peak->bandwidth_gbs};
      }
      Prepared prepared;
      for (const OpVariant* entry : options.ops) {
        run.ops.push_back(run_one(*entry, *gpu, shape, precision, run.roof, options, prepared));
      }
      report.runs.push_back(std::move(run));
      if (on_run) on_run(report, report.runs.back());
    }
  }
  return report;
}

}  // namespace tinyllama::bench
