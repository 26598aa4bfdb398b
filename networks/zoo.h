// The networks of the zoo, one builder per family, each with torchvision's (or, for the MXNet
// symbols, MXNet's) module and parameter names. Every builder takes the input size (square) and
// the class count.
#pragma once

#include <string>
#include <vector>

#include "networks/graph.h"
#include "networks/weights.h"

namespace cnnbench {

// torchvision's AlexNet ("one weird trick"): no LRN, no groups, 224.
Graph alexnet(int input_size = 224, int num_classes = 1000);
// MXNet's symbols/alexnet.py: 96 filters in conv1 without padding, ReLU -> LRN -> max pool, 227.
Graph alexnet_lrn(int input_size = 227, int num_classes = 1000);
// torchvision's VGG-16 / VGG-19, with or without BatchNorm.
Graph vgg(int depth, bool batchnorm, int input_size = 224, int num_classes = 1000);
// MXNet's symbols/inception-bn.py (inputs larger than 28): biases on every conv, floor pooling.
Graph inception_bn(int input_size = 224, int num_classes = 1000);
// torchvision's Inception-v3 at 299; `aux` adds the AuxLogits head (training only: inference never
// reads it, so its nodes do not reach the output).
Graph inception_v3(int input_size = 299, int num_classes = 1000, bool aux = false);
// torchvision's EfficientNet-B0 ... B7 (variant 0..7).
Graph efficientnet(int variant, int input_size = 0, int num_classes = 1000);
int efficientnet_resolution(int variant);  // 224, 240, 260, 300, 380, 456, 528, 600
// YOLOR-CSP-X (cfg/yolor_csp_x.cfg, 80 classes): parameters module_list.{i}.Conv2d / BatchNorm2d /
// implicit as the reference names them; output() is the stride-8 head, extra_outputs() the
// stride-16 and stride-32 ones (each 255 = 3 anchors x 85 channels, before the YOLO decode). The
// implicit layers are graph ops here (implicit_add / implicit_mul). With fold_implicits, the
// inference form: no implicit op, the heads' 1x1 convs take fold_yolor_implicits' weights. Not in
// the registry yet (upsample is not an op of compile() yet).
Graph yolor_csp_x(int input_size = 640, int num_classes = 80, bool fold_implicits = false);
// The reference's weights for the folded graph: each head's shift (x + a before its 1x1 conv W, b)
// and control (times m after it) folded in, W' = m W, b' = m (W a + b), in double; the implicit
// tensors (module_list.192 ... 197) left out. UserError where a tensor is missing.
HostWeights fold_yolor_implicits(const HostWeights& w);
// The prior of a YOLO head's biases (focal loss paper, section 3.3, as the Darknet-cfg builders of
// the YOLO family initialise them): objectness + log(8 / (640 / stride)^2) (8 objects in a 640
// image), each class + log(0.6 / (classes - 0.99)), added to the reference's head convs (blocks
// 201, 207, 213) in place. With it, random weights give a few candidates over conf 0.25 an image,
// as a trained detector does, rather than most of the 100,800 rows of a 1280 input.
void yolor_head_prior(HostWeights& w, int num_classes = 80);
// How many of the cfg's blocks have this type ("convolutional", "route", "shortcut", "maxpool",
// "upsample", "implicit_add", "implicit_mul", "shift_channels", "control_channels", "yolo").
int yolor_layer_count(const std::string& kind);
// StyleGAN2's generator at `resolution` (4 ... 1024) with channel_base 32768 (config-f, paper512,
// paper1024) or 16384 (paper256) and 8 or 2 mapping layers, z = w = 512, unconditional. The input
// is z as [512, 1, 1]; the output the image [3, resolution, resolution]. Not in the registry: no
// inference of its ops exists yet.
Graph stylegan2_generator(int resolution, int channel_base = 32768, int mapping_layers = 8);
// The same generator run on the host from the op references (kernels/stylegan_ref.h), on weights
// named as stylegan2_generator's (NVlabs'): z [n][512] -> images [n][3][resolution][resolution].
// NVlabs' semantics: the mapping's FC layers with lr multiplier 0.01 (W * 0.01 / sqrt(512),
// b * 0.01) and lrelu x sqrt(2); each synthesis layer's styles from its affine (W / sqrt(512),
// bias as stored), the modulated conv with demodulation (up = 2: upfirdn2d's up-sampling with the
// [1, 3, 3, 1] filter, padding 3 and 2, gain 4, then a true convolution: conv2d_resample's generic
// path), the constant noise times its strength, bias, lrelu x sqrt(2), clamp to conv_clamp; ToRGB
// with styles / sqrt(channels), no demodulation, linear, clamped; the skip images up-sampled by
// upfirdn2d (padding 2 and 1, gain 4) and summed. No truncation, no style mixing. conv_clamp <= 0:
// none. For tests and cross-checks: slow (double accumulation, direct convolutions).
std::vector<float> stylegan2_generate_reference(const HostWeights& w, int resolution,
                                                int channel_base, int mapping_layers,
                                                const std::vector<float>& z, int n,
                                                float conv_clamp = 256.f);
// StyleGAN3's layer schedule (SynthesisNetwork: cutoffs, stopbands, sampling rates, sizes and
// channels of L0 ... L{num_layers}, the last the 3-channel ToRGB) and its generator: -T (kernel 3,
// channel_base 32768, channel_max 512) or, with r_config, -R (kernel 1, both doubled, radial down
// filters); train.py's mapping depth 2. Not in the registry: no inference of its ops yet.
struct Sg3Layer {
  std::string name;  // "L7_276_323"
  int size = 0, channels = 0;
  double cutoff = 0, stopband = 0, sampling_rate = 0, half_width = 0;
};
std::vector<Sg3Layer> stylegan3_schedule(int resolution, int channel_base, int channel_max,
                                         int num_layers = 14, int num_critical = 2);
// StyleGAN-XL (networks.md 9.3; autonomousvision/stylegan_xl, networks_stylegan3_resetting):
// the -T synthesis with channel_base 65536 and channel_max 1024, z 64, the class embedding
// (1,000 x 320, projected to 64) beside z, mapping depth 2; a stem of syn_layers at
// stem_resolution grown by SuperresGenerator stages of head_layers each (up factor 2) to
// `resolution`. The input: z then the one-hot class (64 + classes channels, 1 x 1).
// stylegan_xl_head_schedule is compute_superres_filterparams: entry 0 is the last stem layer's.
std::vector<Sg3Layer> stylegan_xl_head_schedule(const Sg3Layer& last, int resolution,
                                                int head_layers, int channel_base, int channel_max,
                                                int num_critical = 2);
// channel_base / channel_max 0: XL's 65536 / 1024 (smaller for tests).
Graph stylegan_xl_generator(int resolution, int syn_layers = 10, int head_layers = 7,
                            int stem_resolution = 16, int classes = 1000, int channel_base = 0,
                            int channel_max = 0);
// What NVlabs' initialisation gives where random_weights' draws differ, applied to random
// weights only: the mapping's weights / lr_multiplier (x 100, so that w is unit-scale, not 1% of
// it), the synthesis weights signed (U(-1, 1) where randn), the affines' biases 1 (the
// input's [1, 0, 0, 0]), magnitude_ema in [0.5, 2] (trained models' input gains are not 1), the
// input's transform the identity, its phases U(-0.5, 0.5) and its frequencies normalised as
// SynthesisInput does (f / (|f| exp(|f|^2)^0.25) * bandwidth 2, from the uniform draws).
void stylegan3_random_buffers(HostWeights& w);
// channel_base / channel_max 0: the config's (a smaller network for tests otherwise).
Graph stylegan3_generator(int resolution, bool r_config = false, int mapping_layers = 2,
                          int channel_base = 0, int channel_max = 0);

}  // namespace cnnbench
