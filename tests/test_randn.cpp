// kernels/randn.cuh's counter normals, on the host (the device runs the same code): moments,
// tails, independence of neighbours and of seeds, and that a counter gives the same value twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "kernels/randn.cuh"

using namespace cnnbench;

TEST(CounterNormal, MomentsTailsAndNeighbours) {
  const int64_t n = 1 << 20;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0, lag = 0;
  int64_t beyond3 = 0;
  float prev = counter_normal(7, 0);
  for (int64_t i = 0; i < n; ++i) {
    const double x = counter_normal(7, uint64_t(i));
    ASSERT_TRUE(std::isfinite(x)) << i;
    s1 += x, s2 += x * x, s3 += x * x * x, s4 += x * x * x * x;
    beyond3 += std::fabs(x) > 3;
    if (i > 0) lag += x * prev;
    prev = float(x);
  }
  const double mean = s1 / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0, 5 / std::sqrt(double(n)));  // 5 standard errors
  EXPECT_NEAR(var, 1, 0.01);
  EXPECT_NEAR(s3 / n, 0, 0.02);                         // skewness of a normal
  EXPECT_NEAR(s4 / n, 3, 0.05);                         // kurtosis of a normal
  EXPECT_NEAR(double(beyond3) / n, 0.0026998, 0.0004);  // P(|x| > 3)
  EXPECT_NEAR(lag / n, 0, 0.01);                        // neighbours uncorrelated
}

TEST(CounterNormal, SameCounterSameValueOtherSeedOtherStream) {
  EXPECT_EQ(counter_normal(3, 12345), counter_normal(3, 12345));
  int same = 0;
  double cross = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const float a = counter_normal(1, i), b = counter_normal(2, i);
    same += a == b;
    cross += double(a) * b;
  }
  EXPECT_LT(same, 5);
  EXPECT_NEAR(cross / 100000, 0, 0.02);
}
