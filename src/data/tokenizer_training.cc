#include "data/tokenizer_training.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/errors.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/token_dataset.h"
#include "io/atomic_file.h"

namespace tinyllama {
namespace {

using Clock = std::chrono::steady_clock;

// The corpus as SentencePiece's trainer reads it: every non-empty line of
// every file, counting the bytes read for the progress line.
class LineReader final : public sentencepiece::SentenceIterator {
 public:
  explicit LineReader(std::vector<std::string> files) : files_(std::move(files)) { Next(); }

  bool done() const override { return done_.load(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }
  void Next() override {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) {
        bytes_read_ += static_cast<std::int64_t>(line_.size()) + 1;
        if (line_.empty()) continue;
        ++sentences_;
        return;
      }
      if (next_file_ == files_.size()) {
        done_ = true;
        return;
      }
      in_ = std::ifstream(files_[next_file_++], std::ios::binary);
    }
  }

  std::int64_t bytes_read() const { return bytes_read_; }
  std::int64_t sentences() const { return sentences_; }

 private:
  std::vector<std::string> files_;
  std::size_t next_file_ = 0;
  std::ifstream in_;
  std::string line_;
  std::atomic<bool> done_{false};  // read by the progress thread too
  std::atomic<std::int64_t> bytes_read_{0};
  std::atomic<std::int64_t> sentences_{0};
};

std::unordered_map<std::string, std::string> llama2_style_spec(const TokenizerTrainOptions& o) {
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.99995"},
      {"max_sentence_length", "16384"},
      {"input_sentence_size", std::to_string(o.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"unk_id", std::to_string(kTokenizerUnkId)},
      {"bos_id", std::to_string(kTokenizerBosId)},
      {"eos_id", std::to_string(kTokenizerEosId)},
      {"pad_id", std::to_string(kTokenizerPadId)},
      {"num_threads", std::to_string(threads)},
      // SentencePiece's own log lines off: ours report progress, its errors
      // come back as a status.
      {"minloglevel", "2"},
  };
}

// Calls `progress` every second from a thread of its own until stopped, so
// the merges (which report nothing) still show that the work goes on.
class ProgressTicker {
 public:
  ProgressTicker(const LineReader& reader, std::int64_t total,
                 const std::function<void(const TokenizerTrainProgress&)>& progress)
      : reader_(reader), total_(total), progress_(progress), start_(Clock::now()) {
    if (progress_) thread_ = std::thread([this] { run(); });
  }
  ~ProgressTicker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      TokenizerTrainProgress p;
      p.bytes_read = reader_.bytes_read();
      p.bytes_total = total_;
      p.sentences = reader_.sentences();
      p.reading = !reader_.done();
      p.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
      progress_(p);
    }
  }
  const LineReader& reader_;
  std::int64_t total_;
  const std::function<void(const TokenizerTrainProgress&)>& progress_;
  Clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

void train_bpe_tokenizer(const TokenizerTrainOptions& o,
                         const std::function<void(const TokenizerTrainProgress&)>& progress) {
  if (o.vocab_size < 261 || o.vocab_size > 1000000) {
    throw UsageError("--vocab-size " + std::to_string(o.vocab_size) +
                     ": must be between 261 (4 special and 256 byte pieces, and one more) and "
                     "1000000");
  }
  // SentencePiece's own floor for a sample.
  if (o.max_sentences < 0 || (o.max_sentences > 0 && o.max_sentences <= 100)) {
    throw UsageError("--max-sentences " + std::to_string(o.max_sentences) +
                     ": must be 0 (every line) or more than 100");
  }
  check_output_path("--output", o.output);
  std::vector<std::string> files;
  std::int64_t total = 0;
  for (const std::string& pattern : o.inputs) {
    for (const std::string& f : expand_input_pattern("--input", pattern)) {
      std::error_code ec;
      if (std::filesystem::is_directory(f, ec)) {
        throw UsageError("--input " + f + ": is a directory (name its files)");
      }
      total += static_cast<std::int64_t>(std::filesystem::file_size(f, ec));
      files.push_back(f);
    }
  }
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed));
  LineReader reader(files);
  std::string model;
  sentencepiece::util::Status status;
  {
    const ProgressTicker ticker(reader, total, progress);
    status = sentencepiece::SentencePieceTrainer::Train(llama2_style_spec(o), &reader, &model);
  }
  if (reader.sentences() == 0) throw UsageError("--input: the files hold no text");
  if (!status.ok()) {
    // SentencePiece says which limit was crossed, e.g. "Vocabulary size is
    // too large. Please set it to a value <= 1234."
    const std::string why = sentencepiece_reason(status.ToString());
    throw UsageError(why.find("ocabulary size") != std::string::npos
                         ? "--vocab-size " + std::to_string(o.vocab_size) + ": " + why
                         : "--input: SentencePiece cannot train on it: " + why);
  }
  write_atomically("--output", o.output, [&](FileSink& out) { out.write(model); });
}

}  // namespace tinyllama
