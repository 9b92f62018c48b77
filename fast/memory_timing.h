// The timing of one external-memory port as the fast engine sees it: the channel rule both
// engines share (contract/memory_channel.h) and the rows in flight, without the bytes, which
// the fast engine moves per instruction instead. Read rows come back in order, at most one
// row per cycle (per port, where several ports share the channel).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "contract/memory_channel.h"

namespace tpu::fast {

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// What the cores ask of the external memories in a cycle: bit c of `host`, core c's host
// DMA asks the host memory's port (of `host_writing`: to write); bit p of `weight`, weight-
// memory port p asks (of `weight_writing`: to write).
struct Requests {
  uint32_t host = 0, host_writing = 0;
  uint64_t weight = 0, weight_writing = 0;
};

// What the memories answer them: the core granted the host port and whether the memory
// takes its request, the core to which the host memory presents a read row (-1: none), the
// weight-memory ports taken and those presented a read row.
struct Answers {
  int host_grant = -1, host_resp = -1;
  bool host_taken = false;
  uint64_t weight_taken = 0, weight_resp = 0;
  bool operator==(const Answers& o) const {
    return host_grant == o.host_grant && host_resp == o.host_resp && host_taken == o.host_taken &&
           weight_taken == o.weight_taken && weight_resp == o.weight_resp;
  }
};

class MemoryTiming {
 public:
  // `ports` ports into the one channel (a port per weight DMA for the weight memory: one a
  // matrix unit), each with its read rows in order.
  MemoryTiming(uint64_t row_bytes, uint64_t bytes_per_cycle, uint64_t latency_cycles, int ports = 1)
      : channel_(row_bytes, bytes_per_cycle, latency_cycles),
        turns_(ports),
        queues_(static_cast<size_t>(ports)) {}

  void Reset() {
    channel_.Reset();
    turns_.Reset();
    for (Queue& q : queues_) q.head = q.tail = 0;
  }
  bool Ready(uint64_t cycle) const { return channel_.Ready(cycle); }
  // A request accepted at the clock edge that ends `cycle`, tagged with who asked;
  // a read row goes to `port`'s rows.
  void Accept(uint64_t cycle, bool read, int tag = 0, int port = 0) {
    const uint64_t due = channel_.Accept(cycle);
    if (read) queues_[static_cast<size_t>(port)].Push(due, tag);
  }
  // The requests of the asking ports (bit p: port p; set in `writing` where it writes),
  // taken in turn while the channel can (hw::PortTurns). Returns the ports taken.
  uint64_t AcceptRequests(uint64_t cycle, uint64_t asking, uint64_t writing) {
    return turns_.Serve(
        asking, [&] { return channel_.Ready(cycle); },
        [&](int p) { Accept(cycle, (writing >> p & 1) == 0, p, p); });
  }
  // The ports AcceptRequests would take, without taking them.
  uint64_t WouldAccept(uint64_t cycle, uint64_t asking) const {
    hw::MemoryChannel channel = channel_;
    hw::PortTurns turns = turns_;
    return turns.Serve(
        asking, [&] { return channel.Ready(cycle); }, [&](int) { channel.Accept(cycle); });
  }
  // The tag of the read row `port` presents to the chip during `cycle`, or -1 (once per
  // cycle and port).
  int Respond(uint64_t cycle, int port = 0) {
    const int tag = Presents(cycle, port);
    if (tag >= 0) ++queues_[static_cast<size_t>(port)].head;
    return tag;
  }
  // What Respond would return, without taking the row.
  int Presents(uint64_t cycle, int port = 0) const {
    const Queue& q = queues_[static_cast<size_t>(port)];
    if (q.head == q.tail || q.due[q.head & (q.due.size() - 1)] > cycle) return -1;
    return q.tags[q.head & (q.due.size() - 1)];
  }
  // The first cycle after `cycle` in which Ready() or Respond() can change.
  uint64_t NextEvent(uint64_t cycle) const {
    const uint64_t free = channel_.FreeFrom();
    uint64_t next = free > cycle ? free : kNever;
    for (const Queue& q : queues_) {
      if (q.head == q.tail) continue;
      const uint64_t due = q.due[q.head & (q.due.size() - 1)];
      if (due < next) next = due;
    }
    return next;
  }

 private:
  // A port's read rows in flight: a ring of due cycles and tags.
  struct Queue {
    std::vector<uint64_t> due = std::vector<uint64_t>(64);  // a power of two
    std::vector<int> tags = std::vector<int>(64);
    uint64_t head = 0, tail = 0;
    void Push(uint64_t d, int tag) {
      if (tail - head == due.size()) Grow();
      due[tail & (due.size() - 1)] = d;
      tags[tail++ & (due.size() - 1)] = tag;
    }
    void Grow() {
      std::vector<uint64_t> bigger(due.size() * 2);
      std::vector<int> bigger_tags(due.size() * 2);
      for (uint64_t i = head; i < tail; ++i) {
        bigger[i - head] = due[i & (due.size() - 1)];
        bigger_tags[i - head] = tags[i & (due.size() - 1)];
      }
      tail -= head;
      head = 0;
      due.swap(bigger);
      tags.swap(bigger_tags);
    }
  };

  hw::MemoryChannel channel_;
  hw::PortTurns turns_;
  std::vector<Queue> queues_;  // per port
};

}  // namespace tpu::fast
