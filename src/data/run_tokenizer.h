#pragma once
// The tokenizer of a training run, for `train --export-hf` and its checks:
// the one the --data shards record (data/token_shard.h), its model found
// beside the first of them as tokenizer.model (where `prepare --tokenizer`
// puts it), and the --init-from directory's tokenizer.model. A run needs no
// flag of its own for it.
#include <optional>
#include <string>
#include <vector>

#include "data/sentencepiece_tokenizer.h"
#include "io/hf_tokenizer.h"

namespace tinyllama {

// The files a Hugging Face directory holds for this tokenizer.
HfTokenizer hf_tokenizer_of(const SentencePieceTokenizer& tokenizer);

// None when neither the shards nor the directory name one. Throws
// UsageError naming the flag when the shards and --init-from disagree (or
// --data records no tokenizer and --init-from has one), when
// the model beside the shards is not the one they record, or when the
// tokenizer has more ids than vocab_size.
std::optional<HfTokenizer> run_tokenizer(const std::vector<std::string>& data,
                                         const std::string& init_from, int vocab_size);

}  // namespace tinyllama
