#pragma once
// `tinyllama tokenizer train`: a SentencePiece BPE model trained on text
// files, set up as Llama 2's tokenizer is -- byte fallback (every byte has
// a piece, so no text is unknown), digits split one by one, no
// normalisation (identity: text decodes to exactly what was encoded), a
// space-marker prefix before the first word -- with the special ids fixed:
// <unk> 0, <s> (BOS) 1, </s> (EOS) 2, <pad> 3, then the 256 byte pieces.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tinyllama {

constexpr int kTokenizerUnkId = 0;
constexpr int kTokenizerBosId = 1;
constexpr int kTokenizerEosId = 2;
constexpr int kTokenizerPadId = 3;

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;  // text files or quoted globs; each line a sentence
  std::string output;               // the .model file, written atomically
  int vocab_size = 8000;
  // Lines sampled for training (0: all); a large corpus needs no more than
  // a few million for a good vocabulary, and memory grows with them.
  std::int64_t max_sentences = 2000000;
  std::uint64_t seed = 1234;  // which lines the sampling keeps
  int threads = 0;            // 0: every core
};

struct TokenizerTrainProgress {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_total = 0;
  std::int64_t sentences = 0;
  double seconds = 0;
  bool reading = true;  // false: reading done, SentencePiece is merging
};

// Trains and writes the model. Throws UsageError naming the flag (--input,
// --vocab-size, --output) for bad input, RuntimeFailure for a failed write.
// `progress` is called about every second while it works.
void train_bpe_tokenizer(const TokenizerTrainOptions& options,
                         const std::function<void(const TokenizerTrainProgress&)>& progress);

}  // namespace tinyllama
