#include "refit/quantize/quantize.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace refit {
namespace {

// The view as [outer][rows][cols]: the leading dims flattened (their blocks are 1), then the two
// dims a block spans. A band is the rows of one block (128 for block128, 1 for mxfp8), a column
// block the columns of one (128 or 32).
struct Geometry {
  std::int64_t outer = 1;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t band = 1;
  std::int64_t width = 1;
  std::int64_t bands = 0;
  std::int64_t col_blocks = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
};

Geometry geometry_of(Scheme scheme, const Bf16View& in) {
  const std::size_t dims = in.shape.size();
  const Shape block = block_extent(scheme, dims);
  Geometry g;
  for (std::size_t d = 0; d + 2 < dims; ++d) g.outer *= in.shape[d];
  g.rows = in.shape[dims - 2];
  g.cols = in.shape[dims - 1];
  g.band = block[dims - 2];
  g.width = block[dims - 1];
  g.bands = (g.rows + g.band - 1) / g.band;
  g.col_blocks = (g.cols + g.width - 1) / g.width;
  g.row_stride = in.strides[dims - 2];
  g.col_stride = in.strides[dims - 1];
  return g;
}

// Offset of outer index `o` (row-major over the leading dims) in the view's data.
std::int64_t outer_offset(const Bf16View& in, std::int64_t o) {
  std::int64_t offset = 0;
  for (std::size_t d = in.shape.size() - 2; d-- > 0;) {
    offset += (o % in.shape[d]) * in.strides[d];
    o /= in.shape[d];
  }
  return offset;
}

// The inner loops: contiguous runs of at most one block's width, which the compiler vectorises
// (integer max; fp32 multiply and integer selects per element, no calls).
std::uint16_t run_amax(const std::uint16_t* x, std::int64_t n) {
  std::uint16_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t a = fp8::abs_bits(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

void run_convert(const std::uint16_t* x, std::int64_t n, float multiplier, std::uint8_t* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = fp8::quantize_element(x[i], multiplier);
}

// One band of one outer index: its rows, gathered into `scratch` when the last dim is strided so
// that the inner loops always see contiguous rows.
class Band {
 public:
  Band(const Bf16View& in, const Geometry& g, std::vector<std::uint16_t>& scratch, std::int64_t o,
       std::int64_t first_row)
      : g_(g), base_(in.data + outer_offset(in, o) + first_row * g.row_stride) {
    count_ = std::min(g.band, g.rows - first_row);
    if (g.col_stride == 1 || g.cols == 1) return;
    scratch.resize(static_cast<std::size_t>(count_ * g.cols));
    for (std::int64_t r = 0; r < count_; ++r)
      for (std::int64_t c = 0; c < g.cols; ++c)
        scratch[r * g.cols + c] = base_[r * g.row_stride + c * g.col_stride];
    gathered_ = scratch.data();
  }
  std::int64_t rows() const { return count_; }
  const std::uint16_t* row(std::int64_t r) const {
    return gathered_ ? gathered_ + r * g_.cols : base_ + r * g_.row_stride;
  }

 private:
  const Geometry& g_;
  const std::uint16_t* base_;
  const std::uint16_t* gathered_ = nullptr;
  std::int64_t count_ = 0;
};

// Steps 1 and 2 of fp8_rules.h for every block of a band: its scales, stored at `scales_out`.
void band_scales(Scheme scheme, const Geometry& g, const Band& band, std::vector<fp8::BlockScale>& out,
                 std::byte* scales_out) {
  std::vector<std::uint16_t> amax(static_cast<std::size_t>(g.col_blocks), 0);
  for (std::int64_t r = 0; r < band.rows(); ++r)
    for (std::int64_t cb = 0; cb < g.col_blocks; ++cb) {
      const std::int64_t first = cb * g.width;
      amax[cb] = std::max(amax[cb], run_amax(band.row(r) + first, std::min(g.width, g.cols - first)));
    }
  const int bytes = fp8::scale_bytes(scheme);
  out.resize(amax.size());
  for (std::size_t cb = 0; cb < amax.size(); ++cb) {
    out[cb] = fp8::block_scale(scheme, amax[cb]);
    fp8::store_scale(scheme, out[cb], reinterpret_cast<unsigned char*>(scales_out + cb * bytes));
  }
}

}  // namespace

std::int64_t scale_buffer_bytes(Scheme scheme, const Shape& shape) {
  return element_count(scale_shape(scheme, shape)) * dtype_size(scale_dtype(scheme));
}

void quantize(Scheme scheme, const Bf16View& in, std::span<std::uint8_t> values,
              std::span<std::byte> scales) {
  if (element_count(in.shape) == 0) return;
  const Geometry g = geometry_of(scheme, in);
  const int bytes = fp8::scale_bytes(scheme);
  std::vector<std::uint16_t> scratch;
  std::vector<fp8::BlockScale> block_scales;
  for (std::int64_t o = 0; o < g.outer; ++o)
    for (std::int64_t b = 0; b < g.bands; ++b) {
      const Band band(in, g, scratch, o, b * g.band);
      band_scales(scheme, g, band, block_scales, scales.data() + ((o * g.bands + b) * g.col_blocks) * bytes);
      // Step 3, row by row: each run shares its block's multiplier.
      for (std::int64_t r = 0; r < band.rows(); ++r) {
        std::uint8_t* out = values.data() + (o * g.rows + b * g.band + r) * g.cols;
        for (std::int64_t cb = 0; cb < g.col_blocks; ++cb) {
          const std::int64_t first = cb * g.width;
          run_convert(band.row(r) + first, std::min(g.width, g.cols - first), block_scales[cb].multiplier,
                      out + first);
        }
      }
    }
}

Result<void> quantize_checked(Scheme scheme, const Bf16View& in, std::span<std::uint8_t> values,
                              std::span<std::byte> scales) {
  if (in.shape.size() < 2)
    return invalid(
        fmt::format("{} quantizes weights of 2 or more dims, not {}", scheme_name(scheme), in.shape.size()));
  if (in.strides.size() != in.shape.size())
    return mismatch(fmt::format("a view of {} dims has {} strides", in.shape.size(), in.strides.size()));
  for (std::size_t d = 0; d < in.shape.size(); ++d)
    if (in.shape[d] < 0 || in.strides[d] < 0)
      return out_of_range(fmt::format("view dim {}: extent {} and stride {} must not be negative", d,
                                      in.shape[d], in.strides[d]));
  const std::int64_t elements = element_count(in.shape);
  if (elements > 0 && in.data == nullptr) return invalid("a view of elements has no data");
  if (static_cast<std::int64_t>(values.size()) != elements)
    return mismatch(fmt::format("values: {} bytes for {} elements", values.size(), elements));
  const std::int64_t scale_bytes = scale_buffer_bytes(scheme, in.shape);
  if (static_cast<std::int64_t>(scales.size()) != scale_bytes)
    return mismatch(
        fmt::format("scales: {} bytes where {} takes {}", scales.size(), scheme_name(scheme), scale_bytes));
  quantize(scheme, in, values, scales);
  return {};
}

}  // namespace refit
