#include "data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include <string>

namespace tinyllama {
namespace {

TEST(ByteTokenizer, EncodesBytesAfterEndOfTextAndDecodesBack) {
  const std::string text = "Hi, \xc3\xa9t\xc3\xa9!";  // "Hi, été!"
  const std::vector<std::uint16_t> t = encode_document(text);
  ASSERT_EQ(t.size(), text.size() + 1);
  EXPECT_EQ(t[0], kEndOfText);
  EXPECT_EQ(t[1], 'H');
  EXPECT_EQ(t[5], 0xc3);
  EXPECT_EQ(decode_tokens(t), "\n<|endoftext|>\n" + text);
}

TEST(ByteTokenizer, FindsTheFirstInvalidUtf8Byte) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("\xe2\x82\xac \xf0\x9f\x98\x80"), std::string::npos);  // € 😀
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(first_invalid_utf8("a\xc3"), 1u);             // truncated
  EXPECT_EQ(first_invalid_utf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xed\xa0\x80"), 0u);      // a surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8(std::string("a\0b", 3)), std::string::npos);
}

}  // namespace
}  // namespace tinyllama
