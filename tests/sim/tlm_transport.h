// One blocking TLM-2.0 transaction from a test's host software: what the system answered.
#pragma once

#include <tlm.h>

#include <cstdint>

namespace tpu::sim {

template <class Socket>
tlm::tlm_response_status TlmTransport(Socket& socket, tlm::tlm_command cmd, uint64_t addr,
                                      void* data, unsigned len, sc_core::sc_time* delay) {
  tlm::tlm_generic_payload t;
  t.set_command(cmd);
  t.set_address(addr);
  t.set_data_ptr(static_cast<unsigned char*>(data));
  t.set_data_length(len);
  t.set_streaming_width(len);
  t.set_byte_enable_ptr(nullptr);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  socket->b_transport(t, *delay);
  return t.get_response_status();
}

}  // namespace tpu::sim
