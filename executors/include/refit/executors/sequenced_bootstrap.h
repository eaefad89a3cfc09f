#pragma once
// Every collective call numbered, so that ranks out of step are named instead of mistaken for
// dead. A bootstrap's rounds match by arrival order alone: a rank that makes one call more than
// its peers (an option given on one rank only) would take a peer's next allgather as its barrier,
// and both would go on with the wrong bytes. This decorator prefixes each contribution with the
// exchange protocol's version, the call's sequence number and its kind, and checks every peer's
// prefix: a peer at another call is kMismatch naming both calls, and a contribution without the
// prefix (an exchange that garbles bytes) is kRuntime naming the rank it came from.
#include <cstdint>

#include "refit/executors/bootstrap.h"

namespace refit {

// The version of what ranks exchange through a bootstrap (this prefix, the agreement's settings,
// the executors' cards); ranks of two versions refuse each other at their first call.
inline constexpr std::uint32_t kExchangeProtocolVersion = 3;

class SequencedBootstrap final : public Bootstrap {
 public:
  explicit SequencedBootstrap(Bootstrap& inner) : inner_(inner) {}
  std::int32_t rank() const override { return inner_.rank(); }
  std::int32_t size() const override { return inner_.size(); }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override;
  [[nodiscard]] Result<void> barrier() override;

 private:
  enum class Kind : std::uint8_t { kAllgather, kBarrier };
  [[nodiscard]] Result<std::vector<std::string>> call(Kind kind, std::string_view mine);

  Bootstrap& inner_;
  std::uint64_t calls_ = 0;  // made so far
};

}  // namespace refit
