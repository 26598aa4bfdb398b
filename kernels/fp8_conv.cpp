#include "kernels/fp8_conv.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <deque>

#include "harness/check.h"
#include "kernels/cudnn_backend.h"
#include "kernels/fp8.h"
#include "kernels/graph_probe.h"
#include "kernels/storage.h"

namespace cnnbench {

bool Fp8VariantResult::agrees() const {
  if (!error.empty() || engines.empty() || !(rel_l2_emulated >= 0)) return false;
  // fp16 inputs accumulate in fp32: fp16's own rounding. E4M3 products are exact in float, but
  // Hopper's FP8 tensor cores keep about 14 bits of each partial sum unless the kernel promotes
  // them (DeepSeek-V3 measured up to 2% at K = 4096): 1e-2 tells a kernel that computes something
  // else from one that accumulates coarsely; rel_l2_emulated reports which it is. E4M3 outputs: a
  // code one step off is a tie broken the other way; more than one step off in 1% of the samples
  // is not.
  if (variant == Fp8Variant::Fp16 || variant == Fp8Variant::Fp16Residual)
    return rel_l2_emulated <= 2e-3;
  // INT8 into INT8: a code one step off is a tie (or the float sum's last bit) the other way.
  if (int8_output(variant)) return codes_off * 100 <= samples && rel_l2_emulated <= 1e-2;
  // INT8: exact int32 sums, then float descale, bias and ReLU, and fp16's rounding.
  if (int8_inputs(variant)) return rel_l2_emulated <= 2e-3;
  if (!fp8_output(variant)) return rel_l2_emulated <= 1e-2;
  return codes_off * 100 <= samples && rel_l2_emulated <= 3e-2;
}

namespace {

enum Uid : int64_t {
  kX = 1,
  kW = 2,
  kB = 3,
  kY = 5,
  kDescaleX = 10,
  kDescaleW = 11,
  kScaleY = 12,
  kAmax = 13,
  kDescale = 14,
  kZ = 15,
  kFirstVirtual = 101
};

// The variant's operation graph (kernels/fp8_case.h says what each computes). conv_out: the
// type of the conv's own (virtual) output: float, or int32 for INT8 where float finds no engine.
void build_graph(ProbeGraph& G, const ConvGeometry& g, Fp8Variant v,
                 cudnnDataType_t conv_out = CUDNN_DATA_FLOAT) {
  const cudnnDataType_t in_t = int8_inputs(v)  ? CUDNN_DATA_INT8
                               : fp8_inputs(v) ? CUDNN_DATA_FP8_E4M3
                                               : CUDNN_DATA_HALF;
  const cudnnDataType_t out_t = fp8_output(v)    ? CUDNN_DATA_FP8_E4M3
                                : int8_output(v) ? CUDNN_DATA_INT8
                                                 : CUDNN_DATA_HALF;
  auto keep = [&](BackendDesc b) { return G.hold(std::move(b)); };
  int64_t next_virtual = kFirstVirtual;
  auto virt = [&] { return keep(make_tensor_of(next_virtual++, CUDNN_DATA_FLOAT, g.y, true)); };
  auto real = [&](int64_t uid, BackendDesc b) { return G.real(uid, std::move(b)); };
  const BackendDesc* x = real(kX, make_tensor_of(kX, in_t, g.x));
  const BackendDesc* w =
      real(kW, make_tensor_of(kW, in_t, Dims{g.y.c, g.x.c, g.kernel_h, g.kernel_w}));
  const BackendDesc* y = real(kY, make_tensor_of(kY, out_t, g.y));

  std::vector<BackendDesc>& ops = G.ops;
  const BackendDesc* cur = keep(make_tensor_of(next_virtual++, conv_out, g.y, true));
  {
    const BackendDesc* conv =
        keep(make_conv_descriptor(g.stride, g.pad_h, g.pad_w, g.dilation,
                                  int8_inputs(v) ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT));
    BackendDesc op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    const float alpha = 1.0f, beta = 0.0f;
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *x)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *w)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *cur)
        .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, *conv)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
        .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    op.finalize();
    ops.push_back(std::move(op));
  }
  // cur = mode(cur[, b]) into `out`.
  auto pointwise = [&](cudnnPointwiseMode_t mode, const BackendDesc* b, const BackendDesc* out) {
    const BackendDesc* pw = keep(make_pointwise_desc(mode));
    ops.push_back(make_pointwise_op(*pw, *cur, b, *out));
    cur = out;
  };
  auto scalar = [&](int64_t uid) {
    return real(uid, make_channel_tensor_of(uid, CUDNN_DATA_FLOAT, 1));
  };
  const BackendDesc* amax_of = nullptr;  // the tensor whose amax the graph writes
  const bool per_channel =
      v == Fp8Variant::Fp8ToFp16PerChannel || v == Fp8Variant::Fp8ToFp8 || int8_inputs(v);
  switch (v) {
    case Fp8Variant::Fp16:
      pointwise(CUDNN_POINTWISE_ADD, real(kB, make_channel_tensor_of(kB, CUDNN_DATA_HALF, g.y.c)),
                virt());
      pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, y);
      break;
    case Fp8Variant::Fp16Residual:
      pointwise(CUDNN_POINTWISE_ADD, real(kB, make_channel_tensor_of(kB, CUDNN_DATA_HALF, g.y.c)),
                virt());
      pointwise(CUDNN_POINTWISE_ADD, real(kZ, make_tensor_of(kZ, CUDNN_DATA_HALF, g.y)), virt());
      pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, y);
      break;
    case Fp8Variant::Fp16ToInt8:  // the bias in float, as the other scaled forms'
      pointwise(CUDNN_POINTWISE_ADD, real(kB, make_channel_tensor_of(kB, CUDNN_DATA_FLOAT, g.y.c)),
                virt());
      pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, virt());
      pointwise(CUDNN_POINTWISE_MUL, scalar(kScaleY), y);
      break;
    case Fp8Variant::Fp8Sample:
      pointwise(CUDNN_POINTWISE_MUL, scalar(kDescaleX), virt());
      pointwise(CUDNN_POINTWISE_MUL, scalar(kDescaleW), virt());
      amax_of = cur;
      pointwise(CUDNN_POINTWISE_MUL, scalar(kScaleY), y);
      break;
    case Fp8Variant::Fp8ToFp16:
    case Fp8Variant::Fp8ToFp16PerChannel:
    case Fp8Variant::Fp8ToFp8:
    case Fp8Variant::Int8ToFp16PerChannel:
    case Fp8Variant::Int8ToInt8PerChannel:
    case Fp8Variant::Int8ToFp16Residual: {
      const BackendDesc* descale =
          per_channel ? real(kDescale, make_channel_tensor_of(kDescale, CUDNN_DATA_FLOAT, g.y.c))
                      : scalar(kDescale);
      pointwise(CUDNN_POINTWISE_MUL, descale, virt());
      pointwise(CUDNN_POINTWISE_ADD, real(kB, make_channel_tensor_of(kB, CUDNN_DATA_FLOAT, g.y.c)),
                virt());
      if (v == Fp8Variant::Fp8ToFp8) {
        pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, virt());
        amax_of = cur;
        pointwise(CUDNN_POINTWISE_MUL, scalar(kScaleY), y);
      } else if (int8_output(v)) {
        pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, virt());
        pointwise(CUDNN_POINTWISE_MUL, scalar(kScaleY), y);
      } else if (has_residual(v)) {
        pointwise(CUDNN_POINTWISE_ADD, real(kZ, make_tensor_of(kZ, CUDNN_DATA_HALF, g.y)), virt());
        pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, y);
      } else {
        pointwise(CUDNN_POINTWISE_RELU_FWD, nullptr, y);
      }
      break;
    }
  }
  if (amax_of) {
    BackendDesc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnReduceTensorOp_t mode = CUDNN_REDUCE_TENSOR_AMAX;
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    red.finalize();
    const BackendDesc* r = keep(std::move(red));
    BackendDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *amax_of)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *scalar(kAmax))
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *r);
    op.finalize();
    ops.push_back(std::move(op));
  }
}

// E4M3 codes in value order (sign and magnitude to one signed scale).
int code_ordinal(uint8_t q) {
  return q & 0x80 ? -int(q & 0x7f) : int(q & 0x7f);
}

}  // namespace

Fp8VariantResult run_fp8_variant(GpuContext& ctx, const Fp8CaseData& d, Fp8Variant v,
                                 int max_engines, int launches) {
  const ConvGeometry& g = d.c.g;
  Fp8VariantResult r;
  r.variant = v;
  r.flops = 2.0 * double(g.y.numel()) * g.kernel_h * g.kernel_w * g.x.c;
  // INT8: the conv's output as float first, then as int32 (cuDNN's INT8 engines differ in which
  // they take); the other variants: float.
  std::vector<cudnnDataType_t> conv_outs{CUDNN_DATA_FLOAT};
  std::vector<std::string> labels{""};
  if (int8_inputs(v)) {
    conv_outs.push_back(CUDNN_DATA_INT32);
    labels = {"conv float: ", "conv int32: "};
  }
  ProbedForm found = probe_first_form(ctx, labels, max_engines, [&](ProbeGraph& G, size_t i) {
    build_graph(G, g, v, conv_outs[i]);
  });
  r.configs = found.configs;
  r.refusals = found.refusals;
  if (!found.probe) {
    r.error = found.error;
    return r;
  }
  GraphProbe& probe = *found.probe;

  // The buffers, in the variant's types.
  const bool f8in = fp8_inputs(v), f8out = fp8_output(v), i8in = int8_inputs(v),
             i8out = int8_output(v);
  const size_t y_elem = f8out || i8out ? 1 : 2, in_elem = f8in || i8in ? 1 : 2;
  DeviceMem x(size_t(g.x.numel()) * in_elem), w(d.w.size() * in_elem);
  DeviceMem y(size_t(g.y.numel()) * y_elem), bias(size_t(g.y.c) * 4);
  DeviceMem descale_x(4), descale_w(4), scale_y(4), amax(4), descale(size_t(g.y.c) * 4);
  if (i8in) {
    x.upload(d.xi8);
    w.upload(d.wi8_rows);
    bias.upload(d.bias);
    std::vector<float> ds(size_t(g.y.c));
    for (size_t k = 0; k < ds.size(); ++k) ds[k] = 1.f / (d.x_scale_i8 * d.w_scales_i8[k]);
    descale.upload(ds);
  } else if (f8in) {
    x.upload(d.xq);
    const bool per_channel = v == Fp8Variant::Fp8ToFp16PerChannel || v == Fp8Variant::Fp8ToFp8;
    w.upload(per_channel ? d.wq_rows : d.wq);
    bias.upload(d.bias);
    descale_x.upload(std::vector<float>{1.f / d.x_scale});
    descale_w.upload(std::vector<float>{1.f / d.w_scale});
    std::vector<float> ds(size_t(g.y.c));
    for (size_t k = 0; k < ds.size(); ++k)
      ds[k] = 1.f / (d.x_scale * (per_channel ? d.w_scales[k] : d.w_scale));
    descale.upload(per_channel ? ds : std::vector<float>{ds[0]});
  } else {
    x.upload(to_storage(d.x, DType::F16));
    w.upload(to_storage(d.w, DType::F16));
    if (v == Fp8Variant::Fp16ToInt8)
      bias.upload(d.bias);  // fp16 into INT8: float, as its graph declares
    else
      bias.upload(to_storage(d.bias, DType::F16));
  }
  // The residual, fp16, shaped like y (residual forms only: up to 410 MB at batch 256).
  DeviceMem z(has_residual(v) ? size_t(g.y.numel()) * 2 : 1);
  if (has_residual(v)) {
    std::vector<float> zf(size_t(g.y.numel()));
    for (size_t i = 0; i < zf.size(); ++i) zf[i] = residual_value(d.seed, int64_t(i));
    z.upload(to_storage(zf, DType::F16));
  }
  if (i8out) {  // INT8 output: scale_y from the samples' amax (no AMAX op in this graph)
    double a = 0;
    for (double e : fp8_exact(d, v)) a = std::max(a, std::fabs(e));
    r.amax = a;
    r.y_scale = output_scale_for(v, a);
  }
  scale_y.upload(std::vector<float>{r.y_scale});
  CNN_CHECK_CUDA(cudaMemset(amax.p, 0, 4));  // an engine may reduce into it rather than store
  DeviceMem workspace(probe.workspace_bytes());
  probe.bind({{kX, x.p},
              {kW, w.p},
              {kY, y.p},
              {kB, bias.p},
              {kDescaleX, descale_x.p},
              {kDescaleW, descale_w.p},
              {kScaleY, scale_y.p},
              {kAmax, amax.p},
              {kDescale, descale.p},
              {kZ, z.p}},
             workspace.p);
  cudaStream_t s = ctx.stream;

  // Delayed scaling: a first run's amax sets scale_y.
  if (f8out) {
    if (!probe.run_first()) {
      r.error = "the first engine failed to run";
      return r;
    }
    float a = -1;
    CNN_CHECK_CUDA(cudaMemcpyAsync(&a, amax.p, 4, cudaMemcpyDeviceToHost, s));
    CNN_CHECK_CUDA(cudaStreamSynchronize(s));
    r.amax = a;
    r.y_scale = fp8_scale_for(a);
    scale_y.upload(std::vector<float>{r.y_scale});
  }

  for (const ProbeEngine& e : probe.time_all(launches))
    r.engines.push_back({e.tag, e.notes, e.workspace, e.us});
  if (r.engines.front().us < 0) {
    r.error = "no built engine ran";
    return r;
  }

  // The fastest engine's output on a poisoned buffer (0xFF: NaN in fp16 and in E4M3).
  CNN_CHECK_CUDA(cudaMemsetAsync(y.p, 0xFF, size_t(g.y.numel()) * y_elem, s));
  if (!probe.run_fastest()) {
    r.error = "the fastest engine failed to run again";
    return r;
  }
  std::vector<uint8_t> out(size_t(g.y.numel()) * y_elem);
  CNN_CHECK_CUDA(cudaMemcpyAsync(out.data(), y.p, out.size(), cudaMemcpyDeviceToHost, s));
  CNN_CHECK_CUDA(cudaStreamSynchronize(s));
  r.samples = int64_t(d.samples.size());
  std::vector<double> got(d.samples.size());
  const std::vector<double> emu = fp8_emulated(d, v, r.y_scale);
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t idx = size_t(d.samples[i].index);
    if (f8out) {
      const uint8_t q = out[idx];
      got[i] = double(fp8_decode(q)) / r.y_scale;
      const int want = code_ordinal(fp8_encode(float(emu[i] * r.y_scale)));
      if (std::isnan(got[i]) || std::abs(code_ordinal(q) - want) > 1) ++r.codes_off;
    } else if (i8out) {
      const int q = int(int8_t(out[idx]));
      got[i] = double(q) / r.y_scale;
      if (std::abs(q - int8_round(float(emu[i] * r.y_scale))) > 1) ++r.codes_off;
    } else {
      __half_raw h;
      h.x = uint16_t(out[2 * idx] | (out[2 * idx + 1] << 8));
      got[i] = double(__half2float(__half(h)));
    }
  }
  r.rel_l2_exact = relative_l2(got, fp8_exact(d, v));
  r.rel_l2_emulated = relative_l2(got, emu);
  return r;
}

}  // namespace cnnbench
