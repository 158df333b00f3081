// Small helpers shared by the example programs' command lines.
#pragma once
#include <string>

#include "nxrt/status.h"

namespace examples {

// The folder holding the running executable (from /proc/self/exe), or "." when it cannot be read.
std::string executable_dir();

// Where `make demo` (scripts/demo.sh) unpacks npm package PACKAGE@VERSION relative to the examples'
// build folder: <build>/real-models/<package@version with '@' and '/' as '_'>/package.
std::string demo_package_dir(const std::string& package_at_version);

// Parses a whole decimal integer or number; false when `text` is not one.
bool parse_int(const std::string& text, int* out);
bool parse_float(const std::string& text, float* out);

// Walks argv: `for (std::string arg; args.next(&arg);)`, taking an option's value with value().
class Args {
 public:
  Args(int argc, char** argv, const char* usage) : argc_(argc), argv_(argv), usage_(usage) {}
  bool next(std::string* arg);
  // The argument after the current option; false when there is none.
  bool value(std::string* out);
  // The same as a number within [min, max]; false when missing or not such a number.
  bool int_value(int* out, int min, int max);
  bool float_value(float* out, float min, float max);
  // Prints the usage (exit code 0), or "error: MESSAGE" and the usage (exit code 2).
  int help() const;
  int usage_error(const std::string& message) const;

 private:
  int argc_;
  char** argv_;
  const char* usage_;
  int i_ = 0;
};

// Prints "error: MESSAGE" on stderr; returns the exit code for a failed run, 1.
int fail(const nxrt::Status& status);

}  // namespace examples
