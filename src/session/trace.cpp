#include "session/trace.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>

namespace nxrt::session {

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o;
}

namespace {
// A small number per thread for the trace's "tid" (1 for the first thread that records).
int trace_thread_id() {
  static std::atomic<int> next{1};
  thread_local const int id = next.fetch_add(1);
  return id;
}
}  // namespace

void Tracer::span(const std::string& name, const std::string& category, double start_us, double dur_us,
                  const std::string& args_json) {
  const int tid = trace_thread_id();
  std::lock_guard<std::mutex> lk(mu_);
  events_.push_back({name, category, args_json, start_us - origin_us_, dur_us, tid});
}

bool Tracer::write() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::ofstream out(path_);
  if (!out) return false;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    char nums[96];
    std::snprintf(nums, sizeof nums, "\"ts\":%.3f,\"dur\":%.3f", e.ts, e.dur);
    out << "{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << json_escape(e.category)
        << "\",\"ph\":\"X\",\"pid\":1,\"tid\":" << e.tid << "," << nums << ",\"args\":{" << e.args << "}}"
        << (i + 1 < events_.size() ? ",\n" : "\n");
  }
  out << "]}\n";
  return static_cast<bool>(out);
}

std::string OpProfile::table() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [op, e] : totals_) {
    rows.push_back({e.first, op});
    total += e.first;
  }
  std::sort(rows.rbegin(), rows.rend());
  std::string s = "nxrt op profile (total per op type):\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-32s %8s %12s %7s\n", "op", "calls", "total ms", "share");
  s += buf;
  for (const auto& [us, op] : rows) {
    std::snprintf(buf, sizeof buf, "  %-32s %8ld %12.3f %6.1f%%\n", op.c_str(), totals_.at(op).second, us / 1000.0,
                  total > 0 ? 100.0 * us / total : 0.0);
    s += buf;
  }
  return s;
}

}  // namespace nxrt::session
