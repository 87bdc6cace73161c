// The artefact tree of docs/jit.md#artefacts and crash-safe file writes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

namespace pypto_pro::jit {

// What names one compiled instance's directory.
struct InstanceKey {
  std::string kernel_name;
  std::string arch;
  std::string static_signature;    // canonical text of the STATIC dims; empty = kernel has none
  int device = -1;                 // >= 0 adds __d<device>
  int rank = -1;                   // >= 0 (with device) adds _r<rank>
  std::string datatype_json;       // canonical JSON of the dtype binding; empty = no datatype schema
  std::optional<uint64_t> tiling_key;  // packed TilingKey; nullopt = tk_none
  bool sanitizer = false;          // adds __sanitizer: an instrumented kernel never shares a plain one's files
  bool profile = false;            // adds __profile: the instance pypto_pro.profiler launches record
  bool debug = false;              // adds __debug: a debug build (-O0 -g, Python lines)
};

// ./build, or $ASCEND_WORK_PATH/PYPTO_PRO/build when that is set (read at each call).
std::filesystem::path ArtefactRoot();

// <root>/<name>__<arch>[__shape_<h12>][__d<dev>[_r<rank>]][__sanitizer][__profile][__debug]/[dt_<h16>/]tk_<hex>|tk_none
std::filesystem::path InstanceDir(const InstanceKey& key);

// The artefact tree cannot be created or written (a read-only working directory, a full disk). The
// message names the directory and how ASCEND_WORK_PATH moves the tree.
class ArtefactDirError : public std::runtime_error {
 public:
  ArtefactDirError(const std::string& what, const std::filesystem::path& dir);
  std::filesystem::path dir;
};

// create_directories, or ArtefactDirError.
void CreateArtefactDir(const std::filesystem::path& dir);

// Writes `content` to a unique temporary file next to `path`, then renames it over `path`, so a
// reader (another thread or process) sees the old file or the new one, never a half-written one.
void WriteFileAtomic(const std::filesystem::path& path, const std::string& content);

// A name unique to this process and call, for temporary files: ".<pid>.<counter>.tmp".
std::string TempSuffix();

}  // namespace pypto_pro::jit
