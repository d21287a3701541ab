//===- UniformExpr.cpp - A manifest's uniform expressions -------------------===//
#include "UniformExpr.h"

#include "Error.h"

#include <cmath>
#include <sstream>

namespace qopt::rt {

namespace {

constexpr OpInfo kOps[] = {
    {"add", Expr::Op::Add, 2, -1},      {"sub", Expr::Op::Sub, 2, 2},
    {"mul", Expr::Op::Mul, 2, -1},      {"div", Expr::Op::Div, 2, 2},
    {"pow", Expr::Op::Pow, 2, 2},       {"neg", Expr::Op::Neg, 1, 1},
    {"sqrt", Expr::Op::Sqrt, 1, 1},     {"abs", Expr::Op::Abs, 1, 1},
    {"sign", Expr::Op::Sign, 1, 1},     {"min", Expr::Op::Min, 2, -1},
    {"max", Expr::Op::Max, 2, -1},      {"lt", Expr::Op::Lt, 2, 2},
    {"le", Expr::Op::Le, 2, 2},         {"gt", Expr::Op::Gt, 2, 2},
    {"ge", Expr::Op::Ge, 2, 2},         {"eq", Expr::Op::Eq, 2, 2},
    {"ne", Expr::Op::Ne, 2, 2},         {"and", Expr::Op::And, 2, -1},
    {"or", Expr::Op::Or, 2, -1},        {"not", Expr::Op::Not, 1, 1},
    {"select", Expr::Op::Select, 3, 3},
    {"exp", Expr::Op::Exp, 1, 1},       {"log", Expr::Op::Log, 1, 1},
    {"tanh", Expr::Op::Tanh, 1, 1},     {"atan2", Expr::Op::Atan2, 2, 2},
};

const OpInfo &opInfo(Expr::Op op) {
  for (const OpInfo &o : kOps)
    if (o.op == op)
      return o;
  return kOps[0];
}

} // namespace

const OpInfo *findOp(std::string_view name) {
  for (const OpInfo &o : kOps)
    if (name == o.name)
      return &o;
  return nullptr;
}

std::string opNames() {
  std::string list;
  for (const OpInfo &o : kOps)
    list += (list.empty() ? "" : " ") + std::string(o.name);
  return list;
}

double evaluate(const Expr &e, const std::vector<double> &h, double step) {
  switch (e.kind) {
  case Expr::Kind::Literal:
    return e.value;
  case Expr::Kind::Hyper:
    return h[e.hyper];
  case Expr::Kind::Step:
    return step;
  case Expr::Kind::Op:
    break;
  }
  auto arg = [&](size_t i) { return evaluate(e.operands[i], h, step); };
  auto truth = [](double v) { return v != 0.0; }; // NaN is true
  auto b = [](bool v) { return v ? 1.0 : 0.0; };
  switch (e.op) {
  case Expr::Op::Add: {
    double v = arg(0);
    for (size_t i = 1; i < e.operands.size(); ++i)
      v += arg(i);
    return v;
  }
  case Expr::Op::Mul: {
    double v = arg(0);
    for (size_t i = 1; i < e.operands.size(); ++i)
      v *= arg(i);
    return v;
  }
  case Expr::Op::Sub:
    return arg(0) - arg(1);
  case Expr::Op::Div:
    return arg(0) / arg(1);
  case Expr::Op::Pow:
    return std::pow(arg(0), arg(1));
  case Expr::Op::Neg:
    return -arg(0);
  case Expr::Op::Sqrt:
    return std::sqrt(arg(0));
  case Expr::Op::Abs:
    return std::fabs(arg(0));
  case Expr::Op::Sign: {
    double v = arg(0);
    return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; // +0 for ±0 and NaN, as torch.sign
  }
  case Expr::Op::Min:
  case Expr::Op::Max: {
    // NaN-propagating, as torch.minimum/maximum.
    double v = arg(0);
    for (size_t i = 1; i < e.operands.size(); ++i) {
      double w = arg(i);
      if (std::isnan(v) || std::isnan(w))
        v = std::nan("");
      else
        v = (e.op == Expr::Op::Min) ? (w < v ? w : v) : (w > v ? w : v);
    }
    return v;
  }
  case Expr::Op::Lt:
    return b(arg(0) < arg(1));
  case Expr::Op::Le:
    return b(arg(0) <= arg(1));
  case Expr::Op::Gt:
    return b(arg(0) > arg(1));
  case Expr::Op::Ge:
    return b(arg(0) >= arg(1));
  case Expr::Op::Eq:
    return b(arg(0) == arg(1));
  case Expr::Op::Ne:
    return b(arg(0) != arg(1));
  case Expr::Op::And: {
    bool v = true;
    for (size_t i = 0; i < e.operands.size(); ++i)
      v = v && truth(arg(i));
    return b(v);
  }
  case Expr::Op::Or: {
    bool v = false;
    for (size_t i = 0; i < e.operands.size(); ++i)
      v = v || truth(arg(i));
    return b(v);
  }
  case Expr::Op::Not:
    return b(!truth(arg(0)));
  case Expr::Op::Select:
    return truth(arg(0)) ? arg(1) : arg(2);
  // The C library's, as Python's math module and the frontend's folding.
  case Expr::Op::Exp:
    return std::exp(arg(0));
  case Expr::Op::Log:
    return std::log(arg(0));
  case Expr::Op::Tanh:
    return std::tanh(arg(0));
  case Expr::Op::Atan2:
    return std::atan2(arg(0), arg(1));
  }
  return std::nan("");
}

std::string toString(const Expr &e, const std::vector<std::string> &names) {
  switch (e.kind) {
  case Expr::Kind::Literal: {
    std::ostringstream os;
    os.precision(17);
    os << e.value;
    return os.str();
  }
  case Expr::Kind::Hyper:
    return "\"" + names[e.hyper] + "\"";
  case Expr::Kind::Step:
    return "\"step\"";
  case Expr::Kind::Op:
    break;
  }
  std::string s = cat("[\"", opInfo(e.op).name, "\"");
  for (const Expr &o : e.operands)
    s += ", " + toString(o, names);
  return s + "]";
}

} // namespace qopt::rt
