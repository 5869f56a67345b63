#pragma once
// Aligned plain-text columns for terminal tables. Widths count characters,
// not bytes, so a header such as "median µs" lines up.
#include <string>
#include <vector>

namespace tinyllama::bench {

class TextTable {
 public:
  enum class Align { Left, Right };
  struct Column {
    std::string header;
    Align align = Align::Left;
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // A row of at most as many cells as columns; missing cells are blank.
  void add_row(std::vector<std::string> cells);
  // A row whose text starts at `column` and runs on past the columns
  // (a skipped op's reason, an error).
  void add_note_row(std::vector<std::string> leading_cells, std::string text);

  // Header, then rows; columns separated by two spaces, no trailing blanks.
  std::string render() const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string note;  // after the cells, unaligned
  };
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

// Characters in a UTF-8 string (bytes that do not continue a sequence).
std::size_t display_width(const std::string& s);

}  // namespace tinyllama::bench
