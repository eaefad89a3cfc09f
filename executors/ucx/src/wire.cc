#include "wire.h"

#include <cstring>

#include <fmt/format.h>

#include "ucx_handles.h"

namespace refit::ucx_detail {
namespace {

constexpr unsigned kAmId = 0x5e;

struct WireHeader {
  std::uint8_t kind;
  std::uint8_t reserved[3];
  std::int32_t from;
  std::uint64_t epoch;
  std::uint64_t membership;
  std::int32_t transfer;
  std::uint32_t count;  // runs, or bytes of text
  std::int64_t chunk;
};

struct WireRun {
  std::uint32_t region;
  std::uint32_t reserved;
  std::int64_t stream;
  std::int64_t offset;
  std::int64_t length;
};

template <class T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

ucs_status_t on_message(void* arg, const void*, std::size_t, void* data, std::size_t length,
                        const ucp_am_recv_param_t* param) {
  auto& inbox = *static_cast<Inbox*>(arg);
  std::optional<Message> m;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0)
    m = decode(std::span(static_cast<const std::byte*>(data), length));
  if (!m || m->from < 0 || static_cast<std::size_t>(m->from) >= inbox.last_heard.size()) {
    inbox.malformed_from = m ? m->from : -1;
    return UCS_OK;
  }
  inbox.last_heard[static_cast<std::size_t>(m->from)] = Clock::now();
  if (m->kind != MessageKind::kHeartbeat) inbox.messages.push_back(std::move(*m));
  return UCS_OK;
}

}  // namespace

std::string encode(const Message& m) {
  std::string out;
  const bool grant = m.kind == MessageKind::kGrant;
  const WireHeader h{.kind = static_cast<std::uint8_t>(m.kind),
                     .reserved = {},
                     .from = m.from,
                     .epoch = m.epoch,
                     .membership = m.membership,
                     .transfer = m.transfer,
                     .count = static_cast<std::uint32_t>(grant ? m.runs.size() : m.text.size()),
                     .chunk = m.chunk};
  append(out, h);
  for (const Run& r : m.runs)
    append(
        out,
        WireRun{
            .region = r.region, .reserved = 0, .stream = r.stream, .offset = r.offset, .length = r.length});
  out += m.text;
  return out;
}

std::optional<Message> decode(std::span<const std::byte> bytes) {
  WireHeader h{};
  if (bytes.size() < sizeof h) return std::nullopt;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.kind < static_cast<std::uint8_t>(MessageKind::kGrant) ||
      h.kind > static_cast<std::uint8_t>(MessageKind::kFenced))
    return std::nullopt;
  Message m{.kind = static_cast<MessageKind>(h.kind),
            .from = h.from,
            .epoch = h.epoch,
            .membership = h.membership,
            .transfer = h.transfer,
            .chunk = h.chunk,
            .runs = {},
            .text = {}};
  const auto body = bytes.subspan(sizeof h);
  if (m.kind == MessageKind::kGrant) {
    if (body.size() != std::size_t{h.count} * sizeof(WireRun)) return std::nullopt;
    for (std::uint32_t i = 0; i < h.count; ++i) {
      WireRun w{};
      std::memcpy(&w, body.data() + i * sizeof w, sizeof w);
      m.runs.push_back(Run{.stream = w.stream, .region = w.region, .offset = w.offset, .length = w.length});
    }
  } else {
    if (body.size() != h.count) return std::nullopt;
    m.text.assign(reinterpret_cast<const char*>(body.data()), body.size());
  }
  return m;
}

Result<void> listen(ucp_worker_h worker, Inbox& inbox) {
  ucp_am_handler_param_t p{};
  p.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                 UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  p.id = kAmId;
  p.cb = on_message;
  p.arg = &inbox;
  p.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (auto s = ucp_worker_set_am_recv_handler(worker, &p); s != UCS_OK)
    return ucx_error(s, "ucp_worker_set_am_recv_handler");
  return {};
}

Result<void> Outbox::post(ucp_ep_h ep, Rank to, const Message& m) {
  auto& item = in_flight_.add(OutgoingMessage{.bytes = encode(m), .to = to, .epoch = m.epoch});
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &InFlight<OutgoingMessage>::completed;
  p.user_data = &item;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  void* request =
      ucp_am_send_nbx(ep, kAmId, nullptr, 0, item.value.bytes.data(), item.value.bytes.size(), &p);
  if (UCS_PTR_IS_ERR(request)) {
    item.done = true;
    item.status = UCS_PTR_STATUS(request);
    return ucx_error(UCS_PTR_STATUS(request), fmt::format("sending to rank {}", to.value));
  }
  if (request == nullptr) item.done = true;
  return {};
}

bool Outbox::empty_but_for(const std::vector<bool>& ignored) const {
  return !in_flight_.any_of(
      [&](const OutgoingMessage& m) { return !ignored[static_cast<std::size_t>(m.to.value)]; });
}

std::optional<std::pair<Rank, ucs_status_t>> Outbox::sweep(std::uint64_t epoch) {
  std::optional<std::pair<Rank, ucs_status_t>> failed;
  in_flight_.sweep([&](auto& item) {
    if (item.status != UCS_OK && item.value.epoch == epoch && !failed)
      failed = std::pair{item.value.to, item.status};
  });
  return failed;
}

}  // namespace refit::ucx_detail
