// Every environment variable pypto_pro reads, declared once with its default and meaning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pypto_pro {

struct EnvVarSpec {
  std::string_view name;
  std::string_view default_value;  // as the user would write it; "" = unset
  std::string_view doc;
};

// The table, in documentation order.
const std::vector<EnvVarSpec>& EnvVarTable();

// The variable's value, or its declared default. Reading an undeclared name is a bug (throws).
std::string GetEnv(std::string_view name);
// Same, parsed as a non-negative integer; a malformed value throws std::invalid_argument naming it.
long GetEnvInt(std::string_view name);
// Same, parsed as seconds (a finite number >= 0, or > 0 unless `zero_allowed`).
double GetEnvSeconds(std::string_view name, bool zero_allowed);
// "1"/"true"/"yes"/"on" and "0"/"false"/"no"/"off" (any case); anything else throws naming it.
bool GetEnvFlag(std::string_view name);

}  // namespace pypto_pro
