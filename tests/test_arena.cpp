// The arena's plan (host only): alignment, weights packed, activations reused by liveness.
#include <gtest/gtest.h>

#include "harness/arena.h"

using namespace cnnbench;

TEST(Arena, PacksWeightsAndAligns) {
  Arena a;
  const int w0 = a.add_weights(100), w1 = a.add_weights(300);
  a.plan();
  EXPECT_EQ(a.offset(w0), 0u);
  EXPECT_EQ(a.offset(w1), 256u);
  EXPECT_EQ(a.bytes(MemKind::Weights), 256u + 512u);
}

TEST(Arena, ReusesActivationsWhoseLifetimesDoNotOverlap) {
  Arena a;
  // A chain: each buffer is read by the next step only.
  const int b0 = a.add_activation(1024, 0, 1);
  const int b1 = a.add_activation(1024, 1, 2);
  const int b2 = a.add_activation(1024, 2, 3);
  a.plan();
  EXPECT_EQ(a.bytes(MemKind::Activations), 2048u);
  EXPECT_EQ(a.activations_unplanned_bytes(), 3072u);
  EXPECT_NE(a.offset(b0), a.offset(b1));
  EXPECT_NE(a.offset(b1), a.offset(b2));
  EXPECT_EQ(a.offset(b0), a.offset(b2));  // b0 is dead when b2 is born
}

TEST(Arena, NeverOverlapsLiveBuffers) {
  Arena a;
  struct B {
    int id, first, last;
    size_t bytes;
  };
  std::vector<B> bs;
  for (int i = 0; i < 40; ++i) {
    const int first = (i * 7) % 23, last = first + 1 + (i * 5) % 6;
    const size_t bytes = 256 * size_t(1 + (i * 13) % 9);
    bs.push_back({a.add_activation(bytes, first, last), first, last, bytes});
  }
  a.plan();
  for (const B& x : bs)
    for (const B& y : bs) {
      if (x.id >= y.id || x.last < y.first || y.last < x.first) continue;
      const size_t xo = a.offset(x.id), yo = a.offset(y.id);
      EXPECT_TRUE(xo + x.bytes <= yo || yo + y.bytes <= xo) << x.id << " overlaps " << y.id;
    }
  EXPECT_LE(a.bytes(MemKind::Activations), a.activations_unplanned_bytes());
}

TEST(Arena, WorkspaceIsTheLargestRequest) {
  Arena a;
  a.request_workspace(1000);
  a.request_workspace(5000);
  a.request_workspace(300);
  EXPECT_EQ(a.workspace_bytes(), 5120u);
}
