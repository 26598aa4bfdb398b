#include "networks/weights.h"

#include <cmath>
#include <set>

#include "harness/check.h"
#include "harness/hash.h"
#include "harness/safetensors.h"

namespace cnnbench {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

uint64_t random_stream_state(uint64_t seed, const std::string& name) {
  return seed * 0x2545F4914F6CDD1Dull ^ fnv1a(name.data(), name.size());
}

std::vector<float> random_uniform(uint64_t seed, const std::string& name, size_t count, float lo,
                                  float hi) {
  uint64_t state = random_stream_state(seed, name);
  std::vector<float> v(count);
  for (float& x : v) {
    const double u = double(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
    x = float(lo + (hi - lo) * u);
  }
  return v;
}

HostWeights random_weights(const Graph& g, uint64_t seed) {
  HostWeights w;
  for (const Node& n : g.nodes()) {
    for (int pi : n.params) {
      const ParamSpec& p = g.params()[pi];
      if (p.integer) continue;
      const size_t count = size_t(p.numel());
      float lo = -1, hi = 1;
      if (n.kind == OpKind::Conv || n.kind == OpKind::Linear) {
        // The fan-in is the weight's (a bias's own shape says nothing of it): C/g * R * S for a
        // conv's [K][C/g][R][S], the input features for a linear's [out][in].
        const ParamSpec& wp = g.params()[n.params[0]];
        const int64_t fan_in = n.kind == OpKind::Conv ? wp.numel() / wp.shape[0] : wp.shape.back();
        const bool is_bias = p.role == ParamRole::Bias;
        const float bound = is_bias ? float(1.0 / std::sqrt(double(fan_in)))
                                    : float(std::sqrt(6.0 / double(fan_in)));
        lo = -bound, hi = bound;
      } else if (p.role == ParamRole::Weight) {
        lo = 0.5f, hi = 1.0f;
      } else if (p.role == ParamRole::BnVar) {
        lo = 0.5f, hi = 1.5f;
      } else {
        lo = -0.1f, hi = 0.1f;
      }
      w[p.name] = random_uniform(seed, p.name, count, lo, hi);
    }
  }
  // Buffers of no node (StyleGAN's noise_const, resample_filter, w_avg): U(-1, 1).
  for (const ParamSpec& p : g.params())
    if (!p.integer && !w.count(p.name))
      w[p.name] = random_uniform(seed, p.name, size_t(p.numel()), -1.f, 1.f);
  return w;
}

HostWeights load_weights(const Graph& g, const std::string& path,
                         const std::vector<std::string>& ignored_prefixes) {
  const SafetensorsFile file = SafetensorsFile::load(path);
  HostWeights w;
  std::set<std::string> known;
  for (const ParamSpec& p : g.params()) {
    known.insert(p.name);
    if (p.integer) continue;  // num_batches_tracked: optional, unused by inference
    if (!file.has(p.name))
      throw UserError("weights file " + path + " has no tensor '" + p.name + "' (shape " +
                      shape_str(p.shape) + ") that " + g.name() + " needs");
    const SafetensorInfo& info = file.info(p.name);
    if (info.shape != p.shape)
      throw UserError("weights file " + path + ": tensor '" + p.name + "' has shape " +
                      shape_str(info.shape) + " but " + g.name() + " needs " + shape_str(p.shape));
    w[p.name] = file.to_float(p.name);
  }
  auto ignored = [&](const std::string& name) {
    for (const std::string& p : ignored_prefixes)
      if (name.rfind(p, 0) == 0) return true;
    return false;
  };
  for (const auto& entry : file.tensors())
    if (!known.count(entry.first) && !ignored(entry.first))
      throw UserError("weights file " + path + " holds tensor '" + entry.first + "' that " +
                      g.name() + " does not have");
  return w;
}

}  // namespace cnnbench
