// The instruction timeline (host/engine/timeline.cc): the same program gives the same
// timeline on both engines, and the timeline says what each unit did when.
#include "host/engine/timeline.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>

#include "host/engine/chip_engine.h"
#include "host/engine/engine_factory.h"
#include "host/isa/assembler.h"

namespace tpu::engine {
namespace {

std::vector<uint8_t> Bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

ExecJob DenseLayer() {
  const std::string ex = TPUSIM_SOURCE_DIR "/examples/";
  ExecJob job;
  std::ifstream f(ex + "dense_layer.asm");
  job.program = isa::Assemble(std::string(std::istreambuf_iterator<char>(f), {}), "dense");
  job.host_image = Bytes(ex + "dense_layer.host.bin");
  job.weight_image = Bytes(ex + "dense_layer.weights.bin");
  return job;
}

nlohmann::json Record(EngineKind kind, const ExecJob& job, ExecResult* r) {
  const config::TpuConfig c = config::LoadConfig("small-16");
  Timeline t(c.clock_mhz);
  EngineOptions o;
  o.timeline = &t;
  *r = MakeChipEngine(kind, c, o)->Run(job);
  return t.ToJson();
}

TEST(TimelineTest, BothEnginesWriteTheSameTimeline) {
  ExecResult rtl, fast;
  const nlohmann::json a = Record(EngineKind::kRtl, DenseLayer(), &rtl);
  const nlohmann::json b = Record(EngineKind::kFast, DenseLayer(), &fast);
  ASSERT_TRUE(rtl.ok && fast.ok);
  EXPECT_EQ(a, b);
}

TEST(TimelineTest, EveryInstructionIssuesOnceAndRunsOnItsUnit) {
  ExecResult r;
  const nlohmann::json j = Record(EngineKind::kFast, DenseLayer(), &r);
  ASSERT_TRUE(r.ok) << r.message;
  std::map<int, std::vector<std::pair<double, double>>> tracks;
  std::map<std::string, int> on_units;
  int issues = 0;
  std::vector<std::string> names;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") names.push_back(e["args"]["name"]);
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    const uint64_t start = e["args"]["cycle"], len = e["args"]["cycles"];
    EXPECT_LE(start + len, r.cycles) << e.dump();
    EXPECT_GT(len, 0u) << e.dump();
    const int tid = e["tid"];
    if (tid == 0) {
      issues += e["name"].get<std::string>().rfind("issue ", 0) == 0;
    } else {
      ++on_units[e["name"]];
      tracks[tid].emplace_back(e["ts"], e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"controller (issue)", "host DMA", "weight DMA", "matrix unit",
                                      "activation unit", "layers (whole-network programs)"}));
  EXPECT_EQ(issues, static_cast<int>(r.counters.instructions));
  // examples/dense_layer.asm: 2 read_host, 1 read_weights, 2 matmul, 1 activate,
  // 1 write_host (sync and halt are the controller's).
  EXPECT_EQ(on_units, (std::map<std::string, int>{{"read_host", 2},
                                                  {"read_weights", 1},
                                                  {"matmul", 2},
                                                  {"activate", 1},
                                                  {"write_host", 1}}));
  // A unit runs one instruction at a time: its slices do not overlap.
  for (auto& [tid, spans] : tracks) {
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-9) << tid;
  }
}

// A bf16 chip's vector unit has a track: a slice per vector instruction, as long as the unit
// is busy with it (busy_vector). An int8 chip has none (the test above).
TEST(TimelineTest, TheVectorUnitHasATrackOnABf16Chip) {
  config::TpuConfig c = config::LoadConfig("small-16");
  c.dtype = hw::Dtype::kBf16;
  ExecJob job;
  job.program = isa::Assemble(
      "set_format dtype=bf16\nread_host host=0 ub=0 rows=4\n"
      "vector op=exp a=0 out=8 rows=4 o32\nvector op=lane_sum a=8 out=16 rows=4 a32\nhalt\n",
      "vector");
  job.host_image.assign(4 * 2 * 16, 0);
  Timeline t(c.clock_mhz, 1, /*vector_unit=*/true);
  EngineOptions o;
  o.timeline = &t;
  const ExecResult r = MakeChipEngine(EngineKind::kFast, c, o)->Run(job);
  ASSERT_TRUE(r.ok) << r.message;
  const nlohmann::json j = t.ToJson();
  int track = -1, slices = 0;
  uint64_t cycles = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["name"] == "thread_name" && e["args"]["name"] == "vector unit") track = e["tid"];
  }
  ASSERT_GE(track, 0) << "no vector unit track";
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != track) continue;
    EXPECT_EQ(e["name"], "vector");
    ++slices;
    cycles += e["args"]["cycles"].get<uint64_t>();
  }
  EXPECT_EQ(slices, 2);
  EXPECT_EQ(cycles, r.counters.busy_vector);
}

}  // namespace
}  // namespace tpu::engine
