// Debugging (docs/language.md#debug): pl.printf and pl.pto_assert. The format is a
// compile-time string checked here against its run-time scalar arguments; the runtime formats.
#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"
#include "pypto_pro/support/printf_format.h"

namespace pypto_pro::ir {

namespace {

const std::string& FormatOf(const StmtNode& call) {
  for (const Attr& a : call.attrs) {
    if (a.name == "fmt") return a.text;
  }
  Fail(ErrorKind::kInternal, call.span, "pl." + std::string(call.op->name) + " has no format");
}

// Every conversion has one scalar of a fitting type: integers (and bools) for %d %i %u %x, floats
// for %f.
void CheckFormat(const StmtNode& call, const Expr& args) {
  const std::string where = "pl." + std::string(call.op->name);
  ParsedFormat format = ParseFormat(FormatOf(call));
  if (!format.error.empty()) Fail(ErrorKind::kValue, call.span, where + ": " + format.error);
  const std::vector<Expr>& values = args->operands;
  if (format.conversions.size() != values.size()) {
    Fail(ErrorKind::kType, call.span,
         where + ": the format has " + std::to_string(format.conversions.size()) + " conversion(s) but " +
             std::to_string(values.size()) + " argument(s) follow it");
  }
  const std::string& text = FormatOf(call);
  for (size_t i = 0; i < values.size(); ++i) {
    const FormatConversion& c = format.conversions[i];
    DataType dtype = values[i]->type.dtype;
    bool is_float = IsFloat(dtype);
    if (!values[i]->type.IsScalar() || (c.conversion == 'f') != is_float) {
      Fail(ErrorKind::kType, values[i]->span.valid() ? values[i]->span : call.span,
           where + ": argument " + std::to_string(i + 1) + " is " + values[i]->type.ToString() + " but its conversion '" +
               text.substr(c.begin, c.end - c.begin) + "' needs " + (c.conversion == 'f' ? "an fp32" : "an integer or bool") +
               " scalar");
    }
  }
}

void CheckPrintf(const StmtNode& call) { CheckFormat(call, call.args[0]); }

void CheckAssert(const StmtNode& call) {
  const Expr& cond = call.args[0];
  if (!cond->type.IsScalar() || cond->type.dtype != DataType::kBool) {
    Fail(ErrorKind::kType, cond->span.valid() ? cond->span : call.span,
         "pl.pto_assert: the condition must be a bool scalar (a comparison), got " + cond->type.ToString());
  }
  CheckFormat(call, call.args[1]);
}

std::vector<KwargSpec> DebugKwargs() {
  KwargSpec fmt;
  fmt.name = "fmt";
  fmt.kind = AttrKind::kString;
  fmt.required = true;
  KwargSpec loc;
  loc.name = "loc";  // prefix the text with file:line
  loc.kind = AttrKind::kBool;
  return {fmt, loc};
}

// pto_assert also carries its condition's source text, which a failure prints.
std::vector<KwargSpec> AssertKwargs() {
  std::vector<KwargSpec> kwargs = DebugKwargs();
  KwargSpec cond;
  cond.name = "cond";
  cond.kind = AttrKind::kString;
  cond.required = true;
  kwargs.push_back(cond);
  return kwargs;
}

}  // namespace

void AddDebugOps(std::vector<OpDef>& ops) {
  OpDef printf_op{"printf", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                  {{"args", OperandKind::kScalars, Access::kRead}},
                  false, kAllSupportedDTypes, "", "pto::printf", DebugKwargs(),
                  "print the scalars with a printf format on the host's stdout, prefixed with the core"};
  printf_op.check = &CheckPrintf;
  printf_op.call_form = CallForm::kFormat;
  ops.push_back(printf_op);

  OpDef assert_op{"pto_assert", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                  {{"condition", OperandKind::kScalar, Access::kRead}, {"args", OperandKind::kScalars, Access::kRead}},
                  false, kAllSupportedDTypes, "", "pto::pto_assert", AssertKwargs(),
                  "unless condition holds, print 'Assertion failed: <condition>' and the formatted message; the "
                  "kernel goes on"};
  assert_op.check = &CheckAssert;
  assert_op.call_form = CallForm::kAssert;
  ops.push_back(assert_op);

  // trap: the core stops here; the launch reports it as a fault at the line.
  ops.push_back(OpDef{"trap", Pipe::kS, PipeRule::kFixed, WindowRule::kNone, {}, false, kAllSupportedDTypes, "",
                      "pto::trap", {}, "stop the kernel unconditionally: a KernelFault at this line"});
}

}  // namespace pypto_pro::ir
