#include "harness/gpus.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/check.h"

namespace cnnbench {

namespace {

std::string squash(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_' && c != ' ') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string gib_text(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g GiB", g);
  return buf;
}

}  // namespace

GpuTable parse_gpu_table(const std::string& text, const std::string& source) {
  auto fail = [&](const std::string& why) -> GpuTable {
    throw UserError("GPU table " + source + ": " + why);
  };
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return fail(std::string("not YAML (") + e.what() + ")");
  }
  if (!root.IsMap()) return fail("expected a map with 'sizes' and 'cards'");
  GpuTable t;
  try {
    for (const auto& s : root["sizes"]) t.sizes.push_back(s.as<int>());
    for (const auto& c : root["cards"]) {
      GpuCard card{c["name"].as<std::string>(), c["memory_gib"].as<double>()};
      if (!(card.memory_gib > 0))
        return fail("card '" + card.name + "' has no positive memory_gib");
      for (const GpuCard& o : t.cards)
        if (squash(o.name) == squash(card.name)) return fail("card '" + card.name + "' twice");
      t.cards.push_back(card);
    }
  } catch (const YAML::Exception& e) {
    return fail(std::string("a card or size is malformed (") + e.what() + ")");
  }
  if (t.cards.empty()) return fail("no cards");
  if (t.sizes.empty()) return fail("no sizes");
  for (int s : t.sizes)
    if (s <= 0) return fail("size " + std::to_string(s) + " is not positive");
  return t;
}

GpuTable load_gpu_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read the GPU table " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_gpu_table(ss.str(), path);
}

MemoryLimit parse_memory_limit(const std::string& value, const GpuTable& table) {
  MemoryLimit m;
  // A number, optionally followed by g, gb or gib (spaces and case ignored; a sign kept).
  std::string v;
  for (char c : value)
    if (c != ' ') v += char(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string suffix : {"gib", "gb", "g"})
    if (v.size() > suffix.size() &&
        v.compare(v.size() - suffix.size(), suffix.size(), suffix) == 0) {
      v.resize(v.size() - suffix.size());
      break;
    }
  try {
    size_t used = 0;
    const double g = std::stod(v, &used);
    if (used == v.size() && std::isfinite(g)) {
      if (g <= 0) throw UserError("--memory-limit must be positive, not '" + value + "'");
      m.bytes = uint64_t(g * 1073741824.0);
      m.label = gib_text(g);
      return m;
    }
  } catch (const std::invalid_argument&) {
  } catch (const std::out_of_range&) {
  }
  for (const GpuCard& c : table.cards)
    if (squash(c.name) == squash(value)) {
      m.bytes = uint64_t(c.memory_gib * 1073741824.0);
      m.label = c.name + " (" + gib_text(c.memory_gib) + ")";
      return m;
    }
  std::string names;
  for (const GpuCard& c : table.cards) names += (names.empty() ? "" : ", ") + c.name;
  throw UserError("--memory-limit takes a size in GiB (e.g. 16) or a card name (" + names +
                  "), not '" + value + "'");
}

}  // namespace cnnbench
