#include "ocr/text_boxes.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace examples {
namespace {

double cross(const PointF& o, const PointF& a, const PointF& b) {
  return (static_cast<double>(a.x) - o.x) * (static_cast<double>(b.y) - o.y) -
         (static_cast<double>(a.y) - o.y) * (static_cast<double>(b.x) - o.x);
}

float distance(const PointF& a, const PointF& b) { return std::hypot(a.x - b.x, a.y - b.y); }

// PaddleOCR's order_points_clockwise: the corner with the smallest x + y is top-left, the largest is
// bottom-right; of the other two, the one with the smaller y - x is top-right.
Quad order_by_sums(const Quad& q) {
  int lo = 0, hi = 0;
  for (int i = 1; i < 4; ++i) {
    if (q[i].x + q[i].y < q[lo].x + q[lo].y) lo = i;
    if (q[i].x + q[i].y > q[hi].x + q[hi].y) hi = i;
  }
  if (lo == hi) return q;  // all four corners on one anti-diagonal: nothing sensible to reorder
  int rest[2], n = 0;
  for (int i = 0; i < 4; ++i) {
    if (i != lo && i != hi) rest[n++] = i;
  }
  const bool first_is_top_right = q[rest[0]].y - q[rest[0]].x <= q[rest[1]].y - q[rest[1]].x;
  return {q[lo], q[first_is_top_right ? rest[0] : rest[1]], q[hi], q[first_is_top_right ? rest[1] : rest[0]]};
}

}  // namespace

std::vector<std::vector<PointF>> region_outlines(const std::vector<uint8_t>& mask, int w, int h) {
  std::vector<std::vector<PointF>> outlines;
  std::vector<uint8_t> seen(mask.size(), 0);
  std::vector<int> stack;
  std::vector<int> row_min, row_max;  // per row of the current region, relative to its first row
  for (int start = 0; start < w * h; ++start) {
    if (!mask[start] || seen[start]) continue;
    const int y0 = start / w;  // scanning row by row, the first pixel found is on the region's top row
    row_min.assign(1, w);
    row_max.assign(1, -1);
    seen[start] = 1;
    stack.assign(1, start);
    while (!stack.empty()) {
      const int p = stack.back();
      stack.pop_back();
      const int x = p % w, y = p / w;
      const size_t r = static_cast<size_t>(y - y0);
      if (r >= row_min.size()) {
        row_min.resize(r + 1, w);
        row_max.resize(r + 1, -1);
      }
      row_min[r] = std::min(row_min[r], x);
      row_max[r] = std::max(row_max[r], x);
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
          const int q = ny * w + nx;
          if (mask[q] && !seen[q]) {
            seen[q] = 1;
            stack.push_back(q);
          }
        }
      }
    }
    std::vector<PointF> outline;
    for (size_t r = 0; r < row_min.size(); ++r) {
      if (row_max[r] < 0) continue;
      const float y = static_cast<float>(y0 + static_cast<int>(r));
      outline.push_back({static_cast<float>(row_min[r]), y});
      if (row_max[r] != row_min[r]) outline.push_back({static_cast<float>(row_max[r]), y});
    }
    outlines.push_back(std::move(outline));
  }
  return outlines;
}

std::vector<PointF> convex_hull(std::vector<PointF> points) {
  std::sort(points.begin(), points.end(), [](const PointF& a, const PointF& b) {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
  });
  points.erase(std::unique(points.begin(), points.end(),
                           [](const PointF& a, const PointF& b) { return a.x == b.x && a.y == b.y; }),
               points.end());
  if (points.size() < 3) return points;
  // Andrew's monotone chain: lower hull left to right, then upper hull right to left.
  std::vector<PointF> hull(2 * points.size());
  size_t k = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    while (k >= 2 && cross(hull[k - 2], hull[k - 1], points[i]) <= 0) --k;
    hull[k++] = points[i];
  }
  for (size_t i = points.size() - 1, lower = k + 1; i-- > 0;) {
    while (k >= lower && cross(hull[k - 2], hull[k - 1], points[i]) <= 0) --k;
    hull[k++] = points[i];
  }
  hull.resize(k - 1);  // the last point repeats the first
  return hull;
}

RotatedRect min_area_rect(const std::vector<PointF>& points) {
  const std::vector<PointF> hull = convex_hull(points);
  RotatedRect best;
  if (hull.empty()) return best;
  if (hull.size() == 1) {
    best.center = hull[0];
    return best;
  }
  double best_area = std::numeric_limits<double>::infinity();
  // The minimum-area rectangle has one side on an edge of the hull (Freeman and Shapira): try each.
  for (size_t i = 0; i < hull.size(); ++i) {
    const PointF& a = hull[i];
    const PointF& b = hull[(i + 1) % hull.size()];
    const double len = std::hypot(static_cast<double>(b.x) - a.x, static_cast<double>(b.y) - a.y);
    if (len == 0) continue;
    const double ux = (b.x - a.x) / len, uy = (b.y - a.y) / len;  // along the edge
    const double vx = -uy, vy = ux;                                // across it
    double u_min = std::numeric_limits<double>::infinity(), u_max = -u_min, v_min = u_min, v_max = -u_min;
    for (const PointF& p : hull) {
      const double u = p.x * ux + p.y * uy, v = p.x * vx + p.y * vy;
      u_min = std::min(u_min, u);
      u_max = std::max(u_max, u);
      v_min = std::min(v_min, v);
      v_max = std::max(v_max, v);
    }
    const double area = (u_max - u_min) * (v_max - v_min);
    if (area < best_area) {
      best_area = area;
      const double cu = (u_min + u_max) / 2, cv = (v_min + v_max) / 2;
      best.center = {static_cast<float>(cu * ux + cv * vx), static_cast<float>(cu * uy + cv * vy)};
      best.width = static_cast<float>(u_max - u_min);
      best.height = static_cast<float>(v_max - v_min);
      best.axis = {static_cast<float>(ux), static_cast<float>(uy)};
    }
  }
  return best;
}

Quad ordered_corners(const RotatedRect& rect) {
  const float hw = rect.width / 2, hh = rect.height / 2;
  const PointF u = rect.axis, v{-rect.axis.y, rect.axis.x};
  std::array<PointF, 4> p;
  const float su[4] = {-1, 1, 1, -1}, sv[4] = {-1, -1, 1, 1};
  for (int i = 0; i < 4; ++i) {
    p[i] = {rect.center.x + su[i] * hw * u.x + sv[i] * hh * v.x, rect.center.y + su[i] * hw * u.y + sv[i] * hh * v.y};
  }
  std::stable_sort(p.begin(), p.end(), [](const PointF& a, const PointF& b) { return a.x < b.x; });
  const bool left_first_is_top = p[0].y <= p[1].y;
  const bool right_first_is_top = p[2].y <= p[3].y;
  return {left_first_is_top ? p[0] : p[1], right_first_is_top ? p[2] : p[3], right_first_is_top ? p[3] : p[2],
          left_first_is_top ? p[1] : p[0]};
}

float mean_inside(const std::vector<float>& prob, int w, int h, const Quad& quad) {
  float fx_min = quad[0].x, fx_max = quad[0].x, fy_min = quad[0].y, fy_max = quad[0].y;
  for (const PointF& p : quad) {
    fx_min = std::min(fx_min, p.x);
    fx_max = std::max(fx_max, p.x);
    fy_min = std::min(fy_min, p.y);
    fy_max = std::max(fy_max, p.y);
  }
  const int x_min = std::clamp(static_cast<int>(std::floor(fx_min)), 0, w - 1);
  const int x_max = std::clamp(static_cast<int>(std::ceil(fx_max)), 0, w - 1);
  const int y_min = std::clamp(static_cast<int>(std::floor(fy_min)), 0, h - 1);
  const int y_max = std::clamp(static_cast<int>(std::ceil(fy_max)), 0, h - 1);
  // Integer corners relative to the window (truncated, as the reference casts them to int32).
  Quad q;
  for (int i = 0; i < 4; ++i) {
    q[i] = {std::trunc(quad[i].x - static_cast<float>(x_min)), std::trunc(quad[i].y - static_cast<float>(y_min))};
  }
  double sum = 0;
  int64_t count = 0;
  for (int y = y_min; y <= y_max; ++y) {
    for (int x = x_min; x <= x_max; ++x) {
      const PointF p{static_cast<float>(x - x_min), static_cast<float>(y - y_min)};
      bool any_pos = false, any_neg = false;
      for (int i = 0; i < 4; ++i) {
        const double c = cross(q[i], q[(i + 1) % 4], p);
        any_pos |= c > 0;
        any_neg |= c < 0;
      }
      if (any_pos && any_neg) continue;  // outside (boundary pixels count as inside)
      sum += prob[static_cast<size_t>(y) * w + x];
      ++count;
    }
  }
  return count ? static_cast<float>(sum / static_cast<double>(count)) : 0.f;
}

RotatedRect unclip(const RotatedRect& rect, float ratio) {
  const float perimeter = 2 * (rect.width + rect.height);
  const float d = perimeter > 0 ? rect.width * rect.height * ratio / perimeter : 0.f;
  RotatedRect grown = rect;
  grown.width += 2 * d;
  grown.height += 2 * d;
  return grown;
}

std::vector<Quad> db_boxes(const std::vector<float>& prob, int map_w, int map_h, int src_w, int src_h,
                           const DbParams& params) {
  std::vector<uint8_t> mask(prob.size());
  for (size_t i = 0; i < prob.size(); ++i) mask[i] = prob[i] > params.threshold;
  std::vector<std::vector<PointF>> outlines = region_outlines(mask, map_w, map_h);
  if (outlines.size() > static_cast<size_t>(params.max_candidates)) outlines.resize(params.max_candidates);
  std::vector<Quad> boxes;
  for (const std::vector<PointF>& outline : outlines) {
    const RotatedRect rect = min_area_rect(outline);
    if (std::min(rect.width, rect.height) < params.min_size) continue;
    if (mean_inside(prob, map_w, map_h, ordered_corners(rect)) < params.box_threshold) continue;
    const RotatedRect grown = unclip(rect, params.unclip_ratio);
    if (std::min(grown.width, grown.height) < params.min_size + 2) continue;
    Quad box = ordered_corners(grown);
    const float sx = static_cast<float>(src_w) / static_cast<float>(map_w);
    const float sy = static_cast<float>(src_h) / static_cast<float>(map_h);
    for (PointF& p : box) {
      // Scaled back and rounded half to even (numpy's round), then clipped to the last pixel.
      p.x = std::clamp(std::nearbyint(p.x * sx), 0.f, static_cast<float>(src_w - 1));
      p.y = std::clamp(std::nearbyint(p.y * sy), 0.f, static_cast<float>(src_h - 1));
    }
    box = order_by_sums(box);
    if (static_cast<int>(distance(box[0], box[1])) <= 3 || static_cast<int>(distance(box[0], box[3])) <= 3) continue;
    boxes.push_back(box);
  }
  sort_reading_order(boxes);
  return boxes;
}

void sort_reading_order(std::vector<Quad>& boxes) {
  std::stable_sort(boxes.begin(), boxes.end(), [](const Quad& a, const Quad& b) {
    return a[0].y < b[0].y || (a[0].y == b[0].y && a[0].x < b[0].x);
  });
  for (size_t i = 0; i + 1 < boxes.size(); ++i) {
    for (size_t j = i + 1; j-- > 0;) {
      if (std::fabs(boxes[j + 1][0].y - boxes[j][0].y) < 10 && boxes[j + 1][0].x < boxes[j][0].x) {
        std::swap(boxes[j], boxes[j + 1]);
      } else {
        break;
      }
    }
  }
}

}  // namespace examples
