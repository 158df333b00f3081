// nxrt_core_latency: how far apart the host placed two of this machine's CPUs right now, as the round
// trip of one cache line handed back and forth between a thread pinned to each (the cost behind every
// hand-off and join of a 2-thread parallel loop, and behind reading data the other core wrote).
//
//   nxrt_core_latency [--cpus A,B] [--trips N] [--rounds R]
//
// Default CPUs: the first two this process may run on. Each round times N round trips (default 20000);
// prints one JSON line: {"cpus":[A,B],"trips","rounds","round_trip_ns_median","round_trip_ns_best",
// "round_trip_ns_runs"}. On a VM the figure moves with the host's placement of the vCPUs: on the Zen 5
// VMs of docs/PERF.md ~90 ns (the vCPUs share an L3) or ~450 ns (they do not), and 2-thread speed with it.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

struct alignas(64) Line {
  std::atomic<int64_t> v{0};
};

int usage(const char* why) {
  std::fprintf(stderr, "nxrt_core_latency: %s\nusage: nxrt_core_latency [--cpus A,B] [--trips N] [--rounds R]\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int a = -1, b = -1;
  int64_t trips = 20000;
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage(("missing value after " + arg).c_str());
    const char* v = argv[++i];
    if (arg == "--cpus") {
      if (std::sscanf(v, "%d,%d", &a, &b) != 2 || a < 0 || b < 0 || a == b) return usage("--cpus takes two different CPU numbers A,B");
    } else if (arg == "--trips") {
      trips = std::atoll(v);
      if (trips <= 0) return usage("--trips must be positive");
    } else if (arg == "--rounds") {
      rounds = std::atoi(v);
      if (rounds <= 0) return usage("--rounds must be positive");
    } else {
      return usage(("unknown option " + arg).c_str());
    }
  }
  if (a < 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return usage("cannot read this process's CPUs");
    for (int c = 0; c < CPU_SETSIZE && b < 0; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      if (a < 0) a = c; else b = c;
    }
    if (b < 0) {
      std::printf("{\"cpus\":[%d],\"error\":\"one CPU: no core-to-core trip\"}\n", a);
      return 0;
    }
  }
  Line line;
  std::atomic<bool> pinned_b{true};
  std::thread other([&] {
    pinned_b = pin(b);
    const int64_t total = trips * rounds;
    for (int64_t i = 0; i < total; ++i) {
      while (line.v.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.v.store(2 * i + 2, std::memory_order_release);
    }
  });
  if (!pin(a)) {
    std::fprintf(stderr, "nxrt_core_latency: cannot pin to CPU %d\n", a);
  }
  std::vector<double> ns;
  int64_t i = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t k = 0; k < trips; ++k, ++i) {
      line.v.store(2 * i + 1, std::memory_order_release);
      while (line.v.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / double(trips));
  }
  other.join();
  if (!pinned_b) std::fprintf(stderr, "nxrt_core_latency: cannot pin to CPU %d\n", b);
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"cpus\":[%d,%d],\"trips\":%lld,\"rounds\":%d,\"round_trip_ns_median\":%.0f,\"round_trip_ns_best\":%.0f,"
              "\"round_trip_ns_runs\":[",
              a, b, static_cast<long long>(trips), rounds, sorted[sorted.size() / 2], sorted.front());
  for (size_t k = 0; k < ns.size(); ++k) std::printf("%s%.0f", k ? "," : "", ns[k]);
  std::printf("]}\n");
  return 0;
}
