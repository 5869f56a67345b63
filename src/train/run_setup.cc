#include "train/run_setup.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "core/errors.h"
#include "cuda/cuda_entry.h"
#include "device/cuda_env.h"
#include "model/data_parallel.h"
#include "model/step_plan_json.h"
#include "train/backend_factory.h"
#include "train/checkpoint.h"
#include "train/memory_check.h"
#include "train/validate.h"

namespace tinyllama {
namespace {

DeviceKind choose_device(const TrainOptions& opts, std::vector<std::string>& notes) {
  if (opts.device_request) return *opts.device_request;
  if (cuda_device_available()) return DeviceKind::Cuda;
  notes.push_back("no CUDA device found, running on cpu");
  return DeviceKind::Cpu;
}

}  // namespace

std::vector<std::string> resolve_run(TrainOptions& opts) {
  validate_options(opts);
  std::vector<std::string> notes;
  const DeviceKind device = choose_device(opts, notes);
  if (opts.request.precision.mixed() && device == DeviceKind::Cpu) {
    throw UsageError("--use-amp: mixed precision needs --device cuda");
  }
  if (device == DeviceKind::Cuda && !cuda_device_available()) {
    throw RuntimeFailure("--device cuda: no CUDA device found (" + cuda_build_versions() +
                         "); use --device cpu");
  }
  const int world = opts.parallel.enabled ? opts.parallel.world : 1;
  validate_recipe(opts, world);
  PlanRequest request = opts.request;
  request.update = update_recipe(opts, world);
  request.data_parallel = opts.parallel.enabled;
  // A resumed attention=auto takes the checkpoint's choice rather than timing
  // again (train() loads the same newest checkpoint).
  if (!opts.resume.empty() && request.ops.attention == AttentionImpl::Auto) {
    request.saved_attention = saved_attention_choice(latest_checkpoint(opts.resume));
  }
  if (opts.rank0_attention) request.saved_attention = opts.rank0_attention;
  // What reads the whole gradient after a step (grad_buffers ring keeps two layers').
  if (opts.validate_setup) {
    request.whole_gradient_reader = "--validate-setup checks step 1's gradients";
  } else if (!opts.dump_dir.empty()) {
    request.whole_gradient_reader = "--dump-dir writes step 1's gradients";
  }
  // What reads the final norm's output after a step (else the backward's scratch lies over it).
  if (opts.log_logit_stats) request.final_norm_reader = "--log-logit-stats";
  opts.plan = plan_for_run(request, device, opts.model, opts.shape);
  opts.plan.faults = opts.faults;
  // noncontiguous-kv replaces the flash forward: its backward reads the lse.
  if (opts.faults.noncontiguous_kv && opts.plan.ops.attention != AttentionImpl::Flash) {
    throw UsageError(std::string("--inject noncontiguous-kv: replaces the flash attention "
                                 "forward, and this run's attention is ") +
                     impl_name(opts.plan.ops.attention) + " (add --attention flash)");
  }
  // The range profiler replays each kernel alone (KernelReplay), which a
  // CUDA graph's kernels are not: on an H200 the counter step of a captured
  // step saw one range per graph launch, and at 8 layers it failed with an
  // illegal instruction.
  if (opts.profile_counters && opts.plan.captured()) {
    throw UsageError(
        "--profile-counters: the counters replay each kernel alone, which the kernels of a CUDA "
        "graph cannot be (add --disable-cuda-graphs: the same kernels, launched eagerly)");
  }
  if (opts.parallel.enabled) {
    if (device != DeviceKind::Cuda) {
      throw UsageError("--gpus: data parallel runs on CUDA devices (not --device cpu)");
    }
    opts.plan.parallel = opts.parallel;
    fall_back_to_full_gradients(opts.plan,
                                "data parallel: the gradients are exchanged over each layer's span "
                                "of the flat gradient block");
    if (opts.parallel.shard_optimizer && opts.plan.ops.optimizer == OptimizerImpl::PerTensor) {
      opts.plan.parallel.shard_optimizer = false;
      notes.push_back(
          "--zero-stage 1 needs a fused AdamW sweep; this level's per-tensor AdamW all-reduces "
          "the gradients and keeps the whole optimizer state on every rank");
    }
  }
  // TINYLLAMA_GEMM_SM_MARGIN=N: N SMs beside the exchange (several ranks only).
  if (device == DeviceKind::Cuda) {
    opts.plan.parallel.gemm_sm_margin = gemm_sm_margin_for(
        opts.plan.parallel, cuda::env_whole_number("TINYLLAMA_GEMM_SM_MARGIN", 64));
  }
  check_memory(opts.model, opts.shape, opts.plan);
  return notes;
}

void adopt_rank0_attention(TrainOptions& opts, Collectives& comm) {
  // The same decision on every rank: whether there is a choice to share.
  if (comm.world() == 1 || !opts.plan.attention_auto.requested) return;
  const std::string rank0 = comm.text_from_rank0(attention_choice_json(opts.plan).dump());
  if (comm.rank() == 0) return;
  SavedAttentionChoice choice = attention_choice_from_json(nlohmann::json::parse(rank0), "rank 0");
  if (choice.chosen == opts.plan.ops.attention) return;
  opts.rank0_attention = std::move(choice);
  resolve_run(opts);
}

}  // namespace tinyllama
