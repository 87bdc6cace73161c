// What a process forked from one that ran kernels needs: only the forking thread exists in the
// child, so locks other threads held and threads the runtime counts on are gone there.
#pragma once

#include <cstdint>
#include <mutex>

namespace pypto_pro {

// 0 in the original process; bumped in every forked child (and its children). State that other
// threads may have left half-done (a compile slot, a lock of a compile in flight) compares it.
uint64_t ForkGeneration();

// Re-creates `mutex` unlocked in every forked child. For process-wide mutexes held only briefly
// (output, report files) whose holder may have been another thread at the fork.
void ResetInForkedChild(std::mutex* mutex);

}  // namespace pypto_pro
