// A read-only (copy-on-write) memory mapping of a whole file, shared by the tensors that point into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nxrt/status.h"

namespace nxrt::onnx {

class MappedFile {
 public:
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint8_t* mutable_data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace nxrt::onnx
