#include "bench/text_table.h"

#include <algorithm>

namespace tinyllama::bench {

std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

void TextTable::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back({std::move(cells), ""});
}

void TextTable::add_note_row(std::vector<std::string> leading_cells, std::string text) {
  rows_.push_back({std::move(leading_cells), std::move(text)});
}

std::string TextTable::render() const {
  std::vector<std::size_t> width(columns_.size(), 0);
  for (std::size_t c = 0; c < columns_.size(); ++c) width[c] = display_width(columns_[c].header);
  for (const Row& row : rows_) {
    // A note row's cells size their columns; its note does not.
    for (std::size_t c = 0; c < row.cells.size() && c < columns_.size(); ++c) {
      width[c] = std::max(width[c], display_width(row.cells[c]));
    }
  }
  auto line = [&](const std::vector<std::string>& cells, const std::string& note) {
    std::string out;
    for (std::size_t c = 0; c < cells.size() && c < columns_.size(); ++c) {
      const std::string pad(width[c] - display_width(cells[c]), ' ');
      if (c > 0) out += "  ";
      out += columns_[c].align == Align::Right ? pad + cells[c] : cells[c] + pad;
    }
    if (!note.empty()) out += (out.empty() ? "" : "  ") + note;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& c : columns_) headers.push_back(c.header);
  std::string text = line(headers, "");
  for (const Row& row : rows_) text += line(row.cells, row.note);
  return text;
}

}  // namespace tinyllama::bench
