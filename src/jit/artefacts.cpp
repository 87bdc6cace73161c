#include "pypto_pro/jit/artefacts.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "pypto_pro/support/config.h"
#include "pypto_pro/support/sha256.h"

namespace pypto_pro::jit {

namespace fs = std::filesystem;

fs::path ArtefactRoot() {
  std::string work = GetEnv("ASCEND_WORK_PATH");
  if (!work.empty()) return fs::path(work) / "PYPTO_PRO" / "build";
  return fs::path("build");
}

fs::path InstanceDir(const InstanceKey& key) {
  std::string top = key.kernel_name + "__" + key.arch;
  if (!key.static_signature.empty()) top += "__shape_" + Sha256Hex(key.static_signature).substr(0, 12);
  if (key.device >= 0) {
    top += "__d" + std::to_string(key.device);
    if (key.rank >= 0) top += "_r" + std::to_string(key.rank);
  }
  if (key.sanitizer) top += "__sanitizer";
  if (key.profile) top += "__profile";
  if (key.debug) top += "__debug";
  fs::path dir = ArtefactRoot() / top;
  if (!key.datatype_json.empty()) dir /= "dt_" + Sha256Hex(key.datatype_json).substr(0, 16);
  if (key.tiling_key) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "tk_%llx", static_cast<unsigned long long>(*key.tiling_key));
    dir /= hex;
  } else {
    dir /= "tk_none";
  }
  return dir;
}

namespace {
std::string WithHint(const std::string& what, const fs::path& dir) {
  std::error_code ec;
  fs::path shown = fs::absolute(dir, ec);
  return what + " (kernel build directory " + (ec ? dir : shown).string() +
         "); kernels compile into ./build of the working directory: run from a writable directory, or set "
         "ASCEND_WORK_PATH to build them under $ASCEND_WORK_PATH/PYPTO_PRO/build";
}
}  // namespace

ArtefactDirError::ArtefactDirError(const std::string& what, const fs::path& dir)
    : std::runtime_error(WithHint(what, dir)), dir(dir) {}

void CreateArtefactDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ArtefactDirError("cannot create " + dir.string() + ": " + ec.message(), dir);
}

std::string TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  return "." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + ".tmp";
}

void WriteFileAtomic(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += TempSuffix();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(content.data(), std::streamsize(content.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw ArtefactDirError("cannot write " + path.string(), path.parent_path());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw ArtefactDirError("cannot write " + path.string() + ": " + ec.message(), path.parent_path());
  }
}

}  // namespace pypto_pro::jit
