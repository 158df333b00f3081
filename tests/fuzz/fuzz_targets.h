// The fuzz targets' bodies, one per input format nxrt parses. Each is linked into its libFuzzer
// executable (libfuzzer_main.cpp, `make fuzz-all`) and into the unit tests, which replay every file
// of tests/fuzz/corpus/<target>/ (the seeds and the inputs of past findings) through it.
//
// A body returns false when the input broke a contract the body checks beyond "no crash, no sanitizer
// report" (an error without a message, a round trip that does not reproduce its input, ...); the
// libFuzzer entry point traps on false so that the fuzzer records the input.
#pragma once
#include <cstddef>
#include <cstdint>

namespace nxrt::fuzz {

// ModelProto bytes: loaded with and without function expansion; what loads is written back and must
// load again to the same bytes.
bool model_reader(const uint8_t* data, size_t size);
// TensorProto / SequenceProto / OptionalProto / MapProto / SparseTensorProto bytes (a .pb test-data
// file), read as each of several expected types; what reads is written back and must read again to
// the same bytes.
bool value_pb(const uint8_t* data, size_t size);
// A Jinja chat template, parsed and rendered over a fixed conversation.
bool templates(const uint8_t* data, size_t size);
// tokenizer.json text, then (after the first NUL byte) text to encode; what loads encodes the text,
// decodes the ids, streams them, and decodes ids made from the text's bytes.
bool tokenizer(const uint8_t* data, size_t size);
// genai_config.json text.
bool genai_config(const uint8_t* data, size_t size);

}  // namespace nxrt::fuzz
