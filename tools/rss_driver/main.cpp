// nxrt_rss_driver: runs one model at many distinct sizes of its symbolic dims in ONE process and
// prints the process RSS after each run, to show that memory does not grow with the number of
// distinct shapes seen (buffer pools, shape-keyed caches, allocator fragmentation).
// Uses only the public API (include/nxrt/).
//
//   nxrt_rss_driver MODEL.onnx [--lengths N] [--min L] [--max L] [--seed S] [--threads T]
//                   [--every K] [--check-at A] [--tolerance-pct P] [--tolerance-mb M]
//                   [--self-test-leak-kb K]   (keeps K kB per run: the verdict must then FAIL)
//
// Every symbolic or unknown dim of every float input takes the current length (default the N distinct
// lengths min..max = 1..200, shuffled with the seed). After run k it prints VmRSS and VmHWM from
// /proc/self/status. The verdict compares VmRSS after run A (default 20) with after the last run:
// PASS when it grew by at most max(P% of the run-A value, M MB) (defaults 5% and 4 MB). Exit 0 on
// PASS, 1 on FAIL, 2 on a usage or runtime error.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "nxrt/session.h"

namespace {

struct Mem {
  double rss_mb = 0, hwm_mb = 0;
};

Mem read_mem() {
  Mem m;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    double* dst = line.rfind("VmRSS:", 0) == 0 ? &m.rss_mb : line.rfind("VmHWM:", 0) == 0 ? &m.hwm_mb : nullptr;
    if (dst) *dst = std::atof(line.c_str() + 6) / 1024.0;  // kB -> MB
  }
  return m;
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "error: %s\nusage: nxrt_rss_driver MODEL.onnx [--lengths N] [--min L] [--max L] [--seed S] "
               "[--threads T] [--every K] [--check-at A] [--tolerance-pct P] [--tolerance-mb M]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int n = 200, lo = 1, hi = -1, every = 10, check_at = 20;
  unsigned seed = 1;
  double tol_pct = 5.0, tol_mb = 4.0;
  long leak_kb = 0;  // --self-test-leak-kb: keep this much per run, to show the verdict catches growth
  std::vector<std::vector<char>> leaked;
  nxrt::SessionOptions opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-' && i + 1 >= argc) return usage((a + " needs a value").c_str());
    if (a == "--lengths") n = std::atoi(argv[++i]);
    else if (a == "--min") lo = std::atoi(argv[++i]);
    else if (a == "--max") hi = std::atoi(argv[++i]);
    else if (a == "--seed") seed = static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10));
    else if (a == "--threads") opts.threads = std::atoi(argv[++i]);
    else if (a == "--every") every = std::max(1, std::atoi(argv[++i]));
    else if (a == "--check-at") check_at = std::atoi(argv[++i]);
    else if (a == "--tolerance-pct") tol_pct = std::atof(argv[++i]);
    else if (a == "--tolerance-mb") tol_mb = std::atof(argv[++i]);
    else if (a == "--self-test-leak-kb") leak_kb = std::atol(argv[++i]);
    else if (!a.empty() && a[0] == '-') return usage(("unknown option " + a).c_str());
    else if (model.empty()) model = a;
    else return usage(("unexpected argument " + a).c_str());
  }
  if (model.empty()) return usage("no model");
  if (hi < 0) hi = lo + n - 1;
  if (n < 1 || lo < 1 || hi - lo + 1 < n) return usage("need --lengths N distinct values in [--min, --max]");
  if (check_at < 1 || check_at > n) return usage("--check-at must be in [1, --lengths]");

  // N distinct lengths: the whole range when it holds exactly N, else N drawn from it; shuffled.
  std::mt19937 rng(seed);
  std::vector<int> lengths(static_cast<size_t>(hi - lo + 1));
  std::iota(lengths.begin(), lengths.end(), lo);
  std::shuffle(lengths.begin(), lengths.end(), rng);
  lengths.resize(static_cast<size_t>(n));

  Mem before = read_mem();
  auto session = nxrt::Session::create(model, opts);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().message().c_str());
    return 2;
  }
  Mem created = read_mem();
  std::printf("model %s, %d distinct lengths in [%d, %d] (seed %u), %d thread(s)\n", model.c_str(), n, lo, hi, seed,
              opts.threads);
  std::printf("RSS MB: process start %.1f, after Session::create %.1f\n", before.rss_mb, created.rss_mb);
  std::printf("%5s %5s %8s %10s %10s\n", "run", "len", "max len", "VmRSS MB", "VmHWM MB");

  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::vector<Mem> after;
  int max_len = 0, max_len_at_check = 0;
  for (int k = 0; k < n; ++k) {
    int len = lengths[static_cast<size_t>(k)];
    max_len = std::max(max_len, len);
    std::vector<std::pair<std::string, nxrt::Value>> feeds;
    for (const auto& m : (*session)->inputs()) {
      if (m.has_default) continue;
      if (m.kind != nxrt::ValueMeta::Kind::kTensor || m.dtype != nxrt::DataType::kFloat) {
        std::fprintf(stderr, "error: input '%s' is %s; this driver feeds float tensors only\n", m.name.c_str(),
                     m.describe().c_str());
        return 2;
      }
      nxrt::Dims shape;
      for (int64_t d : m.shape) shape.push_back(d < 0 ? len : d);
      nxrt::Tensor t(nxrt::DataType::kFloat, shape);
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = uf(rng);
      feeds.push_back({m.name, nxrt::Value(std::move(t))});
    }
    auto out = (*session)->run(feeds);
    if (!out.ok()) {
      std::fprintf(stderr, "error: run %d (length %d): %s\n", k + 1, len, out.status().message().c_str());
      return 2;
    }
    out->clear();  // outputs released before measuring, as a caller done with them would
    if (leak_kb > 0) leaked.emplace_back(static_cast<size_t>(leak_kb) * 1024, static_cast<char>(k | 1));
    after.push_back(read_mem());
    if (k + 1 == check_at) max_len_at_check = max_len;
    if ((k + 1) % every == 0 || k == 0 || k + 1 == check_at || k + 1 == n) {
      std::printf("%5d %5d %8d %10.1f %10.1f\n", k + 1, len, max_len, after.back().rss_mb, after.back().hwm_mb);
    }
  }
  double a = after[static_cast<size_t>(check_at - 1)].rss_mb, b = after.back().rss_mb;
  double lo_rss = a, hi_rss = a;
  for (size_t k = static_cast<size_t>(check_at - 1); k < after.size(); ++k) {
    lo_rss = std::min(lo_rss, after[k].rss_mb);
    hi_rss = std::max(hi_rss, after[k].rss_mb);
  }
  double allowed = std::max(a * tol_pct / 100.0, tol_mb);
  bool pass = b - a <= allowed;
  std::printf(
      "RSS after run %d: %.1f MB (longest length so far %d); after run %d: %.1f MB (longest %d); growth %+.1f MB "
      "(%+.1f%%), allowed %.1f MB; range over runs %d..%d: %.1f..%.1f MB; peak (VmHWM) %.1f MB\n",
      check_at, a, max_len_at_check, n, b, max_len, b - a, a > 0 ? 100.0 * (b - a) / a : 0.0, allowed, check_at, n,
      lo_rss, hi_rss, after.back().hwm_mb);
  std::printf("verdict: %s\n", pass ? "PASS (RSS flat across sequence lengths)" : "FAIL (RSS grows with the number of distinct lengths)");
  return pass ? 0 : 1;
}
