#include "text_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace nxrt::cli {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool StopFilter::add(const std::string& piece) {
  text_ += piece;
  size_t hit = std::string::npos;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    const size_t at = text_.find(s, printed_);  // nothing printed can belong to a stop string
    if (at < hit) hit = at;
  }
  if (hit != std::string::npos) {
    emit(hit);
    text_.resize(hit);
    return true;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    for (size_t k = std::min(s.size() - 1, text_.size() - printed_); k > hold; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  emit(text_.size() - hold);
  return false;
}

std::string StopFilter::take_released() {
  std::string out = text_.substr(taken_, printed_ - taken_);
  taken_ = printed_;
  return out;
}

void StopFilter::emit(size_t upto) {
  if (upto <= printed_) return;
  if (out_) {
    std::fwrite(text_.data() + printed_, 1, upto - printed_, out_);
    std::fflush(out_);
  }
  printed_ = upto;
}

size_t common_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

Result<Reply> generate_reply(genai::Generator& gen, const genai::Tokenizer& tok, const std::vector<int64_t>& prompt,
                             const ReplyLimits& limits, std::FILE* out) {
  if (prompt.empty()) return invalid_argument("the prompt is empty (no tokens)");
  Reply r;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  // Reuse the cached prefix: keep the common part (at most all but one prompt token, so the model runs at
  // least one position and produces fresh logits), forget the rest.
  size_t keep = std::min(common_prefix(prompt, gen.sequence()), prompt.size() - 1);
  if (keep < gen.sequence().size()) NXRT_RETURN_IF_ERROR(gen.rewind_to(keep));
  const std::vector<int64_t> fresh(prompt.begin() + static_cast<std::ptrdiff_t>(keep), prompt.end());
  const int64_t run_before = gen.stats().tokens_run;
  const double t0 = now_ms();
  NXRT_RETURN_IF_ERROR(gen.append_tokens(fresh));
  r.prefill_ms = gen.stats().last_run_ms;
  r.prefilled = gen.stats().tokens_run - run_before;

  genai::TokenizerStream stream = tok.create_stream();
  StopFilter filter(limits.stop_strings, out);
  r.finish = "length";
  double t_first = 0;
  for (int64_t k = 0; k < limits.max_new_tokens; ++k) {
    if (gen.is_done()) break;
    const double ts = now_ms();
    NXRT_RETURN_IF_ERROR(gen.generate_next_token());
    const int64_t id = gen.next_token();
    r.tokens.push_back(id);
    if (k == 0) {
      t_first = now_ms();
      r.ttft_ms = t_first - t0;
    } else {
      r.steps.push_back(now_ms() - ts);
    }
    if (!limits.ignore_eos && std::find(limits.eos_ids.begin(), limits.eos_ids.end(), id) != limits.eos_ids.end()) {
      r.finish = "eos";
      break;
    }
    NXRT_ASSIGN_OR_RETURN(std::string piece, stream.decode(static_cast<int32_t>(id)));
    if (!piece.empty() && filter.add(piece)) {
      r.finish = "stop";
      break;
    }
  }
  if (r.finish != "stop") {
    const std::string tail = stream.flush();
    if (!tail.empty() && filter.add(tail)) r.finish = "stop";
  }
  filter.finish();
  r.text = filter.text();
  r.decode_ms = r.tokens.size() > 1 ? now_ms() - t_first : 0;
  return r;
}

std::vector<int64_t> text_eos_ids(const genai::Model& model, const genai::Tokenizer& tok) {
  std::vector<int64_t> ids = model.config().eos_token_ids;
  for (int32_t id : tok.eos_token_ids()) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

std::string fixed3(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", std::round(x * 1000.0) / 1000.0);
  return buf;
}

std::string summary_line(const Reply& r) {
  const size_t n = r.tokens.size();
  std::string decode = n > 1 && r.decode_ms > 0 ? fixed3(static_cast<double>(n - 1) / (r.decode_ms / 1000.0)) : "n/a";
  std::string prefill = r.prefill_ms > 0 ? fixed3(static_cast<double>(r.prefilled) / (r.prefill_ms / 1000.0)) : "n/a";
  return "prompt_tokens " + std::to_string(r.prompt_tokens) + "  prefilled " + std::to_string(r.prefilled) +
         "  new_tokens " + std::to_string(n) + "  ttft " + fixed3(r.ttft_ms) + " ms  prefill " + prefill +
         " tok/s  decode " + decode + " tok/s  finish " + r.finish;
}

void usage_exit(const std::string& msg, const char* usage) {
  std::fprintf(stderr, "error: %s\n%s", msg.c_str(), usage);
  std::exit(2);
}

DataType kv_dtype_arg(const std::string& v, const char* usage) {
  if (v == "float16") return DataType::kFloat16;
  if (v == "float32") return DataType::kUndefined;
  usage_exit("--kv-dtype takes float16 or float32, got '" + v + "'", usage);
}

DataType weight_scales_arg(const std::string& v, const char* usage) {
  if (v == "float16") return DataType::kFloat16;
  if (v == "model") return DataType::kUndefined;
  usage_exit("--weight-scales takes float16 or model, got '" + v + "'", usage);
}

int64_t count_arg(const std::string& flag, const std::string& v, const char* usage) {
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 12) {
    usage_exit(flag + " needs a non-negative integer, got '" + v + "'", usage);
  }
  return std::stoll(v);
}

double real_arg(const std::string& flag, const std::string& v, const char* usage) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(d)) {
    usage_exit(flag + " needs a number, got '" + v + "'", usage);
  }
  return d;
}

int report_error(const Status& s) {
  std::string m = s.to_string();
  std::replace(m.begin(), m.end(), '\n', ' ');
  std::fprintf(stderr, "error: %s\n", m.c_str());
  return 1;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

Result<std::string> read_text(const std::string& path) {
  if (path == "-") {
    std::string s((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    return s;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace nxrt::cli
