// See step_image.h.
#include "host/train/step_image.h"

#include "arith/bf16.h"
#include "arith/fp32.h"

namespace tpu::train {

uint16_t Bf16Of(float v) { return arith::Bf16OfFp32(arith::BitsOfFloat(v)); }
float FloatOfBf16Bits(uint16_t v) { return arith::FloatOfBits(arith::Fp32OfBf16(v)); }

std::vector<uint8_t> BytesOfHalves(const std::vector<uint16_t>& halves) {
  std::vector<uint8_t> out(halves.size() * 2);
  for (size_t i = 0; i < halves.size(); ++i) {
    out[2 * i] = static_cast<uint8_t>(halves[i]);
    out[2 * i + 1] = static_cast<uint8_t>(halves[i] >> 8);
  }
  return out;
}

std::vector<uint16_t> HalvesOfBytes(const std::vector<uint8_t>& bytes) {
  std::vector<uint16_t> out(bytes.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint16_t>(bytes[2 * i] | bytes[2 * i + 1] << 8);
  return out;
}

void PutFp32(std::vector<uint16_t>* img, int64_t row, int n, int lane, float v) {
  const uint32_t u = arith::BitsOfFloat(v);
  (*img)[static_cast<size_t>(row * n + lane)] = static_cast<uint16_t>(u >> 16);
  (*img)[static_cast<size_t>((row + 1) * n + lane)] = static_cast<uint16_t>(u);
}

float GetFp32(const std::vector<uint16_t>& img, int64_t row, int n, int lane) {
  return arith::FloatOfBits(uint32_t{img[static_cast<size_t>(row * n + lane)]} << 16 |
                            img[static_cast<size_t>((row + 1) * n + lane)]);
}

engine::Region HostRows(const std::string& name, int64_t row, int64_t rows, int n) {
  engine::Region r;
  r.name = name;
  r.memory = engine::Memory::kHost;
  r.addr = static_cast<uint64_t>(row) * 2 * static_cast<uint64_t>(n);
  r.bytes = static_cast<uint64_t>(rows) * 2 * static_cast<uint64_t>(n);
  return r;
}

std::vector<uint8_t> BatchOfCores(int cores, int share, const Batch& b,
                                  const std::function<std::vector<uint8_t>(const Batch&)>& image) {
  if (cores == 1) return image(b);
  std::vector<uint8_t> out;
  for (int c = 0; c < cores; ++c) {
    const std::vector<uint8_t> part = image(b.Share(int64_t{c} * share, share));
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

StepOut OutOfCores(int cores, const std::vector<uint8_t>& bytes,
                   const std::function<StepOut(const std::vector<uint8_t>&)>& read) {
  if (cores == 1) return read(bytes);
  const size_t part = bytes.size() / static_cast<size_t>(cores);
  std::vector<StepOut> outs;
  for (int c = 0; c < cores; ++c) {
    const auto from = bytes.begin() + static_cast<ptrdiff_t>(c * part);
    outs.push_back(read(std::vector<uint8_t>(from, from + static_cast<ptrdiff_t>(part))));
  }
  return StepOut::OfCores(outs);
}

}  // namespace tpu::train
