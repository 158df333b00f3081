// Unit tests of the tokenizer.json reader on small hand-built tokenizers (the real Qwen3 / Llama-3
// files are compared with tokenizers.js by scripts/check_tokenizers.sh).
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "genai/json.h"
#include "genai/tokenizer.h"
#include "genai/unicode.h"
#include "genai/utf8.h"
#include "tokenizer_test_util.h"

using nxrt::StatusCode;
using nxrt::genai::Json;
using nxrt::genai::Tokenizer;
using nxrt::genai::utf8_complete_prefix;
using nxrt::genai::utf8_sanitize;
using nxrt::test::byte_char;
using nxrt::test::kQwenPattern;
using nxrt::test::make_byte_level;
using nxrt::test::Spec;

namespace {

Tokenizer load(const Json& j) {
  auto t = Tokenizer::from_json_text(j.dump());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

std::vector<std::string> tokens_of(const Tokenizer& t, const std::string& text, bool special = true) {
  auto ids = t.encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  std::vector<std::string> out;
  for (int32_t id : *ids) out.push_back(t.id_to_token(id));
  return out;
}

using Strs = std::vector<std::string>;
const std::string G = "\xC4\xA0";  // byte-level space 'Ġ'

}  // namespace

TEST(GenaiTokenizer, MergesFollowRank) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec a;
  a.merges = {{"b", "c"}, {"a", "b"}};
  EXPECT_EQ(tokens_of(load(make_byte_level(a)), "abc"), (Strs{"a", "bc"}));
  Spec b;
  b.merges = {{"a", "b"}, {"b", "c"}};
  b.merges_as_strings = true;  // "a b" form
  EXPECT_EQ(tokens_of(load(make_byte_level(b)), "abc"), (Strs{"ab", "c"}));
}

TEST(GenaiTokenizer, EqualRanksMergeLeftmostFirst) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.merges = {{"a", "a"}};
  EXPECT_EQ(tokens_of(load(make_byte_level(s)), "aaa"), (Strs{"aa", "a"}));
  EXPECT_EQ(tokens_of(load(make_byte_level(s)), "aaaaa"), (Strs{"aa", "aa", "a"}));
}

TEST(GenaiTokenizer, HelloWorldRoundTrip) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {G, "w"}, {G + "w", "o"}, {"r", "l"}};
  Tokenizer t = load(make_byte_level(s));
  EXPECT_EQ(tokens_of(t, "hello world"), (Strs{"hello", G + "wo", "rl", "d"}));
  std::vector<std::string> texts = {"hello world", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n",
                                    "caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!", "IT'S we'LL 12345", ""};
  for (const std::string& text : texts) {
    auto ids = t.encode(text);
    ASSERT_TRUE(ids.ok());
    auto back = t.decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

TEST(GenaiTokenizer, PreTokenizerSplitsContractionsAndDigits) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.merges = {{"'", "s"}, {"'", "S"}, {"1", "2"}};
  Tokenizer t = load(make_byte_level(s));
  // \p{N} alone: digits never merge across pre-tokens.
  EXPECT_EQ(tokens_of(t, "12"), (Strs{"1", "2"}));
  // (?i:'s) is its own pre-token in either case...
  EXPECT_EQ(tokens_of(t, "x'S"), (Strs{"x", "'S"}));
  EXPECT_EQ(tokens_of(t, "x's"), (Strs{"x", "'s"}));
  // ...but folds ASCII only (tokenizers.js): in "'\u017f\u017f" (long s) there is no contraction, so
  // the whole run is one pre-token and the bytes of the two letters can merge.
  Spec l;
  l.merges = {{byte_char(0xBF), byte_char(0xC5)}};
  auto toks = tokens_of(load(make_byte_level(l)), "'\xC5\xBF\xC5\xBF");
  EXPECT_EQ(toks, (Strs{"'", byte_char(0xC5), byte_char(0xBF) + byte_char(0xC5), byte_char(0xBF)}));
}

TEST(GenaiTokenizer, AddedTokensSplitFirstLongestMatch) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.added = {{"<|endoftext|>", true, false, false}, {"<tool>", false, false, false}, {"<a>", true, false, false},
             {"<a><b>", true, false, false}};
  std::vector<std::string> vocab;
  Tokenizer t = load(make_byte_level(s, &vocab));
  int32_t eot = t.token_to_id("<|endoftext|>"), tool = t.token_to_id("<tool>"), ab = t.token_to_id("<a><b>");
  ASSERT_GE(eot, 256);
  EXPECT_TRUE(t.is_special(eot));
  EXPECT_FALSE(t.is_special(tool));
  auto ids = t.encode("hi<|endoftext|>there<tool>x<a><b><a>");
  ASSERT_TRUE(ids.ok());
  std::vector<int32_t> want = {'h', 'i', eot, 't', 'h', 'e', 'r', 'e', tool, 'x', ab, t.token_to_id("<a>")};
  EXPECT_EQ(*ids, want);
  auto full = t.decode(*ids);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(*full, "hi<|endoftext|>there<tool>x<a><b><a>");
  auto skipped = t.decode(*ids, /*skip_special_tokens=*/true);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, "hithere<tool>x");
  // Partial matches are plain text.
  EXPECT_EQ(tokens_of(t, "<|endoftext").size(), 11u);
}

TEST(GenaiTokenizer, AddedTokenLstripRstrip) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.added = {{"<T>", true, true, true}};
  Tokenizer t = load(make_byte_level(s));
  EXPECT_EQ(tokens_of(t, "x  <T>  y"), (Strs{"x", "<T>", "y"}));
}

TEST(GenaiTokenizer, TemplateProcessingAddsBos) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.added = {{"<s>", true, false, false}};
  s.post = Json::object(
      {{"type", Json::string("Sequence")},
       {"processors",
        Json::array({Json::object({{"type", Json::string("ByteLevel")}}),
                     Json::object({{"type", Json::string("TemplateProcessing")},
                                   {"single", Json::array({Json::object({{"SpecialToken",
                                                                          Json::object({{"id", Json::string("<s>")},
                                                                                        {"type_id", Json::integer(0)}})}}),
                                                           Json::object({{"Sequence",
                                                                          Json::object({{"id", Json::string("A")},
                                                                                        {"type_id", Json::integer(0)}})}})})}})})}});
  Tokenizer t = load(make_byte_level(s));
  int32_t bos = t.token_to_id("<s>");
  EXPECT_EQ(t.bos_token_id(), bos);
  auto with = t.encode("hi", true);
  auto without = t.encode("hi", false);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(*with, (std::vector<int32_t>{bos, 'h', 'i'}));
  EXPECT_EQ(*without, (std::vector<int32_t>{'h', 'i'}));
  auto empty = t.encode("", true);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, (std::vector<int32_t>{bos}));
}

TEST(GenaiTokenizer, NfcNormalizer) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.normalizer = Json::object({{"type", Json::string("NFC")}});
  Tokenizer t = load(make_byte_level(s));
  auto composed = t.encode("caf\xC3\xA9 \xE2\x84\xAB");    // café Å (U+212B ANGSTROM SIGN)
  auto decomposed = t.encode("cafe\xCC\x81 A\xCC\x8A");    // cafe + U+0301, A + U+030A
  ASSERT_TRUE(composed.ok() && decomposed.ok());
  EXPECT_EQ(*composed, *decomposed);
  auto back = t.decode(*decomposed);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "caf\xC3\xA9 \xC3\x85");
}

TEST(GenaiTokenizer, InvalidUtf8InputIsReadWithReplacementCharacters) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Tokenizer t = load(make_byte_level(Spec{}));
  auto bad = t.encode("a\xFF" "b\xE2\x82");
  auto fixed = t.encode("a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  ASSERT_TRUE(bad.ok() && fixed.ok());
  EXPECT_EQ(*bad, *fixed);
}

TEST(GenaiTokenizer, StreamingHoldsBackIncompleteUtf8) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Tokenizer t = load(make_byte_level(Spec{}));
  std::string text = "a\xC3\xA9\xF0\x9F\x98\x80z";  // a é 😀 z: byte-level ids are single bytes here
  auto ids = t.encode(text);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), text.size());
  auto stream = t.create_stream();
  std::vector<std::string> steps;
  for (int32_t id : *ids) {
    auto piece = stream.step(id);
    ASSERT_TRUE(piece.ok());
    steps.push_back(*piece);
  }
  std::vector<std::string> want = {"a", "", "\xC3\xA9", "", "", "", "\xF0\x9F\x98\x80", "z"};
  EXPECT_EQ(steps, want);
  EXPECT_EQ(stream.flush(), "");
  // An unfinished sequence at the end comes out as U+FFFD on flush, like decode().
  auto s2 = t.create_stream();
  std::string got;
  for (int32_t id : {int32_t{'x'}, int32_t{0xF0}, int32_t{0x9F}}) got += s2.step(id).value();
  EXPECT_EQ(got, "x");
  got += s2.flush();
  auto full = t.decode(std::vector<int32_t>{'x', 0xF0, 0x9F});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(got, *full);
  EXPECT_EQ(*full, "x\xEF\xBF\xBD");
  // Out-of-range ids are errors.
  EXPECT_FALSE(s2.step(1 << 30).ok());
  EXPECT_FALSE(t.decode(std::vector<int32_t>{-1}).ok());
}

TEST(GenaiTokenizer, StreamingSkipsSpecialTokens) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.added = {{"<|im_end|>", true, false, false}};
  Tokenizer t = load(make_byte_level(s));
  auto ids = t.encode("ok<|im_end|>");
  ASSERT_TRUE(ids.ok());
  auto stream = t.create_stream(/*skip_special_tokens=*/true);
  std::string out;
  for (int32_t id : *ids) out += stream.step(id).value();
  out += stream.flush();
  EXPECT_EQ(out, "ok");
}

// A decoder that strips the end of the whole text (Strip `stop` after Fuse) drops trailing spaces only
// at the text's end: the stream holds them back until a later id puts text after them, so what has
// been streamed after each id equals decode() of the ids so far (a caller who stops anywhere, flush()
// or not, has decode's text). The same Strip without Fuse strips each token alone.
TEST(GenaiTokenizer, StreamingHoldsBackWhatTheEndStripRemoves) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  auto make = [](bool fuse) {
    const std::string strip = R"({"type": "Strip", "content": " ", "start": 0, "stop": 2})";
    const std::string decoder =
        fuse ? R"({"type": "Sequence", "decoders": [{"type": "Fuse"}, )" + strip + "]}" : strip;
    return Tokenizer::from_json_text(
        R"({"added_tokens": [{"id": 4, "content": "<s>", "special": true}], "decoder": )" + decoder +
        R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, " ": 2, "a ": 3, "<s>": 4, "  ": 5}, "merges": []}})");
  };
  const int32_t a = 0, b = 1, sp = 2, a_sp = 3, bos = 4, sp2 = 5;
  auto fused = make(true);
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  // While spaces end the text, decode strips two of them; once "a" follows, none. (Windows that ended
  // the text at their own end used to lose one of these spaces.)
  const std::vector<int32_t> ids = {a, sp, sp2, sp, a};
  auto stream = fused->create_stream();
  std::vector<std::string> steps;
  for (int32_t id : ids) steps.push_back(stream.step(id).value());
  EXPECT_EQ(steps, (Strs{"a", "", " ", " ", "  a"}));
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(fused->decode(ids).value(), "a    a");

  const std::vector<std::vector<int32_t>> cases = {
      ids, {sp, sp2, sp, a}, {a, sp, sp, sp, b, sp, sp, sp}, {a_sp, sp, bos, sp2, b, bos, sp}, {bos, sp, sp},
      {a, sp, bos, bos, sp, sp2, a_sp, b}};
  for (bool fuse : {true, false}) {
    auto tok = make(fuse);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    for (bool skip_special : {false, true}) {
      for (const std::vector<int32_t>& c : cases) {
        auto s = tok->create_stream(skip_special);
        std::string streamed;
        for (size_t n = 1; n <= c.size(); ++n) {
          streamed += s.step(c[n - 1]).value();
          auto want = tok->decode(std::span<const int32_t>(c.data(), n), skip_special);
          ASSERT_TRUE(want.ok()) << want.status().to_string();
          EXPECT_EQ(streamed, *want) << "fuse " << fuse << ", skip_special " << skip_special << ", ids " << n;
        }
        EXPECT_EQ(s.flush(), "");
      }
    }
  }
  // Without Fuse, Strip acts on each token: "a " loses its space wherever it stands.
  auto per_token = make(false);
  ASSERT_TRUE(per_token.ok());
  EXPECT_EQ(per_token->decode(std::vector<int32_t>{a_sp, b, sp, a}).value(), "aba");
}

TEST(GenaiTokenizer, ByteFallbackLlama2Style) {
  // Llama-2 style: Prepend/Replace normalizer, no pre-tokenizer, <0xNN> byte fallback.
  const std::string sp = "\xE2\x96\x81";  // ▁
  Json::Object vocab;
  std::vector<std::string> names = {"<unk>", "<s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    names.push_back(buf);
  }
  for (const char* tok : {"h", "i", "t", "e", "r"}) names.push_back(tok);
  names.push_back(sp);
  names.push_back(sp + "h");
  names.push_back(sp + "hi");
  for (size_t i = 0; i < names.size(); ++i) vocab.emplace_back(names[i], Json::integer(static_cast<int64_t>(i)));
  auto str = [](const std::string& s) { return Json::string(s); };
  Json decoder = Json::object(
      {{"type", str("Sequence")},
       {"decoders", Json::array({Json::object({{"type", str("Replace")},
                                               {"pattern", Json::object({{"String", str(sp)}})},
                                               {"content", str(" ")}}),
                                 Json::object({{"type", str("ByteFallback")}}), Json::object({{"type", str("Fuse")}}),
                                 Json::object({{"type", str("Strip")},
                                               {"content", str(" ")},
                                               {"start", Json::integer(1)},
                                               {"stop", Json::integer(0)}})})}});
  Json normalizer = Json::object(
      {{"type", str("Sequence")},
       {"normalizers", Json::array({Json::object({{"type", str("Prepend")}, {"prepend", str(sp)}}),
                                    Json::object({{"type", str("Replace")},
                                                  {"pattern", Json::object({{"String", str(" ")}})},
                                                  {"content", str(sp)}})})}});
  Json root = Json::object(
      {{"added_tokens", Json::array({Json::object({{"id", Json::integer(0)}, {"content", str("<unk>")}, {"special", Json::boolean(true)}}),
                                     Json::object({{"id", Json::integer(1)}, {"content", str("<s>")}, {"special", Json::boolean(true)}})})},
       {"normalizer", normalizer},
       {"pre_tokenizer", Json()},
       {"post_processor", Json()},
       {"decoder", decoder},
       {"model", Json::object({{"type", str("BPE")},
                               {"vocab", Json::object(vocab)},
                               {"merges", Json::array({str(sp + " h"), str(sp + "h i")})},
                               {"unk_token", str("<unk>")},
                               {"byte_fallback", Json::boolean(true)}})}});
  Tokenizer t = load(root);
  auto ids = t.encode("hi \xF0\x9F\x98\x80 tier");
  ASSERT_TRUE(ids.ok());
  std::vector<std::string> toks;
  for (int32_t id : *ids) toks.push_back(t.id_to_token(id));
  EXPECT_EQ(toks, (Strs{sp + "hi", sp, "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", sp, "t", "i", "e", "r"}));
  auto back = t.decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "hi \xF0\x9F\x98\x80 tier");
  // Streaming gives the same text.
  auto stream = t.create_stream();
  std::string streamed;
  for (int32_t id : *ids) streamed += stream.step(id).value();
  streamed += stream.flush();
  EXPECT_EQ(streamed, *back);
}

TEST(GenaiTokenizer, ErrorsAreValues) {
  auto missing = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);

  auto malformed = Tokenizer::from_json_text("{\"model\": {\"type\": \"BPE\",, }");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("at byte 25"), std::string::npos) << malformed.status().message();

  auto unigram = Tokenizer::from_json_text(R"({"model": {"type": "Unigram", "vocab": []}})");
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kNotImplemented);
  EXPECT_NE(unigram.status().message().find("'Unigram'"), std::string::npos);

  Json j = make_byte_level(Spec{});
  for (auto& m : j.mutable_object()) {
    if (m.first == "pre_tokenizer") m.second = Json::object({{"type", Json::string("BertPreTokenizer")}});
  }
  auto bert = Tokenizer::from_json_text(j.dump());
  ASSERT_FALSE(bert.ok());
  EXPECT_EQ(bert.status().code(), StatusCode::kNotImplemented);
  EXPECT_NE(bert.status().message().find("'BertPreTokenizer'"), std::string::npos);

  Spec bad_merge;
  bad_merge.merges = {{"a", "b"}};
  Json jm = make_byte_level(bad_merge);
  for (auto& m : jm.mutable_object()) {
    if (m.first != "model") continue;
    for (auto& mm : m.second.mutable_object()) {
      if (mm.first == "merges") mm.second.mutable_array().push_back(Json::string("zzz qqq"));
    }
  }
  auto unknown_merge = Tokenizer::from_json_text(jm.dump());
  ASSERT_FALSE(unknown_merge.ok());
  EXPECT_NE(unknown_merge.status().message().find("zzz"), std::string::npos);

  Spec bad_regex;
  bad_regex.split_pattern = "(unclosed";
  auto regex = Tokenizer::from_json_text(make_byte_level(bad_regex).dump());
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.status().message().find("(unclosed"), std::string::npos);
}

TEST(GenaiTokenizer, ConcurrentEncodeIsConsistent) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  Spec s;
  s.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}};
  Tokenizer t = load(make_byte_level(s));
  std::string text;
  for (int i = 0; i < 200; ++i) text += "hello world " + std::to_string(i) + " caf\xC3\xA9\n";
  auto want = t.encode(text);
  ASSERT_TRUE(want.ok());
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int r = 0; r < 5; ++r) {
        auto got = t.encode(text);
        ok[k] += got.ok() && *got == *want;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ok[k], 5);
}

TEST(GenaiTokenizer, Utf8Helpers) {
  EXPECT_EQ(utf8_sanitize("ok \xC3\xA9"), "ok \xC3\xA9");
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8_sanitize("\xE2\x82"), R);               // truncated: one replacement
  EXPECT_EQ(utf8_sanitize("\xE2\x82z"), R + "z");
  EXPECT_EQ(utf8_sanitize("\xF0\x80\x80"), R + R + R);   // overlong lead: each byte
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), R + R + R);   // surrogate
  EXPECT_EQ(utf8_sanitize("\xC0\xAF"), R + R);
  EXPECT_EQ(utf8_sanitize("\xFF"), R);
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8_complete_prefix("\xC3"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xFF"), 1u);
  EXPECT_EQ(utf8_complete_prefix("\xE2\x41"), 2u);  // invalid, not incomplete
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

TEST(GenaiTokenizer, UnknownCharactersWithoutByteFallback) {
  // A non-byte-level BPE whose vocabulary lacks some characters: unk_token (fused when fuse_unk).
  auto make = [](bool fuse) {
    Json vocab = Json::object({{"<unk>", Json::integer(0)}, {"a", Json::integer(1)}, {"b", Json::integer(2)},
                               {"ab", Json::integer(3)}});
    Json model = Json::object({{"type", Json::string("BPE")}, {"vocab", vocab},
                               {"merges", Json::array({Json::string("a b")})},
                               {"unk_token", Json::string("<unk>")}, {"fuse_unk", Json::boolean(fuse)}});
    return Json::object({{"model", model}});
  };
  Tokenizer plain = load(make(false));
  auto ids = plain.encode("abxyab");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{3, 0, 0, 3}));
  Tokenizer fused = load(make(true));
  auto fids = fused.encode("abxyab");
  ASSERT_TRUE(fids.ok());
  EXPECT_EQ(*fids, (std::vector<int32_t>{3, 0, 3}));
}

TEST(GenaiTokenizer, RandomBytesNeverFail) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  // Deterministic garbage: encode must succeed, decode must give back the sanitized input, and the
  // stream must agree with decode.
  Spec s;
  s.merges = {{"a", "b"}, {G, "a"}, {byte_char(0xC3), byte_char(0xA9)}};
  s.added = {{"<|x|>", true, false, false}};
  s.normalizer = Json::object({{"type", Json::string("NFC")}});
  Tokenizer t = load(make_byte_level(s));
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1103515245u + 12345u;
    return (state >> 16) & 0xFF;
  };
  const char* alphabet[] = {"a", "b", " ", "\n", "\r", "\t", "<|x|>", "'s", "1", "\xC3\xA9", "e\xCC\x81",
                            "\xF0\x9F\x98", "\x80", "\xFF", "\xE4\xB8\xAD"};
  for (int round = 0; round < 200; ++round) {
    std::string text;
    int len = static_cast<int>(next() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[next() % (sizeof(alphabet) / sizeof(alphabet[0]))];
    auto ids = t.encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    auto back = t.decode(*ids);
    ASSERT_TRUE(back.ok());
    auto stream = t.create_stream();
    std::string streamed;
    for (int32_t id : *ids) streamed += stream.step(id).value();
    streamed += stream.flush();
    EXPECT_EQ(streamed, *back);
    // Round trip up to sanitizing and NFC (only e + U+0301 changes here).
    std::string want = utf8_sanitize(text);
    for (size_t p = want.find("e\xCC\x81"); p != std::string::npos; p = want.find("e\xCC\x81")) {
      want.replace(p, 3, "\xC3\xA9");
    }
    EXPECT_EQ(*back, want);
  }
}

TEST(GenaiTokenizer, DigitsPreTokenizer) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  for (bool individual : {false, true}) {
    Spec s;
    s.merges = {{"1", "2"}, {"a", "b"}, {"b", "1"}};
    Json j = make_byte_level(s);
    for (auto& m : j.mutable_object()) {
      if (m.first != "pre_tokenizer") continue;
      m.second = Json::object(
          {{"type", Json::string("Sequence")},
           {"pretokenizers", Json::array({Json::object({{"type", Json::string("Digits")},
                                                        {"individual_digits", Json::boolean(individual)}}),
                                          Json::object({{"type", Json::string("ByteLevel")},
                                                        {"use_regex", Json::boolean(false)}})})}});
    }
    Tokenizer t = load(j);
    // "b1" never merges: digits are split from letters.
    EXPECT_EQ(tokens_of(t, "ab12x"), individual ? (Strs{"ab", "1", "2", "x"}) : (Strs{"ab", "12", "x"}));
  }
}

// NXRT_WITH_TOKENIZER_LIBS: with PCRE2/ICU the regex and Unicode components load and work; without them
// each fails to load with a not_implemented error naming the component and the build option, and the
// components that need neither (here: String patterns, Metaspace, byte_fallback) keep working.
TEST(GenaiTokenizer, RegexAndUnicodeComponentsFollowTheBuildOption) {
  const bool libs = nxrt::genai::tokenizer_libs_available();
  auto with = [](const char* key, Json value) {
    Json j = make_byte_level(Spec{});
    for (auto& m : j.mutable_object()) {
      if (m.first == key) m.second = std::move(value);
    }
    return j;
  };
  auto type = [](const char* t) { return Json::object({{"type", Json::string(t)}}); };
  struct Case {
    const char* component;  // what the error must name
    Json file;
  };
  std::vector<Case> cases = {
      {"pre_tokenizer Split", make_byte_level(Spec{})},  // Split with a Regex pattern
      {"normalizer NFC", with("normalizer", type("NFC"))},
      {"normalizer NFKD", with("normalizer", type("NFKD"))},
      {"normalizer Lowercase", with("normalizer", type("Lowercase"))},
      {"pre_tokenizer ByteLevel", with("pre_tokenizer", type("ByteLevel"))},  // use_regex defaults to true
      {"pre_tokenizer Digits", with("pre_tokenizer", type("Digits"))},
      {"pre_tokenizer WhitespaceSplit", with("pre_tokenizer", type("WhitespaceSplit"))},
      {"normalizer Replace",
       with("normalizer", Json::object({{"type", Json::string("Replace")},
                                        {"pattern", Json::object({{"Regex", Json::string("a+")}})},
                                        {"content", Json::string("a")}}))},
  };
  for (const Case& c : cases) {
    auto t = Tokenizer::from_json_text(c.file.dump());
    if (libs) {
      ASSERT_TRUE(t.ok()) << c.component << ": " << t.status().to_string();
      auto ids = t->encode("Hello World 42");
      ASSERT_TRUE(ids.ok()) << c.component;
      EXPECT_FALSE(ids->empty()) << c.component;
    } else {
      ASSERT_FALSE(t.ok()) << c.component << " loaded without PCRE2/ICU";
      EXPECT_EQ(t.status().code(), StatusCode::kNotImplemented) << c.component;
      EXPECT_NE(t.status().message().find(c.component), std::string::npos) << t.status().message();
      EXPECT_NE(t.status().message().find("built without PCRE2/ICU (NXRT_WITH_TOKENIZER_LIBS=OFF)"), std::string::npos)
          << t.status().message();
    }
  }
  // Without a regex: String split pattern + ByteLevel without use_regex, Metaspace.
  Json literal = with("pre_tokenizer",
                      Json::object({{"type", Json::string("Sequence")},
                                    {"pretokenizers",
                                     Json::array({Json::object({{"type", Json::string("Split")},
                                                                {"pattern", Json::object({{"String", Json::string(" ")}})},
                                                                {"behavior", Json::string("MergedWithNext")}}),
                                                  Json::object({{"type", Json::string("ByteLevel")},
                                                                {"use_regex", Json::boolean(false)}})})}}));
  Tokenizer t = load(literal);
  EXPECT_EQ(tokens_of(t, "ab cd"), (Strs{"a", "b", G, "c", "d"}));
  auto ids = t.encode("caf\xC3\xA9 ok");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(t.decode(*ids).value(), "caf\xC3\xA9 ok");
}
