//===- TabulateCodes.cpp - Dequantize 8-bit codes through tables ----------===//
//
// An exact strength reduction: float arithmetic that depends on an 8-bit code
// alone (q / 127, the inverse softsign, rho / 127, ...) is evaluated at
// compile time for all 256 codes, in IEEE single precision with one rounding
// per operation, and replaced by a lookup in a shared-memory table.
//
//===----------------------------------------------------------------------===//

#include "qopt/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::qopt {
#define GEN_PASS_DEF_TABULATECODES
#include "qopt/Transforms/Passes.h.inc"
} // namespace mlir::qopt

using namespace mlir;
using namespace mlir::qopt;
using llvm::APFloat;

/// The f32 constant an operand holds (a scalar or a splat), if it is one.
static std::optional<APFloat> constantOperand(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValue();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>();
  return std::nullopt;
}

static bool isFabs(Operation *op) {
  auto call = dyn_cast<LLVM::CallIntrinsicOp>(op);
  return call && call.getIntrin() == "llvm.fabs" && call.getNumOperands() == 1;
}

/// Operations the evaluator knows, all elementwise with one f32 result and
/// one IEEE rounding.
static bool isTabulable(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp>(op) ||
         isFabs(op);
}

/// Evaluates `op` on scalar operands, as the GPU does with the .rn forms.
static APFloat evaluate(Operation *op, ArrayRef<APFloat> args) {
  APFloat r = args[0];
  auto rm = APFloat::rmNearestTiesToEven;
  if (isa<arith::AddFOp>(op))
    r.add(args[1], rm);
  else if (isa<arith::SubFOp>(op))
    r.subtract(args[1], rm);
  else if (isa<arith::MulFOp>(op))
    r.multiply(args[1], rm);
  else if (isa<arith::DivFOp>(op))
    r.divide(args[1], rm);
  else if (isa<arith::NegFOp>(op))
    r.changeSign();
  else // fabs
    r.clearSign();
  return r;
}

namespace {
/// The code-only arithmetic hanging off one integer-to-float conversion.
struct CodeChain {
  Operation *conversion;                  // arith.sitofp / arith.uitofp
  llvm::SetVector<Operation *> ops;       // in program order
  llvm::SetVector<Value> values;          // conversion result and op results
};

struct TabulateCodesPass
    : public qopt::impl::TabulateCodesBase<TabulateCodesPass> {
  void runOnOperation() override;

  /// The table of `exit` for every code byte 0..255.
  SmallVector<float> tabulate(const CodeChain &chain, Value exit);
  Value materializeTable(gpu::GPUFuncOp func, ArrayRef<float> table);

  SmallVector<std::pair<SmallVector<float>, Value>> tables; // per function
  unsigned numGlobals = 0;
};
} // namespace

SmallVector<float> TabulateCodesPass::tabulate(const CodeChain &chain,
                                               Value exit) {
  SmallVector<float> table(256);
  bool isSigned = isa<arith::SIToFPOp>(chain.conversion);
  for (int byte = 0; byte < 256; ++byte) {
    llvm::DenseMap<Value, APFloat> at;
    int code = isSigned ? static_cast<int8_t>(byte) : byte;
    at.try_emplace(chain.conversion->getResult(0),
                   APFloat(static_cast<float>(code)));
    for (Operation *op : chain.ops) {
      SmallVector<APFloat> args;
      for (Value operand : op->getOperands()) {
        auto known = at.find(operand);
        args.push_back(known != at.end() ? known->second
                                         : *constantOperand(operand));
      }
      at.try_emplace(op->getResult(0), evaluate(op, args));
    }
    table[byte] = at.find(exit)->second.convertToFloat();
  }
  return table;
}

Value TabulateCodesPass::materializeTable(gpu::GPUFuncOp func,
                                          ArrayRef<float> table) {
  for (auto &[values, shared] : tables)
    if (ArrayRef<float>(values) == table)
      return shared;

  auto module = func->getParentOfType<gpu::GPUModuleOp>();
  OpBuilder b(func.getContext());
  Location loc = func.getLoc();
  auto f32 = b.getF32Type();
  auto arrayType = LLVM::LLVMArrayType::get(f32, 256);
  std::string name = "__qopt_table" + std::to_string(numGlobals++);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    // The values, in the constant bank; the copy each block reads, in shared
    // memory (a lookup per lane would serialize in the constant cache).
    auto values = DenseElementsAttr::get(
        RankedTensorType::get({256}, f32), table);
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/true,
                           LLVM::Linkage::Internal, name + "_values", values,
                           /*alignment=*/16, /*addrSpace=*/4);
    LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/false,
                           LLVM::Linkage::Internal, name, Attribute(),
                           /*alignment=*/16, /*addrSpace=*/3);
  }
  // At the top of the kernel: for (i = tid; i < 256; i += blockDim) copy.
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
  auto constPtr = LLVM::LLVMPointerType::get(b.getContext(), 4);
  Value shared = LLVM::AddressOfOp::create(b, loc, sharedPtr, name);
  Value source = LLVM::AddressOfOp::create(b, loc, constPtr, name + "_values");
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value step = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
  Value end = arith::ConstantIndexOp::create(b, loc, 256);
  auto copy = scf::ForOp::create(b, loc, tid, end, step);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(copy.getBody()->getTerminator());
    Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                         copy.getInductionVar());
    Value v = LLVM::LoadOp::create(
        b, loc, f32,
        LLVM::GEPOp::create(b, loc, constPtr, f32, source, ValueRange{i}), 4);
    LLVM::StoreOp::create(
        b, loc, v,
        LLVM::GEPOp::create(b, loc, sharedPtr, f32, shared, ValueRange{i}), 4);
  }
  gpu::BarrierOp::create(b, loc);
  tables.push_back({SmallVector<float>(table), shared});
  return shared;
}

/// Replaces the uses of `exit` outside the chain with per-lane loads from the
/// table, indexed by the unsigned code byte.
static void replaceWithLookup(const CodeChain &chain, Value exit,
                              Value table) {
  Operation *after = exit.getDefiningOp();
  OpBuilder b(after->getContext());
  b.setInsertionPointAfter(after);
  Location loc = after->getLoc();
  Value codes = chain.conversion->getOperand(0);
  auto f32 = b.getF32Type();
  auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
  auto lookup = [&](Value code) -> Value {
    Value index = arith::ExtUIOp::create(b, loc, b.getI32Type(), code);
    Value ptr = LLVM::GEPOp::create(b, loc, sharedPtr, f32, table,
                                    ValueRange{index});
    return LLVM::LoadOp::create(b, loc, f32, ptr, 4);
  };
  Value result;
  if (auto vec = dyn_cast<VectorType>(codes.getType())) {
    result = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(VectorType::get(vec.getShape(), f32)));
    for (int64_t i = 0, e = vec.getNumElements(); i < e; ++i)
      result = vector::InsertOp::create(
          b, loc, lookup(vector::ExtractOp::create(b, loc, codes, i)), result,
          i);
  } else {
    result = lookup(codes);
  }
  exit.replaceUsesWithIf(result, [&](OpOperand &use) {
    return !chain.ops.contains(use.getOwner());
  });
}

void TabulateCodesPass::runOnOperation() {
  getOperation().walk([&](gpu::GPUFuncOp func) {
    tables.clear();
    SmallVector<Operation *> conversions;
    func.walk([&](Operation *op) {
      if (!isa<arith::SIToFPOp, arith::UIToFPOp>(op))
        return;
      Type in = getElementTypeOrSelf(op->getOperand(0).getType());
      Type out = getElementTypeOrSelf(op->getResult(0).getType());
      if (in.isInteger(8) && out.isF32())
        conversions.push_back(op);
    });
    for (Operation *conversion : conversions) {
      CodeChain chain;
      chain.conversion = conversion;
      chain.values.insert(conversion->getResult(0));
      // Grow the chain in program order within the conversion's block.
      for (Operation *op = conversion->getNextNode(); op;
           op = op->getNextNode()) {
        if (!isTabulable(op))
          continue;
        bool touches = false, closed = true;
        for (Value operand : op->getOperands()) {
          if (chain.values.contains(operand))
            touches = true;
          else if (!constantOperand(operand))
            closed = false;
        }
        if (touches && closed) {
          chain.ops.insert(op);
          chain.values.insert(op->getResult(0));
        }
      }
      if (chain.ops.empty())
        continue;
      // Tabulate each value of the chain that something else reads.
      SmallVector<Value> exits;
      for (Operation *op : chain.ops) {
        Value v = op->getResult(0);
        if (llvm::any_of(v.getUsers(), [&](Operation *user) {
              return !chain.ops.contains(user);
            }))
          exits.push_back(v);
      }
      for (Value exit : exits)
        replaceWithLookup(chain, exit, materializeTable(func, tabulate(chain, exit)));
      // The chain is dead now, back to front.
      for (Operation *op : llvm::reverse(chain.ops))
        if (op->use_empty())
          op->erase();
      if (conversion->use_empty())
        conversion->erase();
    }
  });
}
