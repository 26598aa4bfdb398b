// Command-line plumbing the binaries share, host-only (no CUDA), so the launcher links it too.
#pragma once

#include <string>

namespace cnnbench {

// main() of the binaries: runs `body`; a UserError is one line on stderr and exit status 2, any
// other error (a library's) one line and exit status 1.
int run_main(const char* program, int (*body)(int, char**), int argc, char** argv);

// A flag's non-negative whole number ("--batch must be a non-negative integer, not 'x'").
long parse_count(const std::string& s, const char* flag);

// A flag's finite number ("--lr must be a number, not 'fast'").
double parse_number(const std::string& s, const char* flag);

// Named-flag parsing shared by the binaries: "--name=value" or "--name value"; value nullptr: a
// switch that takes no value.
bool take_flag(int& i, int argc, char** argv, const std::string& name, std::string* value);

}  // namespace cnnbench
