// FIR low-pass design for StyleGAN3's filtered_lrelu (issue 6), as NVlabs' design_lowpass_filter
// does it with scipy: firwin's windowed sinc with a Kaiser window whose beta comes from the
// transition width (kaiser_atten, then kaiser_beta), or, for radial filters (StyleGAN3-R), a jinc
// under the outer product of two Kaiser windows. Host code in double; the taps go to the device
// as float.
#pragma once

#include <vector>

namespace cnnbench {

// scipy.signal.kaiser_beta / kaiser_atten (Kaiser's empirical formulas; width as a fraction of
// the Nyquist frequency).
double kaiser_beta(double attenuation_db);
double kaiser_atten(int numtaps, double width);
// The symmetric Kaiser window of n points (numpy.kaiser).
std::vector<double> kaiser_window(int n, double beta);
// The symmetric Hamming window (firwin's default window).
std::vector<double> hamming_window(int n);
// firwin(numtaps, cutoff, fs) for a low-pass (pass_zero, scale: unit gain at DC) under `window`.
std::vector<double> firwin_lowpass(int numtaps, double cutoff, double fs,
                                   const std::vector<double>& window);
// firwin(numtaps, cutoff, width=width, fs=fs): the Kaiser window from the width.
std::vector<double> firwin_kaiser(int numtaps, double cutoff, double width, double fs);
// StyleGAN3's design_lowpass_filter: empty for numtaps 1 (no filter); numtaps taps, or
// numtaps x numtaps row-major where radial.
std::vector<double> design_lowpass_filter(int numtaps, double cutoff, double width, double fs,
                                          bool radial = false);

}  // namespace cnnbench
