// Host (consumer) side of the device->host command FIFO; protocol in src/kernels/abi/fifo.h. Used by
// the proxy thread only (one consumer), so nothing here needs a lock.
#pragma once
#include <stdint.h>
#include <deque>
#include "mkccl.h"
#include "kernels/abi/fifo.h"

namespace mkccl {

class FifoReader {
 public:
  void init(FifoCmd* slots, FifoCtl* ctl, uint64_t size) {
    slots_ = slots;
    ctl_ = ctl;
    size_ = size;
    tail_ = __atomic_load_n(&ctl->tail, __ATOMIC_ACQUIRE);
    done_ = __atomic_load_n(&ctl->done, __ATOMIC_ACQUIRE);
    finished_.assign(tail_ - done_, 0);
  }

  // Copies up to `max` published commands in ticket order into out, clears their slots, then
  // publishes the new tail (once for the batch). Returns how many; *first = ticket of out[0].
  int poll(FifoCmd* out, int max, uint64_t* first) {
    *first = tail_;
    int n = 0;
    while (n < max) {
      FifoCmd* s = &slots_[tail_ & (size_ - 1)];
      const uint64_t hdr = __atomic_load_n(&s->hdr, __ATOMIC_ACQUIRE);
      if (hdr == 0) break;
      out[n].hdr = hdr;
      out[n].srcOff = s->srcOff;
      out[n].dstOff = s->dstOff;
      out[n].bytes = s->bytes;
      __atomic_store_n(&s->hdr, 0ull, __ATOMIC_RELAXED);
      ++tail_;
      ++n;
      finished_.push_back(0);
    }
    // Release: the clears above are visible before a producer sees the room they made.
    if (n) __atomic_store_n(&ctl_->tail, tail_, __ATOMIC_RELEASE);
    return n;
  }

  // Ticket t (consumed, not yet completed) has completed: publish the completed prefix.
  void complete(uint64_t t) {
    if (t < done_ || t >= tail_) return;
    finished_[t - done_] = 1;
    const uint64_t before = done_;
    while (!finished_.empty() && finished_.front()) {
      finished_.pop_front();
      ++done_;
    }
    if (done_ != before) __atomic_store_n(&ctl_->done, done_, __ATOMIC_RELEASE);
  }

  // Producers waiting on this FIFO give up (they watch ctl->error).
  void fail(mkcclResult_t code) { __atomic_store_n(&ctl_->error, (uint64_t)code, __ATOMIC_RELEASE); }

  uint64_t tail() const { return tail_; }
  uint64_t done() const { return done_; }
  uint64_t size() const { return size_; }

 private:
  FifoCmd* slots_ = nullptr;
  FifoCtl* ctl_ = nullptr;
  uint64_t size_ = 0, tail_ = 0, done_ = 0;
  std::deque<uint8_t> finished_;  // tickets [done_, tail_): 1 once completed
};

}  // namespace mkccl
