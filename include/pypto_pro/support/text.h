// Small text helpers shared by messages and dumps.
#pragma once

#include <cstdint>
#include <string>

namespace pypto_pro {

// "0x1f00": addresses and byte offsets in messages, IR dumps and sanitizer reports.
std::string Hex(uint64_t v);

// `text` as a string literal between `quote`s, valid C++ and Python alike (generated sources use
// '"', the IR dumps '\''): backslashes and the quote escaped, \n and \t spelled so, other control
// bytes as three-digit octal escapes (a hex escape would swallow the digits after it); UTF-8 stays.
std::string QuotedLiteral(const std::string& text, char quote = '"');

}  // namespace pypto_pro
