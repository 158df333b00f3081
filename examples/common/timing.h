// Wall-clock stage timing for the examples' --timing output.
#pragma once
#include <chrono>

namespace examples {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace examples
