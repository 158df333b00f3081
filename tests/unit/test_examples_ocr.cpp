// The OCR example's own code (examples/): DB post-processing geometry, CTC decoding, the dictionary,
// cropping and the image helpers. The whole pipeline on the real models runs in tests/examples/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "common/image.h"
#include "ocr/ocr_pipeline.h"
#include "ocr/text_boxes.h"

namespace ex = examples;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("nxrt_examples_" + std::to_string(getpid()) + "_" + name)).string();
}

float area(const ex::RotatedRect& r) { return r.width * r.height; }

// A probability map with value `v` inside [x0, x1] x [y0, y1] (inclusive), `background` elsewhere.
void fill(std::vector<float>& map, int w, int x0, int y0, int x1, int y1, float v) {
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) map[static_cast<size_t>(y) * w + x] = v;
  }
}

ex::Image gradient(int w, int h) {
  ex::Image img(w, h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.at(x, y);
      p[0] = static_cast<uint8_t>(x * 7);
      p[1] = static_cast<uint8_t>(y * 11);
      p[2] = static_cast<uint8_t>((x + y) * 3);
    }
  }
  return img;
}

}  // namespace

TEST(ExamplesTextBoxes, ConvexHullKeepsOnlyCorners) {
  std::vector<ex::PointF> pts = {{0, 0}, {10, 0}, {10, 10}, {0, 10}, {5, 0}, {5, 5}, {10, 5}, {3, 7}, {0, 0}};
  const std::vector<ex::PointF> hull = ex::convex_hull(pts);
  ASSERT_EQ(hull.size(), 4u);
  for (const ex::PointF& p : hull) {
    EXPECT_TRUE((p.x == 0 || p.x == 10) && (p.y == 0 || p.y == 10)) << p.x << "," << p.y;
  }
}

TEST(ExamplesTextBoxes, MinAreaRectOfRotatedRectangle) {
  // A 40 x 10 rectangle centred at (50, 30), turned by 30 degrees, sampled on its border and inside.
  const double a = std::numbers::pi / 6;
  const double ux = std::cos(a), uy = std::sin(a);
  std::vector<ex::PointF> pts;
  for (int i = 0; i <= 40; ++i) {
    for (int j = 0; j <= 10; j += 5) {
      const double u = i - 20.0, v = j - 5.0;
      pts.push_back({static_cast<float>(50 + u * ux - v * uy), static_cast<float>(30 + u * uy + v * ux)});
    }
  }
  const ex::RotatedRect r = ex::min_area_rect(pts);
  EXPECT_NEAR(std::max(r.width, r.height), 40.f, 1e-3);
  EXPECT_NEAR(std::min(r.width, r.height), 10.f, 1e-3);
  EXPECT_NEAR(r.center.x, 50.f, 1e-3);
  EXPECT_NEAR(r.center.y, 30.f, 1e-3);
}

TEST(ExamplesTextBoxes, RegionOutlinesAreEightConnected) {
  const int w = 12, h = 8;
  std::vector<uint8_t> mask(w * h, 0);
  auto set = [&](int x, int y) { mask[y * w + x] = 1; };
  for (int i = 1; i <= 3; ++i) set(i, i);  // a diagonal line: one region
  for (int x = 7; x <= 10; ++x) {  // a 4 x 2 block
    set(x, 5);
    set(x, 6);
  }
  const auto outlines = ex::region_outlines(mask, w, h);
  ASSERT_EQ(outlines.size(), 2u);
  EXPECT_EQ(outlines[0].size(), 3u);  // one pixel per row
  EXPECT_EQ(outlines[1].size(), 4u);  // left and right end of two rows
  const ex::RotatedRect block = ex::min_area_rect(outlines[1]);
  // Pixel centres: the block spans 3 x 1 between them, as OpenCV's minAreaRect measures contours.
  EXPECT_NEAR(area(block), 3.f, 1e-4);
}

TEST(ExamplesTextBoxes, OrderedCornersStartTopLeftClockwise) {
  ex::RotatedRect r;
  r.center = {50, 20};
  r.width = 40;
  r.height = 10;
  const ex::Quad q = ex::ordered_corners(r);
  const float want[4][2] = {{30, 15}, {70, 15}, {70, 25}, {30, 25}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(q[i].x, want[i][0]) << i;
    EXPECT_FLOAT_EQ(q[i].y, want[i][1]) << i;
  }
  // The same rectangle described along its other side gives the same corners.
  r.axis = {0, 1};
  r.width = 10;
  r.height = 40;
  const ex::Quad q2 = ex::ordered_corners(r);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(q2[i].x, q[i].x, 1e-4);
    EXPECT_NEAR(q2[i].y, q[i].y, 1e-4);
  }
}

TEST(ExamplesTextBoxes, UnclipGrowsByAreaTimesRatioOverPerimeter) {
  ex::RotatedRect r;
  r.width = 100;
  r.height = 10;
  const ex::RotatedRect g = ex::unclip(r, 1.5f);
  const float d = 100.f * 10.f * 1.5f / 220.f;
  EXPECT_NEAR(g.width, 100 + 2 * d, 1e-4);
  EXPECT_NEAR(g.height, 10 + 2 * d, 1e-4);
}

TEST(ExamplesTextBoxes, MeanInsideCountsOnlyPixelsInTheQuad) {
  const int w = 20, h = 20;
  std::vector<float> prob(w * h, 0.f);
  fill(prob, w, 0, 0, 9, 19, 1.f);  // left half is 1
  const ex::Quad left = {ex::PointF{2, 2}, {8, 2}, {8, 10}, {2, 10}};
  EXPECT_FLOAT_EQ(ex::mean_inside(prob, w, h, left), 1.f);
  const ex::Quad straddling = {ex::PointF{5, 0}, {14, 0}, {14, 5}, {5, 5}};  // columns 5..14: half are 1
  EXPECT_NEAR(ex::mean_inside(prob, w, h, straddling), 0.5f, 1e-6);
  // A diamond: pixels outside its edges, though inside its bounding box, do not count.
  std::vector<float> ring(w * h, 0.f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) ring[y * w + x] = std::abs(x - 10) + std::abs(y - 10) <= 5 ? 1.f : 0.f;
  }
  const ex::Quad diamond = {ex::PointF{10, 5}, {15, 10}, {10, 15}, {5, 10}};
  EXPECT_FLOAT_EQ(ex::mean_inside(ring, w, h, diamond), 1.f);
}

TEST(ExamplesTextBoxes, DbBoxesScaleFilterAndOrder) {
  const int w = 64, h = 32;
  std::vector<float> prob(w * h, 0.f);
  fill(prob, w, 30, 20, 60, 25, 0.9f);  // lower line
  fill(prob, w, 4, 4, 40, 9, 0.95f);    // upper line
  fill(prob, w, 2, 14, 20, 16, 0.4f);   // above the pixel threshold, below the box threshold: dropped
  fill(prob, w, 50, 2, 51, 3, 0.99f);   // shorter side below min_size: dropped
  const std::vector<ex::Quad> boxes = ex::db_boxes(prob, w, h, 2 * w, 2 * h, ex::DbParams{});
  ASSERT_EQ(boxes.size(), 2u);
  // Upper line first. Its 36 x 5 core grows by d = 180 * 1.5 / 82 on each side, then doubles.
  const float d = 36.f * 5.f * 1.5f / 82.f;
  EXPECT_NEAR(boxes[0][0].x, std::nearbyint(2 * (4 - d)), 1.f);
  EXPECT_NEAR(boxes[0][0].y, std::nearbyint(2 * (4 - d)), 1.f);
  EXPECT_NEAR(boxes[0][2].x, std::nearbyint(2 * (40 + d)), 1.f);
  EXPECT_NEAR(boxes[0][2].y, std::nearbyint(2 * (9 + d)), 1.f);
  EXPECT_GT(boxes[1][0].y, boxes[0][0].y + 20);  // the lower line comes second
  EXPECT_GT(boxes[1][0].x, 50.f);
}

TEST(ExamplesTextBoxes, ReadingOrderIsLeftToRightWithinALine) {
  auto box = [](float x, float y) { return ex::Quad{ex::PointF{x, y}, {x + 10, y}, {x + 10, y + 8}, {x, y + 8}}; };
  std::vector<ex::Quad> boxes = {box(100, 52), box(5, 50), box(50, 55), box(0, 5)};
  ex::sort_reading_order(boxes);
  EXPECT_EQ(boxes[0][0].x, 0);
  EXPECT_EQ(boxes[1][0].x, 5);  // tops at 50, 55 and 52 are one line: left to right
  EXPECT_EQ(boxes[2][0].x, 50);
  EXPECT_EQ(boxes[3][0].x, 100);
}

TEST(ExamplesOcr, CtcGreedyDecodeMergesRepeatsAndDropsBlanks) {
  const std::vector<std::string> dict = {"a", "b", " "};
  const int classes = 4;  // blank + 3
  // Steps: a a blank a b b blank space
  const int best[] = {1, 1, 0, 1, 2, 2, 0, 3};
  std::vector<float> probs;
  for (int k : best) {
    for (int c = 0; c < classes; ++c) probs.push_back(c == k ? 0.7f : 0.1f);
  }
  probs[4 * 4 + 2] = 0.9f;  // step 4 ('b') more confident
  const ex::TextLine line = ex::ctc_greedy_decode(probs.data(), 8, classes, dict);
  EXPECT_EQ(line.text, "aab ");
  EXPECT_NEAR(line.confidence, (0.7f + 0.7f + 0.9f + 0.7f) / 4, 1e-6);
  const std::vector<float> blanks(3 * classes, 0.25f);  // ties: the first class (blank) wins
  const ex::TextLine empty = ex::ctc_greedy_decode(blanks.data(), 3, classes, dict);
  EXPECT_EQ(empty.text, "");
  EXPECT_EQ(empty.confidence, 0.f);
}

TEST(ExamplesOcr, DictionaryAddsTheSpaceClass) {
  const std::string path = temp_path("keys.txt");
  std::ofstream(path) << "x\n\xe4\xb8\xad\r\ny";  // CRLF line and no final newline
  auto dict = ex::load_dictionary(path);
  ASSERT_TRUE(dict.ok()) << dict.status().message();
  EXPECT_EQ(*dict, (std::vector<std::string>{"x", "\xe4\xb8\xad", "y", " "}));
  std::filesystem::remove(path);
  auto missing = ex::load_dictionary(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(ExamplesOcr, CropOfAnUprightBoxIsTheSubImage) {
  const ex::Image img = gradient(40, 30);
  const ex::Quad box = {ex::PointF{10, 5}, {30, 5}, {30, 15}, {10, 15}};
  const ex::Image crop = ex::crop_text_box(img, box);
  ASSERT_EQ(crop.width, 20);
  ASSERT_EQ(crop.height, 10);
  for (int y = 0; y < crop.height; ++y) {
    for (int x = 0; x < crop.width; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(crop.at(x, y)[c], img.at(10 + x, 5 + y)[c]) << x << "," << y;
    }
  }
}

TEST(ExamplesOcr, TallCropsAreTurnedAQuarter) {
  const ex::Image img = gradient(40, 40);
  const ex::Quad box = {ex::PointF{10, 2}, {20, 2}, {20, 32}, {10, 32}};  // 10 wide, 30 tall
  const ex::Image crop = ex::crop_text_box(img, box);
  EXPECT_EQ(crop.width, 30);
  EXPECT_EQ(crop.height, 10);
  // Counter-clockwise: the box's top-right pixel ends up at the crop's top-left.
  EXPECT_EQ(crop.at(0, 0)[0], img.at(19, 2)[0]);
  EXPECT_EQ(crop.at(0, 0)[1], img.at(19, 2)[1]);
}

TEST(ExamplesImage, BilinearResizeUsesPixelCentres) {
  ex::Image src(2, 1);
  src.at(0, 0)[0] = 0;
  src.at(1, 0)[0] = 100;
  const ex::Image up = ex::resize_bilinear(src, 4, 1);
  EXPECT_EQ(up.at(0, 0)[0], 0);
  EXPECT_EQ(up.at(1, 0)[0], 25);
  EXPECT_EQ(up.at(2, 0)[0], 75);
  EXPECT_EQ(up.at(3, 0)[0], 100);
  ex::Image flat(7, 5);
  std::fill(flat.rgb.begin(), flat.rgb.end(), 77);
  const ex::Image down = ex::resize_bilinear(flat, 3, 2);
  for (uint8_t v : down.rgb) EXPECT_EQ(v, 77);
}

TEST(ExamplesImage, Rotations) {
  const ex::Image img = gradient(3, 2);
  const ex::Image r180 = ex::rotate_180(img);
  EXPECT_EQ(r180.at(0, 0)[0], img.at(2, 1)[0]);
  EXPECT_EQ(r180.at(0, 0)[1], img.at(2, 1)[1]);
  const ex::Image r90 = ex::rotate_90_ccw(img);
  ASSERT_EQ(r90.width, 2);
  ASSERT_EQ(r90.height, 3);
  EXPECT_EQ(r90.at(0, 0)[0], img.at(2, 0)[0]);  // the top-right corner moves to the top-left
  EXPECT_EQ(r90.at(1, 2)[1], img.at(0, 1)[1]);  // the bottom-left corner moves to the bottom-right
}

TEST(ExamplesImage, PngRoundTripAndErrors) {
  ex::Image img = gradient(13, 7);
  const uint8_t red[3] = {255, 0, 0};
  ex::draw_polygon(img, {{1, 1}, {11, 1}, {11, 5}, {1, 5}}, red, 1);
  EXPECT_EQ(img.at(6, 1)[0], 255);
  EXPECT_EQ(img.at(6, 1)[1], 0);
  const std::string path = temp_path("roundtrip.png");
  ASSERT_TRUE(ex::save_png(path, img).ok());
  auto back = ex::load_image(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->width, 13);
  EXPECT_EQ(back->height, 7);
  EXPECT_EQ(back->rgb, img.rgb);

  // Truncated: a clear error naming the file, no crash.
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  auto truncated = ex::load_image(path);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find(path), std::string::npos);

  std::ofstream(path, std::ios::binary) << "\xff\xd8\xff garbage";
  auto bad_jpeg = ex::load_image(path);
  ASSERT_FALSE(bad_jpeg.ok());
  EXPECT_NE(bad_jpeg.status().message().find("invalid JPEG"), std::string::npos);

  std::ofstream(path, std::ios::binary) << "GIF89a";
  auto other = ex::load_image(path);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("neither a PNG nor a JPEG"), std::string::npos);
  std::filesystem::remove(path);
}
