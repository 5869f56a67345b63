#pragma once
// How `prepare --tokenizer` cuts text into documents, each of which becomes
// BOS, its tokens, EOS in the shards (as LLaMA trains on documents). A
// document is the lines between separator lines, joined by their newlines
// with no final one; the separator lines themselves are dropped, and empty
// documents skipped. Documents are also the unit the encoding is spread
// over the cores with, and SentencePiece's time and memory grow faster than
// a document's length, so a corpus of short documents encodes fastest.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tinyllama {

// `separator`: the line that ends a document ("" is a blank line, so
// paragraphs are documents; "%" suits fortune files); none: the whole text
// is one document. The views point into `text`.
std::vector<std::string_view> split_documents(std::string_view text,
                                              const std::optional<std::string>& separator);

}  // namespace tinyllama
