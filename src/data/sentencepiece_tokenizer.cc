#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "core/errors.h"
#include "core/fingerprint.h"
#include "data/gpt2_tokenizer.h"
#include "io/file_bytes.h"

namespace tinyllama {
namespace {

// What the bytes are instead, for the one-line error.
std::string not_a_model(const std::string& bytes, const std::string& why) {
  if (looks_like_gpt2_tokenizer(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                bytes.size())) {
    return "an llm.c gpt2_tokenizer.bin, which only decodes (generate --tokenizer reads it); "
           "a SentencePiece .model is needed here";
  }
  // SentencePiece's own status names a source line; say what it means.
  if (why.find("ParseFromArray") != std::string::npos) {
    return "not a SentencePiece model (truncated, or a file of another kind: it does not parse "
           "as SentencePiece's ModelProto)";
  }
  return "not a SentencePiece model (" + sentencepiece_reason(why) + ")";
}

}  // namespace

std::string sentencepiece_reason(const std::string& status_text) {
  const std::size_t check = status_text.find(") [");
  const std::size_t end_of_check = status_text.rfind("] ");
  if (check == std::string::npos || end_of_check == std::string::npos) return status_text;
  std::string reason = status_text.substr(end_of_check + 2);
  while (!reason.empty() && reason.back() == ' ') reason.pop_back();
  // Some checks say nothing more than the condition that failed.
  return reason.empty() ? "failed check " + status_text.substr(check + 2, end_of_check - check - 1)
                        : reason;
}

SentencePieceTokenizer::SentencePieceTokenizer()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept =
    default;
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

SentencePieceTokenizer SentencePieceTokenizer::load(const std::string& flag,
                                                    const std::string& path) {
  return from_bytes(flag, path, read_file_bytes(flag, path));
}

SentencePieceTokenizer SentencePieceTokenizer::from_bytes(const std::string& flag,
                                                          const std::string& path,
                                                          std::string bytes) {
  const std::string name = flag.empty() ? path : flag + " " + path;
  if (bytes.empty()) throw UsageError(name + ": empty file, not a SentencePiece model");
  SentencePieceTokenizer t;
  const auto status = t.sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw UsageError(name + ": " + not_a_model(bytes, status.ToString()));
  if (t.sp_->GetPieceSize() < 1) throw UsageError(name + ": " + not_a_model(bytes, "no pieces"));
  t.path_ = path;
  t.fingerprint_ = fingerprint_of(bytes);
  t.bytes_ = std::move(bytes);
  return t;
}

std::vector<std::int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw RuntimeFailure(path_ + ": cannot encode: " + status.ToString());
  return {ids.begin(), ids.end()};
}

std::vector<std::vector<std::int32_t>> SentencePieceTokenizer::encode_all(
    const std::vector<std::string_view>& texts, int threads) const {
  std::vector<std::vector<std::int32_t>> out(texts.size());
  const int workers =
      std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  // Texts are taken one at a time from a shared counter, so a few long
  // documents do not leave the other cores idle at the end.
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::string failure;
  auto work = [&] {
    for (std::size_t i = next++; i < texts.size() && !failed; i = next++) {
      std::vector<int> ids;
      const auto status = sp_->Encode(texts[i], &ids);
      if (!status.ok()) {
        if (!failed.exchange(true)) failure = status.ToString();
        return;
      }
      out[i].assign(ids.begin(), ids.end());
    }
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failed) throw RuntimeFailure(path_ + ": cannot encode: " + failure);
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  std::vector<int> run;  // consecutive ids inside the vocabulary, decoded together
  auto flush = [&] {
    std::string text;
    const auto status = sp_->Decode(run, &text);
    if (!status.ok()) throw RuntimeFailure(path_ + ": cannot decode: " + status.ToString());
    out += text;
    run.clear();
  };
  for (const std::int32_t id : ids) {
    if (id >= 0 && id < vocab_size()) {
      run.push_back(id);
    } else {
      flush();
      out += "<" + std::to_string(id) + ">";
    }
  }
  flush();
  return out;
}

int SentencePieceTokenizer::vocab_size() const {
  return sp_->GetPieceSize();
}

SpecialIds SentencePieceTokenizer::special_ids() const {
  return {sp_->unk_id(), sp_->bos_id(), sp_->eos_id(), sp_->pad_id()};
}

const std::string& SentencePieceTokenizer::piece(int id) const {
  return sp_->IdToPiece(id);
}

std::string SentencePieceTokenizer::describe() const {
  return path_ + " (vocabulary " + std::to_string(vocab_size()) + ", fingerprint " +
         fingerprint_hex(fingerprint_) + ")";
}

}  // namespace tinyllama
