// DB (differentiable binarization) post-processing as PaddleOCR documents it for its text detectors:
// threshold the probability map, take each connected text region's minimum-area rectangle, keep those
// whose mean probability reaches the box threshold, grow them by the unclip distance, scale them back to
// the source image and sort them into reading order. Plain geometry, no OpenCV.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "common/image.h"

namespace examples {

// Corners in the order PaddleOCR uses: top-left, top-right, bottom-right, bottom-left.
using Quad = std::array<PointF, 4>;

struct DbParams {
  float threshold = 0.3f;      // a pixel is text when its probability exceeds this
  float box_threshold = 0.6f;  // a region is kept when its mean probability reaches this
  float unclip_ratio = 1.5f;   // growth distance = area * ratio / perimeter
  int max_candidates = 1000;
  float min_size = 3;          // shorter side, in map pixels, below which a region is dropped
};

// The pixels of each 8-connected region of `mask` (w x h, non-zero = set), as the leftmost and
// rightmost pixel of every row it covers: enough for its convex hull.
std::vector<std::vector<PointF>> region_outlines(const std::vector<uint8_t>& mask, int w, int h);

// Convex hull (counter-clockwise in image coordinates, no collinear points).
std::vector<PointF> convex_hull(std::vector<PointF> points);

struct RotatedRect {
  PointF center;
  float width = 0;   // along `axis`
  float height = 0;  // across it
  PointF axis{1, 0};  // unit vector
};
// The smallest-area rectangle that contains the points (rotating calipers over the convex hull).
RotatedRect min_area_rect(const std::vector<PointF>& points);
// The rectangle's corners ordered as PaddleOCR orders them: by x, then the left pair and the right pair
// each split by y into top and bottom.
Quad ordered_corners(const RotatedRect& rect);

// Mean of `prob` over the pixels inside the quad (taken with integer corners, as PaddleOCR's fast
// box score does).
float mean_inside(const std::vector<float>& prob, int w, int h, const Quad& quad);

// The unclip step for a rectangle: offsetting it by d = area * ratio / perimeter with round joins and
// taking that shape's minimum-area rectangle again gives the rectangle grown by d on every side.
RotatedRect unclip(const RotatedRect& rect, float ratio);

// Boxes from a probability map of size map_w x map_h, in the coordinates of a source image of size
// src_w x src_h, in reading order (top to bottom, then left to right within a line).
std::vector<Quad> db_boxes(const std::vector<float>& prob, int map_w, int map_h, int src_w, int src_h,
                           const DbParams& params);

// PaddleOCR's reading order: sort by the top-left corner (y, then x), then let boxes whose top edges
// are within 10 pixels of each other be ordered left to right.
void sort_reading_order(std::vector<Quad>& boxes);

}  // namespace examples
