#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "genai/json.h"

using nxrt::StatusCode;
using nxrt::genai::Json;
using nxrt::genai::parse_json;
using nxrt::genai::parse_json_file;

TEST(GenaiJson, ParsesAllTypes) {
  auto r = parse_json(R"( {"null": null, "t": true, "f": false, "i": -42, "big": 12345678901234,
      "d": 2.5e-3, "s": "a\"b\\c\/\n\t\u00e9\ud83d\ude00", "arr": [1, [2, {}], []], "o": {"k": "v"}} )");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Json& j = *r;
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j.find("null")->is_null());
  EXPECT_TRUE(j.find("t")->as_bool());
  EXPECT_FALSE(j.find("f")->as_bool());
  EXPECT_TRUE(j.find("i")->is_int());
  EXPECT_EQ(j.get_int("i"), -42);
  EXPECT_EQ(j.get_int("big"), 12345678901234LL);
  EXPECT_FALSE(j.find("d")->is_int());
  EXPECT_DOUBLE_EQ(j.get_double("d"), 2.5e-3);
  EXPECT_EQ(j.get_string("s"), "a\"b\\c/\n\t\xC3\xA9\xF0\x9F\x98\x80");
  const auto& arr = j.find("arr")->as_array();
  ASSERT_EQ(arr.size(), 3u);
  EXPECT_EQ(arr[1].as_array()[0].as_int(), 2);
  EXPECT_TRUE(arr[1].as_array()[1].is_object());
  EXPECT_TRUE(arr[2].as_array().empty());
  EXPECT_EQ(j.find("o")->get_string("k"), "v");
  EXPECT_EQ(j.find("missing"), nullptr);
  EXPECT_EQ(j.get_string("missing", "def"), "def");
  EXPECT_EQ(j.get_int("s", 7), 7);  // wrong type -> default
  // Members keep file order.
  EXPECT_EQ(j.as_object().front().first, "null");
  EXPECT_EQ(j.as_object().back().first, "o");
}

TEST(GenaiJson, LoneSurrogateBecomesReplacement) {
  auto r = parse_json(R"("x\ud800y\udc00")");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->as_string(), "x\xEF\xBF\xBDy\xEF\xBF\xBD");
}

TEST(GenaiJson, NumbersEdgeCases) {
  auto r = parse_json("[0, -0, 1e400, -1e400, 1e-400, 9223372036854775807, 9223372036854775808, 1.0]");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& a = r->as_array();
  EXPECT_EQ(a[0].as_int(), 0);
  EXPECT_TRUE(std::isinf(a[2].as_double()) && a[2].as_double() > 0);
  EXPECT_TRUE(std::isinf(a[3].as_double()) && a[3].as_double() < 0);
  EXPECT_EQ(a[4].as_double(), 0.0);
  EXPECT_EQ(a[5].as_int(), INT64_MAX);
  EXPECT_FALSE(a[6].is_int());
  EXPECT_FALSE(a[7].is_int());
  EXPECT_EQ(a[7].as_int(), 1);
}

TEST(GenaiJson, ErrorsNameTheByteOffset) {
  struct Case {
    const char* text;
    const char* where;
  };
  const Case cases[] = {
      {"{\"a\": }", "at byte 6"},
      {"[1, 2", "at byte 5"},
      {"[1 2]", "at byte 3"},
      {"{\"a\" 1}", "at byte 5"},
      {"\"abc", "at byte 0"},
      {"tru", "at byte 0"},
      {"01", "at byte 1"},
      {"-", "at byte 0"},
      {"1.", "at byte 2"},
      {"[1] x", "at byte 4"},
      {"\"a\x01\"", "at byte 2"},
      {"\"\\q\"", "at byte 1"},
      {"\"\\u12\"", "at byte 1"},
      {"", "at byte 0"},
      {"{\"a\":1,}", "at byte 7"},
  };
  for (const Case& c : cases) {
    auto r = parse_json(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.where), std::string::npos) << c.text << " -> " << r.status().message();
  }
  auto multi = parse_json("{\n  \"a\": 1,\n  \"b\": x\n}");
  ASSERT_FALSE(multi.ok());
  EXPECT_NE(multi.status().message().find("line 3, column 8"), std::string::npos) << multi.status().message();
}

TEST(GenaiJson, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  auto r = parse_json(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nesting"), std::string::npos);
  std::string ok = std::string(500, '[') + std::string(500, ']');
  EXPECT_TRUE(parse_json(ok).ok());
}

TEST(GenaiJson, DumpRoundTrips) {
  const char* text = R"({"a":[1,-2.5,true,false,null],"b":{"c":"x\ny\"\u0001"},"e":[]})";
  auto r = parse_json(text);
  ASSERT_TRUE(r.ok());
  std::string d = r->dump();
  EXPECT_EQ(d, R"({"a":[1,-2.5,true,false,null],"b":{"c":"x\ny\"\u0001"},"e":[]})");
  auto again = parse_json(d);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->dump(), d);
}

TEST(GenaiJson, MissingFileIsIoError) {
  auto r = parse_json_file("/nonexistent/dir/genai_config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/genai_config.json"), std::string::npos);
}
