#include "harness/safetensors.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "harness/check.h"

namespace cnnbench {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw UserError("safetensors file '" + source + "' " + problem + ".");
}

[[noreturn]] void fail_tensor(const std::string& source, const std::string& name,
                              const std::string& problem) {
  fail(source, "has tensor '" + name + "' " + problem);
}

// Bytes per element of every dtype of the format; 0 for an unknown one.
uint64_t element_size(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes{
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

template <typename T>
T load_le(const uint8_t* p) {  // the format and every supported host are little-endian
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bits_to_float(sign | 0x7F800000u | (mantissa << 13));  // inf, nan
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  return sign ? -magnitude : magnitude;
}

SafetensorInfo parse_entry(const std::string& source, const std::string& name, const json& e) {
  if (!e.is_object()) fail_tensor(source, name, "whose header entry is not a JSON object");
  auto dtype = e.find("dtype");
  auto shape = e.find("shape");
  auto offsets = e.find("data_offsets");
  if (dtype == e.end() || !dtype->is_string()) fail_tensor(source, name, "without a dtype string");
  if (shape == e.end() || !shape->is_array()) fail_tensor(source, name, "without a shape list");
  if (offsets == e.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    fail_tensor(source, name, "without data_offsets [begin, end] of two non-negative integers");

  SafetensorInfo info;
  info.dtype = dtype->get<std::string>();
  const uint64_t esize = element_size(info.dtype);
  if (esize == 0) fail_tensor(source, name, "of unknown dtype '" + info.dtype + "'");
  uint64_t numel = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer()) fail_tensor(source, name, "with a non-integer dimension in shape");
    if (!d.is_number_unsigned())
      fail_tensor(source, name, "with negative dimension " + d.dump() + " in shape");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > uint64_t(std::numeric_limits<int64_t>::max()) ||
        (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / esize / dim))
      fail_tensor(source, name, "with a shape too large to address");
    info.shape.push_back(static_cast<int64_t>(dim));
    numel *= dim;
  }
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.end < info.begin)
    fail_tensor(source, name, "whose data_offsets end before they begin " + offsets->dump());
  if (info.end - info.begin != numel * esize)
    fail_tensor(source, name,
                "of " + std::to_string(info.end - info.begin) + " bytes, but its shape " +
                    shape->dump() + " of " + info.dtype + " needs " +
                    std::to_string(numel * esize) + " bytes");
  return info;
}

}  // namespace

int64_t SafetensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::load(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) fail(path, "does not exist");
  if (!std::filesystem::is_regular_file(status)) fail(path, "is not a regular file");
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot be read: " + ec.message());
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, std::string("cannot be opened: ") + std::strerror(errno));
  std::vector<uint8_t> bytes(size);
  const size_t got = size ? std::fread(bytes.data(), 1, size, f) : 0;
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error || got != size) fail(path, "could not be read completely");
  return parse(std::move(bytes), path);
}

SafetensorsFile SafetensorsFile::parse(std::vector<uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, "is shorter than 8 bytes (" + std::to_string(bytes.size()) +
                     " bytes), so it has no header length");
  const uint64_t header_len = load_le<uint64_t>(bytes.data());
  if (header_len > bytes.size() - 8)
    fail(source, "declares a header of " + std::to_string(header_len) + " bytes, but only " +
                     std::to_string(bytes.size() - 8) + " bytes follow the length");
  const char* text = reinterpret_cast<const char*>(bytes.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::parse_error& e) {
    fail(source, "has a header that is not valid JSON (error at header byte " +
                     std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {  // a number out of range (found by tools/fuzz.sh)
    fail(source, std::string("has a header that cannot be read: ") + e.what());
  }
  if (!header.is_object()) fail(source, "has a header that is not a JSON object");

  SafetensorsFile file;
  file.source_ = source;
  file.data_offset_ = 8 + header_len;
  const uint64_t data_size = bytes.size() - file.data_offset_;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(source, "has a __metadata__ entry that is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail(source, "has __metadata__ key '" + key + "' whose value is not a string");
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    SafetensorInfo info = parse_entry(source, name, entry);
    if (info.end > data_size)
      fail_tensor(source, name,
                  "whose data_offsets [" + std::to_string(info.begin) + ", " +
                      std::to_string(info.end) + "] lie beyond the data section of " +
                      std::to_string(data_size) + " bytes");
    file.tensors_.emplace(name, std::move(info));
  }
  file.bytes_ = std::move(bytes);
  return file;
}

const SafetensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw UserError("tensor '" + name + "' is not in safetensors file '" + source_ + "' (it has " +
                    std::to_string(tensors_.size()) + " tensors).");
  return it->second;
}

std::vector<float> SafetensorsFile::to_float(const std::string& name) const {
  const SafetensorInfo& t = info(name);
  const uint8_t* p = bytes_.data() + data_offset_ + t.begin;
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    if (n) std::memcpy(out.data(), p, n * sizeof(float));
  } else if (t.dtype == "F16") {
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float(load_le<uint16_t>(p + 2 * i));
  } else if (t.dtype == "BF16") {
    for (size_t i = 0; i < n; ++i)
      out[i] = bits_to_float(uint32_t(load_le<uint16_t>(p + 2 * i)) << 16);
  } else if (t.dtype == "F64") {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load_le<double>(p + 8 * i));
  } else {
    throw UserError("tensor '" + name + "' in safetensors file '" + source_ + "' has dtype " +
                    t.dtype + ", which cannot be read as float (accepted: F32, F16, BF16, F64).");
  }
  return out;
}

std::vector<int64_t> SafetensorsFile::to_int64(const std::string& name) const {
  const SafetensorInfo& t = info(name);
  const uint8_t* p = bytes_.data() + data_offset_ + t.begin;
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<int64_t> out(n);
  if (t.dtype == "I64") {
    for (size_t i = 0; i < n; ++i) out[i] = int64_t(load_le<uint64_t>(p + 8 * i));
  } else if (t.dtype == "I32") {
    for (size_t i = 0; i < n; ++i) out[i] = int32_t(load_le<uint32_t>(p + 4 * i));
  } else if (t.dtype == "I16") {
    for (size_t i = 0; i < n; ++i) out[i] = int16_t(load_le<uint16_t>(p + 2 * i));
  } else if (t.dtype == "I8") {
    for (size_t i = 0; i < n; ++i) out[i] = int8_t(p[i]);
  } else if (t.dtype == "U8") {
    for (size_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    throw UserError("tensor '" + name + "' in safetensors file '" + source_ + "' has dtype " +
                    t.dtype +
                    ", which cannot be read as integers (accepted: I64, I32, I16, I8, U8).");
  }
  return out;
}

void save_safetensors(const std::string& path, const std::vector<SafetensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorOut& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw UserError("cannot write safetensors file '" + path + "': tensor name '" + t.name +
                      "' is reserved or given twice.");
    uint64_t numel = 1;
    bool valid = true;
    for (int64_t d : t.shape) {
      valid = valid && d >= 0 && (d == 0 || numel <= t.values.size() / uint64_t(d));
      numel *= valid ? uint64_t(d) : 1;
    }
    if (!valid || numel != t.values.size())
      throw UserError("cannot write safetensors file '" + path + "': tensor '" + t.name + "' has " +
                      std::to_string(t.values.size()) + " values but shape " +
                      json(t.shape).dump() + ".");
    const uint64_t bytes = numel * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    throw UserError("cannot write safetensors file '" + path + "': " + std::strerror(errno) + ".");
  const uint64_t len = text.size();  // little-endian on every supported host
  bool ok = std::fwrite(&len, 8, 1, f) == 1 && std::fwrite(text.data(), 1, len, f) == len;
  for (const SafetensorOut& t : tensors) {
    const size_t n = t.values.size();
    ok = ok && (n == 0 || std::fwrite(t.values.data(), sizeof(float), n, f) == n);
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw UserError("cannot write safetensors file '" + path + "': the write failed.");
}

}  // namespace cnnbench
