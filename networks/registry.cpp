#include "networks/registry.h"

#include <cctype>
#include <cstdio>

#include "harness/check.h"
#include "networks/resnet.h"
#include "networks/zoo.h"

namespace cnnbench {

namespace {

template <int kDepth, bool kBn>
Graph vgg_of(int size, int classes) {
  return vgg(kDepth, kBn, size, classes);
}
template <int kVariant>
Graph efficientnet_of(int size, int classes) {
  return efficientnet(kVariant, size, classes);
}
Graph inception_v3_inference(int size, int classes) {
  return inception_v3(size, classes, false);
}
Graph inception_v3_training(int size, int classes) {
  return inception_v3(size, classes, true);
}
Graph resnet50_of(int size, int classes) {
  return build_resnet("resnet50", {3, 4, 6, 3}, size, classes);
}
Graph resnet152_of(int size, int classes) {
  return build_resnet("resnet152", {3, 8, 36, 3}, size, classes);
}
Graph yolor_inference(int size, int classes) {
  return yolor_csp_x(size, classes, true);
}
Graph yolor_reference(int size, int classes) {
  return yolor_csp_x(size, classes, false);
}
// StyleGAN2's generators: the input size is the resolution; there are no classes (1).
template <int kChannelBase>
Graph stylegan2_of(int size, int classes) {
  if (classes != 1)
    throw UserError("stylegan2: the generator is unconditional; num_classes must be 1, not " +
                    std::to_string(classes));
  return stylegan2_generator(size, kChannelBase, 8);
}
// StyleGAN3-T: the resolution is the input size, unconditional.
Graph stylegan3_t_of(int size, int classes) {
  if (classes != 1)
    throw UserError("stylegan3: the generator is unconditional; num_classes must be 1, not " +
                    std::to_string(classes));
  return stylegan3_generator(size);
}
// StyleGAN-XL: the resolution is the input size (16 to 1024), the classes the one-hot's width.
Graph stylegan_xl_of(int size, int classes) {
  return stylegan_xl_generator(size, 10, 7, 16, classes);
}
void yolor_prior(HostWeights& w) {
  yolor_head_prior(w, 80);
}

// "ResNet-50" -> "resnet50".
std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_' && c != ' ') out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::vector<NetworkInfo>& network_registry() {
  // Minimum input sizes: torchvision's min_size metadata where it has one (AlexNet 63, VGG and
  // ResNet 32, Inception-v3 75; EfficientNet: 32, like the other stride-32 designs); for the
  // MXNet symbols the smallest square input every layer keeps non-empty (the test builds each).
  static const std::vector<NetworkInfo> registry = {
      {"alexnet", {}, "torchvision alexnet (one weird trick)", {224, 63}, &alexnet, {}},
      {"alexnet_lrn",
       {"alexnet-mxnet", "alexnet_original"},
       "MXNet symbols/alexnet.py (LRN, 96 filters, no groups)",
       {227, 51},
       &alexnet_lrn,
       {}},
      {"vgg16", {}, "torchvision vgg16", {224, 32}, &vgg_of<16, false>, {}},
      {"vgg16_bn", {}, "torchvision vgg16_bn", {224, 32}, &vgg_of<16, true>, {}},
      {"vgg19", {}, "torchvision vgg19", {224, 32}, &vgg_of<19, false>, {}},
      {"vgg19_bn", {}, "torchvision vgg19_bn", {224, 32}, &vgg_of<19, true>, {}},
      {"inception_bn",
       {"bn-inception", "inception-bn-mxnet"},
       "MXNet symbols/inception-bn.py",
       {224, 205},
       &inception_bn,
       {}},
      {"inception_v3",
       {},
       "torchvision inception_v3 (no AuxLogits, no transform_input)",
       {299, 75},
       &inception_v3_inference,
       {"AuxLogits."},
       &inception_v3_training},
      {"resnet50", {}, "torchvision resnet50 (v1.5)", {224, 32}, &resnet50_of, {}},
      {"resnet152", {}, "torchvision resnet152 (v1.5)", {224, 32}, &resnet152_of, {}},
      {"efficientnet_b0", {}, "torchvision efficientnet_b0", {224, 32}, &efficientnet_of<0>, {}},
      {"efficientnet_b1", {}, "torchvision efficientnet_b1", {240, 32}, &efficientnet_of<1>, {}},
      {"efficientnet_b2", {}, "torchvision efficientnet_b2", {260, 32}, &efficientnet_of<2>, {}},
      {"efficientnet_b3", {}, "torchvision efficientnet_b3", {300, 32}, &efficientnet_of<3>, {}},
      {"efficientnet_b4", {}, "torchvision efficientnet_b4", {380, 32}, &efficientnet_of<4>, {}},
      {"efficientnet_b5", {}, "torchvision efficientnet_b5", {456, 32}, &efficientnet_of<5>, {}},
      {"efficientnet_b6", {}, "torchvision efficientnet_b6", {528, 32}, &efficientnet_of<6>, {}},
      {"efficientnet_b7", {}, "torchvision efficientnet_b7", {600, 32}, &efficientnet_of<7>, {}},
      // Inference only, 80 classes, square inputs that are multiples of 32; the implicit layers
      // folded into the heads' 1x1 convs. Output 0 is the stride-8 head, outputs 1 and 2 the
      // stride-16 and stride-32 ones (raw: before the YOLO decode).
      {"yolor_csp_x",
       {"yolor", "yolor-csp-x"},
       "WongKinYiu/yolor cfg/yolor_csp_x.cfg (implicits folded into the heads)",
       {640, 64, 80, false, true},
       &yolor_inference,
       {},
       nullptr,
       &yolor_reference,
       &fold_yolor_implicits,
       &yolor_prior},
      // Generation: z (512 x 1 x 1) in, the image out; the input size is the resolution (a power
      // of two). Inference only; weights as NVlabs' state_dict names them.
      {"stylegan2_f",
       {"stylegan2", "stylegan2-config-f"},
       "NVlabs stylegan2-ada-pytorch, config-f (channel_base 32768, 8 mapping layers)",
       {1024, 4, 1, false, false},
       &stylegan2_of<32768>,
       {}},
      {"stylegan2_paper256",
       {},
       "NVlabs stylegan2-ada-pytorch, paper256 (channel_base 16384, 8 mapping layers)",
       {256, 4, 1, false, false},
       &stylegan2_of<16384>,
       {}},
      // The alias-free generator (mapping depth 2): 1024 by default; the article trains at 256.
      {"stylegan3_t",
       {"stylegan3", "stylegan3-t"},
       "NVlabs stylegan3, config stylegan3-t (channel_base 32768, channel_max 512, 2 mapping "
       "layers)",
       {1024, 16, 1, false, false},
       &stylegan3_t_of,
       {},
       nullptr,
       nullptr,
       nullptr,
       &stylegan3_random_buffers},
      // Class-conditional: the input is z (64) then the one-hot class (num_classes, 1,000 by
      // default), 1 x 1. The stem (16 px, syn_layers 10, as the README's examples) grown by
      // SuperresGenerator stages of 7 head layers (up factor 2) to the input size.
      {"stylegan_xl",
       {"stylegan-xl"},
       "autonomousvision/stylegan_xl, stylegan3-t (cbase 65536, cmax 1024, z 64), 16 px stem of "
       "10 layers, 7-layer heads",
       {1024, 16, 1000, false, false},
       &stylegan_xl_of,
       {},
       nullptr,
       nullptr,
       nullptr,
       &stylegan3_random_buffers},
  };
  return registry;
}

const NetworkInfo& find_network(const std::string& name) {
  const std::string key = normalized(name);
  std::string valid;
  for (const NetworkInfo& n : network_registry()) {
    if (normalized(n.name) == key) return n;
    for (const std::string& a : n.aliases)
      if (normalized(a) == key) return n;
    valid += (valid.empty() ? "" : ", ") + n.name;
  }
  throw UserError("unknown network '" + name + "': valid networks are " + valid +
                  " (case, '-' and '_' do not matter: resnet-50 is resnet50)");
}

namespace {
const NetworkInfo& checked(const std::string& name, int& input_size, int& num_classes) {
  const NetworkInfo& info = find_network(name);
  if (input_size == 0) input_size = info.limits.default_input_size;
  if (num_classes == 0) num_classes = info.limits.default_classes;
  if (input_size < info.limits.min_input_size)
    throw UserError("input size " + std::to_string(input_size) + " is too small for " + info.name +
                    ": the minimum is " + std::to_string(info.limits.min_input_size));
  if (num_classes < 1)
    throw UserError("num_classes " + std::to_string(num_classes) + " for " + info.name +
                    " must be at least 1");
  return info;
}
}  // namespace

Graph build_network(const std::string& name, int input_size, int num_classes) {
  return checked(name, input_size, num_classes).build(input_size, num_classes);
}

Graph build_training_network(const std::string& name, int input_size, int num_classes) {
  const NetworkInfo& info = checked(name, input_size, num_classes);
  if (!info.limits.trains)
    throw UserError(info.name + " is inference only: it has no training step");
  return (info.build_training ? info.build_training : info.build)(input_size, num_classes);
}

HostWeights network_random_weights(const std::string& name, int input_size, int num_classes,
                                   uint64_t seed) {
  const NetworkInfo& info = checked(name, input_size, num_classes);
  const Graph g =
      (info.build_reference ? info.build_reference : info.build)(input_size, num_classes);
  HostWeights w = random_weights(g, seed);
  if (info.random_prior) info.random_prior(w);
  return info.fold ? info.fold(w) : w;
}

HostWeights network_file_weights(const std::string& name, int input_size, int num_classes,
                                 const std::string& path) {
  const NetworkInfo& info = checked(name, input_size, num_classes);
  if (info.fold)
    return info.fold(load_weights(info.build_reference(input_size, num_classes), path,
                                  info.training_only_prefixes));
  return load_weights(info.build(input_size, num_classes), path, info.training_only_prefixes);
}

ConfigSchema config_schema() {
  ConfigSchema schema;
  for (const NetworkInfo& n : network_registry()) {
    schema.networks[n.name] = n.limits;
    schema.aliases[normalized(n.name)] = n.name;
    for (const std::string& a : n.aliases) schema.aliases[normalized(a)] = n.name;
  }
  return schema;
}

std::string network_table() {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-19s %6s %14s %9s  %s\n", "network", "input", "parameters",
                "GMACs", "definition");
  out += line;
  for (const NetworkInfo& n : network_registry()) {
    const Graph g = n.build(n.limits.default_input_size, n.limits.default_classes);
    std::snprintf(line, sizeof line, "%-19s %6d %14lld %9.3f  %s\n", n.name.c_str(),
                  n.limits.default_input_size, static_cast<long long>(g.num_parameters()),
                  double(g.macs()) / 1e9, n.description.c_str());
    out += line;
  }
  return out;
}

}  // namespace cnnbench
