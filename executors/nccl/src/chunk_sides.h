#pragma once
// One chunk seen from one side, as the NCCL executor runs the lowering's decisions: the address
// ncclSend reads or ncclRecv writes, and the copies around it. A chunk the lowering keeps in place
// is one run of its buffer (NCCL's zero-copy rule), sent or received as it is; a staged one is
// packed into staging by the sender first, or unpacked out of it by the receiver afterwards; parts
// of a received segment that belong in the rank's own box are copied there from where it landed.
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "local_view.h"
#include "program.h"
#include "refit/lowering/rank_program.h"

namespace refit::nccl_detail {

// Hands out staging for one chunk on one side.
using StagingAllocator = std::function<Address(std::int64_t bytes)>;

struct ChunkSide {
  Address at;                  // what ncclSend reads or ncclRecv writes
  std::vector<CopyOp> copies;  // the sender's packs, or the receiver's unpacks and extracts
};

class ChunkSides {
 public:
  // Lowers the plan for every plan rank the process runs. Preconditions: `lowered` and `view`
  // outlive the result.
  [[nodiscard]] static Result<ChunkSides> make(const lowering::LoweredPlan& lowered, const LocalView& view);

  // The staging slot of a plan rank this process runs, or -1.
  std::int32_t slot_of(Rank r) const;
  // Forwarded data the process's plan ranks keep outside their own boxes, back to back.
  std::int64_t scratch_bytes() const { return scratch_bytes_; }

  [[nodiscard]] Result<ChunkSide> send(std::int32_t slot, std::int32_t transfer, std::int64_t k,
                                       const StagingAllocator& staging) const;
  ChunkSide receive(std::int32_t slot, std::int32_t transfer, std::int64_t k,
                    const StagingAllocator& staging) const;
  // The quantize kernel launches of quantize step `transfer` of the rank in `slot`, one per
  // weight: from its bf16 landing copy into its fp8 values and scales, the rank's destination
  // shards. Refuses blocks that are not all of those shards (the kernel writes them row-major;
  // refit's plans quantize a landing rank's whole boxes).
  [[nodiscard]] Result<std::vector<Quantize>> quantize(std::int32_t slot, std::int32_t transfer) const;

 private:
  ChunkSides(const lowering::LoweredPlan& lowered, const LocalView& view)
      : lowered_(&lowered), view_(&view) {}
  Address address(std::int32_t slot, lowering::BufferKind kind, std::int32_t index,
                  std::int64_t offset) const;
  CopyOp copy(std::int32_t slot, const lowering::Located& from, const lowering::Located& to, const Box& x,
              std::int64_t first, std::int64_t count, std::int64_t element_size) const;
  // Copies of the part of elements [first, first + count) of `segment` that lies in `dest`.
  void extract(std::int32_t slot, const lowering::Located& arrived, const lowering::Located& dest,
               const Box& segment, const lowering::Piece& p, std::int64_t element_size,
               std::vector<CopyOp>& out) const;

  const lowering::LoweredPlan* lowered_;
  const LocalView* view_;
  std::vector<lowering::RankProgram> programs_;                            // by slot
  std::vector<std::unordered_map<std::int32_t, std::size_t>> send_of_;     // by slot: transfer -> send
  std::vector<std::unordered_map<std::int32_t, std::size_t>> receive_of_;  // by slot: transfer -> receive
  std::vector<std::int64_t> scratch_base_;                                 // by slot
  std::int64_t scratch_bytes_ = 0;
};

}  // namespace refit::nccl_detail
