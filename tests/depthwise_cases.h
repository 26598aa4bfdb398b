#pragma once
// The depthwise conv spec the kernel tests use: "same" padding (k / 2) at the stride given.
#include "kernels/depthwise.h"

namespace cnnbench::test {

inline DepthwiseSpec dw_spec(Dims x, int k, int stride, Act act = Act::None) {
  DepthwiseSpec s;
  s.x = x;
  s.kernel = k, s.stride = stride, s.pad = k / 2;
  s.y = {x.n, x.c, (x.h + 2 * s.pad - k) / stride + 1, (x.w + 2 * s.pad - k) / stride + 1};
  s.act = act;
  return s;
}

}  // namespace cnnbench::test
