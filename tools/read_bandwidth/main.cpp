// nxrt_read_bandwidth: how fast this machine streams memory into the cores right now, the anchor a
// decode step's speed is compared with (bytes read per token / this = the weight-read limit).
//
//   nxrt_read_bandwidth [--mb N] [--threads T] [--rounds R]
//
// Each of T threads sums its contiguous slice of an N MB buffer (default 1024; pass the bytes a decode
// step reads, so the buffer sits in the same level of the memory hierarchy as the weights) with 32-byte
// loads, R rounds (default 10) after one untimed pass that touches every page. The buffer is on 2 MB
// pages where the kernel gives them (madvise, as nxrt's packed weights are), and each round runs three
// loops: plain loads; the same loads with a non-temporal prefetch 4 KB ahead; and loads behind a
// non-temporal prefetch 8 KB ahead plus one prefetch per 4 KB page 32 KB ahead (how the decode GEMV
// reads its weights, see ops/stream_prefetch.h; where address translation is costly, as on a VM whose
// hypervisor shadows the page tables, one core streams much faster so). The round's figure is the
// fastest of the three, so the anchor is the best this machine showed, not a loop nxrt's kernels could
// beat. Prints one JSON line: {"threads","mb","rounds","gbps_median","gbps_best","gbps_runs",
// "gbps_plain_median","gbps_prefetch_median","gbps_page_ahead_median"}.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "read_loops.h"

namespace {

using nxrt::read_loops::sum;

// A 2 MB-aligned anonymous mapping advised for transparent huge pages (the packed weights' kind of
// memory); nullptr on failure.
void* map_buffer(size_t bytes, size_t* mapped) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw), aligned = (base + kHuge - 1) / kHuge * kHuge;
  if (aligned > base) munmap(raw, aligned - base);
  if (base + len + kHuge > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), base + len + kHuge - aligned - len);
  madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
  *mapped = len;
  return reinterpret_cast<void*>(aligned);
}

int usage(const char* why) {
  std::fprintf(stderr, "nxrt_read_bandwidth: %s\nusage: nxrt_read_bandwidth [--mb N] [--threads T] [--rounds R]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  long mb = 1024, threads = 1, rounds = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + a).c_str());
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v <= 0) return usage(("bad value for " + a).c_str());
    if (a == "--mb") mb = v;
    else if (a == "--threads") threads = v;
    else if (a == "--rounds") rounds = v;
    else return usage(("unknown option " + a).c_str());
  }
  const size_t words = static_cast<size_t>(mb) * (1 << 20) / 8 / static_cast<size_t>(threads) / 16 * 16;
  const size_t total = words * static_cast<size_t>(threads);
  size_t mapped = 0;
  auto* buf = static_cast<uint64_t*>(map_buffer(total * 8, &mapped));
  if (!buf) return usage("out of memory");
  for (size_t i = 0; i < total; ++i) buf[i] = i & 7;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  constexpr int kLoops = 3;
  std::vector<double> gbps, per_loop[kLoops];
  // Each thread stamps its own start and end; a round's time runs from the earliest start to the
  // latest end. The calling thread is worker 0, so with as many threads as CPUs no extra thread waits
  // on the barrier: a timer thread of its own could be descheduled between the barrier and its clock
  // read and see a round shorter than the work (2 threads on 2 vCPUs once read 330 GB/s from DRAM).
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> starts(static_cast<size_t>(threads)), ends(static_cast<size_t>(threads));
  std::barrier sync(threads);
  auto worker = [&](long t) {
    for (long r = 0; r <= rounds; ++r) {  // round 0 is the untimed pass
      double round_gbps[kLoops] = {};
      for (int k = 0; k < kLoops; ++k) {
        const int loop = static_cast<int>((k + r) % kLoops);  // the loops rotate which goes first
        sync.arrive_and_wait();
        starts[static_cast<size_t>(t)] = Clock::now();
        sums[static_cast<size_t>(t)] += sum(buf + static_cast<size_t>(t) * words, words, loop);
        ends[static_cast<size_t>(t)] = Clock::now();
        sync.arrive_and_wait();
        const auto t0 = *std::min_element(starts.begin(), starts.end());
        const auto t1 = *std::max_element(ends.begin(), ends.end());
        round_gbps[loop] = static_cast<double>(total) * 8 / std::chrono::duration<double>(t1 - t0).count() / 1e9;
        sync.arrive_and_wait();  // every thread has read the stamps before the next loop writes them
      }
      if (t == 0 && r > 0) {
        for (int k = 0; k < kLoops; ++k) per_loop[k].push_back(round_gbps[k]);
        gbps.push_back(*std::max_element(round_gbps, round_gbps + kLoops));
      }
    }
  };
  std::vector<std::thread> pool;
  for (long t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("{\"threads\":%ld,\"mb\":%ld,\"rounds\":%ld,\"gbps_median\":%.2f,\"gbps_best\":%.2f,\"gbps_runs\":[", threads, mb,
              rounds, median(gbps), *std::max_element(gbps.begin(), gbps.end()));
  for (size_t i = 0; i < gbps.size(); ++i) std::printf("%s%.2f", i ? "," : "", gbps[i]);
  std::printf("],\"gbps_plain_median\":%.2f,\"gbps_prefetch_median\":%.2f,\"gbps_page_ahead_median\":%.2f,\"checksum\":%llu}\n",
              median(per_loop[0]), median(per_loop[1]), median(per_loop[2]), static_cast<unsigned long long>(check % 1000));
  munmap(buf, mapped);
  return 0;
}
