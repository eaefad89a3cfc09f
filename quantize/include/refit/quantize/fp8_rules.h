#pragma once
// The arithmetic of refit's bf16 -> fp8 quantizers, written once for both compilers: the CPU
// quantizer (quantize.h) and the NCCL executor's CUDA kernel call these very functions, so the two
// agree bit for bit and the kernel's maths is tested on machines without a GPU. C++20 only (nvcc
// compiles it) and no refit headers beyond this one. docs/quantization.md says which framework
// function each rule follows and why.
//
// A scale block is quantized in three steps:
//   1. amax_bits: the largest |x| of the block as bf16 bits (integer max of the sign-cleared bits:
//      for non-negative IEEE values the integer order is the numeric order, and NaN bits are above
//      Inf's, so a NaN anywhere in the block wins, as torch.amax propagates NaN);
//   2. block_scale: from amax, the multiplier every element is scaled by and the scale stored;
//   3. quantize_element: fp32(x) * multiplier, rounded to fp8 e4m3fn.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define REFIT_QUANTIZE_HD __host__ __device__
#else
#define REFIT_QUANTIZE_HD
#endif

namespace refit {

// How a bf16 weight becomes fp8 (scheme.h has its names, dtypes and block shapes).
enum class Scheme : std::uint8_t {
  kFp8Block128,  // e4m3 values, one fp32 scale_inv per 128x128 block (DeepSeek-V3, vLLM block FP8)
  kMxfp8,        // e4m3 values, one e8m0 scale per 32 elements of the last dim (OCP MX v1.0)
};

namespace fp8 {

inline constexpr std::uint8_t kE4m3Nan = 0x7F;         // e4m3fn's NaN; it has no infinity
inline constexpr std::uint8_t kE4m3Max = 0x7E;         // +448, the largest finite e4m3fn
inline constexpr std::uint32_t kFp32Nan = 0x7FC00000;  // the quiet NaN refit writes as an fp32 scale
inline constexpr std::uint8_t kE8m0Nan = 0xFF;         // e8m0's NaN
inline constexpr std::uint16_t kBf16Inf = 0x7F80;      // |x| bits above this are NaN

REFIT_QUANTIZE_HD inline float float_from_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

REFIT_QUANTIZE_HD inline std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
#endif
}

// IEEE operations rounded to nearest even on both sides, whatever nvcc's -prec-div says, and never
// contracted into a fused multiply-add (which would round once where the reference rounds twice).
REFIT_QUANTIZE_HD inline float divide_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

REFIT_QUANTIZE_HD inline float multiply_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

REFIT_QUANTIZE_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// GCC 12 vectorises std::min but not the equivalent conditional in fp32_to_e4m3's loop (it leaves
// a branch there); CUDA has its own unsigned min.
REFIT_QUANTIZE_HD inline std::uint32_t min_u32(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return min(a, b);
#else
  return std::min(a, b);
#endif
}

// bf16 is the top half of an fp32: widening is exact.
REFIT_QUANTIZE_HD inline float bf16_to_fp32(std::uint16_t bits) {
  return float_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

// |x| as bf16 bits, the quantity step 1 maximises.
REFIT_QUANTIZE_HD inline std::uint16_t abs_bits(std::uint16_t bits) { return bits & 0x7FFF; }

// fp32 -> e4m3fn, round to nearest even, saturating: finite values and infinities beyond 448
// become +-448 (what the OCP MX spec and torch's saturating cast do; the block rules below never
// produce a finite value that rounds past 448 except through mxfp8's power-of-two scale), NaN
// becomes 0x7F whatever its sign or payload (one NaN encoding, so CPU and GPU bytes agree).
// Branch-free selects so that the compiler vectorises the loops that call it.
REFIT_QUANTIZE_HD inline std::uint8_t fp32_to_e4m3(float x) {
  const std::uint32_t bits = bits_of(x);
  const std::uint32_t sign = (bits >> 24) & 0x80;
  const std::uint32_t a = bits & 0x7FFFFFFF;
  // |x| >= 2^-6, e4m3's normal range: keep 3 of fp32's 23 mantissa bits, rounding the 20 dropped
  // ones to nearest even (the carry may ripple into the exponent, which is right), then rebias the
  // exponent from 127 to 7 (120 << 3 = 960 in the shifted encoding).
  const std::uint32_t rounded = (a + 0x7FFFF + ((a >> 20) & 1)) >> 20;
  const std::uint32_t normal = min_u32(rounded - 960, kE4m3Max);
  // |x| < 2^-6: e4m3 subnormals are n * 2^-9 with n = 0..7 (n = 8 is 2^-6, the smallest normal,
  // encoded 0x08 too). Adding 2^14, whose fp32 ulp is 2^-9, rounds |x| to a multiple of 2^-9,
  // nearest even, and leaves n in the low mantissa bits.
  const float magic = 16384.0f;  // 2^14
  const std::uint32_t sub = bits_of(add_rn(float_from_bits(a), magic)) - bits_of(magic);
  const std::uint32_t code = a < 0x3C800000 ? sub : normal;
  return static_cast<std::uint8_t>(a > 0x7F800000 ? kE4m3Nan : (code | sign));
}

// What step 2 gives: every element of the block is fp32(x) * multiplier before rounding, and the
// block's scale is stored as `scale_bits` (fp32 bits for block128, the e8m0 byte for mxfp8).
struct BlockScale {
  float multiplier = 1.0f;
  std::uint32_t scale_bits = 0;
};

// fp8-block128, as vLLM's per_block_cast_to_fp8 (use_ue8m0=False) computes it in fp32:
//   amax = max(max|x|, 1e-4); scale_inv = amax / 448; multiplier = 1 / scale_inv.
// All-zero (or tiny) blocks get amax 1e-4. NaN in the block: amax, scale and multiplier are NaN,
// so every value is NaN. Inf (no NaN): scale_inv = +Inf, multiplier = 0, so the infinities
// become NaN (Inf * 0) and finite values +-0.
REFIT_QUANTIZE_HD inline BlockScale block128_scale(std::uint16_t amax_bits) {
  const float kMinAmax = 1e-4f;
  const float amax = bf16_to_fp32(amax_bits);
  // Written so that a NaN amax stays NaN, as torch.clamp keeps it.
  const float clamped = amax < kMinAmax ? kMinAmax : amax;
  const float scale_inv = divide_rn(clamped, 448.0f);
  const float multiplier = divide_rn(1.0f, scale_inv);
  return {multiplier, amax_bits > kBf16Inf ? kFp32Nan : bits_of(scale_inv)};
}

// mxfp8, as OCP MX v1.0 section 6.3 defines it and torchao's to_mx (ScaleCalculationMode.FLOOR)
// computes it: the scale is 2^(floor(log2(amax)) - 8), 8 being e4m3's largest exponent, clamped
// to e8m0's smallest, 2^-127 (byte 0), which zero and bf16-subnormal blocks get. floor(log2) of a
// normal amax is its exponent field minus 127, so the biased scale byte is exponent - 8. The
// multiplier 2^(127 - byte) is a normal fp32 for every byte this gives (0..246), so x * multiplier
// is exact and only the e4m3 rounding (which saturates: values reach up to 2^9) rounds. A NaN or
// Inf in the block: scale byte 0xFF (NaN) and, through a NaN multiplier, every value NaN.
REFIT_QUANTIZE_HD inline BlockScale mxfp8_scale(std::uint16_t amax_bits) {
  if (amax_bits >= kBf16Inf) return {float_from_bits(kFp32Nan), kE8m0Nan};
  const int exponent = amax_bits >> 7;
  const int byte = exponent > 8 ? exponent - 8 : 0;
  return {float_from_bits(static_cast<std::uint32_t>(254 - byte) << 23), static_cast<std::uint32_t>(byte)};
}

REFIT_QUANTIZE_HD inline BlockScale block_scale(Scheme scheme, std::uint16_t amax_bits) {
  return scheme == Scheme::kMxfp8 ? mxfp8_scale(amax_bits) : block128_scale(amax_bits);
}

// Step 3 for one element.
REFIT_QUANTIZE_HD inline std::uint8_t quantize_element(std::uint16_t bits, float multiplier) {
  return fp32_to_e4m3(multiply_rn(bf16_to_fp32(bits), multiplier));
}

// Bytes of one stored scale: fp32 for block128, e8m0 for mxfp8.
REFIT_QUANTIZE_HD inline int scale_bytes(Scheme scheme) { return scheme == Scheme::kMxfp8 ? 1 : 4; }

// Writes a block's scale at `out` (scale_bytes(scheme) bytes, host byte order as torch stores it).
REFIT_QUANTIZE_HD inline void store_scale(Scheme scheme, const BlockScale& s, unsigned char* out) {
  if (scheme == Scheme::kMxfp8) {
    out[0] = static_cast<unsigned char>(s.scale_bits);
  } else {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned char>(s.scale_bits >> (8 * i));
  }
}

}  // namespace fp8
}  // namespace refit
