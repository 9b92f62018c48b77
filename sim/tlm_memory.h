// A MemoryModel behind a TLM-2.0 target socket: host software (or another SystemC virtual
// platform) loads programs and data and reads results through it. Blocking transport
// annotates the model's latency and bandwidth as delay; debug transport does not count.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include "sim/memory_model.h"

namespace tpu::sim {

class TlmMemory : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<TlmMemory> socket;

  // `clock_period` turns the model's cycles into annotated time.
  TlmMemory(sc_core::sc_module_name name, MemoryModel& memory, sc_core::sc_time clock_period)
      : sc_core::sc_module(name), socket("socket"), memory_(memory), period_(clock_period) {
    socket.register_b_transport(this, &TlmMemory::BTransport);
    socket.register_transport_dbg(this, &TlmMemory::TransportDbg);
  }

 private:
  void BTransport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
    if (!Accept(trans)) return;
    try {
      if (trans.is_read()) {
        memory_.Read(trans.get_address(), trans.get_data_ptr(), trans.get_data_length());
      } else {
        memory_.Write(trans.get_address(), trans.get_data_ptr(), trans.get_data_length());
      }
    } catch (const std::out_of_range&) {
      trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
      return;
    }
    delay += period_ * static_cast<double>(
                           memory_.Timing().TransferCycles(trans.get_data_length()));
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
  }

  unsigned int TransportDbg(tlm::tlm_generic_payload& trans) {
    const uint64_t len = trans.get_data_length();
    if (!memory_.InRange(trans.get_address(), len)) return 0;
    if (trans.is_read()) {
      memory_.Peek(trans.get_address(), trans.get_data_ptr(), len);
    } else if (trans.is_write()) {
      memory_.Write(trans.get_address(), trans.get_data_ptr(), len);
    }
    return static_cast<unsigned int>(len);
  }

  // Commands and features this target does not implement get the standard error codes.
  bool Accept(tlm::tlm_generic_payload& trans) {
    if (!trans.is_read() && !trans.is_write()) {
      trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
      return false;
    }
    if (trans.get_byte_enable_ptr() != nullptr) {
      trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
      return false;
    }
    if (trans.get_streaming_width() < trans.get_data_length()) {
      trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
      return false;
    }
    return true;
  }

  MemoryModel& memory_;
  sc_core::sc_time period_;
};

}  // namespace tpu::sim
