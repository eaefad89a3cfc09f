#include "refit/delta/baseline.h"

#include <fmt/format.h>

namespace refit {

namespace delta {

Result<void> same_baseline(std::optional<Checksum> sender, std::optional<Checksum> receiver) {
  if (!sender) return mismatch("the sender has no baseline: a full refit is needed");
  if (!receiver) return mismatch("the receiver has no baseline: a full refit is needed");
  if (*sender != *receiver)
    return mismatch(
        fmt::format("the receiver's baseline (checksum {:#018x}) is not the sender's ({:#018x}): a full "
                    "refit is needed",
                    receiver->value, sender->value));
  return {};
}

}  // namespace delta

Result<void> require_same_baseline(std::optional<Checksum> sender, std::optional<Checksum> receiver,
                                   std::string_view chunk) {
  auto same = delta::same_baseline(sender, receiver);
  if (!same) return std::unexpected(std::move(same).error().in(std::string(chunk)));
  return {};
}

}  // namespace refit
