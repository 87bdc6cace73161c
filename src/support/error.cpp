#include "pypto_pro/support/error.h"

namespace pypto_pro {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax: return "syntax";
    case ErrorKind::kType: return "type";
    case ErrorKind::kUndefined: return "undefined";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kValue: return "value";
    case ErrorKind::kMemory: return "memory";
    case ErrorKind::kInternal: return "internal";
    case ErrorKind::kPipeline: return "pipeline";
  }
  return "internal";
}

}  // namespace pypto_pro
