// Helpers for the OpDef::check functions of the op families (internal to src/ir).
#pragma once

#include <string>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

// Where an error about operand `i` points: the operand itself when it has a location, else the call.
inline Span OperandSpan(const StmtNode& call, size_t i) {
  const Expr& arg = call.args.at(i);
  return arg && arg->span.valid() ? arg->span : call.span;
}

inline const TileType& TileOf(const StmtNode& call, size_t i) { return *call.args.at(i)->type.tile; }

// "[128, 64]": a tile's shape as rows x cols (a 1-D tile is one row).
inline std::string ShapeText(const TileType& t) {
  return "[" + std::to_string(t.Rows()) + ", " + std::to_string(t.Cols()) + "]";
}

inline std::string OperandName(const StmtNode& call, size_t i) {
  return "'" + std::string(call.op->operands.at(i).name) + "'";
}

inline std::string CallName(const StmtNode& call) { return "pl." + std::string(call.op->PublicName()); }

}  // namespace pypto_pro::ir
