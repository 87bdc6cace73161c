// Small text helpers shared by messages and dumps.
#pragma once

#include <cstdint>
#include <string>

namespace pypto_pro {

// "0x1f00": addresses and byte offsets in messages, IR dumps and sanitizer reports.
std::string Hex(uint64_t v);

}  // namespace pypto_pro
