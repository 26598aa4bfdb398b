#include "harness/cli.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "harness/check.h"

namespace cnnbench {

int run_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const UserError& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

long parse_count(const std::string& s, const char* flag) {
  try {
    size_t used = 0;
    const long v = std::stol(s, &used);
    if (used == s.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw UserError(std::string("--") + flag + " must be a non-negative integer, not '" + s + "'");
}

double parse_number(const std::string& s, const char* flag) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw UserError(std::string("--") + flag + " must be a number, not '" + s + "'");
}

bool take_flag(int& i, int argc, char** argv, const std::string& name, std::string* value) {
  const std::string arg = argv[i];
  const std::string eq = "--" + name + "=";
  if (arg.compare(0, eq.size(), eq) == 0) {
    if (value)
      *value = arg.substr(eq.size());
    else
      throw UserError("flag --" + name + " takes no value");
    return true;
  }
  if (arg != "--" + name) return false;
  if (!value) return true;
  if (i + 1 >= argc) throw UserError("flag --" + name + " needs a value");
  *value = argv[++i];
  return true;
}

}  // namespace cnnbench
