#include "harness/config.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/check.h"
#include "harness/session.h"
#include "kernels/conv.h"
#include "networks/compile.h"
#include "networks/registry.h"

namespace cnnbench {
namespace {

using testing::HasSubstr;
using testing::Not;

ConfigSchema schema() {
  ConfigSchema s;
  s.networks = {{"resnet50", {224, 32}},
                {"resnet152", {224, 32}},
                {"yolor_csp_x", {640, 64, 80, false, true}}};
  return s;
}

SweepConfig parse(const std::string& text) {
  return parse_config_text(text, "sweep.yaml", schema());
}

// The UserError message of parsing `text` ("" if it parses).
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A one-entry config with `extra` lines added to the entry.
std::string entry(const std::string& extra, const std::string& batches = "[1, 8]") {
  return "benchmarks:\n  - network: resnet50\n    precisions: [fp16]\n    batches: " + batches +
         "\n" + extra;
}

TEST(Config, FullConfig) {
  SweepConfig c = parse(R"(
seed: 12345678901234
repetitions: 7
min_time_s: 0.5
warmup_ms: 0
engine: heuristic
autotune_top_k: 3
modes: [eager, graph]
benchmarks:
  - network: resnet50
    precisions: [fp16, bf16, tf32, fp32]
    batches: [1, 2, 4, 256]
    input_size: 160
  - network: resnet152
    precisions: [fp32]
    batches: [32]
    modes: [graph]
)");
  EXPECT_EQ(c.source, "sweep.yaml");
  EXPECT_EQ(c.seed, 12345678901234u);
  EXPECT_EQ(c.repetitions, 7);
  EXPECT_DOUBLE_EQ(c.min_time_s, 0.5);
  EXPECT_DOUBLE_EQ(c.warmup_ms, 0);
  EXPECT_EQ(c.engine, "heuristic");
  EXPECT_EQ(c.autotune_top_k, 3);
  EXPECT_EQ(c.modes, (std::vector<std::string>{"eager", "graph"}));
  ASSERT_EQ(c.benchmarks.size(), 2u);
  const BenchmarkEntry& a = c.benchmarks[0];
  EXPECT_EQ(a.network, "resnet50");
  EXPECT_EQ(a.precisions, (std::vector<std::string>{"fp16", "bf16", "tf32", "fp32"}));
  EXPECT_EQ(a.batches, (std::vector<int>{1, 2, 4, 256}));
  EXPECT_EQ(a.input_size, 160);
  EXPECT_EQ(a.modes, (std::vector<std::string>{"eager", "graph"}));  // the top-level default
  const BenchmarkEntry& b = c.benchmarks[1];
  EXPECT_EQ(b.network, "resnet152");
  EXPECT_EQ(b.batches, (std::vector<int>{32}));
  EXPECT_EQ(b.input_size, 224);
  EXPECT_EQ(b.modes, (std::vector<std::string>{"graph"}));  // overridden by the entry
}

TEST(Config, Defaults) {
  SweepConfig c = parse(entry("    modes: [eager]\n"));
  EXPECT_EQ(c.seed, 0u);
  EXPECT_EQ(c.repetitions, 5);
  EXPECT_DOUBLE_EQ(c.min_time_s, 0.2);
  EXPECT_DOUBLE_EQ(c.warmup_ms, 50);
  EXPECT_EQ(c.engine, "autotune");
  EXPECT_EQ(c.autotune_top_k, 8);
  EXPECT_EQ(c.modes, (std::vector<std::string>{"graph"}));
  ASSERT_EQ(c.benchmarks.size(), 1u);
  EXPECT_EQ(c.benchmarks[0].input_size, 224);
  EXPECT_EQ(c.benchmarks[0].modes, (std::vector<std::string>{"eager"}));
  EXPECT_EQ(parse(entry("")).benchmarks[0].modes, (std::vector<std::string>{"graph"}));
}

TEST(Config, ParseFile) {
  const std::string path = testing::TempDir() + "cnnbench_config_test.yaml";
  std::ofstream(path) << "seed: 3\n" << entry("");
  SweepConfig c = parse_config_file(path, schema());
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.seed, 3u);

  const std::string missing = testing::TempDir() + "cnnbench_no_such_config.yaml";
  try {
    parse_config_file(missing, schema());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
  }
  EXPECT_THROW(parse_config_file(testing::TempDir(), schema()), UserError);
}

TEST(Config, MalformedAndEmpty) {
  std::string msg = error_of("benchmarks: [\n  - x\n");
  EXPECT_THAT(msg, HasSubstr("sweep.yaml"));
  EXPECT_THAT(msg, HasSubstr("not valid YAML"));
  EXPECT_THAT(msg, HasSubstr("line "));
  EXPECT_THAT(msg, HasSubstr("column "));
  for (const char* text : {"", "# only a comment\n", "~\n"}) {
    msg = error_of(text);
    EXPECT_THAT(msg, HasSubstr("sweep.yaml"));
    EXPECT_THAT(msg, HasSubstr("is empty: it needs a 'benchmarks' list"));
  }
  EXPECT_THAT(error_of("- resnet50\n"), HasSubstr("not a map"));
  EXPECT_THAT(error_of("just text\n"), HasSubstr("it needs a 'benchmarks' list"));
  EXPECT_THAT(error_of("seed: 1\n"), HasSubstr("no 'benchmarks'"));
  EXPECT_THAT(error_of("benchmarks: []\n"), HasSubstr("non-empty list"));
  EXPECT_THAT(error_of("benchmarks:\n"), HasSubstr("'benchmarks' is nothing"));
  EXPECT_THAT(error_of("benchmarks: [resnet50]\n"), HasSubstr("benchmarks entry 1 is 'resnet50'"));
}

TEST(Config, UnknownKeys) {
  std::string msg = error_of(entry("    batchs: [2]\n"));
  EXPECT_THAT(msg, HasSubstr("'sweep.yaml' line 5"));
  EXPECT_THAT(msg, HasSubstr("unknown key 'batchs'"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'batches'?"));

  msg = error_of("sed: 4\n" + entry(""));
  EXPECT_THAT(msg, HasSubstr("unknown key 'sed' at the top level"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'seed'?"));

  msg = error_of("colour: blue\n" + entry(""));
  EXPECT_THAT(msg, HasSubstr("'colour'"));
  EXPECT_THAT(msg, Not(HasSubstr("did you mean")));
  EXPECT_THAT(msg, HasSubstr("valid keys: seed, repetitions"));

  EXPECT_THAT(error_of("seed: 1\nseed: 2\n" + entry("")),
              HasSubstr("'seed' at the top level is given twice"));
  EXPECT_THAT(error_of("benchmarks:\n  - precisions: [fp16]\n    batches: [1]\n"),
              HasSubstr("has no 'network'"));
  EXPECT_THAT(error_of("benchmarks:\n  - network: resnet50\n    batches: [1]\n"),
              HasSubstr("has no 'precisions'"));
}

TEST(Config, BadValues) {
  std::string msg =
      error_of("benchmarks:\n  - network: resnet5\n    precisions: [fp16]\n    batches: [1]\n");
  EXPECT_THAT(msg, HasSubstr("'resnet5'"));
  EXPECT_THAT(msg, HasSubstr("resnet152, resnet50"));

  msg = error_of(
      "benchmarks:\n  - network: resnet50\n    precisions: [fp16, fp8]\n    batches: [1]\n");
  EXPECT_THAT(msg, HasSubstr("'fp8'"));
  EXPECT_THAT(msg, HasSubstr("fp32, tf32, fp16, bf16"));

  msg = error_of(entry("    modes: [graphs]\n"));
  EXPECT_THAT(msg, HasSubstr("'graphs'"));
  EXPECT_THAT(msg, HasSubstr("graph, eager"));
  EXPECT_THAT(error_of("modes: []\n" + entry("")), HasSubstr("non-empty list of modes"));

  msg = error_of("engine: fast\n" + entry(""));
  EXPECT_THAT(msg, HasSubstr("'fast'"));
  EXPECT_THAT(msg, HasSubstr("heuristic, autotune"));
}

TEST(Config, Batches) {
  for (const char* bad : {"0", "-3", "2.5", "x", "99999999999"}) {
    const std::string msg = error_of(entry("", std::string("[1, ") + bad + "]"));
    EXPECT_THAT(msg, HasSubstr(std::string("'") + bad + "'")) << bad;
    EXPECT_THAT(msg, HasSubstr("integer >= 1")) << bad;
    EXPECT_THAT(msg, HasSubstr("'sweep.yaml' line 4")) << bad;
  }
  EXPECT_THAT(error_of(entry("", "[]")), HasSubstr("non-empty list of integers"));
  EXPECT_THAT(error_of(entry("", "8")), HasSubstr("non-empty list of integers"));
  EXPECT_THAT(error_of(entry("", "[1, 8, 1]")), HasSubstr("batch 1 twice"));
  EXPECT_THAT(error_of("benchmarks:\n  - network: resnet50\n    precisions: [fp16, fp16]\n"
                       "    batches: [1]\n"),
              HasSubstr("precision 'fp16' twice"));
}

TEST(Config, InputSize) {
  std::string msg = error_of(entry("    input_size: 16\n"));
  EXPECT_THAT(msg, HasSubstr("'16'"));
  EXPECT_THAT(msg, HasSubstr("at least 32"));
  EXPECT_THAT(error_of(entry("    input_size: big\n")), HasSubstr("'big'"));
  EXPECT_THAT(error_of(entry("    input_size: 100.5\n")), HasSubstr("at least 32"));
  EXPECT_EQ(parse(entry("    input_size: 32\n")).benchmarks[0].input_size, 32);
}

TEST(Config, Numbers) {
  const std::pair<const char*, const char*> bad[] = {
      {"repetitions: 0", "integer >= 1"},    {"repetitions: 1.5", "integer >= 1"},
      {"autotune_top_k: 0", "integer >= 1"}, {"min_time_s: 0", "number > 0"},
      {"min_time_s: -1", "number > 0"},      {"min_time_s: soon", "number > 0"},
      {"warmup_ms: -1", "number >= 0"},      {"seed: -1", "non-negative integer"},
      {"seed: 1.5", "non-negative integer"}, {"seed: [1]", "'seed' is a list"},
  };
  for (const auto& [line, expected] : bad) {
    const std::string msg = error_of(std::string(line) + "\n" + entry(""));
    EXPECT_THAT(msg, HasSubstr("'sweep.yaml' line 1")) << line;
    EXPECT_THAT(msg, HasSubstr(expected)) << line;
  }
  EXPECT_DOUBLE_EQ(parse("warmup_ms: 0\nmin_time_s: 1e-3\n" + entry("")).min_time_s, 1e-3);
}

// modes: [train] and the training step's settings: top-level defaults, entry overrides.
TEST(Config, Train) {
  SweepConfig c = parse(R"(
optimizer: sgd
lr: 0.1
momentum: 0.9
weight_decay: 1e-4
benchmarks:
  - network: resnet50
    precisions: [fp16]
    batches: [32, 64]
    modes: [train, graph]
  - network: resnet152
    precisions: [fp16]
    batches: [32]
    modes: [train]
    optimizer: adam
    lr: 1e-3
    epoch_images: 100000
  - network: resnet50
    precisions: [fp32]
    batches: [1]
)");
  ASSERT_EQ(c.benchmarks.size(), 3u);
  const BenchmarkEntry& a = c.benchmarks[0];
  EXPECT_TRUE(a.trains());
  EXPECT_EQ(a.modes, (std::vector<std::string>{"train", "graph"}));
  EXPECT_EQ(a.train.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(a.train.lr, 0.1);
  EXPECT_DOUBLE_EQ(a.train.momentum, 0.9);
  EXPECT_DOUBLE_EQ(a.train.weight_decay, 1e-4);
  EXPECT_EQ(a.train.epoch_images, 1281167);  // ImageNet-1k by default
  const BenchmarkEntry& b = c.benchmarks[1];
  EXPECT_EQ(b.train.optimizer, "adam");
  EXPECT_DOUBLE_EQ(b.train.lr, 1e-3);
  EXPECT_DOUBLE_EQ(b.train.momentum, 0);  // the top-level momentum is sgd's
  EXPECT_DOUBLE_EQ(b.train.weight_decay, 1e-4);
  EXPECT_EQ(b.train.epoch_images, 100000);
  // An inference entry carries no training settings, whatever the defaults.
  EXPECT_FALSE(c.benchmarks[2].trains());
  EXPECT_TRUE(c.benchmarks[2].train.optimizer.empty());
}

TEST(Config, TrainBadValues) {
  const std::string train = "    modes: [train]\n    optimizer: sgd\n";
  const std::pair<std::string, std::vector<std::string>> bad[] = {
      {"    modes: [train]\n    optimizer: rmsprop\n    lr: 0.1\n",
       {"'optimizer' is 'rmsprop'", "sgd, adam"}},
      {train + "    lr: 0\n", {"'lr' is '0'", "number > 0"}},
      {train + "    lr: fast\n", {"'lr' is 'fast'", "number > 0"}},
      {train + "    lr: 0.1\n    momentum: 1\n", {"'momentum' is '1'", ">= 0 and < 1"}},
      {train + "    lr: 0.1\n    momentum: -0.5\n", {"'momentum' is '-0.5'", ">= 0"}},
      {train + "    lr: 0.1\n    weight_decay: -1e-4\n", {"'weight_decay' is '-1e-4'", ">= 0"}},
      {train + "    lr: 0.1\n    epoch_images: 0\n", {"'epoch_images' is '0'", "integer >= 1"}},
      {train + "    lr: 0.1\n    epoch_images: 1.5e5\n", {"'epoch_images'", "integer >= 1"}},
      {"    modes: [train]\n    lr: 0.1\n", {"benchmarks entry 1 trains", "no 'optimizer'"}},
      {train, {"benchmarks entry 1 trains", "no 'lr'"}},
      {"    modes: [train]\n    optimizer: adam\n    lr: 0.1\n    momentum: 0.9\n",
       {"'momentum' is for sgd", "adam"}},
      {"    lr: 0.1\n", {"'lr' is set in benchmarks entry 1", "(graph) have no 'train'"}},
      {train + "    lr: 0.1\n    optimiser: adam\n", {"unknown key 'optimiser'", "'optimizer'"}},
  };
  for (const auto& [extra, expected] : bad) {
    const std::string msg = error_of(entry(extra));
    EXPECT_THAT(msg, HasSubstr("'sweep.yaml' line")) << extra;
    for (const std::string& e : expected) EXPECT_THAT(msg, HasSubstr(e)) << extra;
  }
  // At the top level: momentum with adam, and a bad value, name their key.
  EXPECT_THAT(error_of("optimizer: adam\nmomentum: 0.9\n" + entry("")),
              HasSubstr("'sweep.yaml' line 2: 'momentum' is for sgd"));
  EXPECT_THAT(error_of("lr: -1\n" + entry("")), HasSubstr("'lr' is '-1'"));
  // Top-level settings that no entry uses are defaults, not errors.
  EXPECT_FALSE(parse("optimizer: sgd\nlr: 0.1\n" + entry("")).benchmarks[0].trains());
}

// The detector's sweep: the article's 1280 in every precision, and 640; 80 classes.
TEST(Config, YolorConfigOfTheRepository) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig y = parse_config_file(dir + "yolor.yaml", config_schema());
  std::set<std::string> precisions_at_1280;
  for (const BenchmarkEntry& b : y.benchmarks) {
    EXPECT_EQ(b.network, "yolor_csp_x");
    EXPECT_EQ(b.num_classes, 80);
    EXPECT_FALSE(b.trains());
    if (b.input_size == 1280) precisions_at_1280.insert(b.precisions.begin(), b.precisions.end());
  }
  EXPECT_EQ(precisions_at_1280, (std::set<std::string>{"fp32", "tf32", "fp16", "bf16"}));
}

// The generators' sweep: config-f at 1024 and paper256 at 256, graph mode, one class.
TEST(Config, Stylegan2ConfigOfTheRepository) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig c = parse_config_file(dir + "stylegan2.yaml", config_schema());
  ASSERT_FALSE(c.benchmarks.empty());
  for (const BenchmarkEntry& b : c.benchmarks) {
    EXPECT_EQ(b.num_classes, 1);
    EXPECT_EQ(b.input_size, b.network == "stylegan2_f" ? 1024 : 256) << b.network;
    EXPECT_EQ(b.modes, std::vector<std::string>{"graph"});
  }
  // Training is not there yet: refused by name.
  EXPECT_THROW(parse_config_text("benchmarks:\n  - {network: stylegan2_f, precisions: [fp16], "
                                 "batches: [8], modes: [train]}\n",
                                 "s.yaml", config_schema()),
               UserError);
}

TEST(Config, Stylegan3ConfigOfTheRepository) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig c = parse_config_file(dir + "stylegan3.yaml", config_schema());
  ASSERT_FALSE(c.benchmarks.empty());
  bool at_256 = false;
  for (const BenchmarkEntry& b : c.benchmarks) {
    EXPECT_EQ(b.network, "stylegan3_t");
    EXPECT_EQ(b.num_classes, 1);
    EXPECT_TRUE(b.input_size == 1024 || b.input_size == 256) << b.input_size;
    at_256 = at_256 || b.input_size == 256;
    EXPECT_EQ(b.modes, std::vector<std::string>{"graph"});
  }
  EXPECT_TRUE(at_256);  // the article's resolution
  // A resolution that is no power of two names the problem.
  EXPECT_THROW(build_network("stylegan3_t", 300), UserError);
}

TEST(Config, StyleganXlConfigOfTheRepository) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig c = parse_config_file(dir + "stylegan_xl.yaml", config_schema());
  ASSERT_FALSE(c.benchmarks.empty());
  for (const BenchmarkEntry& b : c.benchmarks) {
    EXPECT_EQ(b.network, "stylegan_xl");
    EXPECT_EQ(b.num_classes, 1000);  // the one-hot's width
    EXPECT_TRUE(b.input_size == 1024 || b.input_size == 256) << b.input_size;
  }
  // More classes than the embedding's rows: named.
  EXPECT_THROW(build_network("stylegan_xl", 256, 1001), UserError);
}

// The training configs of the repository parse against the real registry.
TEST(Config, TrainingConfigsOfTheRepository) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig tiny = parse_config_file(dir + "train_tiny_imagenet.yaml", config_schema());
  ASSERT_EQ(tiny.benchmarks.size(), 1u);
  const BenchmarkEntry& e = tiny.benchmarks[0];
  EXPECT_EQ(e.network, "efficientnet_b0");
  EXPECT_EQ(e.input_size, 64);
  EXPECT_EQ(e.num_classes, 200);
  EXPECT_EQ(e.modes, std::vector<std::string>{"train"});
  EXPECT_EQ(e.precisions, std::vector<std::string>{"fp16"});
  EXPECT_EQ(e.batches, (std::vector<int>{64, 256}));
  EXPECT_EQ(e.train.optimizer, "adam");
  EXPECT_DOUBLE_EQ(e.train.lr, 0.001);
  EXPECT_EQ(e.train.epoch_images, 100000);

  const SweepConfig t = parse_config_file(dir + "train.yaml", config_schema());
  ASSERT_EQ(t.benchmarks.size(), 2u);
  EXPECT_EQ(t.benchmarks[0].network, "resnet50");
  EXPECT_EQ(t.benchmarks[1].network, "efficientnet_b0");
  // ResNet-50 in the precisions the step trains so far and in fp16, the issue's target.
  EXPECT_EQ(t.benchmarks[0].precisions, (std::vector<std::string>{"tf32", "fp32", "fp16"}));
  EXPECT_EQ(t.benchmarks[1].precisions, std::vector<std::string>{"fp16"});
  for (const BenchmarkEntry& b : t.benchmarks) {
    EXPECT_TRUE(b.trains());
    EXPECT_EQ(b.batches, (std::vector<int>{32, 64, 256}));
    EXPECT_EQ(b.train.optimizer, "sgd");
    EXPECT_DOUBLE_EQ(b.train.lr, 0.1);
    EXPECT_DOUBLE_EQ(b.train.momentum, 0.9);
    EXPECT_DOUBLE_EQ(b.train.weight_decay, 1e-4);
  }
}

// The zoo's speed sweep times every registered classifier in fp16 at the batches issue 3
// compares (the detector has configs/yolor.yaml, the generators configs/stylegan2.yaml).
TEST(Config, ZooSpeedConfigCoversEveryNetwork) {
  const std::string dir = std::string(CNNBENCH_TEST_DATA) + "/../../configs/";
  const SweepConfig z = parse_config_file(dir + "zoo_speed.yaml", config_schema());
  for (const NetworkInfo& n : network_registry()) {
    const Graph g = build_network(n.name);
    if (g.node(g.output()).out.h * g.node(g.output()).out.w != 1) continue;  // not a classifier
    bool found = false;
    for (const BenchmarkEntry& b : z.benchmarks) {
      if (b.network != n.name) continue;
      found = true;
      EXPECT_EQ(b.precisions, std::vector<std::string>{"fp16"}) << n.name;
      for (int batch : {1, 8, 32, 128, 256})
        EXPECT_NE(std::find(b.batches.begin(), b.batches.end(), batch), b.batches.end())
            << n.name << " batch " << batch;
    }
    EXPECT_TRUE(found) << n.name << " is missing from zoo_speed.yaml";
  }
}

// Issue 9's targets: the table's six inference cases and the two training ones, all fp16, in one
// config (configs/issue9_targets.yaml), so one sweep gives every figure the issue asks for.
TEST(Config, TheIssue9TargetsConfigHoldsEveryTarget) {
  const SweepConfig c = parse_config_file(
      std::string(CNNBENCH_TEST_DATA) + "/../../configs/issue9_targets.yaml", config_schema());
  EXPECT_EQ(c.engine, "autotune");
  std::set<std::string> cases;
  for (const BenchmarkEntry& b : c.benchmarks) {
    EXPECT_EQ(b.precisions, std::vector<std::string>{"fp16"}) << b.network;
    ASSERT_EQ(b.modes.size(), 1u) << b.network;
    for (int batch : b.batches)
      cases.insert(b.modes[0] + " " + b.network + " " + std::to_string(batch));
    if (b.trains()) {
      EXPECT_EQ(b.train.optimizer, "sgd");
      EXPECT_DOUBLE_EQ(b.train.lr, 0.1);
    }
  }
  const std::set<std::string> want{"graph resnet50 1",       "graph resnet50 32",
                                   "graph resnet50 256",     "graph efficientnet_b0 256",
                                   "graph inception_v3 256", "graph vgg16 256",
                                   "train resnet50 256",     "train efficientnet_b0 256"};
  EXPECT_EQ(cases, want);
}

TEST(Config, NearestWord) {
  const std::vector<std::string> keys{"seed", "repetitions", "warmup_ms", "batches"};
  EXPECT_EQ(nearest_word("batchs", keys), "batches");
  EXPECT_EQ(nearest_word("Seed", keys), "seed");
  EXPECT_EQ(nearest_word("repetition", keys), "repetitions");
  EXPECT_EQ(nearest_word("warmup", keys), "warmup_ms");
  EXPECT_EQ(nearest_word("zzzz", keys), "");
  EXPECT_EQ(nearest_word("batches", {}), "");
}

// The max-batch config: inference and training entries, the article's tiny-imagenet case among
// them.
TEST(Config, TheMaxBatchConfigParses) {
  const SweepConfig c = parse_config_file(
      std::string(CNNBENCH_TEST_DATA) + "/../../configs/max_batch.yaml", config_schema());
  ASSERT_EQ(c.benchmarks.size(), 4u);
  bool tiny = false;
  for (const BenchmarkEntry& e : c.benchmarks)
    if (e.network == "efficientnet_b0" && e.input_size == 64) {
      tiny = true;
      EXPECT_EQ(e.num_classes, 200);
      EXPECT_EQ(e.train.optimizer, "adam");
      EXPECT_EQ(e.modes, std::vector<std::string>{"train"});
    }
  EXPECT_TRUE(tiny);
}

// The seed's training sweep parses: three networks, train mode, SGD.
TEST(Config, TheMxnetTrainingConfigParses) {
  const SweepConfig c = parse_config_file(
      std::string(CNNBENCH_TEST_DATA) + "/../../configs/mxnet_train_imagenet.yaml",
      config_schema());
  ASSERT_EQ(c.benchmarks.size(), 3u);
  for (const BenchmarkEntry& e : c.benchmarks) {
    EXPECT_TRUE(e.trains()) << e.network;
    EXPECT_EQ(e.train.optimizer, "sgd");
  }
  EXPECT_EQ(c.benchmarks[0].batches.back(), 256);  // AlexNet: the seed's batch column x 8
}

// A detector: its class count is its own (80) where the entry leaves it out, and it is inference
// only: an entry (or the sweep's default modes) asking it to train is refused, by name.
TEST(Config, InferenceOnlyNetworkAndItsClassCount) {
  const SweepConfig c = parse(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [1, 8], modes: [graph]}
  - {network: resnet50, precisions: [fp16], batches: [1]}
)");
  EXPECT_EQ(c.benchmarks[0].num_classes, 80);
  EXPECT_EQ(c.benchmarks[0].input_size, 640);
  EXPECT_EQ(c.benchmarks[1].num_classes, 1000);
  std::string msg = error_of(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [1], modes: [graph, train]}
)");
  EXPECT_THAT(msg, HasSubstr("yolor_csp_x is inference only"));
  EXPECT_THAT(msg, HasSubstr("line 3"));
  msg = error_of(R"(
modes: [train]
optimizer: sgd
lr: 0.1
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [1]}
)");
  EXPECT_THAT(msg, HasSubstr("yolor_csp_x is inference only"));
  // Mode detect: a detector's only.
  EXPECT_EQ(parse(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [1], modes: [graph, detect]}
)")
                .benchmarks[0]
                .modes,
            (std::vector<std::string>{"graph", "detect"}));
  EXPECT_THAT(error_of(R"(
benchmarks:
  - {network: resnet50, precisions: [fp16], batches: [1], modes: [detect]}
)"),
              HasSubstr("resnet50 is not a detector"));
  // Mode video: its frame count, only where the entry has that mode.
  const SweepConfig v = parse(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [8], modes: [video], video_frames: 240}
  - {network: yolor_csp_x, precisions: [fp16], batches: [8], modes: [video]}
)");
  EXPECT_EQ(v.benchmarks[0].video_frames, 240);
  EXPECT_EQ(v.benchmarks[1].video_frames, 1000);
  EXPECT_THAT(error_of(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [8], modes: [detect], video_frames: 9}
)"),
              HasSubstr("'video_frames' is set in benchmarks entry 1, but its modes (detect)"));
  EXPECT_THAT(error_of(R"(
benchmarks:
  - {network: yolor_csp_x, precisions: [fp16], batches: [8], modes: [video], video_frames: 0}
)"),
              HasSubstr("'video_frames' is '0', but it must be an integer >= 1"));
  EXPECT_THAT(error_of(R"(
benchmarks:
  - {network: resnet50, precisions: [fp16], batches: [1], modes: [video]}
)"),
              HasSubstr("resnet50 is not a detector"));
}

}  // namespace
}  // namespace cnnbench

TEST(EngineExclusion, NamesTakeAnyKnobsButNotLongerNumbers) {
  using namespace cnnbench;
  const std::vector<std::string> ex = parse_engine_list("eng4,eng8{k24=0,k2=1}");
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[1], "eng8{k24=0,k2=1}");  // the comma inside the knobs does not split it
  EXPECT_TRUE(engine_excluded("eng4{k24=23}+rtc", ex));
  EXPECT_TRUE(engine_excluded("eng4", ex));
  EXPECT_FALSE(engine_excluded("eng41{k2=5,k13=1}", ex));
  EXPECT_TRUE(engine_excluded("eng8{k24=0,k2=1}", ex));
  EXPECT_FALSE(engine_excluded("eng8{k24=1}", ex));
  EXPECT_TRUE(parse_engine_list("").empty());
  EXPECT_THROW(parse_engine_list("eng4,cudnn"), UserError);
  EXPECT_THROW(parse_engine_list("nondeterminstic"), UserError);  // a typo is not a class
}

// --deterministic: the class "nondeterministic" excludes every engine cuDNN marks so, and only
// those; the layer table's notes count them.
TEST(EngineExclusion, DeterministicExcludesEnginesMarkedNondeterministic) {
  using namespace cnnbench;
  const std::vector<std::string> ex = parse_engine_list("nondeterministic");
  ASSERT_EQ(ex, std::vector<std::string>{kNondeterministic});
  EngineInfo marked, plain;
  marked.global_index = plain.global_index = 7;
  marked.numerical_notes = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE,
                            CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
  plain.numerical_notes = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
  EXPECT_TRUE(engine_excluded(marked, ex));
  EXPECT_FALSE(engine_excluded(plain, ex));
  EXPECT_FALSE(engine_excluded(marked, parse_engine_list("eng4")));
  EXPECT_TRUE(engine_excluded(plain, parse_engine_list("eng7")));
  EXPECT_EQ(marked.notes(), "tensor_core,nondeterministic");
  std::vector<LayerRecord> layers(3);
  layers[0].engine_notes = marked.notes();
  layers[1].engine_notes = plain.notes();
  layers[2].engine_notes = "nondeterministic_like";  // a whole name, not a prefix
  EXPECT_EQ(nondeterministic_layers(layers), 1);
  EXPECT_THROW(parse_engine_list("eng"), UserError);
}

TEST(BuildThreads, WholeNumbersFromOneTo64) {
  using namespace cnnbench;
  EXPECT_EQ(parse_build_threads("1"), 1);
  EXPECT_EQ(parse_build_threads("16"), 16);
  EXPECT_THROW(parse_build_threads("0"), UserError);
  EXPECT_THROW(parse_build_threads("65"), UserError);
  EXPECT_THROW(parse_build_threads("4x"), UserError);
  EXPECT_THROW(parse_build_threads(""), UserError);
  EXPECT_DOUBLE_EQ(parse_graph_tune_us("0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_graph_tune_us("100"), 100.0);
  EXPECT_DOUBLE_EQ(parse_graph_tune_us("37.5"), 37.5);
  EXPECT_THROW(parse_graph_tune_us("-1"), UserError);
  EXPECT_THROW(parse_graph_tune_us("1e9"), UserError);
  EXPECT_THROW(parse_graph_tune_us("fast"), UserError);
  EXPECT_THROW(parse_graph_tune_us(""), UserError);
  EXPECT_GE(default_build_threads(), 1);
  EXPECT_LE(default_build_threads(), 16);
}

TEST(CandidateQuota, AutotuneTakesModeAsTopKPlusHalfAsManyOnlyModeBOffers) {
  using namespace cnnbench;
  // The order engine_candidates sees: A's list, then B's (tags A did not offer), then fallback.
  auto take = [](CandidateQuota q, int a, int b, int fallback) {
    std::vector<std::string> got;
    for (auto [source, n] : {std::pair<const char*, int>{"A", a}, {"B", b}, {"fallback", fallback}})
      for (int i = 0; i < n; ++i)
        if (q.wants(source)) q.took(source), got.push_back(source);
    return got;
  };
  auto count = [](const std::vector<std::string>& v, const char* s) {
    return int(std::count(v.begin(), v.end(), s));
  };
  // Autotune, top_k 8: A's eight, four of B's, no fallback.
  std::vector<std::string> got = take(CandidateQuota(8, true), 20, 10, 5);
  EXPECT_EQ(count(got, "A"), 8);
  EXPECT_EQ(count(got, "B"), 4);
  EXPECT_EQ(count(got, "fallback"), 0);
  // A offers three that build: B's four, and the fallback list fills A's share to eight.
  got = take(CandidateQuota(8, true), 3, 10, 9);
  EXPECT_EQ(count(got, "A"), 3);
  EXPECT_EQ(count(got, "B"), 4);
  EXPECT_EQ(count(got, "fallback"), 5);
  // --mode_b=false: as before, A and fallback alone.
  got = take(CandidateQuota(8, false), 20, 10, 5);
  EXPECT_EQ(count(got, "B"), 0);
  EXPECT_EQ(got.size(), 8u);
  // Heuristics (one candidate): A's first; B is never asked.
  got = take(CandidateQuota(1, true), 5, 5, 5);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "A");
  EXPECT_EQ(CandidateQuota(1, true).extra, 0u);
  got = take(CandidateQuota(1, true), 0, 5, 5);  // A builds nothing: fallback's first
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "fallback");
}

TEST(PaddedChannels, NarrowInputsWidenToWhatTensorCoreEnginesTake) {
  using namespace cnnbench;
  EXPECT_EQ(padded_channels(3, 1, Precision::FP16), 8);  // the image stems
  EXPECT_EQ(padded_channels(3, 1, Precision::BF16), 8);
  EXPECT_EQ(padded_channels(3, 1, Precision::TF32), 4);
  EXPECT_EQ(padded_channels(3, 1, Precision::FP32), 0);  // CUDA-core engines: more work, no gain
  EXPECT_EQ(padded_channels(8, 1, Precision::FP16), 0);  // already what the engines take
  EXPECT_EQ(padded_channels(4, 1, Precision::TF32), 0);
  EXPECT_EQ(padded_channels(51, 1, Precision::FP16), 0);  // wide inputs are left alone
  EXPECT_EQ(padded_channels(3, 3, Precision::FP16), 0);   // grouped (depthwise) convs too
}
