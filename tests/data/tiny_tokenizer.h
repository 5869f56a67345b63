#pragma once
// A small SentencePiece model trained once per test binary, on a corpus
// written by the test itself (varied English, code, digits and a little
// non-Latin text), for the tests of what reads and writes with it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/tokenizer_training.h"

namespace tinyllama::testing {

inline std::string tiny_corpus_text() {
  static const char* kLines[] = {
      "The quick brown fox jumps over the lazy dog.",
      "A stitch in time saves nine, said the tailor to his 12 apprentices.",
      "def add(a, b):\n    return a + b  # adds two numbers",
      "for (int i = 0; i < 10; ++i) { total += values[i]; }",
      "Tokyo is 東京 and Beijing is 北京; both are capitals.",
      "Numbers like 3.14159 and 2718 are split into digits.",
      "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
      "Emoji such as 🙂 and 🚀 fall back to bytes in a small vocabulary.",
  };
  std::string text;
  for (int round = 0; round < 40; ++round) {
    for (const char* line : kLines) text += std::string(line) + " " + std::to_string(round) + "\n";
  }
  return text;
}

// Trains (once) and returns the path of a model with `vocab` pieces.
inline std::string tiny_tokenizer(int vocab = 400) {
  namespace fs = std::filesystem;
  static const fs::path dir = fs::temp_directory_path() / ("tl_tok_" + std::to_string(::getpid()));
  const fs::path model = dir / ("tiny" + std::to_string(vocab) + ".model");
  if (fs::exists(model)) return model.string();
  if (fs::create_directories(dir)) {
    std::atexit([] {  // the models live as long as the test process
      std::error_code ec;
      fs::remove_all(dir, ec);
    });
  }
  std::ofstream(dir / "corpus.txt") << tiny_corpus_text();
  TokenizerTrainOptions o;
  o.inputs = {(dir / "corpus.txt").string()};
  o.output = model.string();
  o.vocab_size = vocab;
  train_bpe_tokenizer(o, nullptr);
  return model.string();
}

}  // namespace tinyllama::testing
