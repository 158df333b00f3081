// Counts heap allocations made by this process while a counter is armed: operator new in all its
// forms (replaced for the unit-test binary in alloc_counter.cpp) and tensor storage blocks.
#pragma once
#include <cstdint>

namespace nxrt::test {

// Allocations since the last reset (counted only between arm() and disarm()).
struct AllocCounter {
  static void arm();
  static void disarm();
  static uint64_t count();
};

}  // namespace nxrt::test
