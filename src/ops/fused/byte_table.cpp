// nxrt::ByteTable(X, Table): Y[i] = Table[the byte of X[i]], X uint8 or int8, Table 256 values of uint8 or
// int8 (Y's type), Y X's shape. The kernel of the optimizer's fuse_qdq_table
// (optimizer/fusions/fuse_qdq_table.cpp): a QDQ model's DequantizeLinear -> float elementwise ops ->
// QuantizeLinear chain over one 8-bit value maps each of its 256 codes to one output code, so the chain is
// its table, evaluated once with the same kernels. Elementwise and layout-free: the channels-last pass
// keeps it inside 8-bit chains.
#include "ep/kernel.h"
#include "ops/elementwise/byte_lookup.h"
#include "ops/elementwise/elementwise_util.h"

namespace nxrt::ops {

namespace {

class ByteTableKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    vbmi_ = byte_lookup_vbmi(info.isa());
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& table, ctx.required_tensor(1, "Table"));
    auto is8 = [](DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; };
    if (!is8(x.dtype())) return ctx.error("X must be uint8 or int8, got " + x.describe(), StatusCode::kInvalidArgument);
    if (!is8(table.dtype()) || table.numel() != 256) {
      return ctx.error("Table must hold 256 uint8 or int8 values, got " + table.describe(), StatusCode::kInvalidArgument);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, table.dtype(), x.shape()));
    const Tensor t = table.contiguous();
    const uint8_t* tab = static_cast<const uint8_t*>(t.raw_data());
    const uint8_t* in = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* out = static_cast<uint8_t*>(y->raw_data());
    ew::run_flat(ctx.pool(), x.numel(), 65536, [&](int64_t b, int64_t e) { lookup_bytes(in + b, e - b, tab, out + b, vbmi_); });
    return Status::Ok();
  }

 private:
  bool vbmi_ = false;
};

}  // namespace

void register_byte_table(ep::KernelRegistry& r) { r.add_class<ByteTableKernel>(ir::kNxrtDomain, "ByteTable"); }

}  // namespace nxrt::ops
