// nxrt::ConvMaxPool(X, W, B?): Y = MaxPool(act(Conv(X, W, B))), float, 2-D (optimizer fuse_conv_max_pool).
//
// Attributes: the Conv's (kernel_shape, strides, pads, dilations, group, auto_pad), `activation` and
// `activation_params` as nxrt::FusedConv has them (none, Relu, Clip, LeakyRelu), and the MaxPool's as
// pool_kernel_shape, pool_strides, pool_pads, pool_dilations, pool_ceil_mode, pool_auto_pad.
//
// Why: a CNN stem's conv writes a large plane set (SqueezeNet's 64 x 111 x 111, 3.1 MB) that the max pool
// after it reads once and shrinks four times. Written whole, that tensor leaves the core's L2 and comes
// back from L3 or memory, and its stores miss first (Zen 5, 1 thread: SqueezeNet's stem takes 0.29 ms
// alone, 0.40 ms inside the model, 0.56 ms after 64 MB of other reads). Here the conv runs on bands of
// output rows, each band's rows go straight through the pool while they are in L2, and only the pooled
// output is written. The pass fuses only convs that are cheap per output (see fuse_conv_max_pool.cpp);
// the kernel runs any conv + max pool correctly.
//
// How: at specialize the pooled rows of every image are split evenly over the threads (each thread's
// part contiguous, so the threads' output and input regions stay apart), and each part into bands of
// rows whose conv rows and input rows fit ~512 KiB. A band copies its input rows (all channels) into
// the thread's slot, runs the conv engine on them single-threaded (a ConvShape whose height is the
// band's, with the image's top or bottom pad only where the band touches that edge), then pools each
// plane of the result into its rows of Y. Bands of equal geometry share one conv plan and one pool plan,
// all made at specialize. Where two bands' pool windows overlap (window taller than its stride), a band
// takes the shared conv rows over from the previous band of its part (copied aside before its conv
// overwrites them) and pools the straddling windows in two parts; a part's first band computes them.
//
// Results: the pool is exact; the conv rows are the conv engine's for the band's shape, which may take
// another path than the whole image would (within the engine's tolerance of the reference).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ep/kernel.h"
#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/stem_lanes.h"
#include "ops/pool/row_pool.h"

namespace nxrt::ops {

namespace {

// What a band's conv and pool see; bands with equal geometry share their plans.
struct BandGeom {
  int64_t in_rows = 0, in_pb = 0, in_pe = 0;  // input rows copied, the conv's top / bottom pad
  int64_t conv_rows = 0;                      // conv output rows (the pool's input rows)
  int64_t pool_rows = 0, pool_pb = 0, pool_pe = 0;
  bool operator==(const BandGeom&) const = default;
};

struct Band {
  int64_t n = 0, p0 = 0;  // image, first pooled row
  int64_t in_row = 0;     // first input row copied
  size_t geom = 0;        // index into the variant's plans
  // Carry: the band's first `carry_rows` conv rows are the previous band's last ones (rows from
  // carry_from of its output, whose planes are prev_rows long); only the rows after them are computed.
  // The first carry_pooled pooled rows take the max of their windows' carried part (pool plan
  // carry_geom over the carried rows) and of their computed part.
  int64_t carry_rows = 0, carry_from = 0, prev_rows = 0, carry_pooled = 0;
  size_t carry_geom = 0;
};

struct BandPlan {
  BandGeom bg;
  ConvPlan conv;  // for the band's shape (conv.s)
  rowpool::Plan pool;
};

// Every decision for one X shape and thread count.
struct ConvMaxPoolVariant final : ep::KernelVariant {
  ConvShape full;   // the whole conv (N, C, M, geometry)
  Geom3 pg;         // the whole pool, over the conv's output
  std::vector<BandPlan> plans;
  std::vector<rowpool::Plan> carry_plans;  // the carried rows' part of the straddling pooled rows
  std::vector<Band> bands;
  std::vector<size_t> part_begin;  // parts (one per thread): bands [part_begin[t], part_begin[t + 1])
  // Whole: no bands. The conv runs once over all of X on the pool (plans[0].conv, made for the pool's
  // threads) into the workspace, then the planes are pooled in parallel (plans[0].pool,
  // each thread on its slot's pool scratch).
  bool whole = false;
  // Lanes: the channels-last path (ops/conv/stem_lanes.h) in `lanes_parts` contiguous runs of pooled rows,
  // one slot of lanes.slot_bytes per thread; no bands.
  bool use_lanes = false;
  StemLanesPlan lanes;
  int64_t lanes_parts = 0;
  size_t whole_off = 0;  // the workspace's size (whole: the conv output and its workspace; else none)
  // One slot per thread (KernelContext::thread_slots): input rows, conv rows, the conv's workspace and
  // its own one slot, the pool's scratch, the carried rows and their pooled part (64-byte aligned).
  size_t x_off = 0, y_off = 0, conv_off = 0, pool_off = 0, carry_off = 0, carry_out_off = 0, slot_bytes = 0;
  int slots = 1;
  // The slots are KernelContext::thread_slots (a whole conv's own slots share them: it ends before the
  // pooling starts).
  size_t workspace_bytes() const override { return whole_off; }
  size_t thread_bytes() const { return std::max(slot_bytes, whole ? plans[0].conv.slot_bytes : size_t(0)); }
};

constexpr size_t align64(size_t b) { return (b + 63) / 64 * 64; }
// Bytes of input rows plus conv rows a band aims at: half of a 1 MiB L2, so the pool reads the conv
// rows from L2 (and the next band's copy does not push them out first).
constexpr int64_t kBandBytes = int64_t(512) << 10;
// The fewest conv rows a band may have (else the conv runs whole).
constexpr int64_t kMinBandConvRows = 8;

class ConvMaxPoolKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(conv_attrs_.parse(info, false));
    group_ = info.attr_int("group", 1);
    if (group_ < 1) return info.error("group must be >= 1, got " + std::to_string(group_));
    NXRT_RETURN_IF_ERROR(parse_pool_attrs(info));
    NXRT_ASSIGN_OR_RETURN(act_, parse_activation(info.attr_string("activation", "")));
    if (!conv_post_activation(act_)) {
      return info.error("activation '" + info.attr_string("activation", "") +
                        "' is not one ConvMaxPool applies (none, Relu, Clip, LeakyRelu)");
    }
    const std::vector<float> p = info.attr_floats("activation_params", {});
    if (act_ == Activation::kClip) {
      act_a_ = p.size() > 0 ? p[0] : -INFINITY;
      act_b_ = p.size() > 1 ? p[1] : INFINITY;
    } else if (act_ == Activation::kLeakyRelu) {
      act_a_ = p.size() > 0 ? p[0] : 0.01f;
    }
    cfg_ = conv_config(info);
    isa_ = info.isa();
    // W and B prepared here when they are initializers; else (values a Constant node makes) per call.
    if (const Tensor* w = info.const_input(1)) {
      NXRT_RETURN_IF_ERROR(check_weights(*w, [&](const std::string& m) { return info.error(m); }));
      prepare_weights(*w, &weights_);
      const Tensor wc = w->contiguous();
      raw_w_.assign(wc.data<float>(), wc.data<float>() + wc.numel());
      have_w_ = true;
    }
    if (info.node().inputs.size() > 2 && !info.node().inputs[2].empty()) {
      if (const Tensor* b = info.const_input(2)) {
        if (b->dtype() != DataType::kFloat || (have_w_ && b->numel() != weights_.shape[0])) {
          return info.error("B must be float with one value per output channel, got " + b->describe());
        }
        const Tensor bc = b->contiguous();
        bias_.assign(bc.data<float>(), bc.data<float>() + bc.numel());
        have_b_ = true;
      }
    }
    return Status::Ok();
  }

  // W and B prepared at creation are not read again.
  bool reads_const_input_data(size_t i) const override { return !((i == 1 && have_w_) || (i == 2 && have_b_)); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    std::unique_ptr<ep::KernelVariant> none;
    if (!have_w_ || !sc.has_input(0) || sc.dtype(0) != DataType::kFloat) return none;
    auto v = make_variant(weights_, sc.shape(0), sc.num_threads());
    if (!v.ok()) return none;  // compute reports it
    return std::unique_ptr<ep::KernelVariant>(std::move(v.value()));
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DataType::kFloat) {
      return ctx.error(std::string("ConvMaxPool takes float X, got ") + dtype_name(X.dtype()));
    }
    const int threads = ctx.pool().num_threads();
    ConvWeights<float> local_w;  // W computed in the graph: prepared per call
    if (!have_w_) {
      if (!ctx.has_input(1)) return ctx.error("missing input W");
      NXRT_RETURN_IF_ERROR(check_weights(ctx.input(1), [&](const std::string& m) { return ctx.error(m); }));
      prepare_weights(ctx.input(1), &local_w);
    }
    const ConvWeights<float>& w = have_w_ ? weights_ : local_w;
    if (have_b_ && static_cast<int64_t>(bias_.size()) != w.shape[0]) {
      return ctx.error("B has " + std::to_string(bias_.size()) + " values for " + std::to_string(w.shape[0]) +
                       " output channels");
    }
    const float* bias = have_b_ ? bias_.data() : nullptr;
    Tensor bias_tensor;
    if (!have_b_ && ctx.has_input(2)) {
      const Tensor& b = ctx.input(2);
      if (b.dtype() != DataType::kFloat || b.numel() != w.shape[0]) {
        return ctx.error("B must be float with one value per output channel (" + std::to_string(w.shape[0]) +
                         "), got " + b.describe());
      }
      bias_tensor = b.contiguous();
      bias = bias_tensor.data<float>();
    }
    const auto* v = have_w_ ? dynamic_cast<const ConvMaxPoolVariant*>(ctx.variant()) : nullptr;
    std::unique_ptr<ConvMaxPoolVariant> local;
    // A variant serves this X and pool: all its parts run on fewer threads too, but a whole conv's plan
    // was made for the pool's size.
    if (!v || v->slots < threads || !fits(*v, X.shape()) || (v->whole && v->slots != threads)) {
      auto made = make_variant(w, X.shape(), threads);
      if (!made.ok()) return ctx.error(made.status().message(), made.status().code());
      local = std::move(made.value());
      v = local.get();
    }
    const ConvShape& s = v->full;
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, DataType::kFloat,
                                                          geom_output_shape(s.N, s.M, v->pg)));
    if (Y->numel() == 0) return Status::Ok();
    void* ws = nullptr;
    if (!local) {
      NXRT_ASSIGN_OR_RETURN(ws, ep::variant_workspace(ctx, *v));
    }
    if (!ws) {  // a variant made now: its workspace from the step's scratch
      NXRT_ASSIGN_OR_RETURN(ws, ctx.workspace(v->workspace_bytes()));
    }
    NXRT_ASSIGN_OR_RETURN(const ep::SlotMemory mem, ctx.thread_slots(v->thread_bytes()));
    const ep::SlotScratch slots(ctx.pool(), mem);
    const Tensor xc = X.contiguous();
    const float* x = xc.data<float>();
    float* y = Y->data<float>();
    ConvPost post;
    post.act = act_;
    post.act_a = act_a_;
    post.act_b = act_b_;
    if (v->use_lanes) {
      const float zero_bias[16 * 4] = {};  // the lanes read M <= 64 bias values: zeros without a bias
      const float* lanes_bias = bias ? bias : zero_bias;
      const int64_t rows = s.N * v->pg.out[1], parts = v->lanes_parts;
      ctx.pool().parallel_for(parts, 1, [&](int64_t t0, int64_t t1) {
        char* slot = slots.mine<char>();
        for (int64_t t = t0; t < t1; ++t) {
          stem_lanes_run(v->lanes, x, lanes_bias, post, y, t * rows / parts, (t + 1) * rows / parts, slot);
        }
      });
      return Status::Ok();
    }
    if (v->whole) {
      const BandPlan& q = v->plans[0];
      float* yc = static_cast<float*>(ws);
      const bool applied = conv_forward_planned<float>(q.conv, x, w, bias, yc, &ctx.pool(), cfg_, &post,
                                                       static_cast<char*>(ws) + v->y_off, mem);
      const int64_t planes = s.N * s.M, conv_plane = s.g.out_size();
      ctx.pool().parallel_for(planes, 1, [&](int64_t p0, int64_t p1) {
        if (!applied) activate(yc + p0 * conv_plane, (p1 - p0) * conv_plane);
        rowpool::run(q.pool, yc, y, p0, p1, slots.mine<char>() + v->pool_off);
      });
      return Status::Ok();
    }
    const int64_t parts = static_cast<int64_t>(v->part_begin.size()) - 1;
    ctx.pool().parallel_for(parts, 1, [&](int64_t t0, int64_t t1) {
      char* slot = slots.mine<char>();
      for (int64_t t = t0; t < t1; ++t) {
        for (size_t b = v->part_begin[static_cast<size_t>(t)]; b < v->part_begin[static_cast<size_t>(t) + 1]; ++b) {
          run_band(*v, v->bands[b], w, bias, x, y, post, slot);
        }
      }
    });
    return Status::Ok();
  }

 private:
  Status parse_pool_attrs(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(pool_attrs_.parse(info, true, "pool_"));
    if (pool_attrs_.kernel_shape.size() != 2) {
      return info.error("pool_kernel_shape must be 2 sizes, got " + shape_to_string(pool_attrs_.kernel_shape));
    }
    return Status::Ok();
  }

  // act_ in place on n values (where the conv engine's path did not apply it in its store).
  void activate(float* p, int64_t n) const {
    if (act_ == Activation::kNone) return;
    for (int64_t i = 0; i < n; ++i) p[i] = apply_activation(act_, p[i], act_a_, act_b_);
  }

  bool fits(const ConvMaxPoolVariant& v, const Dims& x) const {
    return x.size() == 4 && x[0] == v.full.N && x[1] == v.full.C && x[2] == v.full.g.in[1] && x[3] == v.full.g.in[2];
  }

  // The bands, their plans and the slot layout for X of shape x on `threads` threads.
  Result<std::unique_ptr<ConvMaxPoolVariant>> make_variant(const ConvWeights<float>& weights, const Dims& x,
                                                           int threads) const {
    if (x.size() != 4) return invalid_argument("X must be [N, C, H, W], got " + shape_to_string(x));
    const Dims& wshape = weights.shape;
    if (x[1] != wshape[1] * group_) {
      return invalid_argument("X " + shape_to_string(x) + " has " + std::to_string(x[1]) + " channels, W " +
                              shape_to_string(wshape) + " with group " + std::to_string(group_) + " reads " +
                              std::to_string(wshape[1] * group_));
    }
    auto v = std::make_unique<ConvMaxPoolVariant>();
    ConvShape& s = v->full;
    s.N = x[0];
    s.C = x[1];
    s.M = wshape[0];
    s.group = group_;
    NXRT_RETURN_IF_ERROR(forward_geometry(conv_attrs_, {x[2], x[3]}, {wshape[2], wshape[3]}, &s.g));
    if (!conv_attrs_.kernel_shape.empty() && conv_attrs_.kernel_shape != Dims{wshape[2], wshape[3]}) {
      return invalid_argument("kernel_shape " + shape_to_string(conv_attrs_.kernel_shape) + " differs from W " +
                              shape_to_string(wshape));
    }
    NXRT_RETURN_IF_ERROR(forward_geometry(pool_attrs_, {s.g.out[1], s.g.out[2]}, pool_attrs_.kernel_shape, &v->pg));
    const Geom3& cg = s.g;
    const Geom3& pg = v->pg;
    const int64_t IH = cg.in[1], IW = cg.in[2], OH = cg.out[1], OW = cg.out[2], PH = pg.out[1];
    const int64_t cs = cg.s[1], cdk = (cg.k[1] - 1) * cg.d[1] + 1, cpt = cg.pb[1];
    const int64_t ps = pg.s[1], pek = (pg.k[1] - 1) * pg.d[1] + 1, ppt = pg.pb[1];
    v->slots = std::max(1, threads);
    const int64_t rows = s.N * PH;
    if (rows == 0 || s.M == 0 || OW == 0 || pg.out[2] == 0) {
      v->part_begin = {0};
      return v;
    }
    // The lanes path where it applies, unless a conv path is forced (reference=1, conv.path: those run the
    // conv engine as asked) or conv.skip=stem-lanes.
    if (cfg_.path == ConvPath::kAuto && !cfg_.skip_stem_lanes && &weights == &weights_ && !raw_w_.empty() &&
        stem_lanes_plan(s, pg, raw_w_.data(), isa_, &v->lanes)) {
      v->use_lanes = true;
      v->lanes_parts = std::min<int64_t>(v->slots, rows);
      v->slot_bytes = v->lanes.slot_bytes;
      return v;
    }
    // Pooled rows a band: each adds ps conv rows (M x OW) and ps * cs input rows (C x IW).
    const int64_t per_row = 4 * ps * (s.M * OW + cs * s.C * IW);
    const int64_t band_rows = std::max<int64_t>(1, kBandBytes / std::max<int64_t>(1, per_row));
    // Bands pay where the conv's output is much larger than its input rows (a stem: 3 channels in, 64 out)
    // and each band has enough rows for the conv engine's tiles. Elsewhere (VGG's 64 -> 64 @224x224:
    // bands of 4 rows, each copying as many input floats as it writes) the conv runs whole. Zen 5, 1
    // thread, VGG-19 with bands everywhere: 1.45x the unfused time.
    const int64_t conv_rows_per_band = std::min(OH, band_rows * ps);
    if (4 * s.C * cs * IW > 2 * 4 * s.M * OW || conv_rows_per_band < kMinBandConvRows) {
      v->whole = true;
      BandPlan q;
      q.conv = conv_plan<float>(s, weights, cfg_, v->slots, false);
      if (!rowpool::make_plan(pg, true, false, &q.pool, isa_)) {
        return invalid_argument("no row-wise max pool for geometry of " + std::to_string(OH) + " rows");
      }
      // Workspace: the conv's output at 0, the conv's own workspace at y_off, then the pool slots.
      v->y_off = align64(static_cast<size_t>(s.N * s.M * OH * OW) * sizeof(float));
      v->whole_off = v->y_off + align64(q.conv.workspace_bytes);
      v->pool_off = 0;
      v->slot_bytes = align64(q.pool.scratch_bytes);
      v->plans.push_back(std::move(q));
      return v;
    }
    const int64_t parts = std::min<int64_t>(v->slots, rows);
    size_t max_x = 0, max_y = 0, max_conv_ws = 0, max_pool_ws = 0;
    v->part_begin.push_back(0);
    size_t max_carry = 0, max_carry_out = 0;
    for (int64_t t = 0; t < parts; ++t) {
      const int64_t r0 = t * rows / parts, r1 = (t + 1) * rows / parts;
      int64_t prev_n = -1, prev_c0 = 0, prev_c1 = 0;  // the conv rows the part's previous band holds
      for (int64_t r = r0; r < r1;) {
        const int64_t n = r / PH, p0 = r % PH;
        const int64_t p1 = std::min({PH, p0 + band_rows, p0 + (r1 - r)});
        // Conv rows the pooled rows [p0, p1) read; those the previous band of this part computed (pool
        // windows taller than their stride overlap) are carried over, the rest computed from the input
        // rows they read.
        const int64_t c0 = std::max<int64_t>(0, p0 * ps - ppt), c1 = std::min(OH, (p1 - 1) * ps - ppt + pek);
        Band b;
        b.n = n;
        b.p0 = p0;
        int64_t cs0 = c0;  // the first conv row computed
        if (prev_n == n && prev_c1 > c0 && prev_c1 < c1 && c0 >= prev_c0) {
          cs0 = prev_c1;
          b.carry_rows = prev_c1 - c0;
          b.carry_from = c0 - prev_c0;
          b.prev_rows = prev_c1 - prev_c0;
          // Pooled rows whose windows start in the carried rows.
          b.carry_pooled = std::min(p1 - p0, (prev_c1 + ppt + ps - 1) / ps - p0);
          Geom3 g = pg;
          g.in[1] = b.carry_rows;
          g.out[1] = b.carry_pooled;
          g.pb[1] = 0;
          g.pe[1] = std::max<int64_t>(0, (b.carry_pooled - 1) * ps + pek - b.carry_rows);
          auto ct = std::find_if(v->carry_plans.begin(), v->carry_plans.end(),
                                 [&](const rowpool::Plan& q) { return q.fits(g); });
          if (ct == v->carry_plans.end()) {
            rowpool::Plan q;
            if (!rowpool::make_plan(g, true, false, &q, isa_)) {
              return invalid_argument("no row-wise max pool for " + std::to_string(b.carry_rows) + " carried rows");
            }
            max_pool_ws = std::max(max_pool_ws, q.scratch_bytes);
            v->carry_plans.push_back(std::move(q));
            ct = v->carry_plans.end() - 1;
          }
          b.carry_geom = static_cast<size_t>(ct - v->carry_plans.begin());
          max_carry = std::max(max_carry, static_cast<size_t>(s.M * b.carry_rows * OW));
          max_carry_out = std::max(max_carry_out, static_cast<size_t>(b.carry_pooled * pg.out[2]));
        }
        const int64_t i0 = cs0 * cs - cpt, i1 = (c1 - 1) * cs - cpt + cdk;
        BandGeom bg;
        bg.in_pb = std::max<int64_t>(0, -i0);
        bg.in_pe = std::max<int64_t>(0, i1 - IH);
        bg.in_rows = std::min(IH, i1) - std::max<int64_t>(0, i0);
        bg.conv_rows = c1 - cs0;
        bg.pool_rows = p1 - p0;
        bg.pool_pb = ppt + cs0 - p0 * ps;  // the carried rows count as padding here
        bg.pool_pe = std::max<int64_t>(0, (p1 - 1) * ps - ppt + pek - c1);
        b.in_row = std::max<int64_t>(0, i0);
        auto it = std::find_if(v->plans.begin(), v->plans.end(), [&](const BandPlan& q) { return q.bg == bg; });
        if (it == v->plans.end()) {
          BandPlan q;
          q.bg = bg;
          ConvShape band = s;
          band.N = 1;
          band.g.in[1] = bg.in_rows;
          band.g.out[1] = bg.conv_rows;
          band.g.pb[1] = bg.in_pb;
          band.g.pe[1] = bg.in_pe;
          q.conv = conv_plan<float>(band, weights, cfg_, 1, false);
          Geom3 g = pg;
          g.in[1] = bg.conv_rows;
          g.out[1] = bg.pool_rows;
          g.pb[1] = bg.pool_pb;
          g.pe[1] = bg.pool_pe;
          if (!rowpool::make_plan(g, true, false, &q.pool, isa_)) {
            return invalid_argument("no row-wise max pool for a band of " + std::to_string(bg.conv_rows) + " rows");
          }
          max_x = std::max(max_x, static_cast<size_t>(s.C * bg.in_rows * IW));
          max_y = std::max(max_y, static_cast<size_t>(s.M * bg.conv_rows * OW));
          max_conv_ws = std::max(max_conv_ws, align64(q.conv.workspace_bytes) + align64(q.conv.slot_bytes));
          max_pool_ws = std::max(max_pool_ws, q.pool.scratch_bytes);
          v->plans.push_back(std::move(q));
          it = v->plans.end() - 1;
        }
        b.geom = static_cast<size_t>(it - v->plans.begin());
        v->bands.push_back(b);
        prev_n = n;
        prev_c0 = cs0;
        prev_c1 = c1;
        r += p1 - p0;
      }
      v->part_begin.push_back(v->bands.size());
    }
    v->x_off = 0;
    v->y_off = align64(max_x * sizeof(float));
    v->conv_off = v->y_off + align64(max_y * sizeof(float));
    v->pool_off = v->conv_off + align64(max_conv_ws);
    v->carry_off = v->pool_off + align64(max_pool_ws);
    v->carry_out_off = v->carry_off + align64(max_carry * sizeof(float));
    v->slot_bytes = v->carry_out_off + align64(max_carry_out * sizeof(float));
    return v;
  }

  // One band on the calling thread: its input rows into the slot, the conv on them, then each plane's
  // pooled rows into Y.
  void run_band(const ConvMaxPoolVariant& v, const Band& b, const ConvWeights<float>& w, const float* bias,
                const float* x, float* y, const ConvPost& post, char* slot) const {
    const BandPlan& q = v.plans[b.geom];
    const ConvShape& s = v.full;
    const int64_t IH = s.g.in[1], IW = s.g.in[2], OW = s.g.out[2];
    float* xb = reinterpret_cast<float*>(slot + v.x_off);
    float* yb = reinterpret_cast<float*>(slot + v.y_off);
    float* carry = reinterpret_cast<float*>(slot + v.carry_off);
    if (b.carry_rows > 0) {  // the previous band's rows this one shares, before the conv overwrites them
      const size_t n = static_cast<size_t>(b.carry_rows * OW) * sizeof(float);
      for (int64_t m = 0; m < s.M; ++m) {
        std::memcpy(carry + m * b.carry_rows * OW, yb + (m * b.prev_rows + b.carry_from) * OW, n);
      }
    }
    const size_t row_bytes = static_cast<size_t>(q.bg.in_rows * IW) * sizeof(float);
    for (int64_t c = 0; c < s.C; ++c) {
      std::memcpy(xb + c * q.bg.in_rows * IW, x + ((b.n * s.C + c) * IH + b.in_row) * IW, row_bytes);
    }
    // The conv's own one slot after its workspace (conv_off holds both).
    const size_t conv_ws = align64(q.conv.workspace_bytes);
    const ep::SlotMemory conv_slot{slot + v.conv_off + conv_ws, align64(q.conv.slot_bytes), 1};
    const bool applied =
        conv_forward_planned<float>(q.conv, xb, w, bias, yb, nullptr, cfg_, &post, slot + v.conv_off, conv_slot);
    const int64_t band_size = s.M * q.bg.conv_rows * OW;
    if (!applied) activate(yb, band_size);
    const int64_t PH = v.pg.out[1], PW = v.pg.out[2];
    const int64_t conv_plane = q.bg.conv_rows * OW;
    void* pool_ws = slot + v.pool_off;
    float* carry_out = reinterpret_cast<float*>(slot + v.carry_out_off);
    for (int64_t m = 0; m < s.M; ++m) {
      float* yo = y + ((b.n * s.M + m) * PH + b.p0) * PW;
      rowpool::run(q.pool, yb + m * conv_plane, yo, 0, 1, pool_ws);
      if (b.carry_rows > 0) {
        // Straddling windows: their carried rows come first in the window, so on equal values the
        // carried part's (the reference's first maximal tap in row-major order).
        rowpool::run(v.carry_plans[b.carry_geom], carry + m * b.carry_rows * OW, carry_out, 0, 1, pool_ws);
        for (int64_t i = 0; i < b.carry_pooled * PW; ++i) yo[i] = yo[i] > carry_out[i] ? yo[i] : carry_out[i];
      }
    }
  }

  template <typename Err>
  Status check_weights(const Tensor& w, Err&& err) const {
    if (w.dtype() != DataType::kFloat || w.rank() != 4 || w.dim(0) % group_ != 0) {
      return err("W must be float [M, C / group, kH, kW] with M a multiple of group " + std::to_string(group_) +
                 ", got " + w.describe());
    }
    return Status::Ok();
  }
  void prepare_weights(const Tensor& w, ConvWeights<float>* out) const {
    bool unit = true;
    for (int64_t v : conv_attrs_.strides) unit = unit && v == 1;
    for (int64_t v : conv_attrs_.dilations) unit = unit && v == 1;
    const Tensor wc = w.contiguous();
    out->prepare(w.shape(), group_, std::vector<float>(wc.data<float>(), wc.data<float>() + wc.numel()), unit);
  }

  WindowAttrs conv_attrs_, pool_attrs_;
  int64_t group_ = 1;
  Activation act_ = Activation::kNone;
  float act_a_ = 0.f, act_b_ = 0.f;
  ConvConfig cfg_;
  ep::IsaTier isa_ = ep::IsaTier::kScalar;
  ConvWeights<float> weights_;
  std::vector<float> raw_w_;  // W as given, [M, C / group, kH, kW] (the lanes path packs it per shape)
  std::vector<float> bias_;
  bool have_w_ = false, have_b_ = false;
};

}  // namespace

void register_conv_max_pool(ep::KernelRegistry& r) { r.add_class<ConvMaxPoolKernel>(ir::kNxrtDomain, "ConvMaxPool"); }

}  // namespace nxrt::ops
