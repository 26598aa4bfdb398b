#include "harness/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "harness/check.h"

namespace cnnbench {
namespace {

const std::vector<std::string> kTrainKeys{"optimizer", "lr", "momentum", "weight_decay",
                                          "epoch_images"};
std::vector<std::string> with_train_keys(std::vector<std::string> keys) {
  keys.insert(keys.end(), kTrainKeys.begin(), kTrainKeys.end());
  return keys;
}
const std::vector<std::string> kTopKeys =
    with_train_keys({"seed", "repetitions", "min_time_s", "warmup_ms", "engine", "autotune_top_k",
                     "modes", "benchmarks"});
const std::vector<std::string> kEntryKeys = with_train_keys(
    {"network", "precisions", "batches", "input_size", "num_classes", "modes", "video_frames"});
const std::vector<std::string> kOptimizers{"sgd", "adam"};
const std::vector<std::string> kEngines{"heuristic", "autotune"};

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// How a node reads in a message: its text if it is a scalar, its kind otherwise.
std::string shown(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

class Parser {
 public:
  Parser(std::string source, const ConfigSchema& schema)
      : source_(std::move(source)), schema_(schema) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& problem) const {
    std::string where = "config '" + source_ + "'";
    if (at.IsDefined() && !at.Mark().is_null())
      where += " line " + std::to_string(at.Mark().line + 1);
    throw UserError(where + ": " + problem + (problem.back() == '?' ? "" : "."));
  }

  // The keys of map `node`, checked against `valid`; `what` names the map in messages.
  std::map<std::string, YAML::Node> keys(const YAML::Node& node,
                                         const std::vector<std::string>& valid,
                                         const std::string& what) const {
    std::map<std::string, YAML::Node> out;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) fail(kv.first, "a key " + what + " is not a plain word");
      const std::string key = kv.first.Scalar();
      if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
        const std::string near = nearest_word(key, valid);
        fail(kv.first, "unknown key '" + key + "' " + what +
                           (near.empty() ? " (valid keys: " + join(valid) + ")"
                                         : ", did you mean '" + near + "'?"));
      }
      if (!out.emplace(key, kv.second).second)
        fail(kv.first, "key '" + key + "' " + what + " is given twice");
    }
    return out;
  }

  // A decimal integer that fits an int.
  static bool to_int(const YAML::Node& n, long long& v) {
    if (!n.IsScalar() || n.Scalar().empty() ||
        n.Scalar().find_first_not_of("+-0123456789") != std::string::npos)
      return false;
    char* end = nullptr;
    errno = 0;
    v = std::strtoll(n.Scalar().c_str(), &end, 10);
    return *end == '\0' && errno == 0 && v >= std::numeric_limits<int>::min() &&
           v <= std::numeric_limits<int>::max();
  }

  int integer(const YAML::Node& n, const std::string& label, int min) const {
    long long v = 0;
    if (!to_int(n, v) || v < min)
      fail(n, label + " " + shown(n) + ", but it must be an integer >= " + std::to_string(min));
    return static_cast<int>(v);
  }

  double number(const YAML::Node& n, const std::string& label, bool zero_ok) const {
    if (n.IsScalar()) {
      const std::string& s = n.Scalar();
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0' && std::isfinite(v) && (v > 0 || (zero_ok && v == 0)))
        return v;
    }
    fail(n, label + " " + shown(n) + ", but it must be a number " + (zero_ok ? ">= 0" : "> 0"));
  }

  std::string word(const YAML::Node& n, const std::string& label,
                   const std::vector<std::string>& valid, const std::string& what) const {
    if (n.IsScalar() && std::find(valid.begin(), valid.end(), n.Scalar()) != valid.end())
      return n.Scalar();
    const std::string near = n.IsScalar() ? nearest_word(n.Scalar(), valid) : "";
    fail(n, label + " " + shown(n) + ", which is not a known " + what +
                (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; valid " + what +
                "s are " + join(valid));
  }

  // A network by canonical name or by any spelling the schema's aliases know.
  std::string network(const YAML::Node& n, const std::vector<std::string>& valid) const {
    if (n.IsScalar()) {
      std::string key;
      for (char c : n.Scalar())
        if (c != '-' && c != '_' && c != ' ')
          key += char(std::tolower(static_cast<unsigned char>(c)));
      auto it = schema_.aliases.find(key);
      if (it != schema_.aliases.end()) return it->second;
    }
    return word(n, "'network' is", valid, "network");
  }

  std::vector<std::string> words(const YAML::Node& n, const std::string& key,
                                 const std::vector<std::string>& valid,
                                 const std::string& what) const {
    if (!n.IsSequence() || n.size() == 0)
      fail(n, "'" + key + "' is " + shown(n) + ", but it must be a non-empty list of " + what +
                  "s from " + join(valid));
    std::vector<std::string> out;
    for (const YAML::Node& item : n) {
      out.push_back(word(item, "'" + key + "' has", valid, what));
      if (std::count(out.begin(), out.end(), out.back()) > 1)
        fail(item, "'" + key + "' lists " + what + " '" + out.back() + "' twice");
    }
    return out;
  }

  // The training settings of map `k` over `s`.
  TrainSettings train_settings(std::map<std::string, YAML::Node>& k, TrainSettings s) const {
    if (k.count("optimizer"))
      s.optimizer = word(k["optimizer"], "'optimizer' is", kOptimizers, "optimizer");
    if (k.count("lr")) s.lr = number(k["lr"], "'lr' is", false);
    if (k.count("momentum")) {
      const YAML::Node& m = k["momentum"];
      s.momentum = number(m, "'momentum' is", true);
      if (s.momentum >= 1)
        fail(m, "'momentum' is " + shown(m) + ", but it must be a number >= 0 and < 1");
    }
    if (k.count("weight_decay"))
      s.weight_decay = number(k["weight_decay"], "'weight_decay' is", true);
    if (k.count("epoch_images"))
      s.epoch_images = integer(k["epoch_images"], "'epoch_images' is", 1);
    if (s.optimizer == "adam" && k.count("momentum"))
      fail(k["momentum"],
           "'momentum' is for sgd, but 'optimizer' is adam (whose betas are 0.9, "
           "0.999)");
    return s;
  }

  BenchmarkEntry entry(const YAML::Node& n, size_t index, const std::vector<std::string>& modes,
                       const TrainSettings& train) const {
    const std::string what = "in benchmarks entry " + std::to_string(index + 1);
    if (!n.IsMap())
      fail(n, "benchmarks entry " + std::to_string(index + 1) + " is " + shown(n) +
                  ", but it must be a map with network, precisions and batches");
    auto k = keys(n, kEntryKeys, what);
    for (const char* required : {"network", "precisions", "batches"})
      if (!k.count(required))
        fail(n, "benchmarks entry " + std::to_string(index + 1) + " has no '" + required + "'");
    BenchmarkEntry e;
    std::vector<std::string> networks;
    for (const auto& kv : schema_.networks) networks.push_back(kv.first);
    e.network = network(k["network"], networks);
    e.precisions = words(k["precisions"], "precisions", schema_.precisions, "precision");
    const YAML::Node& batches = k["batches"];
    if (!batches.IsSequence() || batches.size() == 0)
      fail(batches,
           "'batches' is " + shown(batches) + ", but it must be a non-empty list of integers >= 1");
    for (const YAML::Node& b : batches) {
      e.batches.push_back(integer(b, "'batches' has", 1));
      if (std::count(e.batches.begin(), e.batches.end(), e.batches.back()) > 1)
        fail(b, "'batches' lists batch " + std::to_string(e.batches.back()) + " twice");
    }
    const NetworkLimits& limits = schema_.networks.at(e.network);
    e.input_size = limits.default_input_size;
    if (k.count("input_size")) {
      const YAML::Node& s = k["input_size"];
      long long v = 0;
      if (!to_int(s, v) || v < limits.min_input_size)
        fail(s, "'input_size' is " + shown(s) + ", but " + e.network +
                    " needs an integer input size of at least " +
                    std::to_string(limits.min_input_size));
      e.input_size = static_cast<int>(v);
    }
    e.num_classes = limits.default_classes;
    if (k.count("num_classes"))
      e.num_classes = int(integer(k["num_classes"], "'num_classes' is", 1));
    e.modes = k.count("modes") ? words(k["modes"], "modes", schema_.modes, "mode") : modes;
    const bool video = std::find(e.modes.begin(), e.modes.end(), "video") != e.modes.end();
    if (!limits.detects &&
        (video || std::find(e.modes.begin(), e.modes.end(), "detect") != e.modes.end()))
      fail(k.count("modes") ? k["modes"] : k["network"],
           e.network + " is not a detector: its modes (" + join(e.modes) +
               ") may not hold 'detect' or 'video'");
    if (k.count("video_frames")) {
      if (!video)
        fail(k["video_frames"], "'video_frames' is set " + what + ", but its modes (" +
                                    join(e.modes) + ") have no 'video'");
      e.video_frames = int(integer(k["video_frames"], "'video_frames' is", 1));
    }
    if (!limits.trains && e.trains())
      fail(
          k.count("modes") ? k["modes"] : k["network"],
          e.network + " is inference only: its modes (" + join(e.modes) + ") may not hold 'train'");
    e.train = train_settings(k, train);
    if (!e.trains()) {
      for (const std::string& key : kTrainKeys)
        if (k.count(key))
          fail(k[key], "'" + key + "' is set " + what + ", but its modes (" + join(e.modes) +
                           ") have no 'train'");
      e.train = TrainSettings{};
      return e;
    }
    const std::string entry_n = "benchmarks entry " + std::to_string(index + 1);
    if (e.train.optimizer.empty())
      fail(n,
           entry_n + " trains but no 'optimizer' is set (sgd or adam), here or at the top level");
    if (e.train.lr == 0)
      fail(n, entry_n +
                  " trains but no 'lr' is set (the learning rate, a number > 0), here or at " +
                  "the top level");
    if (e.train.optimizer == "adam") e.train.momentum = 0;  // a top-level default for sgd entries
    return e;
  }

  SweepConfig parse(const std::string& text) const {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      std::string where = e.mark.is_null()
                              ? ""
                              : "line " + std::to_string(e.mark.line + 1) + ", column " +
                                    std::to_string(e.mark.column + 1) + ": ";
      throw UserError("config '" + source_ + "' is not valid YAML (" + where + e.msg + ").");
    }
    const std::string needs = ": it needs a 'benchmarks' list";
    if (!root.IsDefined() || root.IsNull())
      throw UserError("config '" + source_ + "' is empty" + needs + ".");
    if (!root.IsMap()) fail(root, "the top level is " + shown(root) + ", not a map" + needs);
    auto k = keys(root, kTopKeys, "at the top level");
    SweepConfig c;
    c.source = source_;
    if (k.count("seed")) {
      const YAML::Node& s = k["seed"];
      const bool digits = s.IsScalar() && !s.Scalar().empty() &&
                          s.Scalar().find_first_not_of("0123456789") == std::string::npos;
      errno = 0;
      if (digits) c.seed = std::strtoull(s.Scalar().c_str(), nullptr, 10);
      if (!digits || errno == ERANGE)
        fail(s, "'seed' is " + shown(s) + ", but it must be a non-negative integer");
    }
    if (k.count("repetitions")) c.repetitions = integer(k["repetitions"], "'repetitions' is", 1);
    if (k.count("min_time_s")) c.min_time_s = number(k["min_time_s"], "'min_time_s' is", false);
    if (k.count("warmup_ms")) c.warmup_ms = number(k["warmup_ms"], "'warmup_ms' is", true);
    if (k.count("engine")) c.engine = word(k["engine"], "'engine' is", kEngines, "engine");
    if (k.count("autotune_top_k"))
      c.autotune_top_k = integer(k["autotune_top_k"], "'autotune_top_k' is", 1);
    if (k.count("modes")) c.modes = words(k["modes"], "modes", schema_.modes, "mode");
    const TrainSettings train = train_settings(k, TrainSettings{});
    if (!k.count("benchmarks"))
      throw UserError("config '" + source_ + "' has no 'benchmarks' list of networks to run.");
    const YAML::Node& list = k["benchmarks"];
    if (!list.IsSequence() || list.size() == 0)
      fail(list, "'benchmarks' is " + shown(list) + ", but it must be a non-empty list of entries");
    for (const YAML::Node& item : list)
      c.benchmarks.push_back(entry(item, c.benchmarks.size(), c.modes, train));
    return c;
  }

 private:
  std::string source_;
  const ConfigSchema& schema_;
};

}  // namespace

bool BenchmarkEntry::trains() const {
  return std::find(modes.begin(), modes.end(), "train") != modes.end();
}

SweepConfig parse_config_text(const std::string& text, const std::string& source,
                              const ConfigSchema& schema) {
  return Parser(source, schema).parse(text);
}

SweepConfig parse_config_file(const std::string& path, const ConfigSchema& schema) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UserError(
        "config file '" + path + "' " +
        (std::filesystem::exists(path, ec) ? "is not a regular file." : "does not exist."));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in)
    throw UserError("config file '" + path + "' cannot be read: " + std::strerror(errno) + ".");
  return parse_config_text(text.str(), path, schema);
}

std::string nearest_word(const std::string& word, const std::vector<std::string>& choices) {
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  const std::string a = lower(word);
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& choice : choices) {
    const std::string b = lower(choice);
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
        diagonal = up;
      }
    }
    // Close enough to be a typo: two edits, or a third of the longer word.
    const size_t limit = std::max<size_t>(2, std::max(a.size(), b.size()) / 3);
    if (row[b.size()] <= limit && row[b.size()] < best_distance) {
      best = choice;
      best_distance = row[b.size()];
    }
  }
  return best;
}

}  // namespace cnnbench
