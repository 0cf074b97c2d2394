// What the one-channel convolution's forward loops (conv_one_channel.cc) and its filter
// gradient (conv_one_channel_grad.cc) share: the vector widths and when the wide one runs.
#pragma once

#include <cstdint>

#include "core/backend/cpu/lanes.h"
#include "core/backend/portable/conv_ops.h"

namespace cadre::backend::cpu::conv_one_channel {

using Narrow = Lanes<8>;
using Wide = Lanes<16>;

// The wide loops are compiled for AVX-512 inside functions with this target and run where
// the CPU has it: 16 output channels per vector instead of 8. Each lane is one channel
// with the same arithmetic in the same order, so both widths give the same bits.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CADRE_WIDE_LANES 1
#define CADRE_WIDE_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))
#else
#define CADRE_WIDE_LANES 0
#define CADRE_WIDE_TARGET
#endif

// Whether the wide lanes run for g: its channels fill them, the CPU has them and
// set_wide_lanes left them on.
bool use_wide(const portable::ConvGeometry& g);

// The filter sizes and channel counts whose sums stay in registers.
inline bool in_registers(const portable::ConvGeometry& g) {
  return g.o % Narrow::kLanes == 0 && ((g.kh == 3 && g.kw == 3) || (g.kh == 2 && g.kw == 2));
}

}  // namespace cadre::backend::cpu::conv_one_channel
