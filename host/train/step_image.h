// The host's side of the compiled training steps (dense_step.h, conv_step.h): buffer rows of
// N bfloat16 lanes as the bytes of host memory, a float32 value in a lane of two rows (its
// high halves, then its low), and a host region of whole rows.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/engine/executable.h"
#include "host/train/dense_net.h"

namespace tpu::train {

uint16_t Bf16Of(float v);           // rounded to nearest even
float FloatOfBf16Bits(uint16_t v);  // exact

std::vector<uint8_t> BytesOfHalves(const std::vector<uint16_t>& halves);  // little-endian
std::vector<uint16_t> HalvesOfBytes(const std::vector<uint8_t>& bytes);

// Lane `lane` of rows `row` and `row + 1` of an image of rows of n halves.
void PutFp32(std::vector<uint16_t>* img, int64_t row, int n, int lane, float v);
float GetFp32(const std::vector<uint16_t>& img, int64_t row, int n, int lane);

// Host memory rows [row, row + rows) of 2n bytes each, named `name`.
engine::Region HostRows(const std::string& name, int64_t row, int64_t rows, int n);

// A step split across `cores` cores, `share` images each: the host region of the batch,
// each core's share's bytes (`image`) in core order (each core reads its own part).
std::vector<uint8_t> BatchOfCores(int cores, int share, const Batch& b,
                                  const std::function<std::vector<uint8_t>(const Batch&)>& image);
// The results region of such a step (equal parts, in core order) as the step's results:
// each part's (`read`), put together as StepOut::OfCores puts them.
StepOut OutOfCores(int cores, const std::vector<uint8_t>& bytes,
                   const std::function<StepOut(const std::vector<uint8_t>&)>& read);

}  // namespace tpu::train
