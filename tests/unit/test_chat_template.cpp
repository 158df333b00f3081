// The folder-level Tokenizer API (include/nxrt/tokenizer.h): tokenizer_config.json, chat template
// selection and rendering, special-token parsing on encode, add_bos_token, streaming decode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "genai/json.h"
#include "nxrt/tokenizer.h"
#include "tokenizer_test_util.h"

namespace fs = std::filesystem;
using nxrt::genai::EncodeOptions;
using nxrt::genai::read_tokenizer_config;
using nxrt::genai::render_chat_template;
using nxrt::genai::Tokenizer;
using nxrt::test::make_byte_level;
using nxrt::test::Spec;

namespace {

class TempFolder {
 public:
  TempFolder() {
    path_ = fs::temp_directory_path() / ("nxrt_chat_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  fs::path path_;
};

// ids: 0..255 bytes, 256 <s>, 257 <|im_start|>, 258 <|im_end|>, 259 <|plain|> (added, not special)
void write_tokenizer(const TempFolder& dir, const std::string& config) {
  Spec s;
  s.added = {{"<s>", true, false, false},
             {"<|im_start|>", true, false, false},
             {"<|im_end|>", true, false, false},
             {"<|plain|>", false, false, false}};
  dir.write("tokenizer.json", make_byte_level(s).dump());
  dir.write("tokenizer_config.json", config);
}

const char* kChatML =
    R"({"bos_token": {"content": "<s>", "special": true}, "eos_token": "<|im_end|>", "pad_token": null,
        "add_bos_token": false,
        "chat_template": "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}{% if tools %}[{{ tools | length }} tools]{% endif %}{% if enable_thinking is false %}/no_think{% endif %}"})";

}  // namespace

TEST(ChatTemplate, ReadsTokenizerConfig) {
  TempFolder dir;
  write_tokenizer(dir, kChatML);
  auto cfg = read_tokenizer_config(dir.str());
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->bos_token, "<s>");  // an AddedToken object gives its content
  EXPECT_EQ(cfg->eos_token, "<|im_end|>");
  EXPECT_EQ(cfg->pad_token, "");
  EXPECT_TRUE(cfg->has_add_bos_token);
  EXPECT_FALSE(cfg->add_bos_token);
  ASSERT_EQ(cfg->chat_templates.size(), 1u);
  EXPECT_EQ(cfg->chat_templates[0].first, "default");
  EXPECT_EQ(fs::path(cfg->chat_template_file).filename(), "tokenizer_config.json");
}

TEST(ChatTemplate, SourceOrderAndNamedTemplates) {
  TempFolder dir;
  write_tokenizer(dir, R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  auto cfg = read_tokenizer_config(dir.str());
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->chat_template(false).value(), "D");
  EXPECT_EQ(cfg->chat_template(true).value(), "T");
  // chat_template.jinja wins over tokenizer_config.json's default.
  dir.write("chat_template.jinja", "J");
  cfg = read_tokenizer_config(dir.str());
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->chat_template(false).value(), "J");
  EXPECT_EQ(cfg->chat_template(true).value(), "T");
  EXPECT_EQ(fs::path(cfg->chat_template_file).filename(), "chat_template.jinja");

  TempFolder none;
  write_tokenizer(none, R"({"eos_token": "<|im_end|>"})");
  auto empty = read_tokenizer_config(none.str());
  ASSERT_TRUE(empty.ok());
  auto err = empty->chat_template(false);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("chat_template.jinja"), std::string::npos);
  EXPECT_NE(err.status().message().find("tokenizer_config.json"), std::string::npos);

  TempFolder only_tools;
  write_tokenizer(only_tools, R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  auto no_default = read_tokenizer_config(only_tools.str());
  ASSERT_TRUE(no_default.ok());
  EXPECT_NE(no_default->chat_template(false).status().message().find("templates: tool_use"), std::string::npos);

  TempFolder bad;
  write_tokenizer(bad, R"({"chat_template": 3})");
  EXPECT_FALSE(read_tokenizer_config(bad.str()).ok());
}

TEST(ChatTemplate, ApplyChatTemplate) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  TempFolder dir;
  write_tokenizer(dir, kChatML);
  auto tok = Tokenizer::create(dir.str());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::string messages = R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Héllo"}])";
  auto text = tok->apply_chat_template(messages, "", true);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(*text, "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHéllo<|im_end|>\n<|im_start|>assistant\n");
  auto no_gen = tok->apply_chat_template(messages, "null", false);
  ASSERT_TRUE(no_gen.ok());
  EXPECT_EQ(no_gen->find("assistant"), std::string::npos);
  auto tools = tok->apply_chat_template(messages, R"([{"name": "a"}, {"name": "b"}])", false, R"({"enable_thinking": false})");
  ASSERT_TRUE(tools.ok());
  EXPECT_NE(tools->find("[2 tools]/no_think"), std::string::npos);
  // The rendered prompt encodes with its special tokens as single ids and no added BOS.
  EncodeOptions eo;
  eo.add_special_tokens = false;
  auto ids = tok->encode(*text, eo);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 256);
  EXPECT_EQ((*ids)[1], 257);
  EXPECT_EQ(tok->eos_token_ids(), std::vector<int32_t>{258});
  // Errors are values naming the problem.
  EXPECT_FALSE(tok->apply_chat_template("{", "", true).ok());
  EXPECT_FALSE(tok->apply_chat_template(R"({"role": "user"})", "", true).ok());
  EXPECT_FALSE(tok->apply_chat_template("[]", "{}", true).ok());
}

TEST(ChatTemplate, EncodeParseSpecialAndAddBos) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  TempFolder dir;
  write_tokenizer(dir, R"({"bos_token": "<s>", "add_bos_token": true})");
  auto tok = Tokenizer::create(dir.str());
  ASSERT_TRUE(tok.ok());
  auto with = tok->encode("<|im_start|>x<|plain|>");
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(*with, (std::vector<int32_t>{256, 257, 'x', 259}));  // add_bos_token puts <s> first
  EncodeOptions literal;
  literal.parse_special = false;
  literal.add_special_tokens = false;
  auto without = tok->encode("<|im_start|>x<|plain|>", literal);
  ASSERT_TRUE(without.ok());
  // The special token is plain text now (one id per byte); the non-special added token still matches.
  ASSERT_EQ(without->size(), std::string("<|im_start|>x").size() + 1);
  EXPECT_EQ(without->front(), '<');
  EXPECT_EQ(without->back(), 259);
  // A tokenizer loaded from tokenizer.json alone has no config and adds nothing.
  auto bare = Tokenizer::load(dir.str());
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->encode("x").value(), (std::vector<int32_t>{'x'}));
}

TEST(ChatTemplate, StreamPrintsASplitCharacterOnce) {
  NXRT_SKIP_WITHOUT_TOKENIZER_LIBS();
  TempFolder dir;
  write_tokenizer(dir, "{}");
  auto tok = Tokenizer::create(dir.str());
  ASSERT_TRUE(tok.ok());
  // "é" is two byte-level tokens and "😀" four: each appears once, on the token that completes it.
  const std::string text = "é😀!";
  auto ids = tok->encode(text);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 7u);
  auto stream = tok->create_stream();
  std::vector<std::string> pieces;
  for (int32_t id : *ids) pieces.push_back(stream.decode(id).value());
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "é", "", "", "", "😀", "!"}));
  EXPECT_EQ(stream.flush(), "");
}

TEST(ChatTemplate, RenderWithContextAndFill) {
  TempFolder dir;
  write_tokenizer(dir, kChatML);
  auto cfg = read_tokenizer_config(dir.str());
  ASSERT_TRUE(cfg.ok());
  auto out = render_chat_template("{{ bos_token }}|{{ eos_token }}|{{ x }}", R"({"x": 1, "eos_token": "E"})", &cfg.value());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<s>|E|1");  // given values win over the config's
  EXPECT_EQ(render_chat_template("{{ bos_token }}", "{}").value(), "");
  auto bad = render_chat_template("{{ x }", "{}", nullptr, "mine.jinja");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("mine.jinja:1:"), std::string::npos);
  EXPECT_FALSE(render_chat_template("x", "[]").ok());
}
