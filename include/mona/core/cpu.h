// Which compiled version of the core kernels runs on this machine.
#pragma once

namespace mona::core {

/// The instruction set the core kernels use on this CPU: "x86-64-v3 (AVX2, FMA)" when the
/// library was built with kernel clones (CMake option MONA_KERNEL_CLONES, on by default;
/// off in sanitizer builds) and the CPU supports x86-64-v3, else "baseline". The choice
/// is made once, when the program loads (src/core/targets.h). Results of the two versions
/// differ only by rounding (fused multiply-adds). Never throws.
const char* kernel_target();

}  // namespace mona::core
