#include "pypto_pro/ir/visitor.h"

namespace pypto_pro::ir {

namespace {

// The expression fields of a statement, in program order. The one list of them.
template <typename Fn>
void ForEachExprField(const StmtNode& s, Fn&& fn) {
  fn(s.value);
  fn(s.start);
  fn(s.stop);
  fn(s.step);
  fn(s.cond);
  for (const Expr& arg : s.args) fn(arg);
}

std::vector<Stmt> SpliceSeq(const std::vector<Stmt>& old_children, std::vector<Stmt> children) {
  std::vector<Stmt> out;
  out.reserve(children.size());
  for (size_t i = 0; i < children.size(); ++i) {
    const Stmt& child = children[i];
    if (!child) continue;
    if (child != old_children[i] && child->kind == StmtKind::kSeq) {
      out.insert(out.end(), child->stmts.begin(), child->stmts.end());
    } else {
      out.push_back(child);
    }
  }
  return out;
}

}  // namespace

void IRVisitor::VisitExprsOf(const StmtNode& s) {
  ForEachExprField(s, [&](const Expr& e) { Visit(e); });
}

void IRVisitor::VisitChildrenOf(const StmtNode& s) {
  const std::optional<SectionKind> outer = section_;
  if (s.kind == StmtKind::kSection) section_ = s.section;
  for (const Stmt& child : s.stmts) Visit(child);
  Visit(s.body);
  Visit(s.orelse);
  section_ = outer;
}

void IRVisitor::VisitStmt(const StmtNode& s) {
  VisitExprsOf(s);
  VisitChildrenOf(s);
}

void IRVisitor::VisitExpr(const ExprNode& e) {
  for (const Expr& operand : e.operands) Visit(operand);
}

Stmt IRMutator::MutateStmt(const Stmt& s) {
  bool changed = false;
  auto expr = [&](const Expr& e) {
    Expr out = Mutate(e);
    changed |= out != e;
    return out;
  };
  auto stmt = [&](const Stmt& child) {
    Stmt out = Mutate(child);
    changed |= out != child;
    return out;
  };
  Expr value = expr(s->value), start = expr(s->start), stop = expr(s->stop), step = expr(s->step),
       cond = expr(s->cond);
  std::vector<Expr> args;
  args.reserve(s->args.size());
  for (const Expr& arg : s->args) args.push_back(expr(arg));
  std::vector<Stmt> children;
  children.reserve(s->stmts.size());
  for (const Stmt& child : s->stmts) children.push_back(stmt(child));
  Stmt body = stmt(s->body), orelse = stmt(s->orelse);
  if (!changed) return s;
  auto node = CopyNode(s);
  node->value = value;
  node->start = start;
  node->stop = stop;
  node->step = step;
  node->cond = cond;
  node->args = std::move(args);
  node->stmts = SpliceSeq(s->stmts, std::move(children));
  node->body = body;
  node->orelse = orelse;
  return node;
}

Expr IRMutator::MutateExpr(const Expr& e) {
  std::vector<Expr> operands;
  operands.reserve(e->operands.size());
  bool changed = false;
  for (const Expr& operand : e->operands) {
    operands.push_back(Mutate(operand));
    changed |= operands.back() != operand;
  }
  if (!changed) return e;
  auto node = std::make_shared<ExprNode>(*e);
  node->operands = std::move(operands);
  return node;
}

void ForEachStmt(const Stmt& root, const std::function<void(const StmtNode&)>& fn) {
  struct Walker : IRVisitor {
    const std::function<void(const StmtNode&)>& fn;
    explicit Walker(const std::function<void(const StmtNode&)>& f) : fn(f) {}
    void VisitStmt(const StmtNode& s) override {
      fn(s);
      VisitChildrenOf(s);
    }
  } walker(fn);
  walker.Visit(root);
}

void ForEachExpr(const Expr& root, const std::function<void(const ExprNode&)>& fn) {
  struct Walker : IRVisitor {
    const std::function<void(const ExprNode&)>& fn;
    explicit Walker(const std::function<void(const ExprNode&)>& f) : fn(f) {}
    void VisitExpr(const ExprNode& e) override {
      fn(e);
      IRVisitor::VisitExpr(e);
    }
  } walker(fn);
  walker.Visit(root);
}

}  // namespace pypto_pro::ir
