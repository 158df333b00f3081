#include "genai/tokenizer/regex.h"

#if NXRT_HAVE_TOKENIZER_LIBS
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <vector>

#include "genai/json.h"
#include "genai/unicode.h"  // tokenizer_libs_missing_message
#include "genai/utf8.h"

namespace nxrt::genai::tok {
namespace {

// Oniguruma (the tokenizers crate's engine) -> PCRE2, following tokenizers.js's translation:
// \s/\S = Unicode White_Space, \h/\H = hex digit, \w/\W = Alphabetic|M|Nd|Pc (+ a few Latin-1), and
// (?i:...) / (?i) fold ASCII letters only. One pass over the pattern, tracking character classes and
// the case-insensitivity of each open group.
class OnigurumaRewriter {
 public:
  explicit OnigurumaRewriter(std::string_view p) : p_(p), n_(p.size()) {}

  std::string run() {
    while (i_ < n_) {
      const char c = p_[i_];
      if (c == '\\' && i_ + 1 < n_) {
        escape();
      } else if (in_class_) {
        class_char(c);
      } else if (c == '[') {
        open_class();
      } else if (c == '(') {
        open_group();
      } else if (c == ')') {
        if (ci_stack_.size() > 1) ci_stack_.pop_back();
        out_ += c;
        ++i_;
      } else if (ci_stack_.back() && is_alpha(c)) {
        out_ += '[';
        out_ += c;
        out_ += swap_case(c);
        out_ += ']';
        ++i_;
      } else {
        out_ += c;
        ++i_;
      }
    }
    return std::move(out_);
  }

 private:
  static constexpr const char* kWordChars = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
  static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
  static char swap_case(char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c + 32); }

  // A backslash escape at i_ (with at least one character after the backslash).
  void escape() {
    const char e = p_[i_ + 1];
    if ((e == 'p' || e == 'P' || e == 'x') && i_ + 2 < n_ && p_[i_ + 2] == '{') {
      size_t close = p_.find('}', i_ + 2);
      if (close == std::string_view::npos) close = n_ - 1;
      out_.append(p_.substr(i_, close + 1 - i_));
      i_ = close + 1;
      return;
    }
    std::string rep;
    switch (e) {
      case 's': rep = "\\p{White_Space}"; break;
      case 'S': rep = "\\P{White_Space}"; break;
      case 'h': rep = in_class_ ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
      case 'H': if (!in_class_) rep = "[^0-9A-Fa-f]"; break;
      case 'w': rep = in_class_ ? std::string(kWordChars) : "[" + std::string(kWordChars) + "]"; break;
      case 'W': if (!in_class_) rep = "[^" + std::string(kWordChars) + "]"; break;
      default: break;
    }
    if (!rep.empty()) {
      out_ += rep;
      i_ += 2;
      return;
    }
    const size_t l = cp_len(static_cast<unsigned char>(e));
    out_.append(p_.substr(i_, 1 + l));
    i_ += 1 + l;
  }

  // A character inside [...]: the closing bracket, or a letter to fold under (?i).
  void class_char(char c) {
    if (c == ']' && i_ > class_start_) {
      in_class_ = false;
      out_ += c;
      ++i_;
      return;
    }
    if (ci_stack_.back() && is_alpha(c)) {
      if (i_ + 2 < n_ && p_[i_ + 1] == '-' && is_alpha(p_[i_ + 2])) {
        out_ += p_.substr(i_, 3);
        out_ += swap_case(c);
        out_ += '-';
        out_ += swap_case(p_[i_ + 2]);
        i_ += 3;
      } else {
        out_ += c;
        out_ += swap_case(c);
        ++i_;
      }
      return;
    }
    out_ += c;
    ++i_;
  }

  void open_class() {
    in_class_ = true;
    out_ += '[';
    ++i_;
    if (i_ < n_ && p_[i_] == '^') out_ += p_[i_++];
    if (i_ < n_ && p_[i_] == ']') out_ += p_[i_++];  // a ']' right at the start is a literal
    class_start_ = i_;
  }

  // '(' at i_: case-insensitivity switches, named groups (copied verbatim), other groups.
  void open_group() {
    const bool ci = ci_stack_.back();
    if (p_.substr(i_, 4) == "(?i:" || p_.substr(i_, 5) == "(?-i:") {
      const bool on = p_[i_ + 2] == 'i';
      ci_stack_.push_back(on);
      out_ += "(?:";
      i_ += on ? 4 : 5;
      return;
    }
    if (p_.substr(i_, 4) == "(?i)" || p_.substr(i_, 5) == "(?-i)") {
      const bool on = p_[i_ + 2] == 'i';
      ci_stack_.back() = on;
      i_ += on ? 4 : 5;
      return;
    }
    ci_stack_.push_back(ci);
    // Copy a group prefix with a name verbatim: (?<name> (?P<name> (?'name'
    size_t j = i_ + 1;
    if (j < n_ && p_[j] == '?') {
      ++j;
      if (j < n_ && p_[j] == 'P') ++j;
      if (j + 1 < n_ && (p_[j] == '<' || p_[j] == '\'') && p_[j + 1] != '=' && p_[j + 1] != '!') {
        const char close = p_[j] == '<' ? '>' : '\'';
        const size_t e = p_.find(close, j + 1);
        if (e != std::string_view::npos) j = e;
      }
      out_.append(p_.substr(i_, j + 1 - i_));
      i_ = j + 1;
      return;
    }
    out_ += '(';
    ++i_;
  }

  std::string_view p_;
  size_t n_;
  size_t i_ = 0;
  std::string out_;
  std::vector<bool> ci_stack_{false};
  bool in_class_ = false;
  size_t class_start_ = 0;
};

}  // namespace

#if NXRT_HAVE_TOKENIZER_LIBS

namespace {

// Per-thread JIT stack and match data (a Regex is shared by every thread that encodes).
struct JitStack {
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_data* md = nullptr;
  JitStack() {
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (mctx && stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
    md = pcre2_match_data_create(1, nullptr);
  }
  ~JitStack() {
    if (md) pcre2_match_data_free(md);
    if (stack) pcre2_jit_stack_free(stack);
    if (mctx) pcre2_match_context_free(mctx);
  }
};

JitStack& thread_jit() {
  thread_local JitStack js;
  return js;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<char*>(buf);
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
};

Result<std::shared_ptr<Regex>> Regex::compile(std::string_view onig_pattern) {
  std::string pat = OnigurumaRewriter(onig_pattern).run();
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  if (cctx) pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX, &err, &off,
                                   cctx);
  if (cctx) pcre2_compile_context_free(cctx);
  if (!code) {
    return invalid_model("tokenizer.json: cannot compile regex '" + std::string(onig_pattern) + "' (as PCRE2 '" +
                         pat + "'): " + pcre2_message(err) + " at offset " + std::to_string(off));
  }
  std::shared_ptr<Regex> r(new Regex());
  r->code_ = new Compiled{code};
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // matching falls back to the interpreter without JIT
  r->source_ = std::string(onig_pattern);
  return r;
}

Regex::~Regex() {
  if (code_) pcre2_code_free(code_->code);
  delete code_;
}

Status Regex::match_loop(std::string_view s, MatchFn fn, void* ctx) const {
  JitStack& js = thread_jit();
  if (!js.md) return runtime_error("tokenizer: out of memory for regex match data");
  size_t pos = 0;
  while (pos <= s.size()) {
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                               PCRE2_NO_UTF_CHECK, js.md, js.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return runtime_error("tokenizer: regex '" + source_ + "' failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(js.md);
    const size_t b = ov[0], e = ov[1];
    fn(ctx, b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= s.size()) break;
      pos = e + cp_len(static_cast<unsigned char>(s[e]));
    }
  }
  return Status::Ok();
}

#else  // !NXRT_HAVE_TOKENIZER_LIBS

struct Regex::Compiled {};

Result<std::shared_ptr<Regex>> Regex::compile(std::string_view onig_pattern) {
  return not_implemented("regex '" + std::string(onig_pattern) + "' needs PCRE2: " + tokenizer_libs_missing_message());
}

Regex::~Regex() { delete code_; }

Status Regex::match_loop(std::string_view, MatchFn, void*) const {
  return not_implemented("regex '" + source_ + "' needs PCRE2: " + tokenizer_libs_missing_message());
}

#endif  // NXRT_HAVE_TOKENIZER_LIBS

Result<Pattern> parse_pattern(const Json* j, const std::string& where) {
  if (!j || !j->is_object()) return invalid_model("tokenizer.json: " + where + ": missing 'pattern' object");
  Pattern p;
  if (const Json* r = j->find("Regex"); r && r->is_string()) {
    auto regex = Regex::compile(r->as_string());
    if (!regex.ok() && regex.status().code() == StatusCode::kNotImplemented) {
      return regex.status().with_context("tokenizer.json: " + where + ": ");
    }
    NXRT_ASSIGN_OR_RETURN(p.regex, std::move(regex));
    p.is_regex = true;
  } else if (const Json* s = j->find("String"); s && s->is_string()) {
    p.literal = s->as_string();
  } else {
    return invalid_model("tokenizer.json: " + where + ": 'pattern' needs a 'Regex' or 'String' member");
  }
  return p;
}

std::string replace_all(std::string_view s, const Pattern& p, std::string_view content, Status* st) {
  std::string out;
  size_t prev = 0;
  *st = p.for_each_match(s, [&](size_t b, size_t e) {
    out.append(s.substr(prev, b - prev));
    out.append(content);
    prev = e;
  });
  out.append(s.substr(prev));
  return out;
}

}  // namespace nxrt::genai::tok
