// What a checkpoint keeps of the run's timed choices: attention=auto's
// implementation and both times go into the checkpoint, and a resumed
// auto run resolves its plan from them instead of timing again. On the CPU
// nothing is timed, so the saved choice is made different from what a new
// choice would be (materialized where the CPU's auto takes flash): a plan
// that shows it was read from the checkpoint.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "train/checkpoint.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

TrainOptions auto_attention_run(const fs::path& dir) {
  TrainOptions o;
  o.model.vocab_size = 64;
  o.model.hidden_dim = 32;
  o.model.num_layers = 1;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 64;
  o.shape = {2, 8};
  o.device_request = DeviceKind::Cpu;
  o.request.ops.attention = AttentionImpl::Auto;
  o.warmup_steps = 0;
  o.num_steps = 1;
  o.checkpoint_dir = dir.string();
  return o;
}

fs::path scratch(const std::string& tag) {
  const fs::path dir =
      fs::temp_directory_path() / ("tinyllama_ckpt_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Checkpoint, KeepsAttentionAutosChoiceAndAResumedRunTakesIt) {
  const fs::path dir = scratch("attention_auto");
  TrainOptions first = auto_attention_run(dir);
  resolve_run(first);
  ASSERT_TRUE(first.plan.attention_auto.requested);
  ASSERT_EQ(first.plan.ops.attention, AttentionImpl::Flash);  // the CPU's auto: no cuDNN
  // As if a GPU's timing had chosen materialized, with these times.
  first.plan.ops.attention = AttentionImpl::Materialized;
  first.plan.attention_auto.flash_timed = first.plan.attention_auto.cudnn_timed = true;
  first.plan.attention_auto.flash = {0.125, 0.25};
  first.plan.attention_auto.cudnn = {0.5, 1.0};
  train(first, {});

  const std::string path = latest_checkpoint(dir.string());
  const std::optional<SavedAttentionChoice> saved = saved_attention_choice(path);
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->chosen, AttentionImpl::Materialized);
  EXPECT_DOUBLE_EQ(saved->how.flash.forward_ms, 0.125);
  EXPECT_DOUBLE_EQ(saved->how.cudnn.total_ms(), 1.5);
  EXPECT_EQ(saved->how.notes, first.plan.attention_auto.notes);
  EXPECT_EQ(saved->from, path);

  // Resumed: the plan is the checkpoint's, times and all.
  TrainOptions resumed = auto_attention_run(dir);
  resumed.num_steps = 2;
  resumed.resume = dir.string();
  resolve_run(resumed);
  EXPECT_EQ(resumed.plan.ops.attention, AttentionImpl::Materialized);
  EXPECT_EQ(resumed.plan.attention_auto.reused_from, path);
  EXPECT_DOUBLE_EQ(resumed.plan.attention_auto.flash.total_ms(), 0.375);
  // ... and trains on it, saving the same choice again for the next resume.
  train(resumed, {});
  const std::optional<SavedAttentionChoice> again =
      saved_attention_choice(latest_checkpoint(dir.string()));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->chosen, AttentionImpl::Materialized);
  EXPECT_DOUBLE_EQ(again->how.cudnn.forward_ms, 0.5);

  // Not resumed, the same request chooses anew.
  TrainOptions fresh = auto_attention_run(dir);
  resolve_run(fresh);
  EXPECT_EQ(fresh.plan.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(fresh.plan.attention_auto.reused_from.empty());
  fs::remove_all(dir);
}

TEST(Checkpoint, ARunWithoutAutoSavesNoAttentionChoice) {
  const fs::path dir = scratch("no_auto");
  TrainOptions o = auto_attention_run(dir);
  o.request.ops.attention = AttentionImpl::Flash;
  resolve_run(o);
  train(o, {});
  EXPECT_FALSE(saved_attention_choice(latest_checkpoint(dir.string())).has_value());
  // Resumed with auto, it has nothing to take: auto chooses as usual.
  TrainOptions resumed = auto_attention_run(dir);
  resumed.num_steps = 2;
  resumed.resume = dir.string();
  resolve_run(resumed);
  EXPECT_EQ(resumed.plan.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(resumed.plan.attention_auto.reused_from.empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama
