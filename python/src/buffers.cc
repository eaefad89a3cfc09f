#include "buffers.h"

#include <map>
#include <optional>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/stl/string.h>

#include "refit/core/try.h"

namespace refit::python {
namespace {

namespace dl = nb::dlpack;
using Code = dl::dtype_code;

// DLPack's device types: host memory (plain, or CUDA-pinned) and CUDA device memory.
constexpr int kDlCpu = 1;
constexpr int kDlCuda = 2;
constexpr int kDlCudaHost = 3;

std::string dlpack_dtype_name(dl::dtype d) {
  const auto code = static_cast<Code>(d.code);
  std::string name;
  switch (code) {
    case Code::Int:
      name = fmt::format("int{}", d.bits);
      break;
    case Code::UInt:
      name = fmt::format("uint{}", d.bits);
      break;
    case Code::Float:
      name = fmt::format("float{}", d.bits);
      break;
    case Code::Bfloat:
      name = fmt::format("bfloat{}", d.bits);
      break;
    case Code::Bool:
      name = "bool";
      break;
    case Code::Float8_E4M3FN:
      name = "float8_e4m3fn";
      break;
    case Code::Float8_E4M3:
      name = "float8_e4m3";
      break;
    case Code::Float8_E5M2:
      name = "float8_e5m2";
      break;
    default:
      name = fmt::format("DLPack type code {} of {} bits", d.code, d.bits);
  }
  return d.lanes > 1 ? fmt::format("{}x{}", name, d.lanes) : name;
}

// The array dtypes that hold a tensor of `t`: its own, and for the types numpy lacks (bf16, fp8)
// an unsigned integer of the same width holding the bits.
std::vector<dl::dtype> accepted(DType t) {
  const auto of = [](Code c, std::uint8_t bits) { return dl::dtype{static_cast<std::uint8_t>(c), bits, 1}; };
  switch (t) {
    case DType::kBF16:
      return {of(Code::Bfloat, 16), of(Code::UInt, 16)};
    case DType::kFP16:
      return {of(Code::Float, 16)};
    case DType::kFP32:
      return {of(Code::Float, 32)};
    case DType::kFP64:
      return {of(Code::Float, 64)};
    case DType::kFP8E4M3:
      return {of(Code::Float8_E4M3FN, 8), of(Code::Float8_E4M3, 8), of(Code::UInt, 8)};
    case DType::kFP8E5M2:
      return {of(Code::Float8_E5M2, 8), of(Code::UInt, 8)};
    case DType::kInt8:
      return {of(Code::Int, 8)};
    case DType::kUInt8:
      return {of(Code::UInt, 8)};
    case DType::kInt32:
      return {of(Code::Int, 32)};
    case DType::kInt64:
      return {of(Code::Int, 64)};
    case DType::kFP8E8M0:
      return {of(Code::Float8_E8M0FNU, 8), of(Code::UInt, 8)};
  }
  return {};
}

template <class Array>
Shape shape_of(const Array& a) {
  Shape s;
  for (std::size_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<std::int64_t>(a.shape(i)));
  return s;
}

template <class Array>
bool row_major(const Array& a) {
  if (a.size() == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// Where the tensor's box is, for a rank that holds (or needs) part of it.
struct Wanted {
  std::uint32_t tensor = 0;
  Box box;
};

// Checks one array against the rank's box of its tensor; returns its memory kind.
template <class Array>
Result<MemoryKind> check_array(const Array& a, const TensorSpec& t, const Box& box,
                               const std::string& where) {
  const Shape shape = shape_of(a);
  if (shape != box.extent)
    return mismatch(fmt::format("{}: shape [{}] is not the rank's box of the tensor, {} (extent [{}])", where,
                                fmt::join(shape, ", "), box.to_string(), fmt::join(box.extent, ", ")));
  const auto dtypes = accepted(t.dtype);
  if (std::ranges::find(dtypes, a.dtype()) == dtypes.end()) {
    std::vector<std::string> names;
    for (const auto& d : dtypes) names.push_back(dlpack_dtype_name(d));
    return mismatch(fmt::format("{}: dtype {} does not hold the tensor's {} (expected {})", where,
                                dlpack_dtype_name(a.dtype()), dtype_name(t.dtype), fmt::join(names, " or ")));
  }
  if (!row_major(a)) {
    std::vector<std::int64_t> strides;
    for (std::size_t i = 0; i < a.ndim(); ++i) strides.push_back(a.stride(i));
    return mismatch(
        fmt::format("{}: not contiguous in row-major order (strides [{}] elements); pass a "
                    "contiguous copy",
                    where, fmt::join(strides, ", ")));
  }
  const auto need = box.volume() * dtype_size(t.dtype);
  if (static_cast<std::int64_t>(a.nbytes()) != need)
    return mismatch(fmt::format("{}: holds {} bytes, the box needs {}", where, a.nbytes(), need));
  switch (a.device_type()) {
    case kDlCpu:
    case kDlCudaHost:
      return MemoryKind::kHost;
    case kDlCuda:
      return MemoryKind::kCuda;
    default:
      return unsupported(fmt::format("{}: memory of DLPack device type {} (refit moves host and CUDA memory)",
                                     where, a.device_type()));
  }
}

}  // namespace

Result<RankArrays> rank_arrays(const ReshardProblem& problem, Rank rank, const nb::dict& arrays) {
  if (rank.value < 0 || rank.value >= problem.world_size())
    return out_of_range(
        fmt::format("rank {} is not in the problem's {} ranks", rank.value, problem.world_size()));
  const bool source = problem.is_source(rank);
  const std::string_view side = source ? "training" : "inference";
  std::map<std::string, Wanted, std::less<>> wanted;  // tensor name -> the rank's non-empty box
  std::map<std::string, std::uint32_t, std::less<>> index;
  for (std::uint32_t t = 0; t < problem.tensors().size(); ++t) {
    const auto& tr = problem.tensors()[t];
    index.emplace(tr.tensor.name, t);
    const Layout& layout = source ? tr.source : tr.destination;
    if (!layout.mesh().position_of_rank(rank)) continue;
    const Box box = REFIT_TRY(layout.local_box(rank));
    if (!box.empty()) wanted.emplace(tr.tensor.name, Wanted{.tensor = t, .box = box});
  }
  RankArrays out;
  std::optional<MemoryKind> memory;
  std::map<std::string, bool, std::less<>> given;
  for (const auto& [key, value] : arrays) {
    if (!nb::isinstance<nb::str>(key))
      return invalid(fmt::format("rank {}: buffers are keyed by tensor name, got a key of type {}",
                                 rank.value, nb::type_name(key.type()).c_str()));
    const std::string name = nb::cast<std::string>(key);
    const std::string where = fmt::format("buffer '{}' (rank {})", name, rank.value);
    if (!index.contains(name))
      return not_found(fmt::format("{}: no tensor of that name in the problem", where));
    const auto w = wanted.find(name);
    nb::ndarray<nb::ro> readable;
    if (!nb::try_cast(value, readable))
      return invalid(
          fmt::format("{}: a {} is not an array that exports DLPack (a numpy array, a torch tensor, ...)",
                      where, nb::type_name(value.type()).c_str()));
    if (w == wanted.end()) {
      if (readable.size() == 0) continue;  // an empty array for an empty box
      return mismatch(
          fmt::format("{}: {} rank {} holds no part of tensor '{}'", where, side, rank.value, name));
    }
    const TensorSpec& spec = problem.tensors()[w->second.tensor].tensor;
    std::span<std::byte> bytes;
    MemoryKind kind{};
    if (source) {
      kind = REFIT_TRY(check_array(readable, spec, w->second.box, where));
      bytes = {static_cast<std::byte*>(const_cast<void*>(readable.data())), readable.nbytes()};
      out.sources.push_back(readable);
    } else {
      nb::ndarray<> writable;
      if (!nb::try_cast(value, writable))
        return invalid(
            fmt::format("{}: read-only, but an inference rank's buffers receive the tensor", where));
      kind = REFIT_TRY(check_array(writable, spec, w->second.box, where));
      bytes = {static_cast<std::byte*>(writable.data()), writable.nbytes()};
      out.destinations.push_back(writable);
    }
    if (memory && *memory != kind)
      return mismatch(fmt::format("{}: {} memory, while the rank's other buffers are {} memory", where,
                                  kind == MemoryKind::kCuda ? "CUDA" : "host",
                                  *memory == MemoryKind::kCuda ? "CUDA" : "host"));
    memory = kind;
    given[name] = true;
    (source ? out.buffers.sources : out.buffers.destinations)
        .push_back(ShardBuffer{.tensor = w->second.tensor, .box = w->second.box, .bytes = bytes});
  }
  for (const auto& [name, w] : wanted)
    if (!given.contains(name))
      return not_found(fmt::format("rank {}: no buffer for tensor '{}' (the {} rank {} its box {})",
                                   rank.value, name, side, source ? "holds" : "needs", w.box.to_string()));
  out.buffers.memory = memory.value_or(MemoryKind::kHost);
  return out;
}

}  // namespace refit::python
