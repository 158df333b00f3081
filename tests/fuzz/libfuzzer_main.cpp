// The libFuzzer entry point of one fuzz target: NXRT_FUZZ_BODY names its body (fuzz_targets.h), set by
// CMake per executable. A body that reports a broken contract is a finding: trap, so libFuzzer saves
// the input.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!nxrt::fuzz::NXRT_FUZZ_BODY(data, size)) __builtin_trap();
  return 0;
}
