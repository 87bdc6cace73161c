// Source locations and the one exception type the compiler core raises.
#pragma once

#include <stdexcept>
#include <string>

namespace pypto_pro {

// A position in the user's kernel source (1-based line, 0-based column like Python's ast).
struct Span {
  int line = 0;
  int col = 0;
  bool valid() const { return line > 0; }
};

// What went wrong, so the Python layer can pick the matching exception class.
enum class ErrorKind {
  kSyntax,       // ParserSyntaxError
  kType,         // ParserTypeError
  kUndefined,    // UndefinedVariableError
  kUnsupported,  // UnsupportedFeatureError
  kValue,        // a bad value the user wrote (ValueError family)
  kMemory,       // tile outside its memory / misaligned (TileMemoryError, a ValueError)
  kInternal,     // a bug in pypto_pro: the IR broke an invariant
  kPipeline,     // a kernel the pipeline transform cannot schedule (PipelineError, a ValueError)
};

const char* ErrorKindName(ErrorKind kind);

// Thrown by the IR builder, the verifier and the passes. Carries the user's source position.
class CompileDiagnostic : public std::runtime_error {
 public:
  CompileDiagnostic(ErrorKind kind, std::string message, Span span, std::string hint = "")
      : std::runtime_error(message), kind_(kind), span_(span), hint_(std::move(hint)) {}
  ErrorKind kind() const { return kind_; }
  const Span& span() const { return span_; }
  const std::string& hint() const { return hint_; }

 private:
  ErrorKind kind_;
  Span span_;
  std::string hint_;
};

[[noreturn]] inline void Fail(ErrorKind kind, Span span, std::string message, std::string hint = "") {
  throw CompileDiagnostic(kind, std::move(message), span, std::move(hint));
}

}  // namespace pypto_pro
