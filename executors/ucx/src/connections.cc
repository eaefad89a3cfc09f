#include "connections.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>

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

// Caller memory that overlaps or touches other caller memory, in address order: the groups that
// one registration covers (parameters that are views into one buffer, as Megatron's distributed
// optimizer keeps them, register once).
std::vector<std::vector<std::size_t>> touching_groups(const UcxProgram& program,
                                                      std::vector<std::size_t> ids) {
  std::ranges::sort(ids, {}, [&](std::size_t i) { return program.regions[i].user; });
  std::vector<std::vector<std::size_t>> out;
  const std::byte* end = nullptr;
  for (const std::size_t i : ids) {
    const auto& spec = program.regions[i];
    if (out.empty() || spec.user > end) out.emplace_back();
    out.back().push_back(i);
    end = std::max<const std::byte*>(end, spec.user + spec.bytes);
  }
  return out;
}

}  // namespace

Result<LocalRegions> register_regions(Worker& worker, const UcxProgram& program,
                                      AllocatedRegions& allocated) {
  const auto n = program.regions.size();
  LocalRegions out{.registrations = std::vector<std::shared_ptr<MemoryRegion>>(n),
                   .bases = std::vector<std::byte*>(n, nullptr),
                   .handles = std::vector<ucp_mem_h>(n, nullptr)};
  std::vector<std::size_t> caller;  // caller memory outside the executor's allocations
  for (std::size_t i = 0; i < n; ++i) {
    const RegionSpec& spec = program.regions[i];
    if (spec.bytes <= 0) continue;
    if (!spec.user)
      out.registrations[i] =
          std::make_shared<MemoryRegion>(REFIT_TRY(MemoryRegion::allocate(worker.context(), spec.bytes)));
    else if (auto shared = allocated.find(spec.user, spec.bytes))
      out.registrations[i] = std::move(shared);
    else
      caller.push_back(i);
  }
  for (const auto& group : touching_groups(program, std::move(caller))) {
    std::byte* first = program.regions[group.front()].user;
    std::byte* last = first;
    for (const std::size_t i : group)
      last = std::max(last, program.regions[i].user + program.regions[i].bytes);
    const auto region =
        std::make_shared<MemoryRegion>(REFIT_TRY(MemoryRegion::map(worker.context(), first, last - first)));
    for (const std::size_t i : group) out.registrations[i] = region;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!out.registrations[i]) continue;
    out.bases[i] = program.regions[i].user ? program.regions[i].user : out.registrations[i]->base();
    out.handles[i] = out.registrations[i]->handle();
  }
  return out;
}

// The card: the worker's address; each registration peers put into, once (its base, size and
// key); then each region: which registration holds it (kUnpublished: none), its base and size.
Result<std::string> make_card(const Worker& worker, const UcxProgram& program, const LocalRegions& regions) {
  CardWriter w;
  w.put_bytes(REFIT_TRY(worker.address()));
  std::map<const MemoryRegion*, std::uint32_t> index;
  std::vector<const MemoryRegion*> published;
  std::vector<std::uint32_t> held_by(program.regions.size(), kUnpublished);
  for (std::size_t i = 0; i < program.regions.size(); ++i) {
    const auto* r = regions.registrations[i].get();
    if (!program.regions[i].remote || r == nullptr) continue;
    const auto [it, fresh] = index.try_emplace(r, static_cast<std::uint32_t>(published.size()));
    if (fresh) published.push_back(r);
    held_by[i] = it->second;
  }
  w.put(static_cast<std::uint32_t>(published.size()));
  for (const auto* r : published) {
    w.put(reinterpret_cast<std::uint64_t>(r->base()));
    w.put(r->bytes());
    w.put_bytes(REFIT_TRY(r->packed_key()));
  }
  w.put(static_cast<std::uint32_t>(program.regions.size()));
  for (std::size_t i = 0; i < program.regions.size(); ++i) {
    w.put(held_by[i]);
    w.put(reinterpret_cast<std::uint64_t>(regions.bases[i]));
    w.put(held_by[i] == kUnpublished ? std::int64_t{0} : program.regions[i].bytes);
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
  if (!in.get_bytes(address)) return fail(ErrorCode::kRuntime, "malformed card");
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
  std::uint32_t registrations = 0;
  if (!in.get(registrations)) return fail(ErrorCode::kRuntime, "malformed card");
  for (std::uint32_t k = 0; k < registrations; ++k) {
    RemoteRegistration& r = peer.registrations.emplace_back();
    std::string key;
    if (!in.get(r.base) || !in.get(r.bytes) || !in.get_bytes(key) || key.empty())
      return fail(ErrorCode::kRuntime, "malformed card");
    ucp_rkey_h rkey = nullptr;
    if (auto s = ucp_ep_rkey_unpack(peer.endpoint, key.data(), &rkey); s != UCS_OK)
      return ucx_error(s, "ucp_ep_rkey_unpack");
    r.key.reset(rkey);
  }
  std::uint32_t count = 0;
  if (!in.get(count)) return fail(ErrorCode::kRuntime, "malformed card");
  for (std::uint32_t i = 0; i < count; ++i) {
    RemoteRegion region;
    if (!in.get(region.registration) || !in.get(region.base) || !in.get(region.bytes))
      return fail(ErrorCode::kRuntime, "malformed card");
    if (region.registration != kUnpublished) {
      if (region.registration >= registrations) return fail(ErrorCode::kRuntime, "malformed card");
      region.key = peer.registrations[region.registration].key.get();
    }
    peer.regions.push_back(region);
  }
  return {};
}

void Connections::map_ahead(Rank r) {
  Peer& p = peer(r);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (RemoteRegistration& registration : p.registrations) {
    void* local = nullptr;
    if (ucp_rkey_ptr(registration.key.get(), registration.base, &local) != UCS_OK) continue;
    registration.mapped = static_cast<std::byte*>(local);
    // Page-aligned, as madvise wants; failure (a kernel older than 5.14) only means the first
    // puts fault the pages in themselves.
    const auto begin = reinterpret_cast<std::uintptr_t>(local) & ~(page - 1);
    const auto end =
        reinterpret_cast<std::uintptr_t>(local) + static_cast<std::uintptr_t>(registration.bytes);
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
  }
  for (RemoteRegion& region : p.regions)
    if (region.registration != kUnpublished)
      if (std::byte* mapped = p.registrations[region.registration].mapped)
        region.mapped = mapped + (region.base - p.registrations[region.registration].base);
}

Connections::~Connections() {
  std::vector<ucp_ep_h> endpoints;
  std::vector<bool> dead;
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    peers_[r].regions.clear();
    peers_[r].registrations.clear();  // keys go before their endpoints
    endpoints.push_back(peers_[r].endpoint);
    dead.push_back(inbox_.given_up[r]);
  }
  close_endpoints(worker_, endpoints, dead, kCloseGrace);
}

}  // namespace refit::ucx_detail
