// pypto_pro._C.ir: the IR builder the Python parser drives, and the registry it reads.
#include <pybind11/stl.h>

#include "bindings.h"
#include "pypto_pro/codegen/codegen.h"
#include "pypto_pro/codegen/python_writer.h"
#include "pypto_pro/ir/printer.h"
#include "pypto_pro/ir/verifier.h"
#include "pypto_pro/passes/pass.h"

namespace pypto_pro::python {

using namespace ir;

namespace {

struct PyVar {
  Var var;
};
struct PyExpr {
  Expr expr;
};
struct PyStmt {
  Stmt stmt;
};

Span At(int line, int col) { return Span{line, col}; }

DataType ParseDType(const std::string& name) {
  auto dtype = DataTypeFromName(name);
  if (!dtype) Fail(ErrorKind::kType, {}, "unknown dtype '" + name + "'");
  return *dtype;
}

const char* KindName(TypeKind kind) {
  switch (kind) {
    case TypeKind::kScalar: return "scalar";
    case TypeKind::kTensor: return "tensor";
    case TypeKind::kTile: return "tile";
    case TypeKind::kTileGroup: return "group";
    case TypeKind::kTuple: return "tuple";
    case TypeKind::kStruct: return "struct";
    case TypeKind::kPtr: return "ptr";
  }
  return "?";
}

// (dtype, shape, memory, layout, valid_shape, pad, compact) as the Python front end validated it.
using TileSpec =
    std::tuple<std::string, std::vector<int64_t>, std::string, std::string, std::vector<int64_t>, int, int>;

TileType ParseTileSpec(const TileSpec& spec, Span span) {
  TileType t;
  t.dtype = ParseDType(std::get<0>(spec));
  t.shape = std::get<1>(spec);
  auto memory = MemorySpaceFromName(std::get<2>(spec));
  auto layout = LayoutFromName(std::get<3>(spec));
  if (!memory) Fail(ErrorKind::kType, span, "unknown memory space '" + std::get<2>(spec) + "'");
  if (!layout) Fail(ErrorKind::kType, span, "unknown layout '" + std::get<3>(spec) + "'");
  t.memory = *memory;
  t.layout = *layout;
  t.valid_shape = std::get<4>(spec);
  t.pad = std::get<5>(spec);
  if (t.pad < 0 || t.pad > 3) Fail(ErrorKind::kValue, span, "a tile's pad is a pl.TilePad value (0..3)");
  t.compact = std::get<6>(spec);
  if (t.compact < 0 || t.compact > 1) Fail(ErrorKind::kValue, span, "a tile's compact mode is 0 or 1 here");
  if (t.shape.empty() || t.shape.size() > 2) Fail(ErrorKind::kType, span, "a tile shape has 1 or 2 dims");
  if (t.valid_shape.size() != t.shape.size()) Fail(ErrorKind::kType, span, "valid_shape must match the tile rank");
  return t;
}

StructType LayoutStruct(const std::string& name, const std::vector<std::tuple<std::string, std::string, int>>& fields) {
  std::vector<StructField> out;
  for (const auto& [fname, dtype, count] : fields) out.push_back({fname, ParseDType(dtype), count, 0});
  return StructType::Layout(name, std::move(out));
}

TileSpec ToTileSpec(const TileType& t) {
  return {std::string(Name(t.dtype)), t.shape, std::string(Name(t.memory)), std::string(Name(t.layout)),
          t.valid_shape, t.pad, t.compact};
}

std::vector<Expr> Unwrap(const std::vector<PyExpr>& items) {
  std::vector<Expr> out;
  for (const PyExpr& item : items) out.push_back(item.expr);
  return out;
}

std::vector<Stmt> UnwrapStmts(const std::vector<PyStmt>& items) {
  std::vector<Stmt> out;
  for (const PyStmt& item : items) out.push_back(item.stmt);
  return out;
}

// Front-end keyword values: None, int, bool, float (as a constant expression), str, or an Expr.
std::map<std::string, KwargValue> ConvertKwargs(const py::dict& kwargs, Span span) {
  std::map<std::string, KwargValue> out;
  for (auto item : kwargs) {
    std::string key = py::str(item.first).cast<std::string>();
    py::handle v = item.second;
    KwargValue value;
    if (v.is_none()) {
      value.kind = KwargValue::Kind::kNone;
    } else if (py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v)) {
      value.kind = KwargValue::Kind::kInt;
      value.i = v.cast<int64_t>();
    } else if (py::isinstance<py::float_>(v)) {
      value.kind = KwargValue::Kind::kExpr;
      value.e = FloatConst(v.cast<double>(), span);
    } else if (py::isinstance<py::str>(v)) {
      value.kind = KwargValue::Kind::kString;
      value.s = v.cast<std::string>();
    } else if (py::isinstance<PyExpr>(v)) {
      value.kind = KwargValue::Kind::kExpr;
      value.e = v.cast<const PyExpr&>().expr;
    } else {
      Fail(ErrorKind::kType, span, "keyword '" + key + "' has a value the kernel language cannot take");
    }
    out.emplace(std::move(key), std::move(value));
  }
  return out;
}

const char* AttrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::kInt: return "int";
    case AttrKind::kBool: return "bool";
    case AttrKind::kEnum: return "enum";
    case AttrKind::kString: return "str";
    case AttrKind::kDispatch: return "dispatch";
    case AttrKind::kOperand: return "operand";
    case AttrKind::kAxes: return "axes";
    case AttrKind::kFloat: return "float";
  }
  return "?";
}

}  // namespace

void BindIR(py::module_& parent) {
  py::module_ m = parent.def_submodule("ir", "The IR builder driven by the Python parser.");

  py::class_<PyVar>(m, "Var")
      .def_property_readonly("name", [](const PyVar& v) { return v.var->name; })
      .def_property_readonly("id", [](const PyVar& v) { return v.var->id; })
      .def_property_readonly("kind", [](const PyVar& v) { return KindName(v.var->type.kind); })
      .def_property_readonly("dtype", [](const PyVar& v) { return std::string(Name(v.var->type.dtype)); })
      .def_property_readonly("dims",
                             [](const PyVar& v) {
                               // A GM tensor's dims: the constant ones, None for those known at run time.
                               py::list dims;
                               if (!v.var->type.IsTensor()) return dims;
                               for (const Dim& d : v.var->type.tensor->dims) {
                                 const bool known = d.IsConstant() && d.kind != DimKind::kDynamic;
                                 dims.append(known ? py::object(py::int_(d.value)) : py::object(py::none()));
                               }
                               return dims;
                             })
      .def_property_readonly("rank",
                             [](const PyVar& v) {
                               return v.var->type.IsTensor() ? int(v.var->type.tensor->dims.size()) : 0;
                             })
      .def_property_readonly("tile",
                             [](const PyVar& v) -> py::object {
                               if (!v.var->type.tile) return py::none();
                               return py::cast(ToTileSpec(*v.var->type.tile));
                             })
      .def_property_readonly("depth", [](const PyVar& v) { return v.var->group ? v.var->group->depth : 0; })
      .def("__repr__", [](const PyVar& v) { return "<Var " + v.var->name + ": " + v.var->type.ToString() + ">"; });

  py::class_<PyExpr>(m, "Expr")
      .def_property_readonly("kind", [](const PyExpr& e) { return KindName(e.expr->type.kind); })
      .def_property_readonly("dtype", [](const PyExpr& e) { return std::string(Name(e.expr->type.dtype)); })
      .def_property_readonly("is_const", [](const PyExpr& e) { return e.expr->IsConst(); })
      .def_property_readonly("type", [](const PyExpr& e) { return e.expr->type.ToString(); })
      .def_property_readonly("value",
                             [](const PyExpr& e) -> py::object {
                               if (!e.expr->IsConst()) return py::none();
                               if (e.expr->type.dtype == DataType::kBool) return py::bool_(e.expr->int_value != 0);
                               if (IsFloat(e.expr->type.dtype)) return py::float_(e.expr->float_value);
                               return py::int_(e.expr->int_value);
                             })
      .def("__str__", [](const PyExpr& e) { return Print(e.expr); })
      .def("__repr__", [](const PyExpr& e) { return "<Expr " + Print(e.expr) + ">"; });

  py::class_<PyStmt>(m, "Stmt").def("__str__", [](const PyStmt& s) { return Print(s.stmt); });

  py::class_<PyFunction>(m, "Function")
      .def_property_readonly("name", [](const PyFunction& f) { return f.func->name; })
      .def("__str__", [](const PyFunction& f) { return Print(*f.func); })
      .def("verify", [](const PyFunction& f) { Verify(*f.func); })
      .def(
          "run_passes",
          [](const PyFunction& f, const std::string& arch_name) {
            const ArchModel* arch = FindArch(arch_name);
            if (!arch) Fail(ErrorKind::kValue, {}, "unknown arch '" + arch_name + "'");
            Function copy = *f.func;
            passes::PassContext ctx;
            ctx.arch = arch;
            std::vector<std::pair<std::string, std::string>> dumps;
            passes::RunPipeline(copy, ctx, [&](std::string_view pass, const Function& fn) {
              dumps.emplace_back(std::string(pass), Print(fn));
            });
            return dumps;
          },
          py::arg("arch") = "a5", "Runs the pass pipeline on a copy; returns [(pass, IR text)].")
      .def(
          "generate",
          [](const PyFunction& f, const std::string& arch_name) {
            const ArchModel* arch = FindArch(arch_name);
            if (!arch) Fail(ErrorKind::kValue, {}, "unknown arch '" + arch_name + "'");
            Function copy = *f.func;
            passes::PassContext ctx;
            ctx.arch = arch;
            passes::RunPipeline(copy, ctx);
            auto sources = codegen::Generate(copy, *arch);
            return std::make_pair(sources.kernel_cpp, sources.call_kernel_cpp);
          },
          py::arg("arch") = "a5", "Passes + codegen on a copy; returns (kernel_cpp, call_kernel_cpp).");

  py::class_<Function, std::shared_ptr<Function>>(m, "FunctionBuilder")
      .def(py::init([](const std::string& name, const std::string& source_file) {
        auto f = std::make_shared<Function>();
        f->name = name;
        f->source_file = source_file;
        return f;
      }))
      .def("add_source_file",
           [](Function& f, const std::string& path) {
             // The file index of a helper's module (support/source_line.h); 0 is the kernel's own.
             if (path == f.source_file) return 0;
             for (size_t i = 0; i < f.other_files.size(); ++i) {
               if (f.other_files[i] == path) return int(i + 1);
             }
             f.other_files.push_back(path);
             return int(f.other_files.size());
           })
      .def_property_readonly("source_files",
                             [](const Function& f) {
                               std::vector<std::string> files{f.source_file};
                               files.insert(files.end(), f.other_files.begin(), f.other_files.end());
                               return files;
                             })
      .def("tensor_param",
           [](Function& f, const std::string& name, const std::string& dtype,
              const std::vector<std::pair<std::string, int64_t>>& dims, int line, int col) {
             TensorType t;
             t.dtype = ParseDType(dtype);
             int dyn = f.NumDynamicDims();
             for (const auto& [kind, value] : dims) {
               Dim d;
               d.kind = kind == "fixed" ? DimKind::kFixed : kind == "static" ? DimKind::kStatic : DimKind::kDynamic;
               d.value = d.kind == DimKind::kDynamic ? -1 : value;
               if (d.kind == DimKind::kDynamic) d.dyn_slot = dyn++;
               t.dims.push_back(d);
             }
             Var v = f.NewVar(name, Type::Tensor(std::move(t)), At(line, col));
             f.params.push_back(v);
             return PyVar{v};
           })
      .def("tiling_param",
           [](Function& f, const std::string& name, const std::string& class_name,
              const std::vector<std::tuple<std::string, std::string, int>>& fields, int line, int col) {
             Var v = f.NewVar(name, Type::Struct(LayoutStruct(class_name, fields)), At(line, col));
             f.params.push_back(v);
             return PyVar{v};
           })
      .def("ptr_param",
           [](Function& f, const std::string& name, const std::string& dtype, int line, int col) {
             Var v = f.NewVar(name, Type::Ptr(ParseDType(dtype)), At(line, col));
             f.params.push_back(v);
             return PyVar{v};
           })
      .def("value_var",
           [](Function& f, const std::string& name, const PyExpr& value, int line, int col) {
             // A variable of the value's type: GM views (pl.make_tensor) and pointers (pl.addptr, ...).
             return PyVar{f.NewVar(name, value.expr->type, At(line, col))};
           })
      .def("scalar_param",
           [](Function& f, const std::string& name, const std::string& dtype, int line, int col) {
             Var v = f.NewVar(name, Type::Scalar(ParseDType(dtype)), At(line, col));
             f.params.push_back(v);
             return PyVar{v};
           })
      .def("scalar_var",
           [](Function& f, const std::string& name, const std::string& dtype, int line, int col) {
             return PyVar{f.NewVar(name, Type::Scalar(ParseDType(dtype)), At(line, col))};
           })
      .def("tile_var",
           [](Function& f, const std::string& name, const TileSpec& spec, int line, int col) {
             return PyVar{f.NewVar(name, Type::Tile(ParseTileSpec(spec, At(line, col))), At(line, col))};
           })
      .def("group_var",
           [](Function& f, const std::string& name, const TileSpec& spec, const std::vector<int64_t>& addrs,
              const std::vector<std::vector<int>>& mutex_ids, int depth, bool single, int line, int col,
              const std::vector<int>& fwd_ids, const std::vector<int>& bwd_ids) {
             auto info = std::make_shared<TileGroupInfo>();
             info->fwd_ids = fwd_ids;
             info->bwd_ids = bwd_ids;
             info->tile = ParseTileSpec(spec, At(line, col));
             info->addrs = addrs;
             info->mutex_ids = mutex_ids;
             info->depth = depth;
             info->single_tile = single;
             TileType tile = info->tile;
             return PyVar{f.NewVar(name, Type::TileGroup(tile), At(line, col), info)};
           },
           py::arg("name"), py::arg("spec"), py::arg("addrs"), py::arg("mutex_ids"), py::arg("depth"), py::arg("single"),
           py::arg("line"), py::arg("col"), py::arg("fwd_ids") = std::vector<int>{},
           py::arg("bwd_ids") = std::vector<int>{})
      .def("finish", [](const std::shared_ptr<Function>& f, const PyStmt& body) {
        auto out = std::make_shared<Function>(*f);
        out->body = body.stmt;
        return PyFunction{out};
      });

  // Expressions.
  m.def("const_int", [](int64_t v, int line, int col, const std::string& dtype) {
    return PyExpr{IntConst(v, At(line, col), ParseDType(dtype))};
  }, py::arg("value"), py::arg("line") = 0, py::arg("col") = 0, py::arg("dtype") = "int32");
  m.def("const_float", [](double v, int line, int col) { return PyExpr{FloatConst(v, At(line, col))}; },
        py::arg("value"), py::arg("line") = 0, py::arg("col") = 0);
  m.def("const_bool", [](bool v, int line, int col) { return PyExpr{BoolConst(v, At(line, col))}; },
        py::arg("value"), py::arg("line") = 0, py::arg("col") = 0);
  m.def("var_ref", [](const PyVar& v, int line, int col) { return PyExpr{VarRef(v.var, At(line, col))}; },
        py::arg("var"), py::arg("line") = 0, py::arg("col") = 0);
  m.def("binary", [](const std::string& op, const PyExpr& a, const PyExpr& b, int line, int col) {
    static const std::vector<std::pair<std::string, BinaryOp>> ops = {
        {"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}, {"*", BinaryOp::kMul}, {"/", BinaryOp::kDiv},
        {"//", BinaryOp::kFloorDiv}, {"%", BinaryOp::kMod}, {"min", BinaryOp::kMin}, {"max", BinaryOp::kMax},
        {"==", BinaryOp::kEq}, {"!=", BinaryOp::kNe}, {"<", BinaryOp::kLt}, {"<=", BinaryOp::kLe},
        {">", BinaryOp::kGt}, {">=", BinaryOp::kGe}, {"and", BinaryOp::kAnd}, {"or", BinaryOp::kOr},
        {"&", BinaryOp::kBitAnd}, {"|", BinaryOp::kBitOr}, {"^", BinaryOp::kBitXor}, {"<<", BinaryOp::kShl},
        {">>", BinaryOp::kShr}};
    for (const auto& [symbol, kind] : ops) {
      if (symbol == op) return PyExpr{Binary(kind, a.expr, b.expr, At(line, col))};
    }
    Fail(ErrorKind::kUnsupported, At(line, col), "operator '" + op + "' is not supported on kernel scalars");
  }, py::arg("op"), py::arg("lhs"), py::arg("rhs"), py::arg("line") = 0, py::arg("col") = 0);
  m.def("unary", [](const std::string& op, const PyExpr& a, int line, int col) {
    if (op != "-" && op != "not" && op != "~") {
      Fail(ErrorKind::kUnsupported, At(line, col), "unary '" + op + "' is not supported");
    }
    return PyExpr{Unary(op == "-" ? UnaryOp::kNeg : op == "not" ? UnaryOp::kNot : UnaryOp::kBitNot, a.expr,
                        At(line, col))};
  }, py::arg("op"), py::arg("operand"), py::arg("line") = 0, py::arg("col") = 0);
  m.def("ternary", [](const PyExpr& c, const PyExpr& a, const PyExpr& b, int line, int col) {
    return PyExpr{Ternary(c.expr, a.expr, b.expr, At(line, col))};
  });
  m.def("cast", [](const PyExpr& a, const std::string& dtype, int line, int col) {
    return PyExpr{Cast(a.expr, ParseDType(dtype), At(line, col))};
  });
  m.def("builtin", [](const std::string& name, int line, int col) {
    for (Builtin b : {Builtin::kBlockIdx, Builtin::kBlockNum, Builtin::kSubblockIdx, Builtin::kSubblockNum}) {
      if (name == Name(b)) return PyExpr{BuiltinCall(b, At(line, col))};
    }
    Fail(ErrorKind::kUndefined, At(line, col), "unknown builtin pl." + name);
  });
  m.def("register_read", [](const std::string& name, const std::vector<PyExpr>& args, int line, int col) {
    for (Builtin b : {Builtin::kSpr, Builtin::kCtrlSpr, Builtin::kSaturationFlag}) {
      if (name == Name(b)) return PyExpr{RegisterRead(b, Unwrap(args), At(line, col))};
    }
    Fail(ErrorKind::kUndefined, At(line, col), "unknown register read pl." + name);
  }, "pl.get_spr(), pl.get_ctrl_spr(start_bit, end_bit), pl.get_saturation_flag(mode index): a scalar.");
  m.def("shape_dim", [](const PyVar& tensor, int axis, int line, int col) {
    return PyExpr{ShapeDim(tensor.var, axis, At(line, col))};
  });
  m.def("field", [](const PyVar& strct, const std::string& name, std::optional<PyExpr> index, int line, int col) {
    return PyExpr{Field(strct.var, name, index ? index->expr : nullptr, At(line, col))};
  });
  m.def("element", [](const PyVar& container, const PyExpr& offset, int line, int col) {
    return PyExpr{Element(container.var, offset.expr, At(line, col))};
  });
  m.def("make_view", [](const PyExpr& source, const std::vector<PyExpr>& shape, const std::vector<PyExpr>& stride,
                        const std::string& dtype, int line, int col) {
    return PyExpr{MakeView(source.expr, Unwrap(shape), Unwrap(stride), ParseDType(dtype), At(line, col))};
  });
  m.def("ptr_offset", [](const PyExpr& ptr, const PyExpr& offset, const std::string& dtype, int line, int col) {
    return PyExpr{PtrOffset(ptr.expr, offset.expr, ParseDType(dtype), At(line, col))};
  });
  m.def("valid_shape", [](const PyVar& tile, int axis, int line, int col) {
    return PyExpr{ValidShape(tile.var, axis, At(line, col))};
  });
  m.def("struct_layout", [](const std::string& name, const std::vector<std::tuple<std::string, std::string, int>>& f) {
    StructType t = LayoutStruct(name, f);
    std::vector<std::tuple<std::string, std::string, int, int64_t>> fields;
    for (const StructField& each : t.fields) {
      fields.emplace_back(each.name, std::string(Name(each.dtype)), each.count, each.offset);
    }
    return std::make_pair(fields, t.size);
  }, "C layout of a TilingData struct: ([(name, dtype, count, offset)], size).");
  m.def("tuple", [](const std::vector<PyExpr>& items, int line, int col) {
    return PyExpr{Tuple(Unwrap(items), At(line, col))};
  });

  // Statements.
  m.def("ssbuf_op", [](const std::string& name, const PyExpr& offset, const std::vector<PyExpr>& fields,
                       const std::string& struct_name, int line, int col) {
    // The front end's pl.ssbuf_store / ssbuf_load(struct, offset): the struct's field variables.
    if (name != "ssbuf_store" && name != "ssbuf_load") Fail(ErrorKind::kInternal, At(line, col), "not an ssbuf op");
    Attr attr;
    attr.name = "name";
    attr.is_string = true;
    attr.text = struct_name;
    Stmt call = OpCall(FindOp(name), {offset.expr, Tuple(Unwrap(fields), At(line, col))}, {attr}, At(line, col));
    call->op->check(*call);
    return PyStmt{call};
  });
  m.def("check_index", [](const PyExpr& index, int64_t lo, int64_t hi, const std::string& what, int line, int col) {
    return PyStmt{CheckIndexCall(index.expr, lo, hi, what, At(line, col))};
  });
  m.def("seq", [](const std::vector<PyStmt>& stmts) { return PyStmt{Seq(UnwrapStmts(stmts))}; });
  m.def("assign", [](const PyVar& v, const PyExpr& e, int line, int col) {
    return PyStmt{Assign(v.var, e.expr, At(line, col))};
  });
  m.def("for_", [](const PyVar& v, const PyExpr& start, const PyExpr& stop, const PyExpr& step, const PyStmt& body,
                   int line, int col) {
    return PyStmt{For(v.var, start.expr, stop.expr, step.expr, body.stmt, At(line, col))};
  });
  m.def("while_", [](const PyExpr& cond, const PyStmt& body, int line, int col) {
    return PyStmt{While(cond.expr, body.stmt, At(line, col))};
  });
  m.def("if_", [](const PyExpr& cond, const PyStmt& then_body, std::optional<PyStmt> else_body, int line, int col) {
    return PyStmt{If(cond.expr, then_body.stmt, else_body ? else_body->stmt : nullptr, At(line, col))};
  });
  m.def("break_", [](int line, int col) { return PyStmt{Break(At(line, col))}; });
  m.def("continue_", [](int line, int col) { return PyStmt{Continue(At(line, col))}; });
  m.def("return_", [](int line, int col) { return PyStmt{Return(At(line, col))}; });
  m.def(
      "op",
      [](const std::string& name, const std::vector<PyExpr>& args, const py::dict& kwargs, int line, int col) {
        return PyStmt{BuildOpCall(name, Unwrap(args), ConvertKwargs(kwargs, At(line, col)), At(line, col))};
      },
      py::arg("name"), py::arg("args"), py::arg("kwargs"), py::arg("line"), py::arg("col"));
  m.def("decl_tiles", [](const PyVar& group, int line, int col) {
    return PyStmt{DeclTiles(group.var, At(line, col))};
  });
  m.def("select_tile", [](const PyVar& tile, const PyVar& group, const std::string& mode,
                          std::optional<PyExpr> index, int line, int col) {
    SelectMode m = mode == "next" ? SelectMode::kNext
                   : mode == "current" ? SelectMode::kCurrent
                   : mode == "previous" ? SelectMode::kPrevious
                                        : SelectMode::kIndex;
    return PyStmt{SelectTile(tile.var, group.var, m, index ? index->expr : nullptr, At(line, col))};
  });
  m.def("stage", [](const std::string& name, const PyStmt& body, int line, int col) {
    return PyStmt{Stage(name, body.stmt, At(line, col))};
  });
  m.def("reinterpret", [](const PyVar& view, const PyVar& tile, int line, int col) {
    return PyStmt{Reinterpret(view.var, VarRef(tile.var, At(line, col)), At(line, col))};
  });
  m.def("subview", [](const PyVar& view, const PyVar& tile, const std::vector<PyExpr>& bounds, int line, int col) {
    return PyStmt{Subview(view.var, VarRef(tile.var, At(line, col)), Unwrap(bounds), At(line, col))};
  });
  m.def("section", [](const std::string& kind, const PyStmt& body, int line, int col) {
    return PyStmt{Section(kind == "cube" ? SectionKind::kCube : SectionKind::kVector, body.stmt, At(line, col))};
  });

  // The registry, for the front end (op stubs in the pl namespace) and for docs.
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (const OpDef& op : AllOps()) {
      if (!op.internal && op.PublicName() == op.name) names.emplace_back(op.name);
    }
    return names;
  }, "Ops kernels can call by name.");
  m.def("planned_ops", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const PlannedOp& op : PlannedOps()) out.emplace_back(std::string(op.name), std::string(op.doc));
    return out;
  });
  m.def("op_info", [](const std::string& name) {
    const OpDef* op = FindOp(name);
    if (!op) throw py::key_error(name);
    py::dict info;
    std::vector<std::string> operands;
    for (const OperandSpec& s : op->operands) operands.emplace_back(s.name);
    py::list kwargs;
    for (const KwargSpec& k : op->kwargs) {
      py::dict kw;
      kw["name"] = std::string(k.name);
      kw["kind"] = std::string(AttrKindName(k.kind));
      std::vector<std::string> choices(k.choices.begin(), k.choices.end());
      kw["choices"] = choices;
      kw["default"] = k.default_value;
      if (k.kind == AttrKind::kEnum) kw["python_enum"] = codegen::PythonEnumOf(*op, k);  // pipeline_generated.py
      kwargs.append(kw);
    }
    info["name"] = std::string(op->name);
    info["operands"] = operands;
    info["kwargs"] = kwargs;
    info["pipe"] = std::string(Name(op->pipe));
    info["scalar_form"] = std::string(op->scalar_form);
    info["signature"] = op->Signature();
    info["doc"] = std::string(op->doc);
    static constexpr const char* kCallForms[] = {"operands", "format", "assert"};
    info["call_form"] = kCallForms[size_t(op->call_form)];
    info["per_slot"] = op->per_slot;
    info["pairs_with"] = std::string(op->sync.pairs_with);
    info["row_local"] = passes::RowLocalOp(*op);  // fuse_rows may run it strip by strip
    static constexpr const char* kRoles[] = {"same", "column", "row", "any"};
    static constexpr const char* kKinds[] = {"tile", "tensor", "offsets", "scalar", "tiles", "scalars",
                                             "container", "index", "workspaces"};
    py::list specs;
    for (const OperandSpec& o : op->operands) {
      specs.append(py::make_tuple(std::string(o.name), kKinds[size_t(o.kind)], o.access != Access::kRead,
                                  kRoles[size_t(o.shape)]));
    }
    info["operand_specs"] = specs;  // (name, kind, written, shape role)
    return info;
  });
}

}  // namespace pypto_pro::python
