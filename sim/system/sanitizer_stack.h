#pragma once

namespace tpu::sim {

// Call on the main thread each time sc_start() returns. SystemC runs its processes on
// stacks of its own and tells AddressSanitizer of each switch, but Debian's SystemC 2.3.4
// leaves ASan believing, back on the main thread, that the stack spans from the main
// stack's bottom to the top of the last process's stack; the next exception thrown on
// the main thread then makes ASan unpoison a nonsense range and report a false
// stack-buffer-overflow. This switches ASan's notion of the current stack back to the
// main thread's own. Without ASan it does nothing.
void ResetSanitizerStack();

}  // namespace tpu::sim
