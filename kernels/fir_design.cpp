#include "kernels/fir_design.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace cnnbench {

namespace {
constexpr double kPi = 3.14159265358979323846;

double sinc(double x) {
  return x == 0 ? 1.0 : std::sin(kPi * x) / (kPi * x);
}
}  // namespace

double kaiser_beta(double a) {
  if (a > 50) return 0.1102 * (a - 8.7);
  if (a > 21) return 0.5842 * std::pow(a - 21, 0.4) + 0.07886 * (a - 21);
  return 0.0;
}

double kaiser_atten(int numtaps, double width) {
  return 2.285 * (numtaps - 1) * kPi * width + 7.95;
}

std::vector<double> kaiser_window(int n, double beta) {
  std::vector<double> w(size_t(std::max(n, 0)));
  if (n == 1) return {1.0};
  const double i0b = std::cyl_bessel_i(0.0, beta);
  for (int k = 0; k < n; ++k) {
    const double t = 2.0 * k / (n - 1) - 1.0;
    w[k] = std::cyl_bessel_i(0.0, beta * std::sqrt(std::max(0.0, 1.0 - t * t))) / i0b;
  }
  return w;
}

std::vector<double> hamming_window(int n) {
  std::vector<double> w(size_t(std::max(n, 0)));
  if (n == 1) return {1.0};
  for (int k = 0; k < n; ++k) w[k] = 0.54 - 0.46 * std::cos(2 * kPi * k / (n - 1));
  return w;
}

std::vector<double> firwin_lowpass(int numtaps, double cutoff, double fs,
                                   const std::vector<double>& window) {
  const double c = cutoff / (0.5 * fs);  // a fraction of Nyquist
  if (numtaps < 1 || !(c > 0 && c < 1) || int(window.size()) != numtaps)
    throw std::invalid_argument("firwin: numtaps, cutoff or window out of range");
  std::vector<double> h(static_cast<size_t>(numtaps));
  const double alpha = 0.5 * (numtaps - 1);
  for (int k = 0; k < numtaps; ++k) h[k] = c * sinc(c * (k - alpha)) * window[k];
  const double s = std::accumulate(h.begin(), h.end(), 0.0);  // unit gain at DC
  for (double& v : h) v /= s;
  return h;
}

std::vector<double> firwin_kaiser(int numtaps, double cutoff, double width, double fs) {
  const double beta = kaiser_beta(kaiser_atten(numtaps, width / (0.5 * fs)));
  return firwin_lowpass(numtaps, cutoff, fs, kaiser_window(numtaps, beta));
}

std::vector<double> design_lowpass_filter(int numtaps, double cutoff, double width, double fs,
                                          bool radial) {
  if (numtaps < 1) throw std::invalid_argument("design_lowpass_filter: numtaps below 1");
  if (numtaps == 1) return {};
  if (!radial) return firwin_kaiser(numtaps, cutoff, width, fs);
  // x = (arange(n) - (n - 1) / 2) / fs; r = hypot; f = j1(2 cutoff pi r) / (pi r), whose limit
  // at r = 0 is cutoff; times the outer product of Kaiser windows; normalised to sum 1.
  const std::vector<double> w =
      kaiser_window(numtaps, kaiser_beta(kaiser_atten(numtaps, width / (fs / 2))));
  std::vector<double> f(size_t(numtaps) * numtaps);
  for (int i = 0; i < numtaps; ++i)
    for (int j = 0; j < numtaps; ++j) {
      const double xi = (i - (numtaps - 1) / 2.0) / fs, xj = (j - (numtaps - 1) / 2.0) / fs;
      const double r = std::hypot(xi, xj);
      const double v = r == 0 ? cutoff : std::cyl_bessel_j(1.0, 2 * cutoff * kPi * r) / (kPi * r);
      f[size_t(i) * numtaps + j] = v * w[i] * w[j];
    }
  const double s = std::accumulate(f.begin(), f.end(), 0.0);
  for (double& v : f) v /= s;
  return f;
}

}  // namespace cnnbench
