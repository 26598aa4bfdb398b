#include "kernels/stylegan3_ref.h"
