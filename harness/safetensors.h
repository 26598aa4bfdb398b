// Reading and writing .safetensors files (https://github.com/huggingface/safetensors format):
// 8-byte little-endian header length, a JSON header, then the raw little-endian tensor bytes.
//
// Every problem with a file (missing, truncated, corrupt header, offsets out of range, a tensor
// that is not there, a dtype that cannot be read as float) throws UserError with one sentence
// that names the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnbench {

struct SafetensorInfo {
  std::string dtype;           // as in the header: "F32", "F16", "BF16", "F64", "I64", ...
  std::vector<int64_t> shape;  // [] for a scalar
  uint64_t begin = 0;          // byte offsets into the data section
  uint64_t end = 0;
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Reads the whole file. Throws UserError naming `path` and the problem.
  static SafetensorsFile load(const std::string& path);
  // Parses an in-memory image of a file; `source` names it in messages.
  static SafetensorsFile parse(std::vector<uint8_t> bytes, const std::string& source);

  const std::string& source() const { return source_; }
  // Tensors by name (sorted); "__metadata__" is not a tensor and is kept apart.
  const std::map<std::string, SafetensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const SafetensorInfo& info(const std::string& name) const;  // UserError if absent

  // The tensor's values as float32, converted from F32, F16, BF16 or F64.
  // UserError if absent or of another dtype.
  std::vector<float> to_float(const std::string& name) const;
  // The tensor's values as int64, from I64, I32, I16, I8 or U8 (class labels).
  // UserError if absent or of another dtype.
  std::vector<int64_t> to_int64(const std::string& name) const;

 private:
  std::string source_;
  std::vector<uint8_t> bytes_;
  uint64_t data_offset_ = 0;
  std::map<std::string, SafetensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct SafetensorOut {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // written as F32
};

// Writes F32 tensors (and optional string metadata). Throws UserError if the file cannot be written
// or a tensor's values do not match its shape.
void save_safetensors(const std::string& path, const std::vector<SafetensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace cnnbench
