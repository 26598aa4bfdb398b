// libFuzzer target (issue 10): the .safetensors reader on arbitrary bytes, then every tensor it
// accepts read as floats. Bad input may only end in UserError; anything else is a finding.
// tools/fuzz.sh builds and runs it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/check.h"
#include "harness/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cnnbench::SafetensorsFile f =
        cnnbench::SafetensorsFile::parse(std::vector<uint8_t>(data, data + size), "fuzz");
    for (const auto& [name, info] : f.tensors()) {
      (void)info;
      try {
        (void)f.to_float(name);
      } catch (const cnnbench::UserError&) {  // not a float dtype: as integers
        (void)f.to_int64(name);
      }
    }
  } catch (const cnnbench::UserError&) {
  }
  return 0;
}
