// The one traversal of the IR. A statement's children are listed in one place (visitor.cpp);
// every analysis and pass walks the tree through IRVisitor or IRMutator and overrides only the
// nodes it cares about, so a new statement kind or field is a change in that one place.
#pragma once

#include <functional>
#include <optional>

#include "pypto_pro/ir/stmt.h"

namespace pypto_pro::ir {

// Walks statements and expressions in program order. The defaults recurse: a statement visits
// its expressions (value, loop bounds, condition, operands) and then its child statements; an
// expression visits its operands. Override and call the base to keep recursing.
class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  void Visit(const Stmt& s) {
    if (s) VisitStmt(*s);
  }
  void Visit(const Expr& e) {
    if (e) VisitExpr(*e);
  }

 protected:
  virtual void VisitStmt(const StmtNode& s);
  virtual void VisitExpr(const ExprNode& e);
  // The parts of the default, for overrides that need them separately.
  void VisitExprsOf(const StmtNode& s);
  void VisitChildrenOf(const StmtNode& s);
  // The section (pl.section_vector / pl.section_cube) around the node being visited, if any.
  std::optional<SectionKind> section() const { return section_; }

 private:
  std::optional<SectionKind> section_;
};

// Rebuilds a tree bottom-up, sharing every subtree it does not change. The defaults mutate a
// statement's expressions and children and copy the node only when one of them changed; in a
// sequence, a child mutated to null is dropped and a child mutated into a sequence is spliced in.
class IRMutator {
 public:
  virtual ~IRMutator() = default;
  Stmt Mutate(const Stmt& s) { return s ? MutateStmt(s) : s; }
  Expr Mutate(const Expr& e) { return e ? MutateExpr(e) : e; }

 protected:
  virtual Stmt MutateStmt(const Stmt& s);
  virtual Expr MutateExpr(const Expr& e);
};

// Calls `fn` on every statement of the tree, parents before children.
void ForEachStmt(const Stmt& root, const std::function<void(const StmtNode&)>& fn);
// Calls `fn` on every expression node under `root`, parents before operands.
void ForEachExpr(const Expr& root, const std::function<void(const ExprNode&)>& fn);

}  // namespace pypto_pro::ir
