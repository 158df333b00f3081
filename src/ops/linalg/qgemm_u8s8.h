// Exact int32 products of 8-bit matrices, for MatMulInteger with a constant B: the product is formed
// as unsigned A bytes times signed B bytes (the VNNI dot product's operand kinds) with the zero points
// and the sign shifts folded in afterwards from row and column sums, so every tier forms the same
// exact sums (integer arithmetic, wrapping as int32 as the generic loop's does).
//
//   Y[m, n] = sum_k (A[m,k] - za[m]) * (B[k,n] - zb[n])
//           = D[m,n] - beta[n] * SA[m] - alpha[m] * SB[n] + K * alpha[m] * beta[n]
// with Au = A + oa (oa = 128 for int8 A, so Au is unsigned), Bs = B - ob (ob = 128 for uint8 B, so Bs
// is signed), alpha = za + oa, beta = zb - ob, D = Au . Bs, SA = row sums of Au, SB = column sums of Bs.
//
// Microkernels (qgemm_kernels()), named by operation, tile and ISA:
//   qu8s8_i32_gemm_4x16__avx512vnni  vpdpbusd on 512-bit registers (AVX512-VNNI, the avx512 tier;
//                                    8 rows by two adjacent panels where it can (8 x 32), by one panel
//                                    (8 x 16) for an odd one, 4 rows and fewer at a block's end)
//   qu8s8_i32_gemm_4x16__avxvnni     the VEX vpdpbusd on two 256-bit halves (AVX-VNNI, the avx2 tier)
//   qu8s8_i32_gemm_2x16__avx2        int16 vpmaddwd (exact: vpmaddubsw would saturate u8 x s8 pairs)
// The reference is the generic integer matmul in integer_matmul.cpp, which the tests compare with.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/function_ref.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

enum class QGemmKernel { kNone, kAvx2, kAvxVnni, kAvx512Vnni };
struct QGemmKernelInfo {
  QGemmKernel kernel;
  const char* name;
  ep::IsaTier tier;  // the lowest tier that may choose it
};
const std::vector<QGemmKernelInfo>& qgemm_kernels();  // every vector kernel
bool qgemm_kernel_supported(QGemmKernel k);           // whether this CPU runs it
// The kernel a MatMulInteger of tier `tier` uses here (kNone: the generic loop).
QGemmKernel choose_qgemm_kernel(ep::IsaTier tier);
const char* qgemm_kernel_name(QGemmKernel k);

// B [K, N] packed once: 16-column panels; per quad of k one 64-byte record holding column c's four
// Bs bytes at 4c (k past K zero); col_sums[n] = SB[n] (zero past N).
struct QGemmPackedB {
  int64_t K = 0, N = 0, quads = 0, panels = 0;
  int32_t ob = 0;
  std::vector<int8_t> data;
  std::vector<int32_t> col_sums;
  bool empty() const { return data.empty(); }
};
QGemmPackedB qgemm_pack_b(const void* B, bool b_signed, int64_t K, int64_t N);

// Scratch qgemm_u8s8 and qgemm_u8s8_rows need for M rows: the rows of Au padded to whole quads (none
// when qgemm_u8s8_rows reads them in place: rows_in_place) and the per-row terms.
size_t qgemm_workspace_bytes(const QGemmPackedB& B, int64_t M, bool rows_in_place = false);

// Fills rows [m0, m1) of Au, (m1 - m0) rows of B.quads * 4 bytes starting at `au` (A + oa as unsigned
// bytes, zero past K), and sa[m - m0] = the sum of row m's first K bytes.
using QGemmFillRows = ep::FunctionRef<void(int64_t m0, int64_t m1, uint8_t* au, int32_t* sa)>;

// Called with each block of rows [m0, m1) of Y once the block is complete, on the thread that computed
// it (a conv requantizes the rows while they are in that thread's cache).
using QGemmRowsDone = ep::FunctionRef<void(int64_t m0, int64_t m1)>;

// Rows of Au read where they are (already unsigned bytes): row m's B.quads quads as `segments` equal
// runs (B.quads a multiple of it), run j at base + m * row_stride + j * segment_stride. One run of
// row_stride = B.quads * 4 bytes: rows stored whole (a 1x1 conv's channels-last pixels, the channel
// count a multiple of 4). Several: a stride-1 conv's patch rows inside a padded channels-last image, one
// run per row of taps, consecutive rows one pixel apart (an implicit GEMM: no patch is copied).
struct QGemmARows {
  const uint8_t* base = nullptr;
  int64_t row_stride = 0;
  int64_t segments = 1, segment_stride = 0;
};

// QLinearConv's requantization done by the tiles themselves (`requant` of qgemm_u8s8_rows): output
// byte y[m, n] = min(hi, max(lo, round_half_even((S[m, n] + bias[n]) * scale_d[n]) + zero_point)) of the
// exact sum S, as the conv's reference requantization computes it, written straight to row m's bytes, so
// no int32 Y is stored and read back. In float with a guard: S + bias in int32 (the caller guarantees it
// cannot wrap: qgemm_requant_exact), times scale[n] = float(scale_d[n]) plus zero_point (one fused
// rounding); a float product within 3 float roundings of the double one rounds the same way unless it
// lies within 2^-12 of a half-integer, and such lanes (and only they) are redone in double; products
// too large for that bound saturate either way.
struct QGemmRequant {
  const int32_t* bias = nullptr;    // N values
  const float* scale = nullptr;     // N values: float(scale_d[n]), each 0 or of magnitude in [2^-100, 2^100]
  const double* scale_d = nullptr;  // N values
  int32_t zero_point = 0;
  bool out_signed = false;  // int8 output (else uint8)
  // GEMM row m's output row: y + m * ldy; with row_period > 0 rows come in runs of row_period of which
  // the first row_keep are outputs (an implicit GEMM's padded width): row m is output row
  // (m / row_period) * row_keep + m % row_period, dropped when m % row_period >= row_keep.
  uint8_t* y = nullptr;
  int64_t ldy = 0;
  int64_t row_period = 0, row_keep = 0;
};
// Whether S + bias stays exact in int32 for every sum of K products of two 8-bit values centered on their
// zero points (|S| <= K * 255 * 255), and the scales qualify (QGemmRequant::scale's range, finite).
bool qgemm_requant_exact(int64_t K, const int32_t* bias, const double* scale_d, int64_t n);
// The float scales QGemmRequant reads (n values).
void qgemm_requant_scales(const double* scale_d, int64_t n, float* scale);

// Y for M rows of A that `fill` writes block by block inside the parallel loop (so a conv's patches are
// gathered by the thread that multiplies them, while they are in its cache); alpha = za + oa, the same
// for every row. Threads take blocks of rows, each against every panel. With `done`, blocks are whole
// multiples of 16 rows (but the last) and each is handed to it when complete. With `a_rows`, Au's rows
// are read in place (QGemmARows) and `fill` only writes the row sums (its au argument null). With
// `requant`, the tiles write output bytes (QGemmRequant) and Y is not written (it may be null): every
// vector kernel in registers, the portable tile (kNone) through a small int32 tile in double.
void qgemm_u8s8_rows(QGemmKernel kernel, int64_t M, QGemmFillRows fill, int32_t alpha, const QGemmPackedB& B,
                     const int32_t* zb, int32_t* Y, int64_t ldy, ep::ThreadPool* pool, void* workspace,
                     const QGemmRowsDone* done = nullptr, const QGemmARows* a_rows = nullptr,
                     const QGemmRequant* requant = nullptr);

// Y (M x N int32, ldy apart) for M rows of A (8-bit, signed or not, lda bytes apart) with per-row zero
// points za (M values) and per-column ones zb (N values). `workspace`: qgemm_workspace_bytes.
void qgemm_u8s8(QGemmKernel kernel, const void* A, bool a_signed, int64_t M, int64_t lda, const int32_t* za,
                const QGemmPackedB& B, const int32_t* zb, int32_t* Y, int64_t ldy, ep::ThreadPool* pool,
                void* workspace);

}  // namespace nxrt::ops
