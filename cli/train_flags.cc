// `tinyllama train`'s flags, registered on its CLI11 command in groups
// (train_command.h: TrainArgs holds them as typed).
#include "train_flags.h"

#include <string>

#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {
namespace {

void toggle(CLI::App* cmd, const std::string& name, TogglePair& pair, const std::string& what) {
  cmd->add_flag("--enable-" + name, pair.enable,
                "turn " + what + " on (overrides the --version preset)");
  cmd->add_flag("--disable-" + name, pair.disable,
                "turn " + what + " off (overrides the --version preset)");
}

// The model's shape.
void model_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--vocab-size", a.vocab_size, "INT", "vocabulary size (>= 2)")->group("Model");
  value(cmd, "--hidden-dim", a.hidden_dim, "INT", "hidden size D; D / num-heads must be even")
      ->group("Model");
  value(cmd, "--num-layers", a.num_layers, "INT", "transformer blocks L")->group("Model");
  value(cmd, "--num-heads", a.num_heads, "INT", "query heads H")->group("Model");
  value(cmd, "--num-kv-heads", a.num_kv_heads, "INT", "key/value heads K (GQA); must divide H")
      ->default_str("H/2, or H when H is odd")
      ->group("Model");
  value(cmd, "--ffn-dim", a.ffn_dim, "INT", "SwiGLU inner size F")
      ->default_str("4*D")
      ->group("Model");
}

// The step's shape, its length and the optimizer's rate.
void training_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--seq-len", a.seq_len, "INT", "tokens per row S (>= 2)")->group("Training");
  value(cmd, "--batch-size", a.batch_size, "INT",
        "rows per step B; each step draws B distinct rows of a 1000-row synthetic pool")
      ->group("Training");
  value(cmd, "--num-steps", a.num_steps, "INT", "timed training steps")->group("Training");
  value(cmd, "--warmup-steps", a.warmup_steps, "INT",
        "untimed steps before the timed ones (they train too)")
      ->group("Training");
  value(cmd, "--learning-rate", a.learning_rate, "FLOAT", "AdamW learning rate")->group("Training");
  value(cmd, "--seed", a.seed, "UINT",
        "seed of the initial weights, and of the data order unless --data-seed")
      ->group("Training");
  value(cmd, "--data-seed", a.data_seed, "UINT",
        "seed of the data order alone (the synthetic pool and its draws, or --data's shuffle; "
        "default --seed): the same initial weights over several data orders")
      ->group("Training");
}

// Where and how the steps run: ranks, device, level preset, precision and
// the fusion toggles.
void execution_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--gpus", a.gpus, "INT",
        "data parallel on N GPUs of this host: starts one process per GPU (NCCL), each "
        "training --batch-size rows of every global batch of N*B rows; only rank 0 prints and "
        "writes. Under torchrun/mpirun leave it out: RANK, WORLD_SIZE, LOCAL_RANK and "
        "MASTER_ADDR/MASTER_PORT are read from the environment")
      ->group("Execution");
  value(cmd, "--zero-stage", a.zero_stage, "{0,1}",
        "with several ranks: 1 shards AdamW's state (ZeRO-1: gradients reduce-scattered, each "
        "rank updates its shard, weights all-gathered), 0 all-reduces the gradients")
      ->group("Execution");
  value(cmd, "--device", a.device, "{cpu,cuda}", "where to train")
      ->default_str("cuda if a CUDA device is found, else cpu")
      ->group("Execution");
  value(cmd, "--version", a.level, "{v1,v2,v3,v4}",
        "optimisation level preset (workshop name): v1 baseline, v2 fused + flash attention + "
        "CUDA graphs, v3 v2 + custom fused kernels (residual add + RMSNorm, chunked loss, RoPE's "
        "backward in the flash kernels, activations recomputed where large, gradients in a "
        "two-layer ring), v4 v3 + residual adds in the GEMM epilogues + attention timed per "
        "shape (flash or cuDNN)")
      ->group("Execution");
  cmd->add_flag("--use-amp", a.use_amp,
                "mixed precision: --amp-dtype compute, fp32 master weights and optimizer state "
                "(needs --device cuda)")
      ->group("Execution");
  value(cmd, "--amp-dtype", a.amp_dtype, "{bfloat16,float16,float8}",
        "compute dtype under --use-amp; float16 adds dynamic loss scaling; float8 is bfloat16 "
        "with the linear layers' GEMMs (QKV, out projection, gate/up, down; forward and both "
        "gradients) on FP8 tensor cores where the plan finds them faster at their shape: E4M3 "
        "weights and activations, E5M2 gradients, one scale per tensor (--fp8-scaling; needs "
        "sm_89+; the "
        "run header lists the GEMMs in FP8)")
      ->group("Execution");
  value(cmd, "--fp8-gemms", a.fp8_gemms, "{auto,all}",
        "under --amp-dtype float8: auto puts each linear GEMM in FP8 where the estimate (casts "
        "included) says it is faster at its shape; all puts every one in FP8")
      ->group("Execution");
  value(cmd, "--fp8-scaling", a.fp8_scaling, "{current,delayed}",
        "under --amp-dtype float8: how each FP8 tensor's scale is found. delayed: from the "
        "largest amax of the 16 steps before, which the casts record, so each cast is one pass "
        "(Transformer Engine's recipe; the first step scales as current does; under --gpus the "
        "ranks keep one history, each step's amaxes the largest over the ranks); current: from "
        "the tensor's own amax, a pass before each cast")
      ->group("Execution");
  toggle(cmd, "qkv-fusion", a.toggles.qkv_fusion, "the single Q/K/V GEMM");
  toggle(cmd, "swiglu-fusion", a.toggles.swiglu_fusion, "the fused gate/up GEMM and silu*mul");
  toggle(cmd, "flash-attention", a.toggles.flash_attention, "flash attention");
  toggle(cmd, "cuda-graphs", a.toggles.cuda_graphs, "CUDA graph capture of the step");
  toggle(cmd, "fused-optimizer", a.toggles.fused_optimizer,
         "the fused AdamW sweeps (they also write the AMP weight copy; with CUDA graphs, "
         "except fp16, one per layer beside the backward pass)");
}

// The level toggles that pick an implementation per op: attention, norm,
// loss, activations, GEMM epilogue.
void op_choice_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--attention", a.toggles.attention, "{materialized,flash,cudnn,cudnn+flash,auto}",
        "attention implementation, overriding the preset: materialized (S x S scores, v1), "
        "flash (our kernels, v2), cudnn (cuDNN's fused SDPA; bf16/fp16 on CUDA), cudnn+flash "
        "(cuDNN's forward, our backward), auto (times flash and cudnn at start-up, each pass "
        "apart, and keeps the fastest of the three; of those within 1 % of the fastest, the one "
        "with the smallest workspace)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--norm", a.toggles.norm, "{plain,fused}",
        "residual add and RMSNorm: plain (an add, then a norm: v1, v2) or fused (one kernel "
        "adds and normalises, forward and backward: v3)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--loss", a.toggles.loss, "{full_logits,chunked}",
        "LM head and cross-entropy: full_logits (all [tokens, vocab] logits, then the loss: v1, "
        "v2) or chunked (per chunk of rows: head GEMM, one loss+gradient kernel, the head's "
        "gradients; the full logits never exist: v3)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--activations", a.toggles.activations, "{stored,recompute_norms,recompute,auto}",
        "what the backward pass reads: stored (every layer keeps its normalised inputs: v1, "
        "v2), recompute_norms (one shared buffer each; the backward pass remakes a layer's from "
        "its saved input and rstd, bit-identical: 2 x [tokens, D] per layer less memory), "
        "recompute (recompute_norms, and the SwiGLU output silu(g)*u in one shared buffer, "
        "remade from the saved gate/up output by the forward's own op, bit-identical: "
        "[tokens, FFN] per layer less again) or auto (recompute where hidden >= 2048 and "
        "tokens x hidden >= 2^22, where it costs ~2 % of the step; recompute_norms elsewhere "
        "from tokens x hidden >= 2^20, for 0.3-0.8 %; stored below; in fp32 (no AMP) "
        "recompute from tokens x hidden >= 2^19, for 0.6-2.5 %: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--gemm-epilogue", a.toggles.gemm_epilogue, "{none,residual}",
        "what the GEMMs fold into their output: none (the residual adds are their own ops or "
        "the fused norm's add: v1-v3) or residual (the out- and down-projection GEMMs add into "
        "the residual stream through cuBLASLt's beta = 1, so the norms after them only "
        "normalise: v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
}

// The level toggles that pick an implementation per op: SwiGLU, RoPE,
// gradient buffers, kernel launch, optimizer.
void kernel_choice_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--swiglu", a.toggles.swiglu, "{separate,fused,gemm}",
        "SwiGLU: separate (silu, then a multiply: v1), fused (one kernel each way: v2-v4) or "
        "gemm (inside the GEMMs beside it: the gate/up GEMM writes silu(g)*u beside g and u, and "
        "the down projection's data-gradient GEMM writes d_gate and d_up without storing "
        "d_hidden; a Hopper kernel, bf16/fp16, FFN width a multiple of 64, else fused with a "
        "note; measured slower than fused so far, so no preset takes it: docs/PERFORMANCE.md). "
        "Applied after --enable/--disable-swiglu-fusion")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--rope", a.toggles.rope, "{separate,fused}",
        "RoPE: separate (a rotation pass over q|k forward and over dq|dk backward) or fused "
        "(the backward's rotation inside the flash attention backward, before rounding; the "
        "forward pass stays separate; with another attention it falls back to separate: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--grad-buffers", a.toggles.grad_buffers, "{full,ring}",
        "where the layers' fp32 gradients live: full (each layer its own, the whole gradient "
        "kept after the step) or ring (two layer-sized slots the layers take turns in, each "
        "freed by its layer's AdamW sweep beside the backward pass: L-2 layers of gradient less "
        "memory; needs the fused_per_layer optimizer, else full with a note, as under "
        "--dump-dir, --validate-setup and --gpus: v3, v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--kernel-launch", a.toggles.kernel_launch, "{plain,pdl,auto}",
        "how the step's own kernels are launched (not the GEMM libraries'): plain (each waits "
        "for the kernel before it: v1-v3), pdl (programmatic dependent launch: a kernel is "
        "scheduled while the one before it finishes and waits on the device for its results, "
        "hiding launch latency; the same bits; sm_90+, else plain with a note) or auto (pdl "
        "under --use-amp, plain in fp32, where it measured slower: v4)")
      ->default_str("the preset's")
      ->group("Level toggles");
  value(cmd, "--optimizer", a.toggles.optimizer, "{per_tensor,fused,fused_per_layer}",
        "AdamW: per_tensor (one launch per parameter tensor, then the AMP weight copy: v1), "
        "fused (one sweep over all parameters after the backward pass, writing the AMP copy as "
        "it goes) or fused_per_layer (fused, each layer's sweep on a branch of the captured "
        "step beside the backward pass as soon as its gradients are final; eager steps and "
        "fp16's loss scaling fall back to fused: v2-v4). Instead of "
        "--enable/--disable-fused-optimizer")
      ->default_str("the preset's")
      ->group("Level toggles");
}

// The chunked loss's rows, the all-fusion toggles, and every fusion toggle
// shown under "Level toggles".
void fusion_group_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--loss-chunk-rows", a.loss_chunk_rows, "INT",
        "rows per chunk of the chunked loss (needs the chunked loss)")
      ->default_str(
          "the fewest chunks of at most 512 MiB of logits each, two at least above 256 MiB")
      ->group("Level toggles");
  cmd->add_flag("--enable-all-fusion", a.toggles.all_fusion.enable,
                "turn all five toggles on (applied after the preset, before single toggles)");
  cmd->add_flag("--disable-all-fusion", a.toggles.all_fusion.disable,
                "turn all five toggles off (applied after the preset, before single toggles)");
  for (const char* name :
       {"--enable-qkv-fusion", "--disable-qkv-fusion", "--enable-swiglu-fusion",
        "--disable-swiglu-fusion", "--enable-flash-attention", "--disable-flash-attention",
        "--enable-cuda-graphs", "--disable-cuda-graphs", "--enable-fused-optimizer",
        "--disable-fused-optimizer", "--enable-all-fusion", "--disable-all-fusion"}) {
    cmd->get_option(name)->group("Level toggles");
  }
}

// What the run prints and writes.
void output_flags(CLI::App* cmd, TrainArgs& a) {
  value(cmd, "--log-every", a.log_every, "INT",
        "print a step line every N steps (step 1 and the last step always); warm-up steps get "
        "'warm-up i/N' lines by the same rule. On a terminal a progress line with the time per "
        "step and an ETA stands between them")
      ->group("Output");
  value(cmd, "--json", a.json_path, "FILE", "write the summary, config and device as JSON")
      ->group("Output");
  value(cmd, "--save-weights", a.save_weights, "FILE",
        "save the trained weights (safetensors, Hugging Face LLaMA names and layout: q/k rows "
        "rotate-half)")
      ->group("Output");
  value(cmd, "--export-hf", a.export_hf, "DIR",
        "save the trained model as a Hugging Face LLaMA directory (config.json + "
        "model.safetensors, and the data's SentencePiece tokenizer beside them when it had one) "
        "that transformers' from_pretrained(DIR) loads as is; DIR is created if missing")
      ->group("Output");
  value(cmd, "--init-from", a.init_from, "FILE|DIR",
        "start from these weights instead of the seeded init: a safetensors file (--save-weights, "
        "older tinyllama files, Hugging Face names) or a Hugging Face LLaMA directory "
        "(--export-hf, or save_pretrained with safetensors) whose config.json matches the model "
        "flags")
      ->group("Output");
  value(cmd, "--dump-dir", a.dump_dir, "DIR",
        "debugging/parity aid: write the initial weights, every timed batch and step 1's "
        "gradients (safetensors) for an independent replay")
      ->group("Output");
}

// --profile and where and what it records.
void profile_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_flag("--profile", a.profile,
                "profile N timed steps: kernel statistics (CSV), a Perfetto trace and a summary "
                "with FLOPs, MFU and a roofline (docs/PROFILING.md)")
      ->group("Profiling");
  value(cmd, "--profile-dir", a.profile_dir, "DIR", "where --profile writes its files")
      ->default_str("profile")
      ->group("Profiling");
  value(cmd, "--profile-steps", a.profile_steps, "INT",
        "timed steps --profile records (the first ones after the warm-up)")
      ->default_str("5")
      ->group("Profiling");
}

// The debugging exercises' flags.
void exercise_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_option("--inject", a.inject,
                  "exercise fault (docs/EXERCISES.md), repeatable or comma-separated: "
                  "broken-init (weights N(0, 1), not N(0, 0.02)), unsynced-timing (host-clock "
                  "phase times printed beside the event times), naive-swiglu (gate/up "
                  "projections by one thread per output instead of a GEMM), noncontiguous-kv "
                  "(attention forward reading K/V row by row per lane, uncoalesced; needs flash "
                  "attention); on the cpu the last two run the reference loops instead of BLAS")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("Debugging exercise");
  cmd->add_flag("--log-logit-stats", a.log_logit_stats,
                "after every step, a line with the mean, std and max of the step's logits "
                "(keeps one step in flight and reads the logits back: slower)")
      ->group("Debugging exercise");
  cmd->add_flag("--validate-setup", a.validate_setup,
                "the quick check: 5 steps of this model, level, precision and device at batch "
                "<= 2, judged (first loss near ln(vocab), finite gradients, step 1 against the "
                "float64 reference when small enough); prints PASS or FAIL, exit 0 or 1")
      ->group("Debugging exercise");
}

// The profiler's options past --profile: API records, memory timeline,
// everything at once.
void profiling_detail_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->add_flag("--profile-api-calls", a.profile_api_calls,
                "eager runs: keep CUPTI's CUDA API records in the profiled steps too (the trace's "
                "CUDA API track and launch arrows from each call); costs a host-bound eager step "
                "much more than the default, which learns the launch order in the warm-up")
      ->group("Profiling");
  cmd->add_flag("--profile-counters", a.profile_counters,
                "hardware counters per kernel and op (DRAM bytes and bandwidth, L2 hit rate, SM "
                "and tensor-pipe activity, occupancy, FLOPs by instruction) through CUPTI's range "
                "profiler, in the step after the profiled ones (each kernel replayed once per "
                "pass) and, where one follows, a second step for the DRAM bytes alone (one pass, "
                "nothing replayed); neither step's time is profiled or baseline; and the measured "
                "roofline (roofline.svg); needs --num-steps > --profile-steps (+1 for the DRAM "
                "pass) and an eager step (--disable-cuda-graphs where the level captures one)")
      ->group("Profiling");
  value(cmd, "--explain-kernel", a.explain_kernel, "NAME|RANK",
        "with --profile: every counter of one kernel (a rank in kernel_stats.csv, 1 = most "
        "time, or a piece of its name) with what each reads and which limit it points at, as "
        "rocprof-compute analyze --dispatch does (implies --profile-counters)")
      ->group("Profiling");
  cmd->add_option("--enable-memory-profiling", a.memory_profile,
                  "write one step's memory timeline: the bytes live in each activation buffer at "
                  "every op (exact, from the arena plan and the step's accesses), the memory held "
                  "all run (parameters, gradients, AdamW state, workspaces) and the driver's "
                  "sampled usage (CUDA), as JSON to FILE and a plot (SVG) beside it")
      ->type_name("[FILE]")
      ->expected(0, 1)
      ->default_str("memory_timeline.json")
      ->group("Profiling");
  cmd->add_flag(
         "--enable-all-profiling", a.enable_all_profiling,
         "the workshop's flag: every profiling output train has, i.e. --profile with "
         "--profile-api-calls (kernel statistics, trace with the CUDA API track, summary) "
         "and --enable-memory-profiling (memory_timeline.json in the profile folder unless named)")
      ->group("Profiling");
}

}  // namespace

void register_train_flags(CLI::App* cmd, TrainArgs& a) {
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  model_flags(cmd, a);
  training_flags(cmd, a);
  execution_flags(cmd, a);
  op_choice_flags(cmd, a);
  kernel_choice_flags(cmd, a);
  fusion_group_flags(cmd, a);
  register_run_flags(cmd, a.run);
  register_recipe_flags(cmd, a.recipe);
  output_flags(cmd, a);
  profile_flags(cmd, a);
  exercise_flags(cmd, a);
  profiling_detail_flags(cmd, a);
  value(cmd, "--compare-with-v1", a.compare_with_v1, "FILE",
        "an earlier run's --json (any level, the workshop's name): the summary and --json add "
        "this run's speed-up in ms/step and its peak memory ratio against it")
      ->group("Output");
}

}  // namespace tinyllama::cli
