// The nn family: convolutions (conv_kernels.cpp), pooling and LRN (pool_kernels.cpp),
// RNN/GRU/LSTM (rnn_kernels.cpp).
#include "ops/conv_util.h"

namespace nxrt::ops {
void register_nn_ops(ep::KernelRegistry& r) {
  register_conv_kernels(r);
  register_pool_kernels(r);
  register_rnn_kernels(r);
}
}  // namespace nxrt::ops
