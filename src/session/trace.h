// Run diagnostics: a Chrome-trace / Perfetto JSON recorder (NXRT_TRACE=path.json or
// SessionOptions::trace_path) and per-op-type time totals (NXRT_PROFILE_OPS=1). When both are off
// the executor pays one pointer test per node.
#pragma once
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nxrt::session {

inline double monotonic_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Tracer {
 public:
  explicit Tracer(std::string path) : path_(std::move(path)), origin_us_(monotonic_us()) {}
  // A complete event ("ph":"X") on the calling thread's track (concurrent runs of a session get one
  // track each). `args_json` is the inside of the args object (may be empty).
  void span(const std::string& name, const std::string& category, double start_us, double dur_us,
            const std::string& args_json);
  // Writes the JSON file; returns false on an I/O error.
  bool write() const;
  const std::string& path() const { return path_; }

 private:
  struct Event {
    std::string name, category, args;
    double ts, dur;
    int tid;
  };
  std::string path_;
  double origin_us_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

class OpProfile {
 public:
  // Concurrent runs of a session add to one profile.
  void add(const std::string& op, double us) {
    std::lock_guard<std::mutex> lk(mu_);
    auto& e = totals_[op];
    e.first += us;
    e.second += 1;
  }
  // "op  calls  total ms  share" table, slowest first.
  std::string table() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::pair<double, long>> totals_;
};

// What the executor reports to while running (null members are off).
struct RunHooks {
  Tracer* tracer = nullptr;
  OpProfile* profile = nullptr;
  bool active() const { return tracer || profile; }
};

std::string json_escape(const std::string& s);

}  // namespace nxrt::session
