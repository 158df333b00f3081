// Fault injection for tests: make the n-th Storage allocation from now fail.
//
// The hook sits in Storage::allocate and Storage::strings (src/ir/tensor.cpp), which every tensor,
// pooled buffer and kernel workspace comes from. A failing allocation throws AllocationError, as a
// real failure does, so a test can walk n over every allocation of a session's creation or run and
// check that each ends in an error Status, leaves nothing leaked, and leaves the session usable.
// Counting is process-wide: run the code under test on one thread (SessionOptions::threads = 1) to
// make n deterministic. Off (the default), the hook costs one relaxed atomic load per allocation.
#pragma once
#include <cstdint>

namespace nxrt::fault_injection {

// Arms the hook: the n-th allocation from now (1 = the next) fails. 0 disarms.
void inject_allocation_failure(uint64_t n);
// Whether the armed failure has happened since the last inject_allocation_failure call.
bool injected_allocation_failure_fired();

}  // namespace nxrt::fault_injection
