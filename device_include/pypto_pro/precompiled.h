// The first #include of every compiled kernel file (call_kernel.cpp): g++ reads this header, and so
// all of device.h, from a precompiled pypto_pro/precompiled.h.gch where one matches the compile
// (docs/jit.md#precompiled-device-headers-and-routines), and parses it otherwise. Its own name, not device.h's:
// kernel.cpp's #include of device.h then finds the real header, which the .gch marks as read.
#pragma once

#include "pypto_pro/device.h"
