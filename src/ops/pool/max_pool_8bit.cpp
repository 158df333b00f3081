// The 8-bit MaxPool row path (max_pool_8bit.h).
#include "ops/pool/max_pool_8bit.h"

#include <algorithm>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace nxrt::ops::maxpool8 {

namespace {

// The row buffer's length: the left padding, the input row, and up to the last tap any output reads.
int64_t row_len(const Geom3& g) {
  const int64_t reach = (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1;
  return std::max(reach, g.pb[2] + g.in[2]) + 16;  // + a vector's worth, so loads past the end stay inside
}

// d[i] = max(d[i], s[i] ^ flip) for i < n (or = when `first`).
void row_max(uint8_t* d, const uint8_t* s, int64_t n, uint8_t flip, bool first) {
  int64_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  for (; i + 16 <= n; i += 16) {
    const __m128i v = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)), f);
    __m128i* p = reinterpret_cast<__m128i*>(d + i);
    _mm_storeu_si128(p, first ? v : _mm_max_epu8(_mm_loadu_si128(p), v));
  }
#endif
  for (; i < n; ++i) {
    const uint8_t v = static_cast<uint8_t>(s[i] ^ flip);
    d[i] = first ? v : std::max(d[i], v);
  }
}

// y[o] = max over t < k of r[o * step + t * dil] ^ flip, o < n: vectors for step 1 (r read at shifted
// offsets) and step 2 with dilation 1 (even and odd bytes split first), a scalar loop otherwise.
void columns(const uint8_t* r, int64_t step, int64_t k, int64_t dil, int64_t n, uint8_t flip, uint8_t* ev, uint8_t* od,
             uint8_t* y) {
  int64_t o = 0;
#if defined(__x86_64__) || defined(__i386__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  if (step == 1) {
    for (; o + 16 <= n; o += 16) {
      __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + o));
      for (int64_t t = 1; t < k; ++t) m = _mm_max_epu8(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + o + t * dil)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + o), _mm_xor_si128(m, f));
    }
  } else if (step == 2 && dil == 1) {
    // ev[j] = r[2j], od[j] = r[2j + 1] for j < n + k / 2 (+ slack): tap t of output o is ev[o + t / 2]
    // (t even) or od[o + t / 2] (t odd).
    const int64_t half = n + (k + 1) / 2;
    const __m128i lo = _mm_set1_epi16(0x00FF);
    int64_t j = 0;
    for (; j + 16 <= half; j += 16) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * j));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * j + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ev + j), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(od + j), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
    }
    for (; j < half; ++j) {
      ev[j] = r[2 * j];
      od[j] = r[2 * j + 1];
    }
    for (; o + 16 <= n; o += 16) {
      __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ev + o));
      for (int64_t t = 1; t < k; ++t)
        m = _mm_max_epu8(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(((t & 1) ? od : ev) + o + t / 2)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + o), _mm_xor_si128(m, f));
    }
  }
#else
  (void)ev;
  (void)od;
#endif
  for (; o < n; ++o) {
    uint8_t m = r[o * step];
    for (int64_t t = 1; t < k; ++t) m = std::max(m, r[o * step + t * dil]);
    y[o] = static_cast<uint8_t>(m ^ flip);
  }
}

}  // namespace

bool applies(const Geom3& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && g.pe[0] == 0 && g.out[1] > 0 &&
         g.out[2] > 0;
}

size_t scratch_bytes(const Geom3& g) {
  const int64_t len = row_len(g);
  return static_cast<size_t>(len + 2 * (len / 2 + 32));
}

void run(const Geom3& g, const uint8_t* x, uint8_t* y, bool is_signed, int64_t p0, int64_t p1, void* scratch) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t len = row_len(g);
  const uint8_t flip = is_signed ? 0x80 : 0;
  uint8_t* row = static_cast<uint8_t*>(scratch);
  uint8_t* ev = row + len;
  uint8_t* od = ev + len / 2 + 32;
  // Code 0 in the flipped domain is the type's lowest: the padding never beats a real value, and a
  // window of padding alone gives the lowest code, as the reference loop does.
  std::memset(row, 0, static_cast<size_t>(len));
  uint8_t* body = row + g.pb[2];
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* xp = x + p * IH * IW;
    uint8_t* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      bool first = true;
      for (int64_t t = 0; t < g.k[1]; ++t) {
        const int64_t ih = oh * g.s[1] - g.pb[1] + t * g.d[1];
        if (ih < 0 || ih >= IH) continue;
        row_max(body, xp + ih * IW, IW, flip, first);
        first = false;
      }
      if (first) std::memset(body, 0, static_cast<size_t>(IW));
      columns(row, g.s[2], g.k[2], g.d[2], OW, flip, ev, od, yp + oh * OW);
    }
  }
}

void run_channels_last(const Geom3& g, int64_t C, const uint8_t* x, uint8_t* y, bool is_signed, int64_t r0, int64_t r1) {
  const uint8_t flip = is_signed ? 0x80 : 0;
  const int64_t rows = g.out[0] * g.out[1];
  // Per output pixel the window's in-bounds taps (their channel rows), then per 16 channels the max over
  // them held in a register: one store a block instead of a load and a store per tap (SqueezeNet's
  // 3x3 pools over 96-512 channels: ~10% of its QDQ run before).
  constexpr int64_t kMaxTaps = 64;
  const uint8_t* taps[kMaxTaps];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / rows, o0 = r % rows / g.out[1], o1 = r % g.out[1];
    const uint8_t* xn = x + n * g.in_size() * C;
    uint8_t* yo = y + r * g.out[2] * C;
    for (int64_t o2 = 0; o2 < g.out[2]; ++o2, yo += C) {
      int64_t nt = 0;
      bool many = false;
      for (int64_t t0 = 0; t0 < g.k[0]; ++t0) {
        const int64_t i0 = o0 * g.s[0] - g.pb[0] + t0 * g.d[0];
        if (i0 < 0 || i0 >= g.in[0]) continue;
        for (int64_t t1 = 0; t1 < g.k[1]; ++t1) {
          const int64_t i1 = o1 * g.s[1] - g.pb[1] + t1 * g.d[1];
          if (i1 < 0 || i1 >= g.in[1]) continue;
          for (int64_t t2 = 0; t2 < g.k[2]; ++t2) {
            const int64_t i2 = o2 * g.s[2] - g.pb[2] + t2 * g.d[2];
            if (i2 < 0 || i2 >= g.in[2]) continue;
            const uint8_t* tap = xn + ((i0 * g.in[1] + i1) * g.in[2] + i2) * C;
            if (nt == kMaxTaps || many) {
              // A window of more than kMaxTaps taps: the rest folded into y in place (row_max).
              if (!many) {
                row_max(yo, taps[0], C, flip, true);
                for (int64_t t = 1; t < nt; ++t) row_max(yo, taps[t], C, flip, false);
                many = true;
              }
              row_max(yo, tap, C, flip, false);
              continue;
            }
            taps[nt++] = tap;
          }
        }
      }
      if (many) {
        for (int64_t c = 0; c < C; ++c) yo[c] = static_cast<uint8_t>(yo[c] ^ flip);
        continue;
      }
      if (nt == 0) {  // no tap inside x: the flipped domain's 0 (the type's least value)
        std::memset(yo, static_cast<int>(flip), static_cast<size_t>(C));
        continue;
      }
      int64_t c = 0;
#if defined(__x86_64__) || defined(__i386__)
      // In the flipped domain (unsigned order) while reducing, back at the store.
      const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
      for (; c + 16 <= C; c += 16) {
        __m128i m = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(taps[0] + c)), f);
        for (int64_t t = 1; t < nt; ++t)
          m = _mm_max_epu8(m, _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(taps[t] + c)), f));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(yo + c), _mm_xor_si128(m, f));
      }
#endif
      for (; c < C; ++c) {
        uint8_t m = static_cast<uint8_t>(taps[0][c] ^ flip);
        for (int64_t t = 1; t < nt; ++t) m = std::max(m, static_cast<uint8_t>(taps[t][c] ^ flip));
        yo[c] = static_cast<uint8_t>(m ^ flip);
      }
    }
  }
}

}  // namespace nxrt::ops::maxpool8
