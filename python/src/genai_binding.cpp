// nxrt._nxrt.genai: Model, GeneratorParams and Generator over include/nxrt/genai.h, shaped like
// onnxruntime_genai's Python API. nxrt/genai.py adds Config, the provider checks and is_*_available().
//
// Every object made from a Model (params, generator, tokenizer) holds a shared_ptr to it, so the model
// outlives them whatever order Python drops them in.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <algorithm>
#include <climits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "errors.h"
#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"

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

// Search options by name: integers, numbers and bools (Python's types are checked here so the error names
// the Python type; the ranges are checked by GeneratorParams / Generator::create).
const char* const kIntOptions[] = {"max_length", "batch_size", "min_length", "top_k", "num_beams",
                                   "num_return_sequences", "no_repeat_ngram_size", "random_seed"};
const char* const kFloatOptions[] = {"top_p", "min_p", "temperature", "repetition_penalty", "length_penalty",
                                     "diversity_penalty"};
const char* const kBoolOptions[] = {"do_sample", "early_stopping", "past_present_share_buffer", "stop_at_eos"};

template <size_t N>
bool one_of(const std::string& name, const char* const (&names)[N]) {
  for (const char* n : names) {
    if (name == n) return true;
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

void set_search_option(genai::GeneratorParams& p, const std::string& name, const py::handle& v) {
  if (one_of(name, kIntOptions)) {
    check(p.set_search_option(name, static_cast<double>(as_int(name, v))));
  } else if (one_of(name, kFloatOptions)) {
    check(p.set_search_option(name, as_float(name, v)));
  } else if (one_of(name, kBoolOptions)) {
    check(p.set_search_option_bool(name, as_bool(name, v)));
  } else {
    raise_invalid_argument("unknown search option '" + name +
                           "' (nxrt knows max_length, batch_size, min_length, do_sample, top_k, top_p, min_p, "
                           "temperature, repetition_penalty, no_repeat_ngram_size, random_seed, num_beams, "
                           "num_return_sequences, length_penalty, early_stopping, diversity_penalty (0), "
                           "past_present_share_buffer, stop_at_eos)");
  }
}

py::dict search_options_dict(const genai::SearchOptions& o) {
  py::dict d;
  d["max_length"] = o.max_length;
  d["batch_size"] = o.batch_size;
  d["min_length"] = o.min_length;
  d["do_sample"] = o.do_sample;
  d["top_k"] = o.top_k;
  d["top_p"] = o.top_p;
  d["min_p"] = o.min_p;
  d["temperature"] = o.temperature;
  d["repetition_penalty"] = o.repetition_penalty;
  d["no_repeat_ngram_size"] = o.no_repeat_ngram_size;
  d["random_seed"] = o.random_seed;
  d["stop_at_eos"] = o.stop_at_eos;
  d["num_beams"] = o.num_beams;
  d["num_return_sequences"] = o.num_return_sequences;
  d["length_penalty"] = o.length_penalty;
  d["early_stopping"] = o.early_stopping;
  d["diversity_penalty"] = 0.0;
  d["past_present_share_buffer"] = o.past_present_share_buffer;
  return d;
}

// Token ids from a numpy array or list: [n] at batch_size 1, or [batch_size, n].
std::vector<int64_t> tokens_from(const py::handle& obj, int64_t batch) {
  py::array a = py::array::ensure(obj);
  if (!a) raise_invalid_argument("tokens must be a numpy array or a list of ints");
  if (a.ndim() > 2 || (a.ndim() == 2 && a.shape(0) != batch) || (a.ndim() < 2 && batch != 1)) {
    raise_invalid_argument("tokens of shape " + text(a.attr("shape")) + ": expected [batch_size " +
                           std::to_string(batch) + ", n]" + (batch == 1 ? " or [n]" : ""));
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
      .def(py::init([](const std::string& path, int threads, bool kv_float16, bool weight_scales_float16) {
             genai::ModelOptions o;
             o.session.threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
             if (kv_float16) o.session.kv_cache_dtype = DataType::kFloat16;
             if (weight_scales_float16) o.session.matmulnbits_scale_dtype = DataType::kFloat16;
             auto created = [&] {
               py::gil_scoped_release nogil;
               return genai::Model::create(path, o);
             }();
             return std::make_shared<PyModel>(PyModel{take(std::move(created))});
           }),
           py::arg("path"), py::arg("threads") = 0, py::arg("kv_float16") = false,
           py::arg("weight_scales_float16") = false)
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
            genai::GeneratorParams o = p.params;  // all or nothing
            for (auto [k, v] : kw) set_search_option(o, k.cast<std::string>(), v);
            p.params = o;
          },
          "Sets search options by keyword: max_length, batch_size, min_length, do_sample, top_k, top_p, min_p, "
          "temperature, repetition_penalty, no_repeat_ngram_size, random_seed (-1: random), num_beams, "
          "num_return_sequences, length_penalty, early_stopping, past_present_share_buffer, stop_at_eos "
          "(nxrt; default True).")
      .def("get_search_options", [](const PyGeneratorParams& p) { return search_options_dict(p.params.search); });
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
            std::vector<int64_t> ids = tokens_from(tokens, g.generator->search_options().batch_size);
            check(g.locked([&](genai::Generator& gen) { return gen.append_tokens(ids); }));
          },
          py::arg("tokens"),
          "Appends tokens to every row (numpy int array [n] or [batch_size, n], or a list; pad_token_id pads "
          "shorter prompts on the left) and runs the model over them.")
      .def(
          "generate_next_token",
          [](PyGenerator& g) { check(g.locked([](genai::Generator& gen) { return gen.generate_next_token(); })); },
          "Runs the model if needed and appends the next token of every row (greedy, sampled or beam search).")
      .def("is_done", [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.is_done(); }); })
      .def(
          "get_logits",
          [](PyGenerator& g) {
            const genai::SearchOptions& o = g.generator->search_options();
            const auto rows = static_cast<py::ssize_t>(o.batch_size * o.num_beams);
            auto logits = std::make_unique<std::vector<float>>(
                take(g.locked([](genai::Generator& gen) { return gen.get_logits(); })));
            const auto n = static_cast<py::ssize_t>(logits->size()) / rows;
            float* data = logits->data();
            py::capsule owner(logits.release(), [](void* p) { delete static_cast<std::vector<float>*>(p); });
            return py::array_t<float>({rows, py::ssize_t{1}, n}, data, owner);
          },
          "Logits the next tokens are picked from, float32 [rows, 1, vocab] (rows = batch_size * num_beams).")
      .def(
          "set_logits",
          [](PyGenerator& g, const py::handle& obj) {
            auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
            if (!a) raise_invalid_argument("logits must be a float numpy array [rows, vocab] or [rows, 1, vocab]");
            std::vector<float> v(a.data(), a.data() + a.size());
            check(g.locked([&](genai::Generator& gen) { return gen.set_logits(v); }));
          },
          py::arg("logits"),
          "Replaces the logits the next generate_next_token picks from (float [rows, vocab] or [rows, 1, vocab]).")
      .def(
          "get_next_tokens",
          [](PyGenerator& g) {
            return int32_array(g.locked([](genai::Generator& gen) { return gen.get_next_tokens(); }));
          },
          "The last token of every row, int32 [rows].")
      .def(
          "get_sequence",
          [](PyGenerator& g, int64_t index) {
            std::vector<int64_t> seq;
            size_t count = 0;
            g.locked([&](genai::Generator& gen) {
              count = gen.num_sequences();
              if (index >= 0 && static_cast<size_t>(index) < count) seq = gen.get_sequence(static_cast<size_t>(index));
              return 0;
            });
            if (index < 0 || static_cast<size_t>(index) >= count) {
              raise_invalid_argument("sequence " + std::to_string(index) + ": the generator has " +
                                     std::to_string(count) + " (batch_size, or batch_size * num_return_sequences)");
            }
            return int32_array(seq);
          },
          py::arg("index"),
          "Row `index` (prompt and padding included), int32; beam search: prompt * num_return_sequences + k, "
          "the k-th best hypothesis.")
      .def("token_count",
           [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.token_count(); }); })
      .def("get_search_options",
           [](PyGenerator& g) { return search_options_dict(g.generator->search_options()); })
      .def(
          "rewind_to",
          [](PyGenerator& g, size_t length) {
            check(g.locked([&](genai::Generator& gen) { return gen.rewind_to(length); }));
          },
          py::arg("new_length"), "Keeps the first new_length tokens of every row; the KV cache forgets the rest.")
      .def_property_readonly("max_length",
                             [](PyGenerator& g) { return g.locked([](genai::Generator& gen) { return gen.max_length(); }); });
}

struct PyTokenizer {
  std::shared_ptr<PyModel> model;
  std::unique_ptr<genai::Tokenizer> tokenizer;
  int64_t pad_token_id = -1;
};

struct PyTokenizerStream {
  std::shared_ptr<PyTokenizer> tokenizer;  // the stream reads it: keep it alive
  genai::TokenizerStream stream;
};

// Ids of a 1-d numpy int array or list (decode's input); `what` names the argument in errors.
std::vector<int32_t> ids_from(const py::handle& obj, const char* what) {
  py::array a = py::array::ensure(obj);
  if (!a) raise_invalid_argument(std::string(what) + " must be a numpy array or a list of ints");
  if (a.ndim() != 1) raise_invalid_argument(std::string(what) + " of shape " + text(a.attr("shape")) + ": expected [n]");
  if (a.size() > 0 && a.dtype().kind() != 'i' && a.dtype().kind() != 'u') {
    raise_invalid_argument(std::string(what) + " must be integers, got " + text(a.dtype()));
  }
  auto ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  std::vector<int32_t> out(static_cast<size_t>(ids.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t v = ids.data()[i];
    if (v < INT32_MIN || v > INT32_MAX) raise_invalid_argument(std::string(what) + " holds " + std::to_string(v) + ", not a token id");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

py::array_t<int32_t> int32_array(const std::vector<int32_t>& v) {
  py::array_t<int32_t> out(static_cast<py::ssize_t>(v.size()));
  std::copy(v.begin(), v.end(), out.mutable_data());
  return out;
}

void bind_tokenizer(py::module_& m) {
  py::class_<PyTokenizerStream>(m, "TokenizerStream",
                                "Streaming detokenizer: decode(token) returns the text that token completes.")
      .def(
          "decode",
          [](PyTokenizerStream& s, int64_t token) {
            if (token < INT32_MIN || token > INT32_MAX) raise_invalid_argument(std::to_string(token) + " is not a token id");
            return take(s.stream.step(static_cast<int32_t>(token)));
          },
          py::arg("token"),
          "The text `token` completes (\"\" while a UTF-8 character is still split over tokens).");

  py::class_<PyTokenizer, std::shared_ptr<PyTokenizer>>(
      m, "Tokenizer", "The model folder's tokenizer.json + tokenizer_config.json (+ chat_template.jinja).")
      .def(py::init([](std::shared_ptr<PyModel> model) {
             auto created = [&] {
               py::gil_scoped_release nogil;
               return genai::Tokenizer::create(*model->model);
             }();
             auto t = std::make_shared<PyTokenizer>();
             t->model = model;
             t->tokenizer = std::make_unique<genai::Tokenizer>(take(std::move(created)));
             t->pad_token_id = model->model->config().pad_token_id;
             return t;
           }),
           py::arg("model"))
      .def(
          "encode",
          [](const PyTokenizer& t, const std::string& text, bool add_special_tokens) {
            auto ids = [&] {
              py::gil_scoped_release nogil;
              return t.tokenizer->encode(text, add_special_tokens);
            }();
            return int32_array(take(std::move(ids)));
          },
          py::arg("text"), py::arg("add_special_tokens") = true,
          "Token ids of `text`, int32 [n]; special tokens written in the text become their ids.")
      .def(
          "encode_batch",
          [](const PyTokenizer& t, const std::vector<std::string>& texts, bool add_special_tokens) {
            std::vector<std::vector<int32_t>> rows;
            {
              py::gil_scoped_release nogil;
              for (const auto& s : texts) {
                auto r = t.tokenizer->encode(s, add_special_tokens);
                if (!r.ok()) throw StatusError(r.status());  // translated once the GIL is back
                rows.push_back(std::move(r).value());
              }
            }
            size_t width = 0;
            for (const auto& r : rows) width = std::max(width, r.size());
            bool ragged = false;
            for (const auto& r : rows) ragged = ragged || r.size() != width;
            if (ragged && t.pad_token_id < 0) {
              raise_invalid_argument("encode_batch: the prompts have different lengths and genai_config.json has no "
                                     "pad_token_id to pad them with");
            }
            py::array_t<int32_t> out({static_cast<py::ssize_t>(rows.size()), static_cast<py::ssize_t>(width)});
            int32_t* o = out.mutable_data();
            for (const auto& r : rows) {  // left-padded, as Generator.append_tokens reads a batch
              const size_t pad = width - r.size();
              std::fill(o, o + pad, static_cast<int32_t>(t.pad_token_id));
              std::copy(r.begin(), r.end(), o + pad);
              o += width;
            }
            return out;
          },
          py::arg("texts"), py::arg("add_special_tokens") = true,
          "Token ids of each text, int32 [len(texts), longest], shorter rows left-padded with pad_token_id "
          "(what Generator.append_tokens takes for a batch).")
      .def(
          "decode",
          [](const PyTokenizer& t, const py::handle& tokens, bool skip_special_tokens) {
            std::vector<int32_t> ids = ids_from(tokens, "tokens");
            return take(t.tokenizer->decode(ids, skip_special_tokens));
          },
          py::arg("tokens"), py::arg("skip_special_tokens") = false, "The text of int ids [n].")
      .def(
          "decode_batch",
          [](const PyTokenizer& t, const py::handle& tokens, bool skip_special_tokens) {
            py::array a = py::array::ensure(tokens);
            if (!a || a.ndim() != 2) raise_invalid_argument("decode_batch takes int ids [batch, n]");
            std::vector<std::string> out;
            for (py::ssize_t i = 0; i < a.shape(0); ++i) {
              std::vector<int32_t> ids = ids_from(a[py::int_(i)], "tokens row");
              if (t.pad_token_id >= 0) {  // the left padding encode_batch added
                size_t k = 0;
                while (k < ids.size() && ids[k] == t.pad_token_id) ++k;
                ids.erase(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
              }
              out.push_back(take(t.tokenizer->decode(ids, skip_special_tokens)));
            }
            return out;
          },
          py::arg("tokens"), py::arg("skip_special_tokens") = false,
          "The text of each row of int ids [batch, n] (left padding dropped).")
      .def(
          "apply_chat_template",
          [](const PyTokenizer& t, const std::string& messages, const std::optional<std::string>& template_str,
             const std::optional<std::string>& tools, bool add_generation_prompt) {
            if (!template_str) {
              return take(t.tokenizer->apply_chat_template(messages, tools.value_or(""), add_generation_prompt));
            }
            std::string context = "{\"messages\": " + messages +
                                  ", \"add_generation_prompt\": " + (add_generation_prompt ? "true" : "false");
            if (tools && !tools->empty()) context += ", \"tools\": " + *tools;
            context += "}";
            return take(genai::render_chat_template(*template_str, context, &t.tokenizer->config(), "template_str"));
          },
          py::arg("messages"), py::kw_only(), py::arg("template_str") = py::none(), py::arg("tools") = py::none(),
          py::arg("add_generation_prompt") = true,
          "Renders the chat template (the folder's, or template_str) over messages (a JSON array string) and "
          "tools (a JSON array string). Encode the result with add_special_tokens=False: the template writes "
          "its own BOS.")
      .def(
          "create_stream",
          [](std::shared_ptr<PyTokenizer> t, bool skip_special_tokens) {
            return PyTokenizerStream{t, genai::TokenizerStream(t->tokenizer.get(), skip_special_tokens)};
          },
          py::arg("skip_special_tokens") = false, "A TokenizerStream over this tokenizer.")
      .def("to_token_id", [](const PyTokenizer& t, const std::string& token) { return t.tokenizer->token_to_id(token); },
           py::arg("token"), "The id of a token string (-1 when it is not in the vocabulary).")
      .def("get_bos_token_id", [](const PyTokenizer& t) { return t.tokenizer->bos_token_id(); })
      .def("get_eos_token_ids", [](const PyTokenizer& t) { return t.tokenizer->eos_token_ids(); })
      .def("get_pad_token_id", [](const PyTokenizer& t) { return t.pad_token_id; });
}

}  // namespace

void bind_genai(py::module_& m) {
  bind_model(m);
  bind_params(m);
  bind_generator(m);
  bind_tokenizer(m);
}

}  // namespace nxrt::python
