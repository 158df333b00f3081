// nxrt._nxrt.genai: Model, GeneratorParams and Generator over include/nxrt/genai.h, shaped like
// onnxruntime_genai's Python API. nxrt/genai.py adds Config, the provider checks and is_*_available().
//
// Adding a binding for a new genai.h class (the Tokenizer, TokenizerStream) means one more bind_*
// function below taking `const PyModel&`; the model object already outlives everything made from it.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "errors.h"
#include "nxrt/genai.h"

namespace nxrt::python {

namespace {

struct PyModel {
  std::unique_ptr<genai::Model> model;
};

struct PyGeneratorParams {
  std::shared_ptr<PyModel> model;
  genai::GeneratorParams params;
};

struct PyGenerator {
  std::shared_ptr<PyModel> model;  // the generator reads the model's session: keep it alive
  std::unique_ptr<genai::Generator> generator;
  // Methods run with the GIL released; this keeps two Python threads out of one generator.
  std::mutex mu;

  template <typename F>
  auto locked(F&& f) {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu);
    return f(*generator);
  }
};

// Search options onnxruntime_genai knows that need beam search or batching: accepted at their neutral
// value only.
bool must_be_neutral(const std::string& name, const py::handle& v, std::string* why) {
  struct Neutral {
    const char* name;
    double value;
    const char* feature;
  };
  static const Neutral kNeutral[] = {
      {"batch_size", 1, "batching (one sequence per generator)"},
      {"num_beams", 1, "beam search"},
      {"num_return_sequences", 1, "several sequences per prompt"},
      {"no_repeat_ngram_size", 0, "no_repeat_ngram_size"},
      {"min_length", 0, "min_length"},
      {"diversity_penalty", 0, "diversity_penalty"},
  };
  for (const Neutral& n : kNeutral) {
    if (name != n.name) continue;
    if (v.cast<double>() != n.value) *why = std::string(n.feature) + " is not in nxrt yet";
    return true;
  }
  return false;
}

int64_t as_int(const std::string& name, const py::handle& v) {
  if (PyBool_Check(v.ptr()) || !PyLong_Check(v.ptr())) raise_invalid_argument("search option '" + name + "' takes an int");
  return v.cast<int64_t>();
}
double as_float(const std::string& name, const py::handle& v) {
  if (PyBool_Check(v.ptr()) || (!PyLong_Check(v.ptr()) && !PyFloat_Check(v.ptr()))) {
    raise_invalid_argument("search option '" + name + "' takes a number");
  }
  return v.cast<double>();
}
bool as_bool(const std::string& name, const py::handle& v) {
  if (!PyBool_Check(v.ptr())) raise_invalid_argument("search option '" + name + "' takes a bool");
  return v.cast<bool>();
}

void set_search_option(genai::SearchOptions& o, const std::string& name, const py::handle& v) {
  std::string why;
  if (must_be_neutral(name, v, &why)) {
    if (!why.empty()) raise_not_implemented("search option " + name + "=" + text(v) + ": " + why);
    return;
  }
  if (name == "max_length") o.max_length = as_int(name, v);
  else if (name == "do_sample") o.do_sample = as_bool(name, v);
  else if (name == "top_k") o.top_k = as_int(name, v);
  else if (name == "top_p") o.top_p = as_float(name, v);
  else if (name == "min_p") o.min_p = as_float(name, v);
  else if (name == "temperature") o.temperature = as_float(name, v);
  else if (name == "repetition_penalty") o.repetition_penalty = as_float(name, v);
  else if (name == "stop_at_eos") o.stop_at_eos = as_bool(name, v);
  else if (name == "early_stopping") as_bool(name, v);  // beam search only: nothing to stop early
  else if (name == "length_penalty") as_float(name, v);  // beam search only
  else if (name == "random_seed") {
    const int64_t seed = as_int(name, v);
    // onnxruntime_genai: -1 draws a seed.
    o.random_seed = seed == -1 ? (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()
                               : static_cast<uint64_t>(seed);
  } else if (name == "past_present_share_buffer") {
    raise_not_implemented("search option past_present_share_buffer: nxrt takes it from genai_config.json only");
  } else {
    raise_invalid_argument("unknown search option '" + name +
                           "' (nxrt knows max_length, do_sample, top_k, top_p, min_p, temperature, "
                           "repetition_penalty, random_seed, stop_at_eos, and batch_size/num_beams/"
                           "num_return_sequences = 1)");
  }
}

py::dict search_options_dict(const genai::SearchOptions& o, const genai::Model& model) {
  py::dict d;
  d["max_length"] = o.max_length;
  d["do_sample"] = o.do_sample;
  d["top_k"] = o.top_k;
  d["top_p"] = o.top_p;
  d["min_p"] = o.min_p;
  d["temperature"] = o.temperature;
  d["repetition_penalty"] = o.repetition_penalty;
  d["random_seed"] = o.random_seed;
  d["stop_at_eos"] = o.stop_at_eos;
  d["batch_size"] = 1;
  d["num_beams"] = 1;
  d["num_return_sequences"] = 1;
  d["past_present_share_buffer"] = model.config().past_present_share_buffer;
  return d;
}

std::vector<int64_t> tokens_from(const py::handle& obj) {
  py::array a = py::array::ensure(obj);
  if (!a) raise_invalid_argument("tokens must be a numpy array or a list of ints");
  if (a.ndim() > 2 || (a.ndim() == 2 && a.shape(0) != 1)) {
    raise_invalid_argument("tokens of shape " + text(a.attr("shape")) +
                           ": nxrt generates one sequence (shape [n] or [1, n])");
  }
  if (a.size() > 0 && a.dtype().kind() != 'i' && a.dtype().kind() != 'u') {
    raise_invalid_argument("tokens must be integers, got " + text(a.dtype()));
  }
  auto ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  return std::vector<int64_t>(ids.data(), ids.data() + ids.size());
}

py::array_t<int32_t> int32_array(const std::vector<int64_t>& v) {
  py::array_t<int32_t> out(static_cast<py::ssize_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) out.mutable_data()[i] = static_cast<int32_t>(v[i]);
  return out;
}

void bind_model(py::module_& m) {
  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model", "A decoder LLM folder (genai_config.json + .onnx).")
      .def(py::init([](const std::string& path, int threads) {
             genai::ModelOptions o;
             o.session.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
             auto created = [&] {
               py::gil_scoped_release nogil;
               return genai::Model::create(path, o);
             }();
             return std::make_shared<PyModel>(PyModel{take(std::move(created))});
           }),
           py::arg("path"), py::arg("threads") = 0)
      .def_property_readonly("vocab_size", [](const PyModel& pm) { return pm.model->vocab_size(); })
      .def_property_readonly("context_length", [](const PyModel& pm) { return pm.model->config().context_length; })
      .def_property_readonly("eos_token_ids", [](const PyModel& pm) { return pm.model->config().eos_token_ids; });
}

void bind_params(py::module_& m) {
  py::class_<PyGeneratorParams, std::shared_ptr<PyGeneratorParams>>(m, "GeneratorParams",
                                                                    "Search options for a Generator.")
      .def(py::init([](std::shared_ptr<PyModel> model) {
             auto p = std::make_shared<PyGeneratorParams>(PyGeneratorParams{model, genai::GeneratorParams(*model->model)});
             p->params.search.stop_at_eos = true;  // onnxruntime_genai stops at EOS
             return p;
           }),
           py::arg("model"))
      .def(
          "set_search_options",
          [](PyGeneratorParams& p, const py::kwargs& kw) {
            genai::SearchOptions o = p.params.search;  // all or nothing
            for (auto [k, v] : kw) set_search_option(o, k.cast<std::string>(), v);
            p.params.search = o;
          },
          "Sets search options by keyword: max_length, do_sample, top_k, top_p, min_p, temperature, "
          "repetition_penalty, random_seed (-1: random), stop_at_eos (nxrt; default True).")
      .def("get_search_options",
           [](const PyGeneratorParams& p) { return search_options_dict(p.params.search, *p.model->model); });
}

void bind_generator(py::module_& m) {
  py::class_<PyGenerator, std::shared_ptr<PyGenerator>>(m, "Generator", "The token-by-token generation loop.")
      .def(py::init([](std::shared_ptr<PyModel> model, const PyGeneratorParams& params) {
             if (params.model != model) raise_invalid_argument("the GeneratorParams were made for another Model");
             auto created = [&] {
               py::gil_scoped_release nogil;
               return genai::Generator::create(*model->model, params.params);
             }();
             auto g = std::make_shared<PyGenerator>();
             g->model = model;
             g->generator = take(std::move(created));
             return g;
           }),
           py::arg("model"), py::arg("params"))
      .def(
          "append_tokens",
          [](PyGenerator& g, const py::handle& tokens) {
            std::vector<int64_t> ids = tokens_from(tokens);
            check(g.locked([&](genai::Generator& gen) { return gen.append_tokens(ids); }));
          },
          py::arg("tokens"), "Appends prompt tokens (numpy int array [n] or [1, n], or a list) and runs the model over them.")
      .def(
          "generate_next_token",
          [](PyGenerator& g) { check(g.locked([](genai::Generator& gen) { return gen.generate_next_token(); })); },
          "Runs the model if needed and appends the next token chosen by the search options.")
      .def("is_done", [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.is_done(); }); })
      .def(
          "get_logits",
          [](PyGenerator& g) {
            auto logits = std::make_unique<std::vector<float>>(
                take(g.locked([](genai::Generator& gen) { return gen.get_logits(); })));
            const auto n = static_cast<py::ssize_t>(logits->size());
            float* data = logits->data();
            py::capsule owner(logits.release(), [](void* p) { delete static_cast<std::vector<float>*>(p); });
            return py::array_t<float>({py::ssize_t{1}, py::ssize_t{1}, n}, data, owner);
          },
          "Logits of the last position, float32 [1, 1, vocab].")
      .def(
          "get_next_tokens",
          [](PyGenerator& g) {
            std::vector<int64_t> last;
            g.locked([&](genai::Generator& gen) {
              if (!gen.sequence().empty()) last.push_back(gen.sequence().back());
              return 0;
            });
            return int32_array(last);
          },
          "The most recent token of the sequence, int32 [1].")
      .def(
          "get_sequence",
          [](PyGenerator& g, int64_t index) {
            if (index != 0) raise_invalid_argument("sequence " + std::to_string(index) + ": nxrt generates one sequence (index 0)");
            std::vector<int64_t> seq = g.locked([](genai::Generator& gen) { return gen.sequence(); });
            return int32_array(seq);
          },
          py::arg("index"), "Every token so far (prompt and generated), int32.")
      .def("token_count",
           [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.sequence().size(); }); })
      .def(
          "rewind_to",
          [](PyGenerator& g, size_t length) {
            check(g.locked([&](genai::Generator& gen) { return gen.rewind_to(length); }));
          },
          py::arg("new_length"), "Keeps the first new_length tokens; the KV cache forgets the rest.")
      .def_property_readonly("max_length",
                             [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.max_length(); }); });
}

}  // namespace

void bind_genai(py::module_& m) {
  bind_model(m);
  bind_params(m);
  bind_generator(m);
}

}  // namespace nxrt::python
