#include "bench_suite/matrix.h"

#include <functional>
#include <sstream>

#include "core/errors.h"
#include "train/flag_values.h"

namespace tinyllama::suite {
namespace {

// A plan choice train can switch by a flag: whether the choice is "on" in a
// set of choices, and the flags that turn it on or off.
struct Switchable {
  const char* name;
  std::function<bool(const OpChoices&)> on;
  std::vector<std::string> on_args, off_args;
  const char* on_word;
  const char* off_word;
};

const std::vector<Switchable>& switchables() {
  static const std::vector<Switchable> all = {
      {"qkv_fusion",
       [](const OpChoices& o) { return o.qkv_gemm == GemmGrouping::Fused; },
       {"--enable-qkv-fusion"},
       {"--disable-qkv-fusion"},
       "on",
       "off"},
      {"swiglu_fusion",
       [](const OpChoices& o) { return o.swiglu != SwigluImpl::Separate; },
       {"--enable-swiglu-fusion"},
       {"--disable-swiglu-fusion"},
       "on",
       "off"},
      {"attention",
       [](const OpChoices& o) { return o.attention != AttentionImpl::Materialized; },
       {"--attention", "flash"},
       {"--attention", "materialized"},
       "flash",
       "materialized"},
      {"cuda_graphs",
       [](const OpChoices& o) { return o.execution == Execution::Graph; },
       {"--enable-cuda-graphs"},
       {"--disable-cuda-graphs"},
       "on",
       "off"},
      {"fused_optimizer",
       [](const OpChoices& o) { return o.optimizer != OptimizerImpl::PerTensor; },
       {"--enable-fused-optimizer"},
       {"--disable-fused-optimizer"},
       "on",
       "off"},
      {"norm",
       [](const OpChoices& o) { return o.norm == NormImpl::Fused; },
       {"--norm", "fused"},
       {"--norm", "plain"},
       "fused",
       "plain"},
      {"loss",
       [](const OpChoices& o) { return o.loss == LossImpl::Chunked; },
       {"--loss", "chunked"},
       {"--loss", "full_logits"},
       "chunked",
       "full_logits"},
      // Attention timed per shape (v4) against our own flash alone.
      {"attention_choice",
       [](const OpChoices& o) { return o.attention == AttentionImpl::Auto; },
       {"--attention", "auto"},
       {"--attention", "flash"},
       "auto",
       "flash"},
      {"gemm_epilogue",
       [](const OpChoices& o) { return o.epilogue == GemmEpilogue::Residual; },
       {"--gemm-epilogue", "residual"},
       {"--gemm-epilogue", "none"},
       "residual",
       "none"},
      {"kernel_launch",
       [](const OpChoices& o) { return o.kernel_launch != KernelLaunch::Plain; },
       {"--kernel-launch", "pdl"},
       {"--kernel-launch", "plain"},
       "pdl",
       "plain"},
  };
  return all;
}

ChoiceSwitch flipped(const Switchable& s, const OpChoices& preset) {
  const bool now_on = s.on(preset);
  return {std::string(s.name) + " " + (now_on ? s.off_word : s.on_word),
          now_on ? s.off_args : s.on_args};
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

template <typename T>
void require_nonempty(const std::vector<T>& list, const std::string& flag) {
  if (list.empty()) throw UsageError(flag + ": expected at least one value");
}

}  // namespace

std::string BenchPoint::key() const {
  std::string k =
      level + " " + precision + " B" + std::to_string(batch) + " S" + std::to_string(seq);
  if (!variant.name.empty()) k += " [" + variant.name + "]";
  return k;
}

std::vector<std::string> BenchPoint::train_args() const {
  std::vector<std::string> args = {"--version", level};
  if (precision == "bf16") args.insert(args.end(), {"--use-amp", "--amp-dtype", "bfloat16"});
  if (precision == "fp16") args.insert(args.end(), {"--use-amp", "--amp-dtype", "float16"});
  args.insert(args.end(),
              {"--batch-size", std::to_string(batch), "--seq-len", std::to_string(seq)});
  args.insert(args.end(), variant.train_args.begin(), variant.train_args.end());
  return args;
}

BenchAxes default_axes() {
  return {implemented_levels(), {"fp32", "bf16"}, {8}, {128, 512, 1024}};
}

std::vector<BenchPoint> expand(const BenchAxes& axes) {
  require_nonempty(axes.levels, "--levels");
  require_nonempty(axes.precisions, "--precisions");
  require_nonempty(axes.batches, "--batch-sizes");
  require_nonempty(axes.seqs, "--seq-lens");
  for (const std::string& level : axes.levels) level_preset(level);  // throws on unknown
  std::vector<BenchPoint> out;
  for (const std::string& level : axes.levels) {
    for (const std::string& precision : axes.precisions) {
      for (int batch : axes.batches) {
        for (int seq : axes.seqs) out.push_back({level, precision, batch, seq, {}});
      }
    }
  }
  return out;
}

std::vector<ChoiceSwitch> ablation_switches(const OpChoices& preset) {
  std::vector<ChoiceSwitch> out;
  for (const Switchable& s : switchables()) out.push_back(flipped(s, preset));
  return out;
}

std::vector<ChoiceSwitch> switches_between(const OpChoices& earlier, const OpChoices& later) {
  std::vector<ChoiceSwitch> out;
  for (const Switchable& s : switchables()) {
    if (s.on(earlier) != s.on(later)) out.push_back(flipped(s, later));
  }
  return out;
}

std::vector<BenchPoint> with_ablation(const std::vector<BenchPoint>& points) {
  std::vector<BenchPoint> out;
  for (const BenchPoint& p : points) {
    out.push_back(p);
    for (const ChoiceSwitch& s : ablation_switches(level_preset(p.level))) {
      BenchPoint switched = p;
      switched.variant = s;
      out.push_back(switched);
    }
  }
  return out;
}

std::vector<std::string> parse_level_list(const std::string& text) {
  if (text == "all") return implemented_levels();
  std::vector<std::string> out = split_commas(text);
  require_nonempty(out, "--levels");
  for (const std::string& level : out) {
    try {
      level_preset(level);
    } catch (const UsageError&) {
      std::string allowed;
      for (const std::string& l : implemented_levels()) allowed += l + ",";
      throw UsageError("--levels " + text + ": unknown level '" + level + "'; allowed: " + allowed +
                       " or all");
    }
  }
  return out;
}

std::vector<std::string> parse_precision_list(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& p : split_commas(text)) {
    if (p == "fp32") {
      out.push_back("fp32");
    } else if (p == "bf16" || p == "bfloat16") {
      out.push_back("bf16");
    } else if (p == "fp16" || p == "float16") {
      out.push_back("fp16");
    } else {
      throw UsageError("--precisions " + text + ": unknown precision '" + p +
                       "'; allowed: fp32, bf16, fp16");
    }
  }
  require_nonempty(out, "--precisions");
  return out;
}

std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_commas(text)) {
    const int v = parse_int_flag(flag, item);
    if (v < 1) throw UsageError(flag + " " + text + ": expected positive integers");
    out.push_back(v);
  }
  require_nonempty(out, flag);
  return out;
}

}  // namespace tinyllama::suite
