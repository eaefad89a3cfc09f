#pragma once
// FP8 in flight in the NCCL executor (refit/executors/sender_quantization.h): a process's buffers
// as the plan sends from them, with every weight box quantized at the senders replaced by fp8
// values and scales in memory of the executor's own, and the program's Quantize ops that fill
// that memory from the caller's bf16 boxes (translate.h places them). Pure C++: the executor
// allocates device memory, the CPU tests host memory.
#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "local_view.h"
#include "program.h"
#include "refit/core/error.h"
#include "refit/executors/sender_quantization.h"

namespace refit::nccl_detail {

// Memory of `bytes` for the executor's values or scales of a weight box (`what` names it for
// errors); it must stay valid while the prepared plan lives.
using QuantizedAllocator = std::function<Result<std::span<std::byte>>(Bytes bytes, std::string_view what)>;

class QuantizedSources {
 public:
  // Finds and checks the boxes each given rank quantizes (errors name the rank and tensor) and
  // allocates their values and scales.
  [[nodiscard]] static Result<QuantizedSources> make(const Plan& plan,
                                                     std::span<const LocalRankBuffers> given,
                                                     const QuantizedAllocator& allocate);

  // The given ranks' buffers with the quantized sources replaced: what make_local_view takes.
  const std::vector<LocalRankBuffers>& ranks() const { return ranks_; }
  // The ops that quantize every box that is sent, part by part, on `view` (made from ranks()).
  // A box in a buffer of its own is appended to view.shards; a framework parameter is there.
  std::vector<QuantizedBox> add_to(LocalView& view) const;

 private:
  struct Pending {
    std::size_t rank = 0;          // index into ranks_
    std::size_t values_index = 0;  // of its values among ranks_[rank]'s source buffers
    SenderQuantization quantization;
    std::span<std::byte> own;  // the caller's buffer of the box, if the box has one
  };
  std::vector<LocalRankBuffers> ranks_;
  std::vector<Pending> boxes_;
};

}  // namespace refit::nccl_detail
