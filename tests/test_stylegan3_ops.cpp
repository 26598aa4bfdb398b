// StyleGAN3 CPU tests (issue 6).
#include <gtest/gtest.h>
