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

// dump_data(data, offsets, shapes[, workspace]): one offset and one extent per dim of the data; an
// Acc tile goes through a GM workspace of its dtype (the public API), other tiles do not take one.
void CheckDump(const StmtNode& call) {
  const Expr& data = call.args[0];
  const std::string where = "pl.dump_data";
  const size_t rank = data->type.IsTile() ? data->type.tile->shape.size() == 1 ? 1 : 2 : data->type.tensor->dims.size();
  for (size_t i : {size_t(1), size_t(2)}) {
    if (call.args[i]->operands.size() != (data->type.IsTile() ? 2 : rank)) {
      Fail(ErrorKind::kType, call.args[i]->span.valid() ? call.args[i]->span : call.span,
           where + ": " + (i == 1 ? "offsets" : "shapes") + " need one entry per dim of '" + data->var->name + "' (" +
               std::to_string(rank) + "), got " + std::to_string(call.args[i]->operands.size()));
    }
  }
  const bool acc = data->type.IsTile() && data->type.tile->memory == MemorySpace::kAcc;
  if (data->type.IsTile() && !acc && data->type.tile->memory != MemorySpace::kVec) {
    Fail(ErrorKind::kType, data->span.valid() ? data->span : call.span,
         where + ": a " + std::string(Name(data->type.tile->memory)) +
             " tile cannot be dumped on the NPU (Vec tiles are dumped directly, Acc tiles through a GM workspace)",
         "dump the GM tensor it was loaded from, or the Vec / Acc tile it moves to");
  }
  const bool has_workspace = call.args.size() > 3;
  if (acc && !has_workspace) {
    Fail(ErrorKind::kValue, call.span,
         where + ": an Acc tile is dumped through a GM workspace: pass workspace=<a GM tensor of " +
             std::string(Name(data->type.dtype)) + " with at least the window's elements>");
  }
  if (!acc && has_workspace) {
    Fail(ErrorKind::kValue, call.span, where + ": workspace= is for Acc tiles only (others are dumped directly)");
  }
  if (has_workspace && call.args[3]->type.dtype != data->type.dtype) {
    Fail(ErrorKind::kType, call.args[3]->span.valid() ? call.args[3]->span : call.span,
         where + ": the workspace must have the Acc tile's dtype " + std::string(Name(data->type.dtype)) + ", got " +
             std::string(Name(call.args[3]->type.dtype)));
  }
}

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

  // dump_data: the front end passes offsets (default 0) and shapes (default -1: to the end of the
  // tensor / the tile's valid window) and the data's name; pipe S.
  constexpr uint32_t kDumpMemories = Bit(MemorySpace::kVec) | Bit(MemorySpace::kMat) | Bit(MemorySpace::kLeft) |
                                     Bit(MemorySpace::kRight) | Bit(MemorySpace::kAcc);
  OpDef dump{"dump_data", Pipe::kS, PipeRule::kFixed, WindowRule::kDump,
             {{"data", OperandKind::kContainer, Access::kRead, kDumpMemories},
              {"offsets", OperandKind::kOffsets, Access::kRead},
              {"shapes", OperandKind::kOffsets, Access::kRead}},
             false, kAllSupportedDTypes, "", "pto::dump_data", {}, "print a window of a GM tensor or tile and save it as .npy"};
  KwargSpec loc, flag, name;
  loc.name = "loc", loc.kind = AttrKind::kBool;
  flag.name = "flag", flag.kind = AttrKind::kString;
  name.name = "name", name.kind = AttrKind::kString;
  dump.kwargs = {KwargSpec{"workspace", AttrKind::kOperand, -1, {"dump_data_ws"}}, loc, flag, name};
  dump.check = &CheckDump;
  ops.push_back(dump);
  OpDef dump_ws = dump;
  dump_ws.name = "dump_data_ws";
  dump_ws.public_name = "dump_data";
  dump_ws.device_fn = "pto::dump_data_ws";
  dump_ws.operands.push_back({"workspace", OperandKind::kTensor, Access::kWrite});
  dump_ws.kwargs = {loc, flag, name};
  ops.push_back(dump_ws);

  // Run-time index checks the front end and the registry insert (internal): check_index faults unless
  // lo <= index <= hi (a run-time index into a list or pl.struct_array); index_fault always faults (the
  // last branch of a dispatch over the legal values of a run-time event_id= / mutex_id=).
  KwargSpec lo, hi, what, legal;
  lo.name = "lo", hi.name = "hi";
  what.name = "what", what.kind = AttrKind::kString;
  legal.name = "legal", legal.kind = AttrKind::kString;
  OpDef check_index{"check_index", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                    {{"index", OperandKind::kScalar, Access::kRead}}, false, kAllSupportedDTypes, "",
                    "pto::CheckIndex", {lo, hi, what}, "fault unless lo <= index <= hi"};
  check_index.internal = true;
  ops.push_back(check_index);
  OpDef index_fault{"index_fault", Pipe::kS, PipeRule::kFixed, WindowRule::kNone,
                    {{"index", OperandKind::kScalar, Access::kRead}}, false, kAllSupportedDTypes, "",
                    "pto::IndexFault", {what, legal}, "fault: the run-time value is none of the legal ones"};
  index_fault.internal = true;
  ops.push_back(index_fault);

  // trap: the core stops here; the launch reports it as a fault at the line.
  ops.push_back(OpDef{"trap", Pipe::kS, PipeRule::kFixed, WindowRule::kNone, {}, false, kAllSupportedDTypes, "",
                      "pto::trap", {}, "stop the kernel unconditionally: a KernelFault at this line"});
}

}  // namespace pypto_pro::ir
