// libFuzzer target (issue 10): the YAML config parser on arbitrary text. Bad input may only end
// in UserError, the one clear message; anything else (another exception, a crash, a sanitizer
// report) is a finding. tools/fuzz.sh builds and runs it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/check.h"
#include "harness/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const cnnbench::ConfigSchema schema = [] {
    cnnbench::ConfigSchema s;
    s.networks["resnet50"] = {};
    s.networks["inception_v3"] = {299, 75};
    s.aliases["resnet50"] = "resnet50";
    s.aliases["inceptionv3"] = "inception_v3";
    return s;
  }();
  try {
    cnnbench::parse_config_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz",
                                schema);
  } catch (const cnnbench::UserError&) {
  }
  return 0;
}
