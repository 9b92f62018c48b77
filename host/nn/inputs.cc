// Input sets and their fp32 and int8 forms (see inputs.h).
#include "host/nn/inputs.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "arith/int8.h"
#include "host/common/errors.h"
#include "host/common/npy.h"

namespace tpu::nn {

RowMatrix<float> Fp32Inputs(const InputSet& in, int64_t first, int64_t count) {
  const int64_t size = in.shape.Size();
  RowMatrix<float> x(count, size);
  const auto base = static_cast<size_t>(first * size);
  for (int64_t i = 0; i < count * size; ++i) {
    x.data()[i] = in.pixels.empty() ? in.values[base + static_cast<size_t>(i)]
                                    : in.pixels[base + static_cast<size_t>(i)] / 255.0f;
  }
  return x;
}

RowMatrix<int8_t> Int8Inputs(const Model& m, const InputSet& in, int64_t first, int64_t count) {
  const int64_t size = in.shape.Size();
  RowMatrix<int8_t> x(count, size);
  const auto base = static_cast<size_t>(first * size);
  for (int64_t i = 0; i < count * size; ++i) {
    x.data()[i] =
        in.pixels.empty()
            ? arith::QuantizeInput(in.values[base + static_cast<size_t>(i)], m.input_scale)
            : arith::QuantizePixel(in.pixels[base + static_cast<size_t>(i)]);
  }
  return x;
}

std::string InputRangeWarning(const Model& m, const InputSet& in) {
  if (!m.quantized || !in.pixels.empty()) return "";
  const double range = 127.0 * m.input_scale;
  int64_t far = 0;
  double largest = 0;
  for (const float v : in.values) {
    const double a = std::fabs(static_cast<double>(v));
    far += !(a <= 2 * range);  // NaN too
    largest = std::isnan(a) || a > largest ? a : largest;
  }
  if (far == 0) return "";
  return fmt::format(
      "{} of the {} input values lie far outside the range [-{:.4g}, {:.4g}] that model '{}' "
      "was calibrated for (the largest |x| is {:.4g}); the chip and the int8 reference clip "
      "them to it, so the outputs say little about these inputs: quantize the model on inputs "
      "like them (tpusim quantize --inputs)",
      far, in.values.size(), range, range, m.name, largest);
}

InputSet InputsFromMnist(const data::MnistSet& set, int64_t limit, const Shape3& shape) {
  if (shape.Size() != set.image_size) {
    throw std::invalid_argument(
        fmt::format("images of {} bytes for inputs of {} values", set.image_size, shape.Size()));
  }
  InputSet s;
  s.shape = shape;
  s.count = limit > 0 ? std::min(limit, set.count) : set.count;
  s.pixels.assign(set.pixels.begin(), set.pixels.begin() + s.count * set.image_size);
  s.labels.assign(set.labels.begin(), set.labels.begin() + s.count);
  s.source = "test images";
  return s;
}

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

}  // namespace

namespace {

// The shape of an array of `n` inputs of model m: N x C x H x W, or, for a model whose input
// is 1 x T x X (sequences of T steps of X values, as an imported LSTM's), N x T x X; for one
// of 1 x T x 1 (a transformer's token ids), N x T too.
std::vector<int64_t> WantedShape(const Model& m, int64_t n, size_t rank) {
  const Shape3& in = m.input;
  if (rank == 2 && in.h == 1 && in.c == 1) return {n, in.w};
  if (rank == 3 && in.h == 1) return {n, in.w, in.c};
  return {n, in.c, in.h, in.w};
}

// t's values stored h x w x c (N x T x X already is).
std::vector<float> ChannelsLast(const Tensor<float>& t, const Shape3& in) {
  if (t.shape.size() <= 3) return t.data;
  const int64_t plane = int64_t{in.h} * in.w, size = in.Size(), count = t.shape[0];
  std::vector<float> hwc(t.data.size());
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < in.c; ++c)
      for (int64_t p = 0; p < plane; ++p)
        hwc[static_cast<size_t>(n * size + p * in.c + c)] =
            t.data[static_cast<size_t>((n * in.c + c) * plane + p)];
  return hwc;
}

}  // namespace

InputSet InputsFromTensor(const Tensor<float>& t, const Model& m, const std::string& path) {
  const Shape3& in = m.input;
  const int64_t n = t.shape.empty() ? 0 : t.shape[0];
  if (t.shape != WantedShape(m, n, t.shape.size()) || n < 1) {
    const std::vector<int64_t> images = WantedShape(m, 1, 4), steps = WantedShape(m, 1, 3);
    throw UsageError(fmt::format(
        "{}: the inputs are {}; model '{}' takes N x {} (N x C x H x W float32, as the exported "
        "model did{})",
        path, t.shape.empty() ? "a scalar" : ShapeText(t.shape), m.name,
        ShapeText({images.begin() + 1, images.end()}),
        in.h == 1 ? fmt::format(", or N x {} sequences of steps{}",
                                ShapeText({steps.begin() + 1, steps.end()}),
                                in.c == 1 ? fmt::format(", or N x {} token ids", in.w) : "")
                  : ""));
  }
  InputSet s;
  s.shape = in;
  s.count = n;
  const int64_t size = in.Size();
  std::vector<float> hwc = ChannelsLast(t, in);
  for (size_t i = 0; i < hwc.size(); ++i) {
    if (!std::isfinite(hwc[i])) {
      throw UsageError(fmt::format("{}: value {} of input {} is not finite", path,
                                   i % static_cast<size_t>(size), i / static_cast<size_t>(size)));
    }
  }
  if (m.preprocess != "mnist32") {
    s.values = std::move(hwc);
    return s;
  }
  s.pixels.resize(hwc.size());
  for (size_t i = 0; i < hwc.size(); ++i) {
    const float p = std::round(hwc[i] * 255.0f);
    if (p < 0 || p > 255 || std::fabs(hwc[i] * 255.0f - p) > 1e-3f) {
      throw UsageError(fmt::format(
          "{}: value {} of input {} is {}, but model '{}' (preprocess mnist32) takes pixel / 255 "
          "for pixels 0 to 255",
          path, i % static_cast<size_t>(size), i / static_cast<size_t>(size), hwc[i], m.name));
    }
    s.pixels[i] = static_cast<uint8_t>(p);
  }
  return s;
}

InputSet ReadInputsNpy(const std::string& path, const Model& m) {
  InputSet s = InputsFromTensor(ReadNpyTensor<float>(path), m, path);
  s.source = "inputs in " + path;
  return s;
}

data::Dataset DatasetFor(const std::string& flag, const Model& model) {
  const data::Dataset trained = data::ParseDataset(model.dataset);
  if (flag.empty()) return trained;
  const data::Dataset d = data::ParseDataset(flag);
  if (d != trained) {
    throw UsageError(fmt::format(
        "--dataset {}, but model '{}' was trained on {}; drop --dataset, or use a model "
        "trained on {}",
        flag, model.name, model.dataset, flag));
  }
  return d;
}

data::MnistSet LoadTestSet(const Model& model, const std::string& dataset,
                           const std::string& data_dir, int64_t limit) {
  if (model.dataset == "none") {
    throw UsageError("model '" + model.name +
                     "' has no data set: give its inputs with --inputs FILE.npy (N x C x H x W "
                     "float32) or --synthetic N");
  }
  const data::Dataset d = DatasetFor(dataset, model);
  return data::LoadMnist(data::FindDatasetDir(d, data_dir), /*train=*/false, limit);
}

InputSet SyntheticInputs(const Model& m, int64_t count, uint64_t seed) {
  InputSet s;
  s.shape = m.input;
  s.count = count;
  s.source = fmt::format("synthetic inputs (seed {})", seed);
  std::mt19937_64 rng(seed);
  const int64_t size = m.input.Size();
  if (m.preprocess == "mnist32") {
    s.pixels.assign(static_cast<size_t>(count * size), 0);
    const int border = (data::kPaddedSide - data::kMnistSide) / 2;
    for (int64_t n = 0; n < count; ++n)
      for (int y = border; y < border + data::kMnistSide; ++y)
        for (int x = border; x < border + data::kMnistSide; ++x)
          s.pixels[static_cast<size_t>(n * size + y * data::kPaddedSide + x)] =
              static_cast<uint8_t>(rng() >> 56);
    return s;
  }
  // A uniform double in (0, 1) from the top 53 bits (never 0, so the logarithm is finite).
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53; };
  s.values.resize(static_cast<size_t>(count * size));
  for (size_t i = 0; i < s.values.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * M_PI * uniform();
    s.values[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < s.values.size()) s.values[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return s;
}

InputSet SliceInputs(const InputSet& in, int64_t first, int64_t count) {
  InputSet s;
  s.shape = in.shape;
  s.count = count;
  s.source = in.source;
  const auto size = static_cast<size_t>(in.shape.Size());
  const auto a = static_cast<size_t>(first) * size, b = a + static_cast<size_t>(count) * size;
  if (!in.pixels.empty()) s.pixels.assign(in.pixels.begin() + a, in.pixels.begin() + b);
  if (!in.values.empty()) s.values.assign(in.values.begin() + a, in.values.begin() + b);
  if (!in.labels.empty())
    s.labels.assign(in.labels.begin() + first, in.labels.begin() + first + count);
  return s;
}

}  // namespace tpu::nn
