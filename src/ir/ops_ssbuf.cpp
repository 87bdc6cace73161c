// The SuperScalar buffer (docs/language.md#structs-and-tuples): pl.ssbuf_store / pl.ssbuf_load copy
// a pl.struct's fields, laid out as the C struct of those fields, to / from the SSBUF that the cores
// of a block share, on the scalar pipe. The front end passes the fields (ssbuf_load: the variables
// it writes) after the byte offset.
#include <algorithm>

#include "op_tables.h"
#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

SsbufLayout SsbufLayoutOf(const StmtNode& call) {
  SsbufLayout layout;
  int64_t align = 4;  // copied as u32 words
  for (const Expr& field : call.args[1]->operands) {
    const int64_t bytes = Info(field->type.dtype).bits / 8;
    layout.bytes = (layout.bytes + bytes - 1) / bytes * bytes;
    layout.offsets.push_back(layout.bytes);
    layout.bytes += bytes;
    align = std::max(align, bytes);
  }
  layout.bytes = (layout.bytes + align - 1) / align * align;
  return layout;
}

namespace {

void CheckSsbuf(const StmtNode& call) {
  const std::string where = "pl." + std::string(call.op->PublicName());
  const bool load = call.op->name == "ssbuf_load";
  for (const Expr& field : call.args[1]->operands) {
    const DataType d = field->type.dtype;
    if (!field->type.IsScalar() || !(d == DataType::kInt64 || d == DataType::kFP32 || d == DataType::kBool ||
                                     d == DataType::kInt32)) {
      Fail(ErrorKind::kType, call.span, where + ": struct fields are int64, int32, fp32 or bool scalars");
    }
    if (load && field->kind != ExprKind::kVar) {
      Fail(ErrorKind::kInternal, call.span, where + ": the fields it loads must be variables");
    }
  }
  const SsbufLayout layout = SsbufLayoutOf(call);
  const Expr& offset = call.args[0];
  if (!offset->type.IsScalar() || IsFloat(offset->type.dtype) || offset->type.dtype == DataType::kBool) {
    Fail(ErrorKind::kType, offset->span.valid() ? offset->span : call.span,
         where + ": offset is a byte offset, an integer; got " + offset->type.ToString());
  }
  if (!offset->IsIntConst()) return;  // checked when it runs
  const int64_t at = offset->int_value;
  if (at % 4 != 0 || at < 0 || at + layout.bytes > kSsbufBytes) {
    Fail(ErrorKind::kValue, offset->span.valid() ? offset->span : call.span,
         where + ": the struct's " + std::to_string(layout.bytes) + " bytes at byte offset " + std::to_string(at) +
             (at % 4 != 0 ? " are not 4-byte aligned (the SSBUF is copied in 32-bit words)"
                          : " do not fit the SSBUF of " + std::to_string(kSsbufBytes) + " bytes"));
  }
}

}  // namespace

void AddSsbufOps(std::vector<OpDef>& ops) {
  KwargSpec name;
  name.name = "name", name.kind = AttrKind::kString;
  OpDef store{"ssbuf_store", Pipe::kS, PipeRule::kFixed, WindowRule::kSsbuf,
              {{"offset", OperandKind::kScalar, Access::kRead}, {"fields", OperandKind::kScalars, Access::kRead}},
              false, kAllSupportedDTypes, "", "pto::ssbuf_store", {name},
              "copy a pl.struct's fields into the block's SSBUF at a byte offset"};
  store.check = &CheckSsbuf;
  store.internal = true;  // built by the front end from pl.ssbuf_store(struct, offset)
  store.public_name = "ssbuf_store";
  OpDef load = store;
  load.name = "ssbuf_load";
  load.public_name = "ssbuf_load";
  load.device_fn = "pto::ssbuf_load";
  load.operands[1].access = Access::kWrite;
  load.doc = "fill a pl.struct's fields from the block's SSBUF at a byte offset";
  ops.push_back(store);
  ops.push_back(load);
}

}  // namespace pypto_pro::ir
