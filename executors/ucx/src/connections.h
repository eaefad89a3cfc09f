#pragma once
// What the ranks of a plan publish to each other at prepare (the worker address, and the base,
// size and remote key of every region peers put into), and the endpoints and keys made from it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocated_regions.h"
#include "ucx_handles.h"
#include "ucx_program.h"
#include "wire.h"

namespace refit::ucx_detail {

// This rank's regions with their registrations: an allocation of the executor's covering a region
// shares its registration (a pooled allocation: one for all of a rank's buffers); caller memory
// is registered (ucp_mem_map) once per run of regions that overlap or touch; scratch is allocated.
// Empty regions are not registered.
struct LocalRegions {
  std::vector<std::shared_ptr<MemoryRegion>> registrations;  // by region id; nullptr: none
  std::vector<std::byte*> bases;                             // by region id
  std::vector<ucp_mem_h> handles;                            // by region id; nullptr where not registered
};
[[nodiscard]] Result<LocalRegions> register_regions(Worker& worker, const UcxProgram& program,
                                                    AllocatedRegions& allocated);

// The card this rank publishes: worker address, each registration peers put into (once, however
// many regions it holds) and its regions.
[[nodiscard]] Result<std::string> make_card(const Worker& worker, const UcxProgram& program,
                                            const LocalRegions& regions);

// A region of a peer's card that no registration holds (nothing is put into it).
inline constexpr std::uint32_t kUnpublished = 0xffffffff;

// A peer's registration, its key unpacked once for every region it holds.
struct RemoteRegistration {
  std::uint64_t base = 0;
  std::int64_t bytes = 0;
  RemoteKey key;
  std::byte* mapped = nullptr;  // where this process addresses it directly (map_ahead), or null
};

struct RemoteRegion {
  std::uint32_t registration = kUnpublished;  // index into Peer::registrations
  std::uint64_t base = 0;
  std::int64_t bytes = 0;
  ucp_rkey_h key = nullptr;     // its registration's; null where unpublished
  std::byte* mapped = nullptr;  // where this process addresses it directly (map_ahead), or null
};

struct Peer {
  ucp_ep_h endpoint = nullptr;
  std::vector<RemoteRegistration> registrations;
  std::vector<RemoteRegion> regions;  // by that peer's region id
};

// Endpoints to every other rank, with their keys unpacked. Endpoint failures land in `inbox`.
class Connections {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Connections>> connect(Worker& worker, Inbox& inbox, Rank self,
                                                                    const std::vector<std::string>& cards);
  ~Connections();
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  Peer& peer(Rank r) { return peers_[static_cast<std::size_t>(r.value)]; }
  // Maps the regions of `r` that this process can address directly (same-host shared memory),
  // records where (RemoteRegion::mapped), and builds their page tables now, so that the first
  // execution does not pay for them.
  void map_ahead(Rank r);
  std::int32_t world() const { return static_cast<std::int32_t>(peers_.size()); }

 private:
  struct ErrorSink {
    Inbox* inbox;
    std::int32_t rank;
  };
  Connections(Worker& worker, Inbox& inbox) : worker_(worker), inbox_(inbox) {}
  [[nodiscard]] Result<void> connect_peer(Inbox& inbox, std::int32_t rank, const std::string& card);

  Worker& worker_;
  Inbox& inbox_;
  std::vector<Peer> peers_;
  std::vector<std::unique_ptr<ErrorSink>> sinks_;
};

}  // namespace refit::ucx_detail
