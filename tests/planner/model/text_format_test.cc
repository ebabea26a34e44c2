// Number formatting for tables, SVG and reports: always printable text, whatever the value.
#include "pipeplan/model/text_format.h"

#include <cmath>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace pipeplan {
namespace {

bool IsNumberText(const std::string& text) {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool allowed = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e';
    if (!allowed) return false;
  }
  return true;
}

TEST(FormatFixedTest, KeepsTheAskedDecimalsForOrdinaryValues) {
  EXPECT_EQ(FormatFixed(0.24313, 4), "0.2431");
  EXPECT_EQ(FormatFixed(-0.0, 1), "0.0");
  EXPECT_EQ(FormatFixed(123456.0, 0), "123456");
}

// A value whose fixed form does not fit the buffer used to print the whole uninitialised buffer.
TEST(FormatFixedTest, HugeValuesAreShortNumbersNotStackBytes) {
  for (const double value : {1e15, 8.6e89, -1e300, std::numeric_limits<double>::max()}) {
    for (const int decimals : {0, 1, 4}) {
      const std::string text = FormatFixed(value, decimals);
      EXPECT_TRUE(IsNumberText(text)) << value << " gave '" << text << "'";
      EXPECT_LT(text.size(), 32u) << value;
      EXPECT_EQ(std::stod(text), value) << text;
    }
  }
}

TEST(FormatFixedTest, NonFiniteValuesAreNamed) {
  EXPECT_EQ(FormatFixed(std::numeric_limits<double>::infinity(), 2), "inf");
  EXPECT_EQ(FormatFixed(-std::numeric_limits<double>::infinity(), 2), "-inf");
  EXPECT_EQ(FormatFixed(std::nan(""), 2).substr(0, 3), "nan");
}

TEST(FormatBytesTest, BeyondPebibytesStaysText) {
  const std::string text = FormatBytes(1e80 * 1024 * 1024 * 1024);
  EXPECT_EQ(text.substr(text.size() - 4), " PiB");
  EXPECT_TRUE(IsNumberText(text.substr(0, text.size() - 4))) << text;
}

// XML cannot hold control characters, not even escaped (a plan's strings may: they are valid
// UTF-8); the SVG and HTML reports get U+FFFD instead.
TEST(XmlEscapeTest, ControlCharactersBecomeTheReplacementCharacter) {
  EXPECT_EQ(XmlEscape(std::string("a\x00"
                                  "b\x02<\t\n",
                                  7)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD&lt;\t\n");
}

// Found by the output_rendering fuzzer: a makespan of 2.2e20 was written as 21 integer digits,
// valid JSON that readers with 64-bit integers (simdjson) refuse.
TEST(FormatNumberTest, LargeNumbersHaveAnExponent) {
  EXPECT_EQ(FormatNumber(221360928884514619392.0), "2.2136092888451462e+20");
  EXPECT_EQ(FormatNumber(1e20), "1e+20");
  EXPECT_EQ(FormatNumber(123456789012345.0), "123456789012345");
  EXPECT_EQ(FormatNumber(12.5), "12.5");
}

}  // namespace
}  // namespace pipeplan
