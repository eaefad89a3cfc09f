#include "connections.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::ucx_detail {
namespace {

// A flushing close is acknowledged by live peers at once; a dead one never answers.
constexpr std::chrono::milliseconds kCloseGrace{500};

class CardWriter {
 public:
  template <class T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_bytes(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    out_ += s;
  }
  std::string take() && { return std::move(out_); }

 private:
  std::string out_;
};

class CardReader {
 public:
  explicit CardReader(const std::string& in) : in_(in) {}
  template <class T>
  bool get(T& v) {
    if (in_.size() - at_ < sizeof v) return false;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return true;
  }
  bool get_bytes(std::string& s) {
    std::uint64_t n = 0;
    if (!get(n) || in_.size() - at_ < n) return false;
    s = in_.substr(at_, n);
    at_ += n;
    return true;
  }

 private:
  const std::string& in_;
  std::size_t at_ = 0;
};

// Caller memory inside an allocation of the executor's shares its registration; other caller
// memory is registered; executor scratch is allocated.
[[nodiscard]] Result<std::shared_ptr<MemoryRegion>> registration(Worker& worker, const RegionSpec& spec,
                                                                 AllocatedRegions& allocated) {
  if (spec.user)
    if (auto shared = allocated.find(spec.user, spec.bytes)) return shared;
  auto r = REFIT_TRY(spec.user ? MemoryRegion::map(worker.context(), spec.user, spec.bytes)
                               : MemoryRegion::allocate(worker.context(), spec.bytes));
  return std::make_shared<MemoryRegion>(std::move(r));
}

}  // namespace

Result<LocalRegions> register_regions(Worker& worker, const UcxProgram& program,
                                      AllocatedRegions& allocated) {
  LocalRegions out;
  for (const RegionSpec& spec : program.regions) {
    std::shared_ptr<MemoryRegion> region;
    if (spec.bytes > 0) region = REFIT_TRY(registration(worker, spec, allocated));
    out.bases.push_back(!region ? nullptr : spec.user ? spec.user : region->base());
    out.handles.push_back(region ? region->handle() : nullptr);
    out.registrations.push_back(std::move(region));
  }
  return out;
}

Result<std::string> make_card(const Worker& worker, const UcxProgram& program, const LocalRegions& regions) {
  const auto address = REFIT_TRY(worker.address());
  CardWriter w;
  w.put_bytes(address);
  w.put(static_cast<std::uint32_t>(program.regions.size()));
  for (std::size_t i = 0; i < program.regions.size(); ++i) {
    const bool published = program.regions[i].remote && regions.registrations[i] != nullptr;
    std::string key;
    if (published) key = REFIT_TRY(regions.registrations[i]->packed_key());
    w.put(reinterpret_cast<std::uint64_t>(regions.bases[i]));
    w.put(published ? program.regions[i].bytes : std::int64_t{0});
    w.put_bytes(key);
  }
  return std::move(w).take();
}

Result<std::unique_ptr<Connections>> Connections::connect(Worker& worker, Inbox& inbox, Rank self,
                                                          const std::vector<std::string>& cards) {
  std::unique_ptr<Connections> c(new Connections(worker, inbox));
  c->peers_.resize(cards.size());
  for (std::size_t r = 0; r < cards.size(); ++r) {
    if (static_cast<std::int32_t>(r) == self.value) continue;
    REFIT_TRY_IN(c->connect_peer(inbox, static_cast<std::int32_t>(r), cards[r]),
                 fmt::format("connecting to rank {}", r));
  }
  return c;
}

Result<void> Connections::connect_peer(Inbox& inbox, std::int32_t rank, const std::string& card) {
  CardReader in(card);
  std::string address;
  std::uint32_t count = 0;
  if (!in.get_bytes(address) || !in.get(count)) return fail(ErrorCode::kRuntime, "malformed card");
  auto& sink = sinks_.emplace_back(std::make_unique<ErrorSink>(ErrorSink{.inbox = &inbox, .rank = rank}));
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
    const auto* s = static_cast<const ErrorSink*>(arg);
    s->inbox->endpoint_error[static_cast<std::size_t>(s->rank)] = status;
  };
  params.err_handler.arg = sink.get();
  Peer& peer = peers_[static_cast<std::size_t>(rank)];
  if (auto s = ucp_ep_create(worker_.get(), &params, &peer.endpoint); s != UCS_OK)
    return ucx_error(s, "ucp_ep_create");
  for (std::uint32_t i = 0; i < count; ++i) {
    RemoteRegion region;
    std::string key;
    if (!in.get(region.base) || !in.get(region.bytes) || !in.get_bytes(key))
      return fail(ErrorCode::kRuntime, "malformed card");
    if (!key.empty()) {
      ucp_rkey_h rkey = nullptr;
      if (auto s = ucp_ep_rkey_unpack(peer.endpoint, key.data(), &rkey); s != UCS_OK)
        return ucx_error(s, "ucp_ep_rkey_unpack");
      region.key.reset(rkey);
    }
    peer.regions.push_back(std::move(region));
  }
  return {};
}

void Connections::map_ahead(Rank r) {
  for (RemoteRegion& region : peer(r).regions) {
    void* local = nullptr;
    if (!region.key || ucp_rkey_ptr(region.key.get(), region.base, &local) != UCS_OK) continue;
    region.mapped = static_cast<std::byte*>(local);
    // Page-aligned, as madvise wants; failure (a kernel older than 5.14) only means
    // the first puts fault the pages in themselves.
    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(local) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(local) + static_cast<std::uintptr_t>(region.bytes);
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  }
}

Connections::~Connections() {
  std::vector<ucp_ep_h> endpoints;
  std::vector<bool> dead;
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    peers_[r].regions.clear();  // keys go before their endpoints
    endpoints.push_back(peers_[r].endpoint);
    dead.push_back(inbox_.given_up[r]);
  }
  close_endpoints(worker_, endpoints, dead, kCloseGrace);
}

}  // namespace refit::ucx_detail
