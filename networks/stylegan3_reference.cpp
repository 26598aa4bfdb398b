#include "networks/stylegan3_reference.h"
