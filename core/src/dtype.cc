#include "refit/core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace refit {
namespace {

struct DTypeInfo {
  DType type;
  std::int64_t size;
  std::string_view name;
};

constexpr std::array<DTypeInfo, 11> kInfo{{
    {DType::kBF16, 2, "bf16"},
    {DType::kFP16, 2, "fp16"},
    {DType::kFP32, 4, "fp32"},
    {DType::kFP64, 8, "fp64"},
    {DType::kFP8E4M3, 1, "fp8_e4m3"},
    {DType::kFP8E5M2, 1, "fp8_e5m2"},
    {DType::kInt8, 1, "int8"},
    {DType::kUInt8, 1, "uint8"},
    {DType::kInt32, 4, "int32"},
    {DType::kInt64, 8, "int64"},
    {DType::kFP8E8M0, 1, "fp8_e8m0"},
}};

struct Alias {
  std::string_view alias;
  DType type;
};

// Spellings used by torch (torch_dtype in config.json) and safetensors.
constexpr std::array<Alias, 16> kAliases{{
    {"bfloat16", DType::kBF16},
    {"float16", DType::kFP16},
    {"half", DType::kFP16},
    {"float32", DType::kFP32},
    {"float", DType::kFP32},
    {"float64", DType::kFP64},
    {"double", DType::kFP64},
    {"float8_e4m3fn", DType::kFP8E4M3},
    {"f8_e4m3", DType::kFP8E4M3},
    {"float8_e5m2", DType::kFP8E5M2},
    {"f8_e5m2", DType::kFP8E5M2},
    {"float8_e8m0fnu", DType::kFP8E8M0},
    {"f8_e8m0", DType::kFP8E8M0},
    {"bf16_t", DType::kBF16},
    {"int", DType::kInt32},
    {"long", DType::kInt64},
}};

const DTypeInfo& info(DType t) { return kInfo[static_cast<std::size_t>(t)]; }

}  // namespace

std::int64_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }

std::span<const DType> all_dtypes() {
  static constexpr auto kAll = [] {
    std::array<DType, kInfo.size()> out{};
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = kInfo[i].type;
    return out;
  }();
  return kAll;
}

Result<DType> parse_dtype(std::string_view name) {
  std::string lower(name);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.starts_with("torch.")) lower.erase(0, 6);
  for (const auto& i : kInfo)
    if (i.name == lower) return i.type;
  for (const auto& a : kAliases)
    if (a.alias == lower) return a.type;
  return unsupported("unknown dtype '" + std::string(name) +
                     "' (expected one of bf16, fp16, fp32, fp64, fp8_e4m3, fp8_e5m2, int8, uint8, "
                     "int32, int64, fp8_e8m0)");
}

}  // namespace refit
