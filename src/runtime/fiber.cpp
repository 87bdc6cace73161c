#include "pypto_pro/runtime/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <stdexcept>

namespace pypto_pro::runtime {

Fiber::Fiber(size_t stack_bytes) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  // One inaccessible page below the stack turns an overflow into a clean SIGSEGV instead of
  // silently overwriting whatever the allocator put there.
  mapping_bytes_ = stack_bytes_ + page;
  mapping_ = ::mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw std::bad_alloc();
  }
  ::mprotect(mapping_, page, PROT_NONE);
}

Fiber::~Fiber() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
}

void Fiber::Start(Function fn, void* arg) {
  if (state_ != State::kIdle && state_ != State::kReady) throw std::logic_error("Fiber::Start on a live fiber");
  fn_ = fn;
  arg_ = arg;
  ::getcontext(&context_);
  context_.uc_stack.ss_sp = static_cast<char*>(mapping_) + (mapping_bytes_ - stack_bytes_);
  context_.uc_stack.ss_size = stack_bytes_;
  context_.uc_link = &caller_;  // the function's return resumes whoever ran the fiber last
  const auto self = reinterpret_cast<uintptr_t>(this);
  // makecontext passes int arguments only: the pointer travels in two halves.
  ::makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::Entry), 2, unsigned(self & 0xffffffffu),
                unsigned(self >> 32));
  state_ = State::kReady;
}

void Fiber::Entry(unsigned lo, unsigned hi) {
  Fiber* self = reinterpret_cast<Fiber*>((uintptr_t(hi) << 32) | uintptr_t(lo));
  self->fn_(self->arg_);
  self->state_ = State::kIdle;
}

void Fiber::Resume() {
  if (state_ != State::kReady && state_ != State::kSuspended) throw std::logic_error("Fiber::Resume: nothing to run");
  state_ = State::kRunning;
  ::swapcontext(&caller_, &context_);
}

void Fiber::Suspend() {
  state_ = State::kSuspended;
  ::swapcontext(&context_, &caller_);
  state_ = State::kRunning;
}

void Fiber::Discard() {
  if (state_ != State::kReady) throw std::logic_error("Fiber::Discard: the fiber has frames");
  state_ = State::kIdle;
}

}  // namespace pypto_pro::runtime
