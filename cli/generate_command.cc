#include "generate_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "core/errors.h"
#include "core/rng.h"
#include "cuda/cuda_entry.h"
#include "id_list.h"
#include "infer/codec_choice.h"
#include "infer/decoder.h"
#include "infer/sampler.h"
#include "io/hf_directory.h"
#include "io/hf_weights.h"
#include "option_value.h"
#include "train/flag_values.h"

namespace tinyllama::cli {
namespace {

std::unique_ptr<TokenDecoder> make_decoder(const ModelConfig& config, const std::string& weights,
                                           const DecodeSetup& setup, int positions) {
  const std::vector<double> params = load_hf_weights(weights, ParamLayout(config));
  if (setup.device == DeviceKind::Cpu) {
    return std::make_unique<Decoder>(config, params, positions, setup.dtype);
  }
  return make_cuda_decoder(
      config, params, positions,
      {setup.dtype, setup.own_gemv, setup.graph, setup.fused, setup.programmatic});
}

// The prompt's ids: the text through the codec, or the ids as given.
std::vector<std::int32_t> prompt_tokens(const GenerateArgs& a, const TextCodec& codec,
                                        const ModelConfig& config) {
  if (!a.prompt.empty()) {
    if (config.vocab_size < codec.min_vocab()) {
      throw UsageError("--prompt: text is byte-level tokens, which need a vocabulary of at least " +
                       std::to_string(codec.min_vocab()) + " (this model has " +
                       std::to_string(config.vocab_size) + "); use --prompt-ids or --tokenizer");
    }
    return codec.encode(a.prompt);
  }
  std::vector<std::int32_t> prompt = parse_id_list("--prompt-ids", a.prompt_ids);
  for (std::int32_t id : prompt) {
    if (id < 0 || id >= config.vocab_size) {
      throw UsageError("--prompt-ids: " + std::to_string(id) + " is outside [0, " +
                       std::to_string(config.vocab_size) + ")");
    }
  }
  return prompt;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GenerateCommand::GenerateCommand(CLI::App& app)
    : cmd_(app.add_subcommand(
          "generate",
          "continue a prompt with a trained model: incremental decoding with a KV cache "
          "(prefill, then one token per step) on the CPU or a CUDA GPU")) {
  GenerateArgs& a = args_;
  cmd_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  value(cmd_, "--weights", a.weights, "FILE|DIR",
        "the model: a Hugging Face LLaMA directory (--export-hf) or a --save-weights file; its "
        "config.json or metadata gives the model's shape")
      ->required();
  value(cmd_, "--prompt", a.prompt, "TEXT",
        "prompt text: with a tokenizer BOS and its ids; without, read as train --data reads "
        "text (the end-of-text token 256, then one token per byte; vocabulary >= 257)");
  value(cmd_, "--prompt-ids", a.prompt_ids, "IDS", "prompt as comma-separated token ids instead");
  value(cmd_, "--tokenizer", a.tokenizer, "FILE",
        "a SentencePiece .model (tokenizer train, prepare --tokenizer) or llm.c's "
        "gpt2_tokenizer.bin (decoding only); default: tokenizer.model beside the weights "
        "(--export-hf), else byte-level tokens. Generation stops at its EOS");
  value(cmd_, "--max-new-tokens", a.max_new_tokens, "INT", "tokens to generate (>= 1)");
  value(cmd_, "--temperature", a.temperature, "FLOAT",
        "sampling temperature; 0 is greedy (the most likely token every step)");
  value(cmd_, "--top-k", a.top_k, "INT", "sample among the K most likely tokens (0: all)");
  value(cmd_, "--top-p", a.top_p, "FLOAT",
        "sample among the most likely tokens whose probability reaches P (1: all)");
  value(cmd_, "--seed", a.seed, "UINT", "seed of the sampling: the same seed, the same tokens");
  value(cmd_, "--device", a.decode.device, "{cpu,cuda,auto}",
        "where to decode; auto: the GPU when there is one");
  value(cmd_, "--dtype", a.decode.dtype, "{float32,bfloat16,float64}",
        "weights, activations and KV cache: bfloat16 by default on cuda (cuda: bfloat16 or "
        "float32), float32 on the cpu (cpu: float32 or float64)");
  value(cmd_, "--gemv", a.decode.gemv, "{fused,fused-nopdl,own,cublaslt}",
        "cuda, for timing: the weight products of a one-token step through our GEMV kernels "
        "with the norms, RoPE, SwiGLU and residual adds folded in, each launched to overlap the "
        "one before it (fused, the default; fused-nopdl: launched one after another), our "
        "plain GEMV beside the separate kernels (own), or cuBLASLt");
  cmd_->add_flag("--no-graph", a.decode.no_graph,
                 "cuda, for timing: launch each kernel of a one-token step instead of replaying "
                 "one captured CUDA graph");
  cmd_->add_flag("--print-ids", a.print_ids, "also print the generated token ids");
  cmd_->footer(
      "Prints the prompt and its continuation on stdout; on stderr the prefill's tokens/s and the "
      "decode's (the steps after the prefill, whose logits give the first new token).");
}

int GenerateCommand::run() const {
  const GenerateArgs& a = args_;
  const DecodeSetup setup = resolve_decode_setup(a.decode, cuda_device_available());
  if (a.prompt.empty() == a.prompt_ids.empty()) {
    throw UsageError("--prompt/--prompt-ids: give exactly one of them");
  }
  const int max_new = parse_int_flag("--max-new-tokens", a.max_new_tokens);
  if (max_new < 1) throw UsageError("--max-new-tokens " + a.max_new_tokens + ": must be >= 1");
  SamplingOptions sampling;
  sampling.temperature = parse_real_flag("--temperature", a.temperature);
  sampling.top_k = parse_int_flag("--top-k", a.top_k);
  sampling.top_p = parse_real_flag("--top-p", a.top_p);
  validate(sampling);
  Rng rng(parse_uint64_flag("--seed", a.seed));

  const ModelConfig config = read_model_config(a.weights);
  const std::unique_ptr<TextCodec> codec = choose_text_codec(a.tokenizer, a.weights, config);
  const std::vector<std::int32_t> prompt = prompt_tokens(a, *codec, config);
  if (prompt.empty()) throw UsageError("--prompt-ids: no ids");

  const std::unique_ptr<TokenDecoder> decoder =
      make_decoder(config, a.weights, setup, static_cast<int>(prompt.size()) + max_new);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> logits = decoder->step(prompt);
  const double prefill_s = seconds_since(t0);
  std::vector<std::int32_t> generated;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < max_new; ++i) {
    generated.push_back(sample_token(logits, sampling, rng));
    if (generated.back() == codec->stop_id()) break;
    if (i + 1 < max_new) logits = decoder->step({generated.back()});
  }
  const double decode_s = seconds_since(t0);
  const int decoded = static_cast<int>(generated.size());

  std::cout << (a.prompt.empty() ? codec->decode(prompt) : a.prompt)
            << codec->decode_continuation(prompt, generated) << "\n";
  if (a.print_ids) std::cout << "ids | " << id_list_text(generated) << "\n";
  char line[200];
  std::snprintf(line, sizeof line,
                "prefill %zu tokens: %.1f tokens/s | decode %d tokens: %.1f tokens/s | %s",
                prompt.size(), static_cast<double>(prompt.size()) / prefill_s, decoded,
                decoded > 1 ? (decoded - 1) / decode_s : 0.0, decoder->describe().c_str());
  std::cerr << line << std::endl;
  return 0;
}

}  // namespace tinyllama::cli
