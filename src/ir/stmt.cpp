#include "pypto_pro/ir/stmt.h"

#include <algorithm>

namespace pypto_pro::ir {

const char* Name(SelectMode mode) {
  switch (mode) {
    case SelectMode::kNext: return "next";
    case SelectMode::kCurrent: return "current";
    case SelectMode::kPrevious: return "previous";
    case SelectMode::kIndex: return "index";
  }
  return "?";
}

const char* Name(SectionKind section) { return section == SectionKind::kVector ? "vector" : "cube"; }

const char* Name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kVector: return "vector";
    case KernelKind::kCube: return "cube";
    case KernelKind::kMixed: return "mixed";
  }
  return "?";
}

namespace {
std::shared_ptr<StmtNode> New(StmtKind kind, Span span) {
  auto node = std::make_shared<StmtNode>();
  node->kind = kind;
  node->span = span;
  return node;
}
}  // namespace

Stmt Seq(std::vector<Stmt> stmts, Span span) {
  auto node = New(StmtKind::kSeq, span);
  node->stmts = std::move(stmts);
  return node;
}

Stmt Assign(const Var& var, Expr value, Span span) {
  auto node = New(StmtKind::kAssign, span);
  node->var = var;
  node->value = std::move(value);
  return node;
}

Stmt For(const Var& var, Expr start, Expr stop, Expr step, Stmt body, Span span) {
  auto node = New(StmtKind::kFor, span);
  node->var = var;
  node->start = std::move(start);
  node->stop = std::move(stop);
  node->step = std::move(step);
  node->body = std::move(body);
  return node;
}

Stmt While(Expr cond, Stmt body, Span span) {
  auto node = New(StmtKind::kWhile, span);
  node->cond = std::move(cond);
  node->body = std::move(body);
  return node;
}

Stmt If(Expr cond, Stmt then_body, Stmt else_body, Span span) {
  auto node = New(StmtKind::kIf, span);
  node->cond = std::move(cond);
  node->body = std::move(then_body);
  node->orelse = std::move(else_body);
  return node;
}

Stmt Break(Span span) { return New(StmtKind::kBreak, span); }
Stmt Continue(Span span) { return New(StmtKind::kContinue, span); }
Stmt Return(Span span) { return New(StmtKind::kReturn, span); }

Stmt OpCall(const OpDef* op, std::vector<Expr> args, std::vector<Attr> attrs, Span span) {
  auto node = New(StmtKind::kOp, span);
  node->op = op;
  node->args = std::move(args);
  node->attrs = std::move(attrs);
  return node;
}

Stmt DeclTiles(const Var& group, Span span) {
  auto node = New(StmtKind::kDeclTiles, span);
  node->var = group;
  return node;
}

Stmt SelectTile(const Var& tile, const Var& group, SelectMode mode, Expr index, Span span) {
  auto node = New(StmtKind::kSelectTile, span);
  node->var = tile;
  node->group = group;
  node->mode = mode;
  node->value = std::move(index);
  return node;
}

Stmt Section(SectionKind section, Stmt body, Span span) {
  auto node = New(StmtKind::kSection, span);
  node->section = section;
  node->body = std::move(body);
  return node;
}

Stmt Subview(const Var& view, Expr tile, std::vector<Expr> bounds, Span span) {
  auto node = New(StmtKind::kSubview, span);
  node->var = view;
  node->value = std::move(tile);
  node->args = std::move(bounds);
  return node;
}

Stmt Reinterpret(const Var& view, Expr tile, Span span) {
  auto node = New(StmtKind::kReinterpret, span);
  node->var = view;
  node->value = std::move(tile);
  return node;
}

Stmt Stage(const std::string& name, Stmt body, Span span) {
  auto node = New(StmtKind::kStage, span);
  Attr attr;
  attr.name = "name";
  attr.text = name;
  attr.is_string = true;
  node->attrs.push_back(attr);
  node->body = std::move(body);
  return node;
}

Stmt FusedOps(Stmt body, Span span) {
  auto node = New(StmtKind::kFusedOps, span);
  node->body = std::move(body);
  return node;
}

Stmt DirectLoop(Stmt loop, Span span) {
  auto node = New(StmtKind::kDirectLoop, span);
  node->body = std::move(loop);
  return node;
}

Stmt KLoop(Stmt loop, std::vector<Expr> operands, Span span) {
  auto node = New(StmtKind::kKLoop, span);
  node->body = std::move(loop);
  node->args = std::move(operands);
  return node;
}

Stmt DirectRun(Stmt body, const std::vector<Var>& unwritten, Span span) {
  auto node = New(StmtKind::kDirectRun, span);
  for (const Var& var : unwritten) {
    Attr attr;
    attr.name = "unwritten";
    attr.value = var->id;
    attr.text = var->name;
    node->attrs.push_back(attr);
  }
  node->body = std::move(body);
  return node;
}

Stmt ForwardedMove(Stmt move, Span span) {
  auto node = New(StmtKind::kForwardedMove, span);
  node->body = std::move(move);
  return node;
}

namespace {
Attr InPlaceAttr(int number) {
  Attr attr;
  attr.name = "in_place";
  attr.value = number;
  return attr;
}
}  // namespace

Stmt ForwardedReads(Stmt matmul, const std::vector<ForwardedRead>& reads, Span span) {
  auto node = New(StmtKind::kForwardedReads, span);
  for (const ForwardedRead& read : reads) {
    node->args.push_back(VarRef(read.l0, span));
    node->args.push_back(VarRef(read.mat, span));
    node->attrs.push_back(InPlaceAttr(read.in_place));
  }
  node->body = std::move(matmul);
  return node;
}

Stmt InPlaceLoad(Stmt load, int number, Span span) {
  auto node = New(StmtKind::kInPlaceLoad, span);
  node->attrs.push_back(InPlaceAttr(number));
  node->body = std::move(load);
  return node;
}

std::shared_ptr<StmtNode> CopyNode(const Stmt& stmt) { return std::make_shared<StmtNode>(*stmt); }

Var Function::NewVar(const std::string& name, Type type, Span span, std::shared_ptr<const TileGroupInfo> group) {
  std::string unique = name;
  for (int n = 1; std::find(used_names_.begin(), used_names_.end(), unique) != used_names_.end(); ++n) {
    unique = name + "_" + std::to_string(n);
  }
  used_names_.push_back(unique);
  auto var = std::make_shared<VarNode>();
  var->name = unique;
  var->type = std::move(type);
  var->id = next_var_id++;
  var->span = span;
  var->group = std::move(group);
  return var;
}

int Function::NumDynamicDims() const {
  int count = 0;
  for (const Var& param : params) {
    if (!param->type.IsTensor()) continue;
    for (const Dim& dim : param->type.tensor->dims) count += dim.kind == DimKind::kDynamic ? 1 : 0;
  }
  return count;
}

}  // namespace pypto_pro::ir
