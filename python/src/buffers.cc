#include "buffers.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/stl/string.h>

#include "refit/core/try.h"
#include "refit/executors/framework_buffers.h"
#include "writable_memory.h"

namespace refit::python {
namespace {

namespace dl = nb::dlpack;
using Code = dl::dtype_code;

// DLPack's device types: host memory (plain, or CUDA-pinned) and CUDA device memory.
constexpr int kDlCpu = 1;
constexpr int kDlCuda = 2;
constexpr int kDlCudaHost = 3;

// DLPack's type codes by name; a family of widths (int, float...) is named with its bits.
struct DlpackTypeName {
  Code code;
  std::string_view name;
  bool with_bits;
};
constexpr DlpackTypeName kDlpackTypeNames[] = {
    {Code::Int, "int", true},
    {Code::UInt, "uint", true},
    {Code::Float, "float", true},
    {Code::Bfloat, "bfloat", true},
    {Code::Complex, "complex", true},
    {Code::Bcomplex, "bcomplex", true},
    {Code::Bool, "bool", false},
    {Code::Float8_E4M3FN, "float8_e4m3fn", false},
    {Code::Float8_E4M3, "float8_e4m3", false},
    {Code::Float8_E5M2, "float8_e5m2", false},
    {Code::Float8_E8M0FNU, "float8_e8m0fnu", false},
    {Code::Float8_E4M3FNUZ, "float8_e4m3fnuz", false},
    {Code::Float8_E5M2FNUZ, "float8_e5m2fnuz", false},
    {Code::Float8_E4M3B11FNUZ, "float8_e4m3b11fnuz", false},
    {Code::Float8_E3M4, "float8_e3m4", false},
    {Code::Float6_E2M3FN, "float6_e2m3fn", false},
    {Code::Float6_E3M2FN, "float6_e3m2fn", false},
    {Code::Float4_E2M1FN, "float4_e2m1fn", false},
};

std::string dlpack_dtype_name(dl::dtype d) {
  const auto* entry = std::ranges::find(kDlpackTypeNames, static_cast<Code>(d.code), &DlpackTypeName::code);
  const std::string name = entry == std::end(kDlpackTypeNames)
                               ? fmt::format("DLPack type code {} of {} bits", d.code, d.bits)
                           : entry->with_bits ? fmt::format("{}{}", entry->name, d.bits)
                                              : std::string(entry->name);
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

// What an array must be: its shape and dtype, and how messages name them.
struct Expected {
  Shape shape;
  DType dtype;
  std::string shape_is;  // "the rank's box of the tensor, [0:64] (extent [64])", "the parameter's [128, 64]"
  std::string_view owner;  // whose dtype it is: "tensor", "parameter"
};

// Checks one array against what it must be; returns its memory kind.
template <class Array>
Result<MemoryKind> check_array(const Array& a, const Expected& e, const std::string& where) {
  const Shape shape = shape_of(a);
  if (shape != e.shape)
    return mismatch(fmt::format("{}: shape [{}] is not {}", where, fmt::join(shape, ", "), e.shape_is));
  const auto dtypes = accepted(e.dtype);
  if (std::ranges::find(dtypes, a.dtype()) == dtypes.end()) {
    std::vector<std::string> names;
    for (const auto& d : dtypes) names.push_back(dlpack_dtype_name(d));
    return mismatch(fmt::format("{}: dtype {} does not hold the {}'s {} (expected {})", where,
                                dlpack_dtype_name(a.dtype()), e.owner, dtype_name(e.dtype),
                                fmt::join(names, " or ")));
  }
  if (!row_major(a)) {
    std::vector<std::int64_t> strides;
    for (std::size_t i = 0; i < a.ndim(); ++i) strides.push_back(a.stride(i));
    return mismatch(
        fmt::format("{}: not contiguous in row-major order (strides [{}] elements); pass a "
                    "contiguous copy",
                    where, fmt::join(strides, ", ")));
  }
  const auto need = element_count(e.shape) * dtype_size(e.dtype);
  if (static_cast<std::int64_t>(a.nbytes()) != need)
    return mismatch(fmt::format("{}: holds {} bytes, {} needs {}", where, a.nbytes(), e.shape_is, need));
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

// The name a buffer is keyed by.
Result<std::string> key_name(nb::handle key, Rank rank, std::string_view keyed_by) {
  if (!nb::isinstance<nb::str>(key))
    return invalid(fmt::format("rank {}: buffers are keyed by {} name, got a key of type {}", rank.value,
                               keyed_by, nb::type_name(key.type()).c_str()));
  // A str with a lone surrogate has no UTF-8 spelling, and so names no tensor or parameter.
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(key.ptr(), &size);
  if (text == nullptr) {
    PyErr_Clear();
    return invalid(fmt::format("rank {}: buffer key {}: not text a {} name can be (it has no UTF-8 spelling)",
                               rank.value, nb::repr(key).c_str(), keyed_by));
  }
  return std::string(text, static_cast<std::size_t>(size));
}

// str(value.<name>), or "" when it has no such attribute, or reading or printing it raised (it
// only describes an array being refused).
std::string attribute_text(nb::handle value, const char* name) {
  const auto attribute = nb::steal(PyObject_GetAttrString(value.ptr(), name));
  if (!attribute.is_valid()) {
    PyErr_Clear();
    return {};
  }
  const auto text = nb::steal(PyObject_Str(attribute.ptr()));
  Py_ssize_t size = 0;
  const char* utf8 = text.is_valid() ? PyUnicode_AsUTF8AndSize(text.ptr(), &size) : nullptr;
  if (utf8 == nullptr) {
    PyErr_Clear();
    return {};
  }
  return std::string(utf8, static_cast<std::size_t>(size));
}

// Whether `value` is a torch DTensor (it has to_local and device_mesh): its DLPack export has the
// global shape and no memory behind it.
bool is_dtensor(nb::handle value) {
  return PyObject_HasAttrString(value.ptr(), "to_local") == 1 &&
         PyObject_HasAttrString(value.ptr(), "device_mesh") == 1;
}

// Why an array that exports DLPack is still no buffer, or "" when it is one: it has no memory
// (torch storage freed by untyped_storage().resize_(0), as FSDP frees unsharded parameters; a
// FakeTensor), which refit would read or write at address 0.
template <class Array>
std::string no_memory(nb::handle value, const Array& a, const std::string& where) {
  if (a.nbytes() == 0 || reinterpret_cast<std::uintptr_t>(a.data()) >= kFirstPage) return {};
  return fmt::format(
      "{}: a {} of {} bytes with no memory (its data pointer is null: a torch storage freed with "
      "untyped_storage().resize_(0), as FSDP frees parameters, or a FakeTensor); pass a tensor that holds "
      "its bytes",
      where, nb::type_name(value.type()).c_str(), a.nbytes());
}

// The array a buffer is, for reading.
Result<nb::ndarray<nb::ro>> readable_array(nb::handle value, const std::string& where) {
  if (is_dtensor(value))
    return invalid(fmt::format(
        "{}: a DTensor, whose elements lie on the ranks of its device mesh, has no memory of this rank's "
        "box; pass this rank's shard, .to_local()",
        where));
  nb::ndarray<nb::ro> readable;
  if (nb::try_cast(value, readable)) {
    if (auto why = no_memory(value, readable, where); !why.empty()) return invalid(std::move(why));
    return readable;
  }
  // A torch tensor on the meta device (or another without memory) exports no DLPack either, and
  // numpy arrays of a dtype DLPack has no code for (ml_dtypes' bfloat16, big-endian) do not.
  const auto device = attribute_text(value, "device");
  const auto dtype = attribute_text(value, "dtype");
  if (device == "meta")
    return invalid(fmt::format(
        "{}: a {} on device meta has no memory (a meta tensor is a shape and a dtype); refit reads and "
        "writes host or CUDA memory: pass a tensor that holds its bytes (e.g. after "
        "module.to_empty(device=...))",
        where, nb::type_name(value.type()).c_str()));
  return invalid(fmt::format(
      "{}: a {}{}{} is not an array that exports DLPack (a numpy array of a native-endian number dtype, a "
      "torch tensor in host or CUDA memory, ...){}",
      where, nb::type_name(value.type()).c_str(), device.empty() ? "" : " on device " + device,
      dtype.empty() ? "" : " of dtype " + dtype,
      dtype.empty() ? "" : "; bf16 and fp8 go as their bits: .view(np.uint16), .view(np.uint8)"));
}

// Checks one array and keeps it in `out` (for as long as the executor may touch it); `receives`
// names what an inference rank's array receives.
struct Taken {
  std::span<std::byte> bytes;
  MemoryKind memory{};
};
Result<Taken> take(nb::handle value, const Expected& e, const std::string& where, bool source,
                   std::string_view receives, RankArrays& out) {
  const auto readable = REFIT_TRY(readable_array(value, where));
  if (source) {
    const auto memory = REFIT_TRY(check_array(readable, e, where));
    out.sources.push_back(readable);
    return Taken{{static_cast<std::byte*>(const_cast<void*>(readable.data())), readable.nbytes()}, memory};
  }
  nb::ndarray<> writable;
  if (!nb::try_cast(value, writable))
    return invalid(fmt::format("{}: read-only, but an inference rank's buffers receive {}", where, receives));
  const auto memory = REFIT_TRY(check_array(writable, e, where));
  out.destinations.push_back(writable);
  return Taken{{static_cast<std::byte*>(writable.data()), writable.nbytes()}, memory};
}

// The kind of memory of a rank's buffers, and how messages name the first buffer that has it.
struct MemorySeen {
  MemoryKind kind{};
  std::string where;
};

// Every buffer of a rank is the same kind of memory; a refusal names both buffers.
Result<void> same_memory(std::optional<MemorySeen>& seen, MemoryKind kind, const std::string& where) {
  const auto name = [](MemoryKind m) { return m == MemoryKind::kCuda ? "CUDA" : "host"; };
  if (seen && seen->kind != kind)
    return mismatch(
        fmt::format("{}: {} memory, while {} is {} memory (a rank's buffers are all host or "
                    "all CUDA memory)",
                    where, name(kind), seen->where, name(seen->kind)));
  if (!seen) seen = MemorySeen{.kind = kind, .where = where};
  return {};
}

// The rank's memory kind (host when it has no buffers), and the buffer messages name for it.
void set_memory(RankArrays& out, const std::optional<MemorySeen>& seen) {
  out.buffers.memory = seen ? seen->kind : MemoryKind::kHost;
  out.named = seen ? seen->where : std::string();
}

Result<void> check_rank(const ReshardProblem& problem, Rank rank) {
  if (rank.value < 0 || rank.value >= problem.world_size())
    return out_of_range(
        fmt::format("rank {} is not in the problem's {} ranks", rank.value, problem.world_size()));
  return {};
}

// An inference rank's buffers each receive bytes of their own: two that share memory would have
// the later write win silently, so they are refused. (A training rank only reads its buffers.)
Result<void> no_overlap(std::vector<std::pair<std::span<std::byte>, std::string>> buffers, Rank rank) {
  std::erase_if(buffers, [](const auto& b) { return b.first.empty(); });
  std::ranges::stable_sort(buffers, {}, [](const auto& b) { return b.first.data(); });
  for (std::size_t i = 1; i < buffers.size(); ++i) {
    const auto& [before, before_name] = buffers[i - 1];
    const auto& [after, after_name] = buffers[i];
    if (before.data() + before.size() > after.data())
      return mismatch(
          fmt::format("rank {}: buffers '{}' and '{}' share memory, but an inference rank's "
                      "buffers each receive bytes of their own (pass separate tensors)",
                      rank.value, before_name, after_name));
  }
  return {};
}

// An inference rank's buffers: apart, and (in host memory) writable.
Result<void> check_destinations(std::vector<std::pair<std::span<std::byte>, std::string>> buffers, Rank rank,
                                MemoryKind memory) {
  if (memory == MemoryKind::kHost) REFIT_TRY(check_writable(buffers, rank));
  return no_overlap(std::move(buffers), rank);
}

// Where the tensor's box is, for a rank that holds (or needs) part of it.
struct Wanted {
  std::uint32_t tensor = 0;
  Box box;
};

}  // namespace

Result<RankArrays> rank_arrays(const ReshardProblem& problem, Rank rank, const nb::dict& arrays) {
  REFIT_TRY(check_rank(problem, rank));
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
    if (!box.empty() && (!source || held_at_source(tr.tensor)))
      wanted.emplace(tr.tensor.name, Wanted{.tensor = t, .box = box});
  }
  RankArrays out;
  std::optional<MemorySeen> memory;
  std::map<std::string, bool, std::less<>> given;
  for (const auto& [key, value] : arrays) {
    const std::string name = REFIT_TRY(key_name(key, rank, "tensor"));
    const std::string where = fmt::format("buffer '{}' (rank {})", name, rank.value);
    if (!index.contains(name))
      return not_found(fmt::format("{}: no tensor of that name in the problem", where));
    const auto w = wanted.find(name);
    if (w == wanted.end()) {
      if (REFIT_TRY(readable_array(value, where)).size() == 0) continue;  // an empty array for an empty box
      return mismatch(
          fmt::format("{}: {} rank {} holds no part of tensor '{}'", where, side, rank.value, name));
    }
    const TensorSpec& spec = problem.tensors()[w->second.tensor].tensor;
    const Box& box = w->second.box;
    const Expected expected{.shape = box.extent,
                            .dtype = held_dtype(spec, source),
                            .shape_is = fmt::format("the rank's box of the tensor, {} (extent [{}])",
                                                    box.to_string(), fmt::join(box.extent, ", ")),
                            .owner = "tensor"};
    const auto taken = REFIT_TRY(take(value, expected, where, source, "the tensor", out));
    REFIT_TRY(same_memory(memory, taken.memory, where));
    given[name] = true;
    (source ? out.buffers.sources : out.buffers.destinations)
        .push_back(ShardBuffer{.tensor = w->second.tensor, .box = box, .bytes = taken.bytes});
  }
  for (const auto& [name, w] : wanted)
    if (!given.contains(name))
      return not_found(fmt::format("rank {}: no buffer for tensor '{}' (the {} rank {} its box {})",
                                   rank.value, name, side, source ? "holds" : "needs", w.box.to_string()));
  if (!source) {
    std::vector<std::pair<std::span<std::byte>, std::string>> named;
    for (const auto& b : out.buffers.destinations)
      named.emplace_back(b.bytes, problem.tensors()[b.tensor].tensor.name);
    REFIT_TRY(check_destinations(std::move(named), rank, memory ? memory->kind : MemoryKind::kHost));
  }
  set_memory(out, memory);
  return out;
}

Result<RankArrays> parameter_arrays(const ReshardProblem& problem, const models::StorageMap& side, Rank rank,
                                    const nb::dict& arrays) {
  REFIT_TRY(check_rank(problem, rank));
  const auto& storage = *REFIT_TRY(rank_storage(side, rank));
  const bool source = problem.is_source(rank);
  std::map<std::string, std::size_t, std::less<>> index;  // parameter name -> its position
  for (std::size_t i = 0; i < storage.parameters.size(); ++i) index.emplace(storage.parameters[i].name, i);
  RankArrays out;
  std::optional<MemorySeen> memory;
  std::vector<std::span<std::byte>> spans(storage.parameters.size());
  std::vector<bool> given(storage.parameters.size(), false);
  for (const auto& [key, value] : arrays) {
    const std::string name = REFIT_TRY(key_name(key, rank, "parameter"));
    const std::string where = fmt::format("parameter '{}' (rank {})", name, rank.value);
    const auto it = index.find(name);
    if (it == index.end())
      return not_found(
          fmt::format("{}: the {} rank has no parameter of that name (Problem.parameters({}) "
                      "lists them)",
                      where, side.framework, rank.value));
    const auto& p = storage.parameters[it->second];
    const Expected expected{.shape = p.shape,
                            .dtype = p.dtype,
                            .shape_is = fmt::format("the parameter's [{}]", fmt::join(p.shape, ", ")),
                            .owner = "parameter"};
    const auto taken = REFIT_TRY(take(value, expected, where, source, "the parameter", out));
    REFIT_TRY(same_memory(memory, taken.memory, where));
    spans[it->second] = taken.bytes;
    given[it->second] = true;
  }
  for (std::size_t i = 0; i < storage.parameters.size(); ++i)
    if (!given[i]) {
      const auto& p = storage.parameters[i];
      return not_found(fmt::format("rank {}: no buffer for parameter '{}' (the {} rank's [{}] {})",
                                   rank.value, p.name, side.framework, fmt::join(p.shape, ", "),
                                   dtype_name(p.dtype)));
    }
  if (!source) {
    std::vector<std::pair<std::span<std::byte>, std::string>> named;
    for (std::size_t i = 0; i < spans.size(); ++i) named.emplace_back(spans[i], storage.parameters[i].name);
    REFIT_TRY(check_destinations(std::move(named), rank, memory ? memory->kind : MemoryKind::kHost));
  }
  const auto kind = memory ? memory->kind : MemoryKind::kHost;
  out.buffers = REFIT_TRY(framework_rank_buffers(problem, side, rank, std::move(spans), kind));
  set_memory(out, memory);
  return out;
}

}  // namespace refit::python
