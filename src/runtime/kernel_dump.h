// pl.dump_data on the host: the window a core passes is printed on the core's output (after its
// flag line) and written as an .npy file into the kernel's dump directory, with one line of JSON
// per dump appended to index.jsonl there (pypto_pro.debug.load_dumps reads them back as numpy).
#pragma once

#include <string>

#include "pypto_pro/abi.h"

namespace pypto_pro::runtime {

// The text a dump prints: an optional flag line, a header, then the values row by row.
std::string FormatDump(const PtoDump& dump, const std::string& location);

// Writes the dump's .npy file and index line into `dir` (created if missing); returns an error
// message, or "" when written.
std::string WriteDump(const std::string& dir, const PtoDump& dump, const std::string& kernel, int block,
                      const std::string& core, int line);

}  // namespace pypto_pro::runtime
