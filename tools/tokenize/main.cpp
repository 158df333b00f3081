// nxrt_tokenize: encode / decode with a Hugging Face tokenizer.json, compare with reference ids written
// by tests/tokenizer/reference.js (tokenizers.js), and measure encode speed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "genai/json.h"
#include "genai/tokenizer.h"

using nxrt::genai::Json;
using nxrt::genai::Tokenizer;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage:\n"
               "  nxrt_tokenize encode TOKENIZER [TEXT|-] [--no-special]   ids as a JSON array (stdin with -)\n"
               "  nxrt_tokenize decode TOKENIZER ID... [--skip-special]     text\n"
               "  nxrt_tokenize check TOKENIZER CASES.json                  compare with reference.js output\n"
               "  nxrt_tokenize bench TOKENIZER FILE [SECONDS]              encode speed in MB/s\n"
               "TOKENIZER: a tokenizer.json file or a directory holding one.\n");
  return 2;
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = std::move(ss).str();
  return true;
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + "]";
}

// A short printable excerpt of a test text for messages.
std::string excerpt(const std::string& s) {
  Json j = Json::string(s.size() > 80 ? s.substr(0, 80) + "..." : s);
  return j.dump();
}

int cmd_check(const Tokenizer& tok, const std::string& cases_path) {
  auto doc = nxrt::genai::parse_json_file(cases_path);
  if (!doc.ok()) {
    std::fprintf(stderr, "error: %s\n", doc.status().to_string().c_str());
    return 1;
  }
  const Json* cases = doc->find("cases");
  if (!cases || !cases->is_array()) {
    std::fprintf(stderr, "error: %s has no 'cases' array\n", cases_path.c_str());
    return 1;
  }
  size_t n = 0, ids_ok = 0, decode_ok = 0, ref_decode_ok = 0, stream_ok = 0, shown = 0;
  for (const Json& c : cases->as_array()) {
    ++n;
    const std::string& text = c.find("text") ? c.find("text")->as_string() : std::string();
    bool special = c.get_bool("add_special_tokens", true);
    std::vector<int32_t> want;
    if (const Json* w = c.find("ids")) {
      for (const Json& x : w->as_array()) want.push_back(static_cast<int32_t>(x.as_int()));
    }
    auto got = tok.encode(text, special);
    if (!got.ok()) {
      std::fprintf(stderr, "case %zu %s: encode failed: %s\n", n, excerpt(text).c_str(),
                   got.status().to_string().c_str());
      continue;
    }
    if (*got == want) {
      ++ids_ok;
    } else if (shown++ < 10) {
      std::fprintf(stderr, "case %zu %s (add_special_tokens=%d):\n  want %s\n  got  %s\n", n, excerpt(text).c_str(),
                   special, ids_json(want).c_str(), ids_json(*got).c_str());
    }
    // decode(encode(x)) == x (x after the normalizer, e.g. NFC) without the post-processor's tokens.
    const Json* rt = c.find("roundtrip");
    const std::string& expect_back = rt && rt->is_string() ? rt->as_string() : text;
    auto plain = tok.encode(text, false);
    auto back = plain.ok() ? tok.decode(*plain) : nxrt::Result<std::string>(plain.status());
    if (back.ok() && *back == expect_back) {
      ++decode_ok;
    } else if (shown++ < 10) {
      std::fprintf(stderr, "case %zu %s: decode(encode(x)) = %s\n", n, excerpt(text).c_str(),
                   back.ok() ? excerpt(*back).c_str() : back.status().to_string().c_str());
    }
    // Reference decode of the reference ids.
    auto full = tok.decode(want);
    if (const Json* d = c.find("decoded"); d && d->is_string()) {
      if (full.ok() && *full == d->as_string()) {
        ++ref_decode_ok;
      } else if (shown++ < 10) {
        std::fprintf(stderr, "case %zu: decode differs from reference: %s vs %s\n", n,
                     full.ok() ? excerpt(*full).c_str() : full.status().to_string().c_str(),
                     excerpt(d->as_string()).c_str());
      }
    } else {
      ++ref_decode_ok;
    }
    // Streaming decode == full decode.
    auto stream = tok.create_stream();
    std::string streamed;
    bool stream_err = false;
    for (int32_t id : want) {
      auto piece = stream.step(id);
      if (!piece.ok()) {
        stream_err = true;
        break;
      }
      streamed += *piece;
    }
    streamed += stream.flush();
    if (!stream_err && full.ok() && streamed == *full) {
      ++stream_ok;
    } else if (shown++ < 10) {
      std::fprintf(stderr, "case %zu: streamed decode %s != full decode\n", n, excerpt(streamed).c_str());
    }
  }
  std::printf("ids identical: %zu/%zu, decode(encode(x))==x: %zu/%zu, decode==reference decode: %zu/%zu, "
              "stream==decode: %zu/%zu\n",
              ids_ok, n, decode_ok, n, ref_decode_ok, n, stream_ok, n);
  return ids_ok == n && decode_ok == n && ref_decode_ok == n && stream_ok == n ? 0 : 1;
}

int cmd_bench(const Tokenizer& tok, const std::string& path, double seconds) {
  std::string text;
  if (!read_file(path, &text)) {
    std::fprintf(stderr, "error: cannot read %s\n", path.c_str());
    return 1;
  }
  // Encode line by line (typical prompt sizes) and the file as one text.
  std::vector<std::string> lines;
  {
    std::istringstream ss(text);
    std::string line;
    while (std::getline(ss, line)) lines.push_back(line);
  }
  auto run = [&](bool whole, const char* label) {
    using clock = std::chrono::steady_clock;
    size_t bytes = 0, tokens = 0, iters = 0;
    auto start = clock::now();
    double elapsed = 0;
    while (elapsed < seconds || iters == 0) {
      if (whole) {
        auto ids = tok.encode(text, false);
        if (ids.ok()) tokens += ids->size();
        bytes += text.size();
      } else {
        for (const std::string& l : lines) {
          auto ids = tok.encode(l, false);
          if (ids.ok()) tokens += ids->size();
          bytes += l.size();
        }
      }
      ++iters;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    }
    std::printf("%-14s %8.2f MB/s  %10.0f tokens/s  (%zu passes, %.1f s)\n", label, bytes / elapsed / 1e6,
                tokens / elapsed, iters, elapsed);
  };
  if (text.size() >= (1u << 20)) {
    // One pass over the whole file with the word cache still empty (the tokenizer was just loaded);
    // on a large file only, so that one-time set-up (JIT stack, ICU data) does not dominate.
    auto start = std::chrono::steady_clock::now();
    auto ids = tok.encode(text, false);
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-14s %8.2f MB/s  %10.0f tokens/s  (1 pass, %.3f s, %zu bytes)\n", "cold, 1 pass:", text.size() / el / 1e6,
                ids.ok() ? ids->size() / el : 0.0, el, text.size());
  }
  run(false, "per line:");
  run(true, "whole file:");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string cmd = argv[1];
  auto t0 = std::chrono::steady_clock::now();
  auto tok = Tokenizer::load(argv[2]);
  if (!tok.ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (cmd == "encode") {
    bool special = true;
    std::string text;
    bool have_text = false;
    for (int i = 3; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--no-special") {
        special = false;
      } else if (a == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        have_text = true;
      } else {
        text = a;
        have_text = true;
      }
    }
    if (!have_text) return usage();
    auto ids = tok->encode(text, special);
    if (!ids.ok()) {
      std::fprintf(stderr, "error: %s\n", ids.status().to_string().c_str());
      return 1;
    }
    std::printf("%s\n", ids_json(*ids).c_str());
    return 0;
  }
  if (cmd == "decode") {
    std::vector<int32_t> ids;
    bool skip = false;
    for (int i = 3; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--skip-special") {
        skip = true;
      } else {
        ids.push_back(static_cast<int32_t>(std::strtol(a.c_str(), nullptr, 10)));
      }
    }
    auto text = tok->decode(ids, skip);
    if (!text.ok()) {
      std::fprintf(stderr, "error: %s\n", text.status().to_string().c_str());
      return 1;
    }
    std::printf("%s\n", text->c_str());
    return 0;
  }
  if (cmd == "check") {
    if (argc < 4) return usage();
    std::printf("loaded %s in %.0f ms (vocab %zu)\n", argv[2], load_s * 1e3, tok->vocab_size());
    return cmd_check(*tok, argv[3]);
  }
  if (cmd == "bench") {
    if (argc < 4) return usage();
    std::printf("loaded %s in %.0f ms (vocab %zu)\n", argv[2], load_s * 1e3, tok->vocab_size());
    return cmd_bench(*tok, argv[3], argc > 4 ? std::atof(argv[4]) : 2.0);
  }
  return usage();
}
