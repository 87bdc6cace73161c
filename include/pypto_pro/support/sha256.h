// SHA-256, used for the artefact names of docs/jit.md#artefacts (__shape_<h12>, dt_<h16>, call_kernel_<h12>).
#pragma once

#include <string>
#include <string_view>

namespace pypto_pro {

// Lower-case hex digest of `data`.
std::string Sha256Hex(std::string_view data);

}  // namespace pypto_pro
