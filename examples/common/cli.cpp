#include "common/cli.h"

#include <charconv>
#include <filesystem>
#include <iostream>
#include <system_error>

namespace examples {

std::string executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string demo_package_dir(const std::string& package_at_version) {
  std::string key = package_at_version;
  for (char& c : key) {
    if (c == '@' || c == '/') c = '_';
  }
  // The examples live in <build>/examples/, the package cache in <build>/real-models/.
  return (std::filesystem::path(executable_dir()).parent_path() / "real-models" / key / "package").string();
}

bool parse_int(const std::string& text, int* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool parse_float(const std::string& text, float* out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool Args::next(std::string* arg) {
  if (i_ + 1 >= argc_) return false;
  *arg = argv_[++i_];
  return true;
}

bool Args::value(std::string* out) { return next(out); }

bool Args::int_value(int* out, int min, int max) {
  std::string text;
  return value(&text) && parse_int(text, out) && *out >= min && *out <= max;
}

bool Args::float_value(float* out, float min, float max) {
  std::string text;
  return value(&text) && parse_float(text, out) && *out >= min && *out <= max;
}

int Args::help() const {
  std::cout << usage_;
  return 0;
}

int Args::usage_error(const std::string& message) const {
  std::cerr << "error: " << message << "\n" << usage_;
  return 2;
}

int fail(const nxrt::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

}  // namespace examples
