// nxrt_rss_driver: runs one model at many distinct sizes of its symbolic dims in ONE process and
// prints the process RSS after each run, to show that memory does not grow with the number of
// distinct shapes seen (buffer pools, shape-keyed caches, allocator fragmentation).
// Uses only the public API (include/nxrt/).
//
//   nxrt_rss_driver MODEL.onnx [--lengths N] [--min L] [--max L] [--seed S] [--threads T]
//                   [--every K] [--check-at A] [--tolerance-pct P] [--tolerance-mb M]
//                   [--self-test-leak-kb K]   (keeps K kB per run: the verdict must then FAIL)
//                   [--runs R] [--batch-max B]   (shape churn, below)
//                   [--concurrent C]   (C threads share the runs on the one session)
//
// Every symbolic or unknown dim of every float input takes the current length (default the N distinct
// lengths min..max = 1..200, shuffled with the seed). After run k it prints VmRSS and VmHWM from
// /proc/self/status. The verdict compares VmRSS after run A (default 20) with after the last run:
// PASS when it grew by at most max(P% of the run-A value, M MB) (defaults 5% and 4 MB). Exit 0 on
// PASS, 1 on FAIL, 2 on a usage or runtime error.
//
// Shape churn (--runs R): R runs, each at a length drawn uniformly from [min, max] (repeats allowed)
// and, with --batch-max B, a symbolic leading dim drawn from [1, B] (the batch): the pool, the kernel
// cache's variants and the allocator see a new mix of shapes on every run. The verdict then compares
// the peak RSS over runs N/2+1..N with the peak over runs A..N/2 (same tolerance).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
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
  int n = 200, lo = 1, hi = -1, every = 10, check_at = 20, runs = 0, batch_max = 0, concurrent = 1;
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
    else if (a == "--runs") runs = std::atoi(argv[++i]);
    else if (a == "--batch-max") batch_max = std::atoi(argv[++i]);
    else if (a == "--concurrent") concurrent = std::max(1, std::atoi(argv[++i]));
    else if (a == "--self-test-leak-kb") leak_kb = std::atol(argv[++i]);
    else if (!a.empty() && a[0] == '-') return usage(("unknown option " + a).c_str());
    else if (model.empty()) model = a;
    else return usage(("unexpected argument " + a).c_str());
  }
  if (model.empty()) return usage("no model");
  if (hi < 0) hi = lo + n - 1;
  std::mt19937 rng(seed);
  std::vector<int> lengths, batches;
  if (runs > 0) {
    if (lo < 1 || hi < lo || batch_max < 0) return usage("--runs needs 1 <= --min <= --max and --batch-max >= 0");
    std::uniform_int_distribution<int> pick_len(lo, hi), pick_batch(1, std::max(1, batch_max));
    for (int k = 0; k < runs; ++k) {
      lengths.push_back(pick_len(rng));
      batches.push_back(batch_max > 0 ? pick_batch(rng) : 1);
    }
    n = runs;
  } else {
    if (n < 1 || lo < 1 || hi - lo + 1 < n) return usage("need --lengths N distinct values in [--min, --max]");
    // N distinct lengths: the whole range when it holds exactly N, else N drawn from it; shuffled.
    lengths.resize(static_cast<size_t>(hi - lo + 1));
    std::iota(lengths.begin(), lengths.end(), lo);
    std::shuffle(lengths.begin(), lengths.end(), rng);
    lengths.resize(static_cast<size_t>(n));
    batches.assign(lengths.size(), 1);
  }
  if (check_at < 1 || check_at > (runs > 0 ? n / 2 : n)) {
    return usage("--check-at must be in [1, --lengths] (with --runs: [1, runs / 2])");
  }

  Mem before = read_mem();
  auto session = nxrt::Session::create(model, opts);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", session.status().message().c_str());
    return 2;
  }
  Mem created = read_mem();
  if (runs > 0) {
    std::printf("model %s, shape churn: %d runs, lengths drawn from [%d, %d], batch from [1, %d] (seed %u), %d "
                "intra-op thread(s), %d concurrent run(s)\n", model.c_str(), n, lo, hi, std::max(1, batch_max), seed,
                opts.threads, concurrent);
  } else {
    std::printf("model %s, %d distinct lengths in [%d, %d] (seed %u), %d thread(s)\n", model.c_str(), n, lo, hi, seed,
                opts.threads);
  }
  std::printf("RSS MB: process start %.1f, after Session::create %.1f\n", before.rss_mb, created.rss_mb);
  std::printf("%5s %5s %5s %8s %10s %10s\n", "run", "batch", "len", "max len", "VmRSS MB", "VmHWM MB");

  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::vector<Mem> after(static_cast<size_t>(n));
  // Run k: feeds at its batch and length with values from `r`; RSS after it into after[k].
  auto run_one = [&](int k, std::mt19937& r) -> bool {
    const int len = lengths[static_cast<size_t>(k)], batch = batches[static_cast<size_t>(k)];
    std::vector<std::pair<std::string, nxrt::Value>> feeds;
    for (const auto& m : (*session)->inputs()) {
      if (m.has_default) continue;
      if (m.kind != nxrt::ValueMeta::Kind::kTensor || m.dtype != nxrt::DataType::kFloat) {
        std::fprintf(stderr, "error: input '%s' is %s; this driver feeds float tensors only\n", m.name.c_str(),
                     m.describe().c_str());
        return false;
      }
      nxrt::Dims shape;
      for (size_t i = 0; i < m.shape.size(); ++i) {
        const int64_t d = m.shape[i];
        shape.push_back(d >= 0 ? d : i == 0 && batch_max > 0 ? batch : len);
      }
      nxrt::Tensor t(nxrt::DataType::kFloat, shape);
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = uf(r);
      feeds.push_back({m.name, nxrt::Value(std::move(t))});
    }
    auto out = (*session)->run(feeds);
    if (!out.ok()) {
      std::fprintf(stderr, "error: run %d (batch %d, length %d): %s\n", k + 1, batch, len,
                   out.status().message().c_str());
      return false;
    }
    out->clear();  // outputs released before measuring, as a caller done with them would
    after[static_cast<size_t>(k)] = read_mem();
    return true;
  };
  int max_len = 0, max_len_at_check = 0;
  auto report = [&](int k) {
    max_len = std::max(max_len, lengths[static_cast<size_t>(k)]);
    if (k + 1 == check_at) max_len_at_check = max_len;
    if ((k + 1) % every == 0 || k == 0 || k + 1 == check_at || k + 1 == n) {
      std::printf("%5d %5d %5d %8d %10.1f %10.1f\n", k + 1, batches[static_cast<size_t>(k)],
                  lengths[static_cast<size_t>(k)], max_len, after[static_cast<size_t>(k)].rss_mb,
                  after[static_cast<size_t>(k)].hwm_mb);
    }
  };
  if (concurrent <= 1) {
    for (int k = 0; k < n; ++k) {
      if (!run_one(k, rng)) return 2;
      if (leak_kb > 0) leaked.emplace_back(static_cast<size_t>(leak_kb) * 1024, static_cast<char>(k | 1));
      report(k);
    }
  } else {
    // Concurrent churn: `concurrent` threads take the runs in order from one counter, each run with
    // its own value generator (seeded by the run), all on the one session.
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < concurrent; ++t) {
      threads.emplace_back([&] {
        for (int k; !failed && (k = next.fetch_add(1)) < n;) {
          std::mt19937 r(seed * 7919u + static_cast<unsigned>(k));
          if (!run_one(k, r)) failed = true;
        }
      });
    }
    for (auto& th : threads) th.join();
    if (failed) return 2;
    for (int k = 0; k < n; ++k) report(k);
  }
  double a = after[static_cast<size_t>(check_at - 1)].rss_mb, b = after.back().rss_mb;
  double lo_rss = a, hi_rss = a;
  for (size_t k = static_cast<size_t>(check_at - 1); k < after.size(); ++k) {
    lo_rss = std::min(lo_rss, after[k].rss_mb);
    hi_rss = std::max(hi_rss, after[k].rss_mb);
  }
  double allowed = std::max(a * tol_pct / 100.0, tol_mb);
  bool pass = b - a <= allowed;
  // Under churn the RSS after a run follows that run's shape (the pool keeps what the last run used),
  // so the verdict compares peaks instead: the highest RSS after any run of the second half against
  // the highest over runs A..N/2. Memory that grows with the number of runs or shapes seen raises the
  // second peak; a flat process has both peaks at the largest shapes.
  double peak_first = 0, peak_second = 0;
  if (runs > 0) {
    const size_t half = static_cast<size_t>(n / 2);
    for (size_t k = static_cast<size_t>(check_at - 1); k < after.size(); ++k) {
      double& peak = k < half ? peak_first : peak_second;
      peak = std::max(peak, after[k].rss_mb);
    }
    allowed = std::max(peak_first * tol_pct / 100.0, tol_mb);
    pass = peak_second - peak_first <= allowed;
  }
  std::printf(
      "RSS after run %d: %.1f MB (longest length so far %d); after run %d: %.1f MB (longest %d); growth %+.1f MB "
      "(%+.1f%%), allowed %.1f MB; range over runs %d..%d: %.1f..%.1f MB; peak (VmHWM) %.1f MB\n",
      check_at, a, max_len_at_check, n, b, max_len, b - a, a > 0 ? 100.0 * (b - a) / a : 0.0, allowed, check_at, n,
      lo_rss, hi_rss, after.back().hwm_mb);
  double max_rss = 0;
  for (const Mem& m : after) max_rss = std::max(max_rss, m.rss_mb);
  std::printf("RSS MB over all %d runs: after Session::create %.1f, after run 1 %.1f, after the last %.1f, max %.1f\n", n,
              created.rss_mb, after.front().rss_mb, after.back().rss_mb, max_rss);
  if (runs > 0) {
    std::printf("churn: peak RSS over runs %d..%d %.1f MB, over runs %d..%d %.1f MB; growth %+.1f MB, allowed %.1f MB\n",
                check_at, n / 2, peak_first, n / 2 + 1, n, peak_second, peak_second - peak_first, allowed);
  }
  std::printf("verdict: %s\n", pass ? "PASS (RSS flat across sequence lengths)" : "FAIL (RSS grows with the number of distinct lengths)");
  return pass ? 0 : 1;
}
