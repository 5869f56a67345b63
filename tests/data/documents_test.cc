// How prepare --tokenizer cuts text into documents (data/documents.h).
#include "data/documents.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tinyllama {
namespace {

std::vector<std::string> docs(const std::string& text, const std::optional<std::string>& sep) {
  std::vector<std::string> out;
  for (const std::string_view d : split_documents(text, sep)) out.emplace_back(d);
  return out;
}

TEST(Documents, SeparatorLinesEndDocumentsAndAreDropped) {
  const std::string fortunes = "A fortune\non two lines.\n%\nAnother.\n%\n%\nLast, unterminated";
  EXPECT_EQ(docs(fortunes, "%"), (std::vector<std::string>{"A fortune\non two lines.", "Another.",
                                                           "Last, unterminated"}));
  // A separator only counts as a whole line.
  EXPECT_EQ(docs("50% off\n%\nx\n", "%"), (std::vector<std::string>{"50% off", "x"}));
}

TEST(Documents, BlankLinesMakeParagraphsAndWholeTextIsOneDocument) {
  const std::string text = "First paragraph,\nstill first.\n\n\nSecond.\n";
  EXPECT_EQ(docs(text, ""),
            (std::vector<std::string>{"First paragraph,\nstill first.", "Second."}));
  EXPECT_EQ(docs(text, std::nullopt),
            (std::vector<std::string>{"First paragraph,\nstill first.\n\n\nSecond."}));
  EXPECT_TRUE(docs("", "").empty());
  EXPECT_TRUE(docs("\n\n", "").empty());
  EXPECT_TRUE(docs("", std::nullopt).empty());
}

}  // namespace
}  // namespace tinyllama
