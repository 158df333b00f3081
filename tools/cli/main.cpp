// nxrt command-line tool: run, bench, test, info. Uses only the public API (include/nxrt/).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "nxrt/session.h"
#include "text_session.h"

using namespace nxrt;

int cmd_info_capture(int argc, char** argv);  // tools/cli/generate.cpp

namespace {

[[noreturn]] void usage_exit(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  std::fprintf(stderr,
               "usage:\n"
               "  nxrt run MODEL.onnx [--input FILE.pb]... [--output-dir DIR] [--threads N] [--opt LEVEL] [--disable PASS]...\n"
               "  nxrt bench MODEL.onnx [--input FILE.pb]... [--threads N] [--opt LEVEL] [--disable PASS]... [--warmup W] [--runs R] [--dim NAME=V]...\n"
               "             [--concurrency N,M,... [--rounds K]]  (aggregate throughput of N runs at once on one session)\n"
               "  nxrt test DIR... [--jobs N] [--timeout S] [--report FILE] [--ids-file FILE --root DIR] [--opt LEVEL] [--threads N]\n"
               "  (LEVEL: disabled|basic|all, default all; the NXRT_OPT_LEVEL environment variable overrides it; --disable: an optimizer pass not to run, by name)\n"
               "  nxrt info                         this CPU, its features and the kernel tier chosen (NXRT_ISA caps it)\n"
               "  nxrt info MODEL.onnx [--shapes]   (--shapes: inferred shape of every value, symbol lineage)\n"
               "  nxrt info --ops                   every registered kernel: domain, op, opset range\n"
               "  nxrt info --overrides             the kernel override keys (tests, diagnosis)\n"
               "  nxrt info --capture MODEL_DIR     the captured-replay schedule of a genai folder's decoder (or a MODEL.onnx)\n"
               "  nxrt generate MODEL_DIR [\"prompt text\" | --prompt-file F | --prompt-ids 1,2,3 | --prompt-len N] [--chat] ...\n"
               "  nxrt chat MODEL_DIR [--system TEXT] [--max-new-tokens N] ...   (interactive; /reset /system /stats /exit)\n"
               "  nxrt serve MODEL_DIR [--host H] [--port P] [--max-batch N] ...   (OpenAI-compatible server, docs/SERVING.md)\n"
               "  nxrt template TEMPLATE.jinja|MODEL_DIR --context CONTEXT.json   (prints the rendered template)\n");
  std::exit(2);
}

int fail(const Status& s) { return cli::report_error(s); }

// Calls handle(arg, value) for each argument of a command; value() takes the argument after a flag (a
// usage error when there is none).
template <typename Handle>
void for_each_arg(int argc, char** argv, Handle&& handle) {
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_exit(a + " needs a value");
      return argv[++i];
    };
    handle(a, value);
  }
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (every thread, user + system), in ms: on a shared machine it shows the
// work a run did apart from the time it waited for a CPU (ort bench's cpu_median_ms is the same measure).
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double peak_rss_mb() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
std::vector<std::string> list_dir(const std::string& p) {
  std::vector<std::string> out;
  if (DIR* d = opendir(p.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

SessionOptions parse_common(const std::string& flag, const std::string& val, SessionOptions o) {
  if (flag == "--threads") o.threads = std::max(1, std::atoi(val.c_str()));
  if (flag == "--opt") {
    if (val == "disabled") o.opt_level = OptLevel::kDisabled;
    else if (val == "basic") o.opt_level = OptLevel::kBasic;
    else if (val == "all" || val == "extended") o.opt_level = OptLevel::kAll;
    else usage_exit("--opt takes disabled|basic|all");
  }
  if (flag == "--disable") o.disabled_optimizers.push_back(val);  // an unknown pass: Session::create says which
  return o;
}

// Binds .pb files to graph inputs: the K-th file feeds the K-th input without a default, unless the
// proto's name matches another graph input, which it then feeds.
Result<std::vector<std::pair<std::string, Value>>> bind_input_files(const Session& session,
                                                                   const std::vector<std::string>& files) {
  std::vector<const ValueMeta*> positional;
  for (const auto& m : session.inputs()) {
    if (!m.has_default) positional.push_back(&m);
  }
  std::vector<std::pair<std::string, Value>> feeds;
  for (size_t k = 0; k < files.size(); ++k) {
    const ValueMeta* target = k < positional.size() ? positional[k] : nullptr;
    std::string name;
    auto v = read_value_file(files[k], target, &name);
    const ValueMeta* named = nullptr;
    for (const auto& m : session.inputs()) {
      if (!name.empty() && m.name == name) named = &m;
    }
    if (named && named != target) {
      target = named;
      v = read_value_file(files[k], target, &name);
    }
    if (!v.ok()) return v.status().with_context(files[k] + ": ");
    if (!target) {
      return invalid_argument(files[k] + ": more input files than model inputs (" +
                              std::to_string(positional.size()) + " inputs need feeding)");
    }
    Value value = std::move(v).value();
    // ONNX <= 1.12 test data stores bfloat16 tensors as uint16 bit patterns.
    if (target->kind == ValueMeta::Kind::kTensor && target->dtype == DataType::kBFloat16 && value.is_tensor() &&
        value.tensor().dtype() == DataType::kUInt16) {
      const Tensor& t = value.tensor();
      value = Value(Tensor(DataType::kBFloat16, t.shape(), t.storage(), t.byte_offset(), t.strides()));
    }
    feeds.push_back({target->name, std::move(value)});
  }
  return feeds;
}

// ---------------------------------------------------------------------------------------------
// run

int cmd_run(int argc, char** argv) {
  std::string model;
  std::vector<std::string> inputs;
  std::string out_dir;
  SessionOptions opts;
  for_each_arg(argc, argv, [&](const std::string& a, auto& next) {
    if (a == "--input") inputs.push_back(next());
    else if (a == "--output-dir") out_dir = next();
    else if (a == "--threads" || a == "--opt" || a == "--disable") opts = parse_common(a, next(), opts);
    else if (!a.empty() && a[0] == '-') usage_exit("unknown option " + a);
    else if (model.empty()) model = a;
    else usage_exit("unexpected argument " + a);
  });
  if (model.empty()) usage_exit("run needs a model");
  auto session = Session::create(model, opts);
  if (!session.ok()) return fail(session.status());
  auto feeds = bind_input_files(**session, inputs);
  if (!feeds.ok()) return fail(feeds.status());
  auto outs = (*session)->run(*feeds);
  if (!outs.ok()) return fail(outs.status());
  const auto& metas = (*session)->outputs();
  if (!out_dir.empty()) mkdir(out_dir.c_str(), 0755);
  for (size_t k = 0; k < outs->size(); ++k) {
    if (!out_dir.empty()) {
      Status s = write_value_file(out_dir + "/output_" + std::to_string(k) + ".pb", (*outs)[k], metas[k].name);
      if (!s.ok()) return fail(s);
    } else {
      std::printf("output_%zu %s %s\n", k, metas[k].name.c_str(), (*outs)[k].describe().c_str());
    }
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// bench

Value random_value(const ValueMeta& m, const std::map<std::string, int64_t>& dims, std::mt19937_64& rng,
                   Status* err) {
  if (m.kind != ValueMeta::Kind::kTensor) {
    *err = invalid_argument("bench cannot generate input '" + m.name + "' of type " + m.describe());
    return {};
  }
  Dims shape;
  for (size_t i = 0; i < m.shape.size(); ++i) {
    int64_t d = m.shape[i];
    if (d < 0) {
      std::string sym = i < m.dim_names.size() ? m.dim_names[i] : "";
      auto it = dims.find(sym);
      d = it != dims.end() ? it->second : 1;
    }
    shape.push_back(d);
  }
  Tensor t(m.dtype, shape);
  int64_t n = t.numel();
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int> ui(0, 9);
  switch (m.dtype) {
    case DataType::kFloat:
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = uf(rng);
      break;
    case DataType::kDouble:
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = uf(rng);
      break;
    case DataType::kInt64:
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = ui(rng);
      break;
    case DataType::kInt32:
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = ui(rng);
      break;
    case DataType::kBool:
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = ui(rng) & 1;
      break;
    default:
      if (m.dtype != DataType::kString) {
        auto* p = static_cast<uint8_t*>(t.raw_data());
        for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(ui(rng));
      }
  }
  return Value(std::move(t));
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

// --concurrency: `runs` runs of one session shared by N threads (each takes the next run until all are
// taken), for every N in the list, `rounds` times with the Ns alternating inside each round so load on
// a shared machine hits them alike. Per N: median aggregate throughput, its ratio to the first N's in
// the same rounds, and median process CPU time per run.
int bench_concurrency(Session& session, const std::vector<std::pair<std::string, Value>>& feeds,
                      const std::vector<int>& levels, int runs, int rounds, int intra_op_threads) {
  std::map<int, std::vector<double>> per_s, cpu_per_run;
  const std::string load_before = loadavg();
  for (int r = 0; r < rounds; ++r) {
    for (int n : levels) {
      std::atomic<int> next{0};
      std::atomic<bool> failed{false};
      std::string error;
      const double c0 = process_cpu_ms(), t0 = now_ms();
      std::vector<std::thread> ts;
      for (int t = 0; t < n; ++t) {
        ts.emplace_back([&] {
          while (next.fetch_add(1) < runs) {
            auto out = session.run(feeds);
            if (!out.ok() && !failed.exchange(true)) error = out.status().to_string();
          }
        });
      }
      for (auto& th : ts) th.join();
      const double wall = now_ms() - t0, cpu = process_cpu_ms() - c0;
      if (failed) return fail(runtime_error(error));
      per_s[n].push_back(runs / (wall / 1e3));
      cpu_per_run[n].push_back(cpu / runs);
    }
  }
  const double base = quantile(per_s[levels[0]], 0.5);
  std::printf("{\"concurrency\":[");
  for (size_t i = 0; i < levels.size(); ++i) {
    const int n = levels[i];
    const double med = quantile(per_s[n], 0.5);
    std::printf("%s{\"n\":%d,\"runs_per_s\":%.2f,\"ratio_to_n%d\":%.3f,\"cpu_ms_per_run\":%.3f,"
                "\"runs_per_s_min\":%.2f,\"runs_per_s_max\":%.2f}",
                i ? "," : "", n, med, levels[0], base > 0 ? med / base : 0.0, quantile(cpu_per_run[n], 0.5),
                quantile(per_s[n], 0), quantile(per_s[n], 1));
  }
  std::printf("],\"runs\":%d,\"rounds\":%d,\"intra_op_threads\":%d,\"cpus\":%u,\"loadavg_before\":\"%s\","
              "\"loadavg_after\":\"%s\",\"runtime\":\"nxrt\"}\n",
              runs, rounds, intra_op_threads, std::thread::hardware_concurrency(), load_before.c_str(), loadavg().c_str());
  return 0;
}

int cmd_bench(int argc, char** argv) {
  std::string model;
  std::vector<std::string> inputs;
  SessionOptions opts;
  int warmup = 5, runs = 20, rounds = 5;
  std::vector<int> concurrency;
  std::map<std::string, int64_t> dims;
  for_each_arg(argc, argv, [&](const std::string& a, auto& next) {
    if (a == "--input") inputs.push_back(next());
    else if (a == "--threads" || a == "--opt" || a == "--disable") opts = parse_common(a, next(), opts);
    else if (a == "--warmup") warmup = std::max(0, std::atoi(next().c_str()));
    else if (a == "--runs") runs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--rounds") rounds = std::max(1, std::atoi(next().c_str()));
    else if (a == "--concurrency") {
      std::string list = next();
      for (size_t p = 0; p < list.size();) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        const int n = std::atoi(list.substr(p, q - p).c_str());
        if (n < 1) usage_exit("--concurrency takes a list of thread counts, e.g. 1,2,4,8");
        concurrency.push_back(n);
        p = q + 1;
      }
    } else if (a == "--dim") {
      std::string d = next();
      auto eq = d.find('=');
      if (eq == std::string::npos) usage_exit("--dim takes NAME=V");
      dims[d.substr(0, eq)] = std::atoll(d.c_str() + eq + 1);
    } else if (!a.empty() && a[0] == '-') usage_exit("unknown option " + a);
    else if (model.empty()) model = a;
    else usage_exit("unexpected argument " + a);
  });
  if (model.empty()) usage_exit("bench needs a model");
  double t0 = now_ms();
  auto session = Session::create(model, opts);
  double create_ms = now_ms() - t0;
  if (!session.ok()) return fail(session.status());
  auto feeds = bind_input_files(**session, inputs);
  if (!feeds.ok()) return fail(feeds.status());
  std::mt19937_64 rng(42);
  for (const auto& m : (*session)->inputs()) {
    bool fed = false;
    for (const auto& f : *feeds) fed |= f.first == m.name;
    if (fed || m.has_default) continue;
    Status err;
    Value v = random_value(m, dims, rng, &err);
    if (!err.ok()) return fail(err);
    feeds->push_back({m.name, std::move(v)});
  }
  t0 = now_ms();
  auto first = (*session)->run(*feeds);
  double first_ms = now_ms() - t0;
  if (!first.ok()) return fail(first.status());
  for (int i = 0; i < warmup; ++i) {
    auto r = (*session)->run(*feeds);
    if (!r.ok()) return fail(r.status());
  }
  if (!concurrency.empty()) return bench_concurrency(**session, *feeds, concurrency, runs, rounds, opts.threads);
  std::vector<double> times, cpu_times;
  for (int i = 0; i < runs; ++i) {
    t0 = now_ms();
    const double c0 = process_cpu_ms();
    auto r = (*session)->run(*feeds);
    times.push_back(now_ms() - t0);
    cpu_times.push_back(process_cpu_ms() - c0);
    if (!r.ok()) return fail(r.status());
  }
  std::printf(
      "{\"create_ms\":%.3f,\"first_run_ms\":%.3f,\"median_ms\":%.3f,\"p10_ms\":%.3f,\"p90_ms\":%.3f,\"runs\":%d,"
      "\"threads\":%d,\"cpu_median_ms\":%.3f,\"warmup\":%d,\"peak_rss_mb\":%.1f,\"runtime\":\"nxrt\"}\n",
      create_ms, first_ms, quantile(times, 0.5), quantile(times, 0.1), quantile(times, 0.9), runs, opts.threads,
      quantile(cpu_times, 0.5), warmup, peak_rss_mb());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// test

struct TestCase {
  std::string id;
  std::string dir;
};

bool is_test_dir(const std::string& d) {
  if (!is_file(d + "/model.onnx")) return false;
  for (const auto& n : list_dir(d)) {
    if (n.rfind("test_data_set_", 0) == 0 && is_dir(d + "/" + n)) return true;
  }
  return false;
}

void find_tests(const std::string& dir, const std::string& id, std::vector<TestCase>* out, int depth = 0) {
  if (is_test_dir(dir)) {
    out->push_back({id, dir});
    return;
  }
  if (depth > 6) return;
  for (const auto& n : list_dir(dir)) {
    std::string p = dir + "/" + n;
    if (is_dir(p)) find_tests(p, id.empty() ? n : id + "/" + n, out, depth + 1);
  }
}

std::string basename_of(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Float view of an element for comparison.
bool element_as_double(const Tensor& t, int64_t i, double* re, double* im) {
  *im = 0;
  switch (t.dtype()) {
    case DataType::kFloat: *re = t.data<float>()[i]; return true;
    case DataType::kDouble: *re = t.data<double>()[i]; return true;
    case DataType::kFloat16: {
      uint16_t h = t.data<uint16_t>()[i];
      uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
      double v;
      if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
      else if (e == 31) v = m ? NAN : INFINITY;
      else v = std::ldexp(static_cast<double>(m | 0x400), static_cast<int>(e) - 25);
      *re = sign ? -v : v;
      return true;
    }
    case DataType::kBFloat16: {
      uint32_t u = static_cast<uint32_t>(t.data<uint16_t>()[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      *re = f;
      return true;
    }
    case DataType::kComplex64:
      *re = t.data<float>()[2 * i];
      *im = t.data<float>()[2 * i + 1];
      return true;
    case DataType::kComplex128:
      *re = t.data<double>()[2 * i];
      *im = t.data<double>()[2 * i + 1];
      return true;
    default: return false;
  }
}

bool close_enough(double got, double want, double rtol, double atol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

std::string compare_values(const Value& got, const Value& want, double rtol, double atol, const std::string& what) {
  if (got.kind() != want.kind()) return what + ": got " + got.describe() + ", expected " + want.describe();
  if (want.is_sequence() || want.is_optional()) {
    if (got.items().size() != want.items().size()) {
      return what + ": got " + got.describe() + ", expected " + want.describe();
    }
    for (size_t i = 0; i < want.items().size(); ++i) {
      std::string r = compare_values(got.items()[i], want.items()[i], rtol, atol, what + "[" + std::to_string(i) + "]");
      if (!r.empty()) return r;
    }
    return "";
  }
  if (want.is_map()) return "";  // compared by the values below when needed
  const Tensor& g = got.tensor();
  Tensor w = want.tensor();
  // ONNX <= 1.12 test data stores bfloat16 tensors as uint16 bit patterns.
  if (g.dtype() == DataType::kBFloat16 && w.dtype() == DataType::kUInt16) {
    w = Tensor(DataType::kBFloat16, w.shape(), w.storage(), w.byte_offset(), w.strides());
  }
  if (g.dtype() != w.dtype() || g.shape() != w.shape()) {
    return what + ": got " + g.describe() + ", expected " + w.describe();
  }
  int64_t n = w.numel();
  if (w.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) {
      if (g.string_data()[i] != w.string_data()[i]) {
        return what + ": element " + std::to_string(i) + " is \"" + g.string_data()[i] + "\", expected \"" +
               w.string_data()[i] + "\"";
      }
    }
    return "";
  }
  double gr, gi, wr, wi;
  if (element_as_double(w, 0, &wr, &wi) || n == 0) {
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      element_as_double(g, i, &gr, &gi);
      element_as_double(w, i, &wr, &wi);
      if (!close_enough(gr, wr, rtol, atol) || !close_enough(gi, wi, rtol, atol)) {
        if (first < 0) first = i;
        ++bad;
        if (std::isfinite(gr - wr)) worst = std::max(worst, std::fabs(gr - wr));
      }
    }
    if (bad) {
      element_as_double(g, first, &gr, &gi);
      element_as_double(w, first, &wr, &wi);
      char buf[256];
      std::snprintf(buf, sizeof buf, ": %lld of %lld elements differ; first at %lld: got %.9g, expected %.9g; max abs diff %.3g",
                    static_cast<long long>(bad), static_cast<long long>(n), static_cast<long long>(first), gr, wr, worst);
      return what + buf;
    }
    return "";
  }
  // Exact comparison of the packed bytes for integers, bool, float8, int4 ...
  if (std::memcmp(g.raw_data(), w.raw_data(), w.nbytes()) != 0) {
    const auto* gb = static_cast<const uint8_t*>(g.raw_data());
    const auto* wb = static_cast<const uint8_t*>(w.raw_data());
    size_t at = 0;
    while (at < w.nbytes() && gb[at] == wb[at]) ++at;
    return what + ": values differ (first differing byte " + std::to_string(at) + " of " + std::to_string(w.nbytes()) +
           ", dtype " + dtype_name(w.dtype()) + ")";
  }
  return "";
}

// Runs one test folder in this process; returns "" on success or the failure reason.
std::string run_one_test(const TestCase& tc, double rtol, double atol, const SessionOptions& opts) {
  auto session = Session::create(tc.dir + "/model.onnx", opts);
  if (!session.ok()) return session.status().to_string();
  int sets = 0;
  for (const auto& n : list_dir(tc.dir)) {
    if (n.rfind("test_data_set_", 0) != 0) continue;
    std::string ds = tc.dir + "/" + n;
    std::vector<std::string> files;
    for (int k = 0; is_file(ds + "/input_" + std::to_string(k) + ".pb"); ++k) {
      files.push_back(ds + "/input_" + std::to_string(k) + ".pb");
    }
    auto feeds = bind_input_files(**session, files);
    if (!feeds.ok()) return n + ": " + feeds.status().to_string();
    auto outs = (*session)->run(*feeds);
    if (!outs.ok()) return n + ": " + outs.status().to_string();
    const auto& metas = (*session)->outputs();
    for (size_t k = 0; k < metas.size(); ++k) {
      std::string f = ds + "/output_" + std::to_string(k) + ".pb";
      if (!is_file(f)) continue;
      auto want = read_value_file(f, &metas[k]);
      if (!want.ok()) return n + ": reading " + f + ": " + want.status().to_string();
      std::string r = compare_values((*outs)[k], *want, rtol, atol, n + " output " + std::to_string(k) + " '" +
                                                                         metas[k].name + "'");
      if (!r.empty()) return r;
    }
    ++sets;
  }
  if (sets == 0) return "no test data sets";
  return "";
}

struct Running {
  pid_t pid;
  int fd;
  size_t index;
  double start_ms;
  std::string buf;
};

int cmd_test(int argc, char** argv) {
  std::vector<std::string> dirs;
  int jobs = 2;
  double timeout_s = 300;
  double rtol = 1e-3, atol = 1e-5;
  std::string report, ids_file, root;
  bool quiet = false;
  SessionOptions opts;
  for_each_arg(argc, argv, [&](const std::string& a, auto& next) {
    if (a == "--jobs" || a == "-j") jobs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--timeout") timeout_s = std::atof(next().c_str());
    else if (a == "--report") report = next();
    else if (a == "--ids-file") ids_file = next();
    else if (a == "--root") root = next();
    else if (a == "--rtol") rtol = std::atof(next().c_str());
    else if (a == "--atol") atol = std::atof(next().c_str());
    else if (a == "--quiet") quiet = true;
    else if (a == "--opt" || a == "--threads") opts = parse_common(a, next(), opts);
    else if (!a.empty() && a[0] == '-') usage_exit("unknown option " + a);
    else dirs.push_back(a);
  });
  std::vector<TestCase> tests;
  int missing = 0;
  if (!ids_file.empty()) {
    if (root.empty()) usage_exit("--ids-file needs --root");
    std::ifstream in(ids_file);
    if (!in) usage_exit("cannot read " + ids_file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::string d = root + "/" + line;
      if (!is_test_dir(d)) {
        std::printf("FAIL %s: test folder not found under %s\n", line.c_str(), root.c_str());
        ++missing;
        continue;
      }
      tests.push_back({line, d});
    }
  }
  for (const auto& d : dirs) {
    if (!is_dir(d)) usage_exit("not a folder: " + d);
    find_tests(d, basename_of(d), &tests);
  }
  if (tests.empty() && missing == 0) usage_exit("no test folders found");

  std::vector<std::string> result(tests.size());
  std::vector<bool> passed(tests.size(), false);
  std::vector<Running> running;
  size_t next_test = 0;
  std::fflush(stdout);
  while (next_test < tests.size() || !running.empty()) {
    while (next_test < tests.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        std::perror("pipe");
        return 1;
      }
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        std::string r = run_one_test(tests[next_test], rtol, atol, opts);
        std::string msg = r.empty() ? "PASS" : "FAIL " + r;
        if (msg.size() > 2000) msg = msg.substr(0, 2000) + "...";
        std::replace(msg.begin(), msg.end(), '\n', ' ');
        ssize_t w = write(fds[1], msg.data(), msg.size());
        (void)w;
        close(fds[1]);
        _exit(0);
      }
      close(fds[1]);
      fcntl(fds[0], F_SETFL, O_NONBLOCK);
      running.push_back({pid, fds[0], next_test, now_ms(), {}});
      ++next_test;
    }
    std::vector<pollfd> pfds;
    for (auto& r : running) pfds.push_back({r.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 50);
    for (size_t k = 0; k < running.size();) {
      Running& r = running[k];
      char buf[4096];
      ssize_t got;
      while ((got = read(r.fd, buf, sizeof buf)) > 0) r.buf.append(buf, static_cast<size_t>(got));
      int status = 0;
      pid_t w = waitpid(r.pid, &status, WNOHANG);
      bool done = false;
      if (w == r.pid) {
        while ((got = read(r.fd, buf, sizeof buf)) > 0) r.buf.append(buf, static_cast<size_t>(got));
        if (WIFSIGNALED(status)) {
          result[r.index] = std::string("crashed: signal ") + std::to_string(WTERMSIG(status)) + " (" +
                            strsignal(WTERMSIG(status)) + ")";
        } else if (r.buf == "PASS") {
          passed[r.index] = true;
        } else if (r.buf.rfind("FAIL ", 0) == 0) {
          result[r.index] = r.buf.substr(5);
        } else {
          result[r.index] = "exited with status " + std::to_string(WEXITSTATUS(status)) + " without a result";
        }
        done = true;
      } else if (now_ms() - r.start_ms > timeout_s * 1000) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, &status, 0);
        result[r.index] = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
        done = true;
      }
      if (done) {
        close(r.fd);
        if (!passed[r.index]) std::printf("FAIL %s: %s\n", tests[r.index].id.c_str(), result[r.index].c_str());
        else if (!quiet) std::printf("ok   %s\n", tests[r.index].id.c_str());
        std::fflush(stdout);
        running.erase(running.begin() + static_cast<long>(k));
      } else {
        ++k;
      }
    }
  }
  int npass = 0, nfail = missing;
  for (bool p : passed) (p ? npass : nfail)++;
  if (!report.empty()) {
    std::ofstream out(report);
    for (size_t i = 0; i < tests.size(); ++i) {
      std::string reason = result[i];
      std::replace(reason.begin(), reason.end(), '\t', ' ');
      out << tests[i].id << '\t' << (passed[i] ? "pass" : "fail") << '\t' << reason << '\n';
    }
  }
  std::printf("%d passed, %d failed\n", npass, nfail);
  return nfail == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// info

// `nxrt info --ops`: one line per registered kernel (domain, op, opset range, in-place input).
int print_registered_ops() {
  const auto kernels = registered_kernels();
  for (const auto& k : kernels) {
    const std::string range = std::to_string(k.since_version) + "-" +
                              (k.end_version == INT64_MAX ? std::string() : std::to_string(k.end_version));
    std::printf("%-18s %-36s opset %-8s%s\n", k.domain.empty() ? "ai.onnx" : k.domain.c_str(), k.op_type.c_str(),
                range.c_str(), k.inplace_input >= 0 ? (" in-place input " + std::to_string(k.inplace_input)).c_str() : "");
  }
  std::printf("%zu kernels\n", kernels.size());
  return 0;
}

// `nxrt info --overrides`: the keys SessionOptions::kernel_overrides / NXRT_KERNEL_OVERRIDES accept.
int print_override_keys() {
  for (const auto& k : kernel_override_keys()) std::printf("%s=%s\n    %s\n", k.key.c_str(), k.values.c_str(), k.what.c_str());
  return 0;
}

// The "cpu:" and "kernel tier:" lines of `nxrt info` (an error when NXRT_ISA names no tier).
Status print_cpu_and_tier() {
  std::printf("cpu: %s\n", cpu_summary().c_str());
  auto tier = kernel_tier_summary();
  if (!tier.ok()) return tier.status();
  std::printf("kernel tier: %s\n", tier->c_str());
  return Status::Ok();
}

int cmd_info(int argc, char** argv) {
  if (argc < 1) {
    // No model: what this machine runs (the CPU, its features and the kernel tier chosen for it).
    if (Status st = print_cpu_and_tier(); !st.ok()) return fail(st);
    std::printf("(nxrt info MODEL.onnx | --ops | --overrides | --capture MODEL_DIR for more)\n");
    return 0;
  }
  if (std::string(argv[0]) == "--ops") return print_registered_ops();
  if (std::string(argv[0]) == "--overrides") return print_override_keys();
  if (std::string(argv[0]) == "--capture") return cmd_info_capture(argc - 1, argv + 1);
  auto s = inspect_model(argv[0]);
  if (!s.ok()) return fail(s.status());
  if (Status st = print_cpu_and_tier(); !st.ok()) return fail(st);
  std::printf("model: %s\nir_version: %lld\nproducer: %s\nopsets:", argv[0], static_cast<long long>(s->ir_version),
              s->producer.c_str());
  for (const auto& [d, v] : s->opsets) std::printf(" %s=%lld", d.empty() ? "ai.onnx" : d.c_str(), static_cast<long long>(v));
  std::printf("\ninputs:\n");
  for (const auto& m : s->inputs) {
    std::printf("  %s: %s%s\n", m.name.c_str(), m.describe().c_str(), m.has_default ? " (has initializer default)" : "");
  }
  std::printf("outputs:\n");
  for (const auto& m : s->outputs) std::printf("  %s: %s\n", m.name.c_str(), m.describe().c_str());
  std::printf("nodes: %zu, initializers: %zu (%.1f MB)\nops:\n", s->num_nodes, s->num_initializers,
              static_cast<double>(s->initializer_bytes) / 1e6);
  std::vector<std::pair<int, std::string>> hist;
  for (const auto& [op, c] : s->op_histogram) hist.push_back({-c, op});
  std::sort(hist.begin(), hist.end());
  for (const auto& [c, op] : hist) std::printf("  %-28s %d\n", op.c_str(), -c);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--shapes") continue;
    auto shapes = describe_model_shapes(argv[0]);
    if (!shapes.ok()) return fail(shapes.status());
    std::printf("shapes:\n%s", shapes->c_str());
  }
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv);  // tools/cli/generate.cpp
int cmd_chat(int argc, char** argv);      // tools/cli/chat.cpp
int cmd_serve(int argc, char** argv);     // tools/cli/serve.cpp
int cmd_template(int argc, char** argv);  // tools/cli/template.cpp

int main(int argc, char** argv) {
  if (argc < 2) usage_exit("missing command");
  std::string cmd = argv[1];
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "bench") return cmd_bench(argc - 2, argv + 2);
  if (cmd == "test") return cmd_test(argc - 2, argv + 2);
  if (cmd == "info") return cmd_info(argc - 2, argv + 2);
  if (cmd == "generate") return cmd_generate(argc - 2, argv + 2);  // tools/cli/generate.cpp
  if (cmd == "chat") return cmd_chat(argc - 2, argv + 2);
  if (cmd == "serve") return cmd_serve(argc - 2, argv + 2);  // tools/cli/serve.cpp
  if (cmd == "template") return cmd_template(argc - 2, argv + 2);
  if (cmd == "--help" || cmd == "-h" || cmd == "help") usage_exit("help");
  usage_exit("unknown command '" + cmd + "'");
}
