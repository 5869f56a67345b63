#include "data/documents.h"

namespace tinyllama {
namespace {

// The text from `begin` to `end` (a line start) less the newline ending it.
void add_document(std::string_view text, std::size_t begin, std::size_t end,
                  std::vector<std::string_view>& out) {
  std::string_view doc = text.substr(begin, end - begin);
  if (!doc.empty() && doc.back() == '\n') doc.remove_suffix(1);
  if (!doc.empty()) out.push_back(doc);
}

}  // namespace

std::vector<std::string_view> split_documents(std::string_view text,
                                              const std::optional<std::string>& separator) {
  std::vector<std::string_view> docs;
  if (!separator) {
    add_document(text, 0, text.size(), docs);
    return docs;
  }
  std::size_t doc_begin = 0;
  std::size_t line_begin = 0;
  while (line_begin < text.size()) {
    const std::size_t eol = text.find('\n', line_begin);
    const std::size_t line_end = eol == std::string_view::npos ? text.size() : eol;
    const std::size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    if (text.substr(line_begin, line_end - line_begin) == *separator) {
      add_document(text, doc_begin, line_begin, docs);
      doc_begin = next;
    }
    line_begin = next;
  }
  add_document(text, doc_begin, text.size(), docs);
  return docs;
}

}  // namespace tinyllama
