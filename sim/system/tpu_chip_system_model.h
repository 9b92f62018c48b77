// TpuSystemBase bound to one Verilated build of tpu_chip (rtl/tpu_chip.sv: Cores cores of
// kMxus matrix units of one array size sharing the host-memory port, each unit's weight DMA
// and each host DMA with its own weight-memory port): per-core fields are packed in its
// ports, core 0 in the lowest bits, and per-port fields likewise (core c's unit m: port
// c x (kMxus + 1) + m, its host DMA's c x (kMxus + 1) + kMxus).
#pragma once

#include <array>
#include <cstring>
#include <vector>

#include "sim/system/tpu_system_model.h"

namespace tpu::sim {

template <class Model, int kCores, int kMxus>
class TpuChipSystemModel final : public VerilatedSystem<Model> {
  using Base = VerilatedSystem<Model>;
  using Base::model_;
  using typename Base::M;
  template <class Port>
  using Sig = typename Base::template Sig<Port>;
  using typename Base::Inputs;
  using typename Base::Outputs;

 public:
  TpuChipSystemModel(sc_core::sc_module_name name, const TpuSystemConfig& config)
      : Base(name, config),
        words_(static_cast<size_t>(hw::RowBytes(config.chip)) / 4 + 4 * kCores + 8),
        wm_words_(static_cast<size_t>(hw::RowBytes(config.chip)) * kPorts / 4 + 2 * kPorts + 8) {
    model_.clk_i(this->clk);
    model_.rst_ni(rst_n_);
    model_.instr_valid_i(instr_valid_);
    model_.instr_ready_o(instr_ready_);
    model_.instr_i(instr_);
    model_.hm_size_i(hm_size_);
    model_.wm_size_i(wm_size_);
    model_.hm_req_valid_o(hm_req_valid_);
    model_.hm_req_ready_i(hm_req_ready_);
    model_.hm_req_write_o(hm_req_write_);
    model_.hm_req_addr_o(hm_req_addr_);
    model_.hm_req_data_o(hm_req_data_);
    model_.hm_req_id_o(hm_req_id_);
    model_.hm_resp_valid_i(hm_resp_valid_);
    model_.hm_resp_id_i(hm_resp_id_);
    model_.hm_resp_data_i(hm_resp_data_);
    model_.wm_req_valid_o(wm_req_valid_);
    model_.wm_req_ready_i(wm_req_ready_);
    model_.wm_req_addr_o(wm_req_addr_);
    model_.wm_resp_valid_i(wm_resp_valid_);
    model_.wm_resp_data_i(wm_resp_data_);
    model_.hb_req_write_o(hb_req_write_);
    model_.hb_req_data_o(hb_req_data_);
    model_.hm_core_valid_o(hm_core_valid_);
    model_.halted_o(halted_);
    model_.status_o(status_);
    model_.idle_o(idle_);
    model_.progress_o(progress_);
    model_.unit_busy_o(unit_busy_);
    model_.mxu_busy_o(mxu_busy_);
    model_.issue_o(issue_);
    model_.wait_weights_o(wait_weights_);
    model_.obs_o(obs_);
    model_.reg_core_i(reg_core_);
    model_.reg_addr_i(reg_addr_);
    model_.reg_data_o(reg_data_);
  }

 protected:
  void SetReset(bool rst_n) override { rst_n_.write(rst_n); }

  void ReadOutputs(Outputs* out) override {
    out->core.resize(kCores);
    const Packed ready(instr_ready_), hm_valid(hm_core_valid_), wm_valid(wm_req_valid_),
        halted(halted_), status(status_), idle(idle_), progress(progress_), busy(unit_busy_),
        issue(issue_), wait(wait_weights_), obs(obs_), mxus(mxu_busy_);
    for (int c = 0; c < kCores; ++c) {
      typename Base::CoreOutputs& o = out->core[static_cast<size_t>(c)];
      o.instr_ready = ready.Field(c, 1);
      o.hm_valid = hm_valid.Field(c, 1);
      o.halted = halted.Field(c, 1);
      o.status = static_cast<uint32_t>(status.Field(c, 4));
      o.idle = idle.Field(c, 1);
      o.progress = progress.Field(c, 1);
      o.unit_busy = static_cast<uint32_t>(busy.Field(c, hw::kNumUnits));
      o.mxu_busy = static_cast<uint32_t>(mxus.Field(c, 4));
      o.issue = static_cast<uint32_t>(issue.Field(c, 3));
      o.wait_weights = wait.Field(c, 1);
      o.obs = static_cast<uint32_t>(obs.Field(c, 6));
    }
    sc_detail::FromScValue(wm_req_addr_.read(), wm_words_.data());
    out->wm.resize(kPorts);
    for (int p = 0; p < kPorts; ++p) {
      out->wm[static_cast<size_t>(p)] = {
          wm_valid.Field(p, 1) != 0,
          wm_words_[static_cast<size_t>(2 * p)] |
              static_cast<uint64_t>(wm_words_[static_cast<size_t>(2 * p + 1)]) << 32};
    }
    ReadHostDmaWrites(out);
    out->hm_req_valid = hm_req_valid_.read();
    out->hm_req_write = hm_req_write_.read();
    out->hm_req_addr = static_cast<uint32_t>(hm_req_addr_.read());
    out->hm_req_data.resize(static_cast<size_t>(this->RowBytes()));
    sc_detail::FromScValue(hm_req_data_.read(), words_.data());
    UnpackLanes(words_.data(), this->RowBytes(), out->hm_req_data.data());
    out->hm_req_id = static_cast<int>(Packed(hm_req_id_).Field(0, 32));
  }

  // The rows the host DMAs write to the weight memory (write_hbm), core c's at byte
  // c x RowBytes of the data port.
  void ReadHostDmaWrites(Outputs* out) {
    const Packed write(hb_req_write_);
    bool any = false;
    for (int c = 0; c < kCores; ++c) {
      auto& r = out->wm[static_cast<size_t>(c * (kMxus + 1) + kMxus)];
      r.write = write.Field(c, 1) != 0;
      any = any || (r.valid && r.write);
    }
    if (!any) return;
    const auto row = static_cast<size_t>(this->RowBytes());
    out->wm_data.resize(row * kCores);
    hb_words_.resize(row * kCores / 4 + 8);
    sc_detail::FromScValue(hb_req_data_.read(), hb_words_.data());
    const auto* bytes = reinterpret_cast<const uint8_t*>(hb_words_.data());
    for (int c = 0; c < kCores; ++c) {
      auto& r = out->wm[static_cast<size_t>(c * (kMxus + 1) + kMxus)];
      if (!(r.valid && r.write)) continue;
      std::memcpy(&out->wm_data[static_cast<size_t>(c) * row], bytes + static_cast<size_t>(c) * row,
                  row);
      r.data = &out->wm_data[static_cast<size_t>(c) * row];
    }
  }

  void WriteInputs(const Inputs& in) override {
    uint32_t valid = 0;
    std::fill(words_.begin(), words_.begin() + 4 * kCores, 0u);
    for (int c = 0; c < kCores && static_cast<size_t>(c) < in.instr.size(); ++c) {
      if (in.instr[static_cast<size_t>(c)] == nullptr) continue;
      valid |= 1u << c;
      std::memcpy(&words_[static_cast<size_t>(4 * c)], in.instr[static_cast<size_t>(c)], 16);
    }
    instr_valid_.write(static_cast<InstrValidT>(valid));
    instr_.write(sc_detail::ToScValue<InstrT>(words_.data()));
    hm_size_.write(in.hm_size);
    wm_size_.write(in.wm_size);
    hm_req_ready_.write(in.hm_req_ready);
    hm_resp_valid_.write(in.hm_resp_valid);
    WriteId(hm_resp_id_, in.hm_resp_id);
    if (in.hm_resp_valid) {
      PackLanes(in.hm_resp_data, this->RowBytes(), words_.data());
      hm_resp_data_.write(sc_detail::ToScValue<RowT>(words_.data()));
    }
    WriteWeightPorts(in);
  }

  // The weight-memory ports: ready and valid bits, and the rows presented, port p's at
  // byte p x RowBytes of the data port (lanes little-endian, as PackLanes packs them).
  void WriteWeightPorts(const Inputs& in) {
    uint64_t ready = 0, valid = 0;
    const auto row = static_cast<size_t>(this->RowBytes());
    auto* bytes = reinterpret_cast<uint8_t*>(wm_words_.data());
    for (int p = 0; p < kPorts && static_cast<size_t>(p) < in.wm.size(); ++p) {
      const typename Base::WeightAnswer& a = in.wm[static_cast<size_t>(p)];
      ready |= uint64_t{a.req_ready} << p;
      if (!a.resp_valid) continue;
      valid |= uint64_t{1} << p;
      std::memcpy(bytes + static_cast<size_t>(p) * row, a.resp_data, row);
    }
    wm_req_ready_.write(static_cast<ValidT>(ready));
    wm_resp_valid_.write(static_cast<ValidT>(valid));
    if (valid != 0) wm_resp_data_.write(sc_detail::ToScValue<WmRowsT>(wm_words_.data()));
  }

  void SetRegAddr(int core, int addr) override {
    WriteId(reg_core_, core);
    reg_addr_.write(static_cast<uint32_t>(addr));
  }
  uint64_t RegData() override { return static_cast<uint64_t>(reg_data_.read()); }

 private:
  // weight-memory ports: one per weight DMA and one per host DMA (tpu_chip.sv)
  static constexpr int kPorts = kCores * (kMxus + 1);
  template <class Port>
  using ValueOf = typename std::remove_reference_t<Port>::data_type;
  using InstrT = ValueOf<decltype(std::declval<M&>().instr_i)>;
  using InstrValidT = ValueOf<decltype(std::declval<M&>().instr_valid_i)>;
  using RowT = ValueOf<decltype(std::declval<M&>().hm_resp_data_i)>;
  using WmRowsT = ValueOf<decltype(std::declval<M&>().wm_resp_data_i)>;
  using ValidT = ValueOf<decltype(std::declval<M&>().wm_req_ready_i)>;

  // A port's value as bits: field c of `width` bits is core c's.
  struct Packed {
    template <class S>
    explicit Packed(const S& signal) {
      sc_detail::FromScValue(signal.read(), w.data());
    }
    uint64_t Field(int c, int width) const {
      const int lo = c * width;
      const uint64_t pair = w[static_cast<size_t>(lo / 32)] |
                            static_cast<uint64_t>(w[static_cast<size_t>(lo / 32 + 1)]) << 32;
      return (pair >> (lo % 32)) & ((uint64_t{1} << width) - 1);
    }
    std::array<uint32_t, 8> w{};  // up to 6 bits x 16 cores, and a word to spare
  };

  template <class S>
  static void WriteId(S& signal, int id) {
    const uint32_t words[2] = {static_cast<uint32_t>(id), 0};
    using T = typename std::remove_reference_t<decltype(signal.read())>;
    signal.write(sc_detail::ToScValue<std::remove_cv_t<T>>(words));
  }

  sc_core::sc_signal<bool> rst_n_{"rst_n", true};
  Sig<decltype(std::declval<M&>().instr_valid_i)> instr_valid_{"instr_valid"};
  Sig<decltype(std::declval<M&>().instr_ready_o)> instr_ready_{"instr_ready"};
  Sig<decltype(std::declval<M&>().instr_i)> instr_{"instr"};
  Sig<decltype(std::declval<M&>().hm_size_i)> hm_size_{"hm_size"};
  Sig<decltype(std::declval<M&>().wm_size_i)> wm_size_{"wm_size"};
  sc_core::sc_signal<bool> hm_req_valid_{"hm_req_valid"}, hm_req_ready_{"hm_req_ready"},
      hm_req_write_{"hm_req_write"}, hm_resp_valid_{"hm_resp_valid"};
  Sig<decltype(std::declval<M&>().hm_req_addr_o)> hm_req_addr_{"hm_req_addr"};
  Sig<decltype(std::declval<M&>().hm_req_data_o)> hm_req_data_{"hm_req_data"};
  Sig<decltype(std::declval<M&>().hm_req_id_o)> hm_req_id_{"hm_req_id"};
  Sig<decltype(std::declval<M&>().hm_resp_id_i)> hm_resp_id_{"hm_resp_id"};
  Sig<decltype(std::declval<M&>().hm_resp_data_i)> hm_resp_data_{"hm_resp_data"};
  Sig<decltype(std::declval<M&>().wm_resp_data_i)> wm_resp_data_{"wm_resp_data"};
  Sig<decltype(std::declval<M&>().wm_req_valid_o)> wm_req_valid_{"wm_req_valid"};
  Sig<decltype(std::declval<M&>().wm_req_ready_i)> wm_req_ready_{"wm_req_ready"};
  Sig<decltype(std::declval<M&>().wm_resp_valid_i)> wm_resp_valid_{"wm_resp_valid"};
  Sig<decltype(std::declval<M&>().wm_req_addr_o)> wm_req_addr_{"wm_req_addr"};
  Sig<decltype(std::declval<M&>().hm_core_valid_o)> hm_core_valid_{"hm_core_valid"};
  Sig<decltype(std::declval<M&>().hb_req_write_o)> hb_req_write_{"hb_req_write"};
  Sig<decltype(std::declval<M&>().hb_req_data_o)> hb_req_data_{"hb_req_data"};
  Sig<decltype(std::declval<M&>().halted_o)> halted_{"halted"};
  Sig<decltype(std::declval<M&>().status_o)> status_{"status"};
  Sig<decltype(std::declval<M&>().idle_o)> idle_{"idle"};
  Sig<decltype(std::declval<M&>().progress_o)> progress_{"progress"};
  Sig<decltype(std::declval<M&>().unit_busy_o)> unit_busy_{"unit_busy"};
  Sig<decltype(std::declval<M&>().mxu_busy_o)> mxu_busy_{"mxu_busy"};
  Sig<decltype(std::declval<M&>().issue_o)> issue_{"issue"};
  Sig<decltype(std::declval<M&>().wait_weights_o)> wait_weights_{"wait_weights"};
  Sig<decltype(std::declval<M&>().obs_o)> obs_{"obs"};
  // Set by the engine thread and by TLM reads from the host.
  sc_core::sc_signal<ValueOf<decltype(std::declval<M&>().reg_core_i)>, sc_core::SC_MANY_WRITERS>
      reg_core_{"reg_core"};
  sc_core::sc_signal<ValueOf<decltype(std::declval<M&>().reg_addr_i)>, sc_core::SC_MANY_WRITERS>
      reg_addr_{"reg_addr"};
  Sig<decltype(std::declval<M&>().reg_data_o)> reg_data_{"reg_data"};
  std::vector<uint32_t> words_, wm_words_, hb_words_;
};

}  // namespace tpu::sim
