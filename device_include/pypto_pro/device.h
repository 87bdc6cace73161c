// Everything a generated kernel.cpp needs. Kept free of heavy standard headers: kernel compile
// time is part of every first launch.
#pragma once

#include "pypto_pro/abi.h"
#include "pypto_pro/numeric.h"
#include "pypto_pro/tile.h"
#include "pypto_pro/gm_view.h"
#include "pypto_pro/data_movement.h"
#include "pypto_pro/vector_math.h"
#include "pypto_pro/vector_ops.h"
#include "pypto_pro/direct_run.h"
#include "pypto_pro/vector_cast.h"
#include "pypto_pro/vector_compare.h"
#include "pypto_pro/vector_reduce.h"
#include "pypto_pro/vector_broadcast.h"
#include "pypto_pro/vector_bitwise.h"
#include "pypto_pro/vector_part.h"
#include "pypto_pro/vector_transpose.h"
#include "pypto_pro/cube_ops.h"
#include "pypto_pro/sync.h"
#include "pypto_pro/debug.h"
#include "pypto_pro/ssbuf.h"
#include "pypto_pro/registers.h"
