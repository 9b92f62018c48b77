// TpuSystemBase bound to one Verilated build of tpu_top (one array size): the signals
// between the SystemC system and the chip's ports, and FST tracing.
#pragma once

#include <systemc.h>
#include <verilated.h>
#include <verilated_fst_c.h>

#include <cstdlib>
#include <memory>
#include <string>
#if VM_COVERAGE
#include <unistd.h>
#include <verilated_cov.h>
#endif
#include <utility>
#include <vector>

#include "sim/mxu/port_packing.h"
#include "sim/system/sc_port_values.h"
#include "sim/system/tpu_system.h"

namespace tpu::sim {

// The part of a system bound to a Verilated chip that does not depend on its ports: the
// model, FST tracing and coverage.
template <class Model>
class VerilatedSystem : public TpuSystemBase {
 public:
  VerilatedSystem(sc_core::sc_module_name name, const TpuSystemConfig& config)
      : TpuSystemBase(name, config), model_((Verilated::traceEverOn(true), "tpu")) {}

  ~VerilatedSystem() override {
    CloseTrace();
#if VM_COVERAGE
    WriteCoverage();
#endif
  }

  void OpenTrace(const std::string& fst_path) override {
    trace_ = std::make_unique<VerilatedFstC>();
    model_.trace(trace_.get(), 99);
    trace_->set_time_unit("1ns");
    trace_->set_time_resolution("1ns");
    trace_->open(fst_path.c_str());
    if (!trace_->isOpen()) throw std::runtime_error("cannot open trace file '" + fst_path + "'");
  }

  void CloseTrace() override {
    if (trace_) {
      trace_->close();
      trace_.reset();
    }
  }

 protected:
  void DumpTrace(uint64_t time) override {
    if (trace_) trace_->dump(time);
  }

  using M = Model;
  template <class Port>
  using Sig = sc_detail::SignalFor<Port>;
  M model_;

 private:
#if VM_COVERAGE
  // A coverage build (TPUSIM_RTL_COVERAGE, make coverage): the points the chip reached in
  // this process, into $TPUSIM_COVERAGE_DIR/rtl-PID.dat for verilator_coverage to merge.
  static void WriteCoverage() {
    const char* dir = std::getenv("TPUSIM_COVERAGE_DIR");
    if (dir == nullptr || *dir == '\0') return;
    const std::string path = std::string(dir) + "/rtl-" + std::to_string(::getpid()) + ".dat";
    Verilated::threadContextp()->coveragep()->write(path.c_str());
  }
#endif
  std::unique_ptr<VerilatedFstC> trace_;
};

// One core: tpu_top's ports.
template <class Model>
class TpuSystemModel final : public VerilatedSystem<Model> {
  using Base = VerilatedSystem<Model>;
  using Base::model_;
  using typename Base::M;
  template <class Port>
  using Sig = typename Base::template Sig<Port>;
  using typename Base::Inputs;
  using typename Base::Outputs;

 public:
  TpuSystemModel(sc_core::sc_module_name name, const TpuSystemConfig& config)
      : Base(name, config), words_(static_cast<size_t>(hw::RowBytes(config.chip)) / 4 + 8) {
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
    model_.hm_resp_valid_i(hm_resp_valid_);
    model_.hm_resp_data_i(hm_resp_data_);
    model_.wm_req_valid_o(wm_req_valid_);
    model_.wm_req_ready_i(wm_req_ready_);
    model_.wm_req_addr_o(wm_req_addr_);
    model_.wm_resp_valid_i(wm_resp_valid_);
    model_.wm_resp_data_i(wm_resp_data_);
    model_.hb_req_valid_o(hb_req_valid_);
    model_.hb_req_ready_i(hb_req_ready_);
    model_.hb_req_write_o(hb_req_write_);
    model_.hb_req_addr_o(hb_req_addr_);
    model_.hb_req_data_o(hb_req_data_);
    model_.hb_resp_valid_i(hb_resp_valid_);
    model_.hb_resp_data_i(hb_resp_data_);
    model_.halted_o(halted_);
    model_.status_o(status_);
    model_.idle_o(idle_);
    model_.progress_o(progress_);
    model_.unit_busy_o(unit_busy_);
    model_.mxu_busy_o(mxu_busy_);
    model_.issue_o(issue_);
    model_.wait_weights_o(wait_weights_);
    model_.obs_o(obs_);
    model_.arrived_i(arrived_);  // one core: no other core arrives (barrier acts as sync)
    model_.at_barrier_o(at_barrier_);
    model_.reg_addr_i(reg_addr_);
    model_.reg_data_o(reg_data_);
  }

 protected:
  void SetReset(bool rst_n) override { rst_n_.write(rst_n); }

  void ReadOutputs(Outputs* out) override {
    out->core.resize(1);
    typename Base::CoreOutputs& c = out->core[0];
    c.instr_ready = instr_ready_.read();
    out->hm_req_valid = c.hm_valid = hm_req_valid_.read();
    out->hm_req_write = hm_req_write_.read();
    out->hm_req_addr = static_cast<uint32_t>(hm_req_addr_.read());
    out->hm_req_data.resize(static_cast<size_t>(this->RowBytes()));
    sc_detail::FromScValue(hm_req_data_.read(), words_.data());
    UnpackLanes(words_.data(), this->RowBytes(), out->hm_req_data.data());
    out->wm.resize(2);  // the weight DMA's port, the host DMA's (read_hbm, write_hbm)
    out->wm[0] = {wm_req_valid_.read(), static_cast<uint64_t>(wm_req_addr_.read())};
    out->wm[1] = {hb_req_valid_.read(), static_cast<uint64_t>(hb_req_addr_.read()),
                  hb_req_write_.read()};
    if (out->wm[1].valid && out->wm[1].write) {
      out->wm_data.resize(static_cast<size_t>(this->RowBytes()));
      sc_detail::FromScValue(hb_req_data_.read(), words_.data());
      UnpackLanes(words_.data(), this->RowBytes(), out->wm_data.data());
      out->wm[1].data = out->wm_data.data();
    }
    c.halted = halted_.read();
    c.status = static_cast<uint32_t>(status_.read());
    c.idle = idle_.read();
    c.progress = progress_.read();
    c.unit_busy = static_cast<uint32_t>(unit_busy_.read());
    c.mxu_busy = static_cast<uint32_t>(mxu_busy_.read());
    c.issue = static_cast<uint32_t>(issue_.read());
    c.wait_weights = wait_weights_.read();
    c.obs = static_cast<uint32_t>(obs_.read());
  }

  void WriteInputs(const Inputs& in) override {
    const uint8_t* instr = in.instr.empty() ? nullptr : in.instr[0];
    instr_valid_.write(instr != nullptr);
    if (instr != nullptr) {
      PackLanes(instr, 16, words_.data());
      instr_.write(sc_detail::ToScValue<InstrT>(words_.data()));
    }
    hm_size_.write(in.hm_size);
    wm_size_.write(in.wm_size);
    hm_req_ready_.write(in.hm_req_ready);
    hm_resp_valid_.write(in.hm_resp_valid);
    if (in.hm_resp_valid) {
      PackLanes(in.hm_resp_data, this->RowBytes(), words_.data());
      hm_resp_data_.write(sc_detail::ToScValue<RowT>(words_.data()));
    }
    WriteWeightPort(in, 0, wm_req_ready_, wm_resp_valid_, wm_resp_data_);
    WriteWeightPort(in, 1, hb_req_ready_, hb_resp_valid_, hb_resp_data_);
  }

  // Weight-memory port p's answer (none where the inputs have no such port).
  template <class Ready, class Valid, class Data>
  void WriteWeightPort(const Inputs& in, size_t p, Ready& ready, Valid& valid, Data& data) {
    const typename Base::WeightAnswer a =
        p < in.wm.size() ? in.wm[p] : typename Base::WeightAnswer{};
    ready.write(a.req_ready);
    valid.write(a.resp_valid);
    if (a.resp_valid) {
      PackLanes(a.resp_data, this->RowBytes(), words_.data());
      data.write(sc_detail::ToScValue<RowT>(words_.data()));
    }
  }

  void SetRegAddr(int, int addr) override { reg_addr_.write(static_cast<uint32_t>(addr)); }
  uint64_t RegData() override { return static_cast<uint64_t>(reg_data_.read()); }

 private:
  using InstrT = typename std::remove_reference_t<decltype(std::declval<M&>().instr_i)>::data_type;
  using RowT =
      typename std::remove_reference_t<decltype(std::declval<M&>().hm_resp_data_i)>::data_type;

  sc_core::sc_signal<bool> rst_n_{"rst_n", true};
  sc_core::sc_signal<bool> instr_valid_{"instr_valid"}, instr_ready_{"instr_ready"};
  Sig<decltype(std::declval<M&>().instr_i)> instr_{"instr"};
  Sig<decltype(std::declval<M&>().hm_size_i)> hm_size_{"hm_size"};
  Sig<decltype(std::declval<M&>().wm_size_i)> wm_size_{"wm_size"};
  sc_core::sc_signal<bool> hm_req_valid_{"hm_req_valid"}, hm_req_ready_{"hm_req_ready"},
      hm_req_write_{"hm_req_write"}, hm_resp_valid_{"hm_resp_valid"};
  Sig<decltype(std::declval<M&>().hm_req_addr_o)> hm_req_addr_{"hm_req_addr"};
  Sig<decltype(std::declval<M&>().wm_req_addr_o)> wm_req_addr_{"wm_req_addr"};
  Sig<decltype(std::declval<M&>().hm_req_data_o)> hm_req_data_{"hm_req_data"};
  Sig<decltype(std::declval<M&>().hm_resp_data_i)> hm_resp_data_{"hm_resp_data"},
      wm_resp_data_{"wm_resp_data"};
  sc_core::sc_signal<bool> wm_req_valid_{"wm_req_valid"}, wm_req_ready_{"wm_req_ready"},
      wm_resp_valid_{"wm_resp_valid"};
  // the host DMA's weight-memory port (read_hbm, write_hbm)
  sc_core::sc_signal<bool> hb_req_valid_{"hb_req_valid"}, hb_req_ready_{"hb_req_ready"},
      hb_resp_valid_{"hb_resp_valid"}, hb_req_write_{"hb_req_write"};
  Sig<decltype(std::declval<M&>().hb_req_data_o)> hb_req_data_{"hb_req_data"};
  Sig<decltype(std::declval<M&>().hb_req_addr_o)> hb_req_addr_{"hb_req_addr"};
  Sig<decltype(std::declval<M&>().hb_resp_data_i)> hb_resp_data_{"hb_resp_data"};
  sc_core::sc_signal<bool> halted_{"halted"}, idle_{"idle"}, progress_{"progress"},
      wait_weights_{"wait_weights"};
  Sig<decltype(std::declval<M&>().status_o)> status_{"status"};
  Sig<decltype(std::declval<M&>().unit_busy_o)> unit_busy_{"unit_busy"};
  Sig<decltype(std::declval<M&>().mxu_busy_o)> mxu_busy_{"mxu_busy"};
  Sig<decltype(std::declval<M&>().issue_o)> issue_{"issue"};
  Sig<decltype(std::declval<M&>().obs_o)> obs_{"obs"};
  Sig<decltype(std::declval<M&>().arrived_i)> arrived_{"arrived"};  // stays 0
  sc_core::sc_signal<bool> at_barrier_{"at_barrier"};
  // Set by the engine thread (watchdog messages) and by TLM reads from the host.
  sc_core::sc_signal<
      typename std::remove_reference_t<decltype(std::declval<M&>().reg_addr_i)>::data_type,
      sc_core::SC_MANY_WRITERS>
      reg_addr_{"reg_addr"};
  Sig<decltype(std::declval<M&>().reg_data_o)> reg_data_{"reg_data"};
  std::vector<uint32_t> words_;
};

}  // namespace tpu::sim
