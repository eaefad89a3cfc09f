#include "refit/topology/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "cluster_builder.h"
#include "found_machine.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"

namespace refit {
namespace {

using detail::FoundGpu;
using detail::FoundNic;
using detail::PciLocation;

// PCI class codes as NCCL writes them in tclass.
constexpr std::string_view kNvSwitchClass = "0x068000";
bool is_gpu_class(std::string_view c) { return c == "0x030000" || c == "0x030200"; }

// NCCL's dumps nest about 8 deep (system, cpu, pci switches, gpu, nvlink).
constexpr std::size_t kMaxXmlDepth = 64;
// NVLinks between one GPU and one target (18 on an H100 to its NVSwitches), and in all.
constexpr std::int32_t kMaxLinkCount = 64;
constexpr std::size_t kMaxGpuLinks = 1024;
// A <net speed> in Mb/s: 10 Mb/s to 10 Tb/s, so the NIC's rate is within cluster_limits.
constexpr double kMinSpeedMbps = 10;
constexpr double kMaxSpeedMbps = 1e7;

std::int64_t line_of(std::string_view text, std::ptrdiff_t offset) {
  if (offset < 0 || static_cast<std::size_t>(offset) > text.size()) return 0;
  return 1 + std::count(text.begin(), text.begin() + offset, '\n');
}

// Line numbers by binary search over the newlines, found once: errors and every GPU's name
// ("line 12: <gpu dev=...>") need one, and counting from the start each time is quadratic.
class Lines {
 public:
  explicit Lines(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines_.push_back(static_cast<std::ptrdiff_t>(i));
  }
  std::int64_t of(std::ptrdiff_t offset) const {
    return 1 + (std::ranges::lower_bound(newlines_, offset) - newlines_.begin());
  }

 private:
  std::vector<std::ptrdiff_t> newlines_;
};

// An attribute value as messages quote it: cut short.
std::string quoted(std::string_view value) {
  return value.size() > 40 ? fmt::format("{}...", value.substr(0, 37)) : std::string(value);
}

// Walks the XML tree, collecting GPUs and NICs with their place in the PCIe tree.
class XmlReader {
 public:
  explicit XmlReader(std::string_view text) : lines_(text) {}

  [[nodiscard]] Result<detail::FoundMachine> read(const pugi::xml_document& doc) {
    // pugixml takes several top-level elements and text beside them; a dump has one <system>.
    for (const auto& top : doc.children()) {
      if (top.type() == pugi::node_element && top != doc.document_element())
        return invalid(
            fmt::format("{}: a second root element (an NCCL topology dump has one <system>)", where(top)));
      if (top.type() == pugi::node_pcdata)
        return invalid(fmt::format("line {}: text beside the root element", lines_.of(top.offset_debug())));
    }
    REFIT_TRY(check_unique_attributes(doc));
    const auto root = doc.document_element();
    if (std::string_view(root.name()) != "system")
      return invalid(
          fmt::format("{}: expected <system> as the root element (an NCCL topology dump)", where(root)));
    REFIT_TRY(walk(root));
    if (gpus_.empty()) return invalid("no <gpu> element: the file describes no GPU");
    REFIT_TRY(check_links_both_ways());
    detail::FoundMachine machine;
    for (auto& [dev, gpu] : gpus_) machine.gpus.push_back(std::move(gpu));  // NCCL device order
    machine.nics = std::move(nics_);
    return machine;
  }

 private:
  // XML's unique-attribute rule, which pugixml leaves to its users: an element that gives an
  // attribute twice is not well-formed, and reading the first would drop the second unseen. The
  // walk keeps no stack of its own, so no nesting depth overflows it.
  [[nodiscard]] Result<void> check_unique_attributes(const pugi::xml_document& doc) const {
    for (pugi::xml_node n = doc.first_child(); n;) {
      std::set<std::string_view> names;
      for (const auto& a : n.attributes())
        if (!names.insert(a.name()).second)
          return parse_error(
              fmt::format("{}: attribute '{}' given twice (not well-formed XML)", where(n), a.name()));
      if (const auto child = n.first_child()) {
        n = child;
        continue;
      }
      while (n && !n.next_sibling()) n = n.parent() == doc ? pugi::xml_node() : n.parent();
      if (n) n = n.next_sibling();
    }
    return {};
  }

  // "line 12: <gpu dev="3">": the element and its first attribute, which identifies it.
  std::string where(const pugi::xml_node& n) const {
    const auto a = n.first_attribute();
    return fmt::format("line {}: <{}{}>", lines_.of(n.offset_debug()), n.name(),
                       a ? fmt::format(" {}=\"{}\"", a.name(), quoted(a.value())) : std::string());
  }

  [[nodiscard]] Result<std::string> attribute(const pugi::xml_node& n, const char* name) const {
    const auto a = n.attribute(name);
    if (!a) return invalid(fmt::format("{}: attribute '{}' missing", where(n), name));
    const std::string_view value = a.value();
    // Values become names refit prints (a NIC's, a bus id): no escapes for the terminal.
    if (has_control_character(value))
      return invalid(fmt::format("{}: attribute '{}' holds a control character", where(n), name));
    return std::string(value);
  }

  template <class T>
  [[nodiscard]] Result<T> number(const pugi::xml_node& n, const char* name, T min) const {
    return parse_number(n, name, REFIT_TRY(attribute(n, name)), min);
  }

  // The value `text` of attribute `name` of `n` as a number >= min.
  template <class T>
  [[nodiscard]] Result<T> parse_number(const pugi::xml_node& n, const char* name, std::string_view text,
                                       T min) const {
    T v{};
    const auto* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (!text.empty() && ec == std::errc::result_out_of_range && ptr == end)  // too large for T
      return out_of_range(fmt::format("{}: attribute {}=\"{}\" is not a number", where(n), name, text));
    if (text.empty() || ec != std::errc{} || ptr != end)
      return parse_error(fmt::format("{}: attribute {}=\"{}\" is not a number", where(n), name, text));
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(v))
        return out_of_range(fmt::format("{}: attribute {}=\"{}\" is not finite", where(n), name, text));
    if (v < min)
      return out_of_range(fmt::format("{}: attribute {}=\"{}\" must be >= {}", where(n), name, text, min));
    return v;
  }

  // Depth first, in document order, with an explicit stack: nesting costs no C++ stack, and
  // each element's PCIe chain is built once from its parent's (kMaxXmlDepth bounds its length).
  [[nodiscard]] Result<void> walk(const pugi::xml_node& root) {
    struct Open {
      pugi::xml_node node;
      PciLocation here;
      std::size_t depth;
    };
    std::vector<Open> stack{{root, {}, 1}};
    while (!stack.empty()) {
      Open open = std::move(stack.back());
      stack.pop_back();
      std::vector<Open> children;
      for (const auto child : open.node.children()) {
        if (child.type() != pugi::node_element) continue;
        if (open.depth + 1 > kMaxXmlDepth)
          return unsupported(fmt::format("{}: nested deeper than {} elements", where(child), kMaxXmlDepth));
        auto below = REFIT_TRY(visit(child, open.here));
        if (below) children.push_back({child, std::move(*below), open.depth + 1});
      }
      std::move(children.rbegin(), children.rend(), std::back_inserter(stack));
    }
    return {};
  }

  // Reads a <gpu> or <nic>; for a <cpu> or <pci> returns the location of the elements inside it.
  [[nodiscard]] Result<std::optional<PciLocation>> visit(const pugi::xml_node& child,
                                                         const PciLocation& here) {
    const std::string_view name = child.name();
    if (name == "cpu") {
      const auto socket = child.attribute("numaid")
                              ? fmt::format("cpu{}", REFIT_TRY(attribute(child, "numaid")))
                              : fmt::format("cpu#{}", cpus_);
      ++cpus_;
      return PciLocation{.socket = socket, .chain = {socket}};
    }
    if (name == "pci") {
      const auto bus = REFIT_TRY(attribute(child, "busid"));
      PciLocation below = here;
      below.chain.push_back(detail::normalize_bus_id(bus));
      return below;
    }
    if (name == "gpu") REFIT_TRY(add_gpu(child, here));
    if (name == "nic") REFIT_TRY(add_nic(child, here));
    return std::optional<PciLocation>{};  // other elements (c2c, ...) carry nothing refit models
  }

  // NVLinks are cables: a dump lists each from both of its GPUs, with one count. A link listed by
  // one end only (an edited file) would give that GPU NVLink bandwidth to a peer that has none.
  [[nodiscard]] Result<void> check_links_both_ways() const {
    std::map<std::pair<std::string, std::string>, std::int64_t> links;  // (from, to) -> count
    std::map<std::string, const FoundGpu*> by_bus;
    for (const auto& [dev, gpu] : gpus_) {
      by_bus[gpu.bus_id] = &gpu;
      for (const auto& peer : gpu.peer_links) ++links[{gpu.bus_id, peer}];
    }
    for (const auto& [ends, count] : links) {
      if (!by_bus.contains(ends.second)) continue;  // a GPU not in the dump: refused with the domains
      const auto back = links.find({ends.second, ends.first});
      const std::int64_t counted_back = back == links.end() ? 0 : back->second;
      if (count != counted_back)
        return invalid(fmt::format("{}: {} NVLink(s) to GPU {}, which lists {} back",
                                   by_bus.at(ends.first)->what, count, ends.second, counted_back));
    }
    return {};
  }

  // The attributes are read in order, so the first bad one is the one reported.
  [[nodiscard]] Result<void> add_links(const pugi::xml_node& gpu_node, FoundGpu& gpu) const {
    std::set<std::string> peers;
    for (const auto link : gpu_node.children("nvlink")) {
      const auto target = REFIT_TRY(attribute(link, "target"));
      const auto count = REFIT_TRY(number<std::int32_t>(link, "count", 1));
      if (count > kMaxLinkCount)  // each counted link is stored
        return out_of_range(
            fmt::format("{}: attribute count=\"{}\" must be <= {}", where(link), count, kMaxLinkCount));
      const auto tclass = REFIT_TRY(attribute(link, "tclass"));
      if (is_gpu_class(tclass) && detail::normalize_bus_id(target) == gpu.bus_id)
        return invalid(fmt::format("{}: an NVLink from GPU {} to itself", where(link), gpu.bus_id));
      if (!peers.insert(detail::normalize_bus_id(target)).second)
        return invalid(fmt::format("{}: a second <nvlink> to {} (a dump gives one per peer, with its count)",
                                   where(link), detail::normalize_bus_id(target)));
      if (tclass == kNvSwitchClass) gpu.switch_links += count;
      if (is_gpu_class(tclass))
        gpu.peer_links.insert(gpu.peer_links.end(), static_cast<std::size_t>(count),
                              detail::normalize_bus_id(target));
      if (gpu.peer_links.size() + static_cast<std::size_t>(gpu.switch_links) > kMaxGpuLinks)
        return out_of_range(fmt::format("{}: more than {} NVLinks", where(gpu_node), kMaxGpuLinks));
    }  // links to CPUs (POWER, Grace C2C) do not join GPUs
    return {};
  }

  [[nodiscard]] Result<void> add_gpu(const pugi::xml_node& n, const PciLocation& here) {
    const auto parent = n.parent();
    if (std::string_view(parent.name()) != "pci" || here.chain.empty())
      return invalid(fmt::format("{}: not inside a <pci busid=...> element", where(n)));
    const auto dev = REFIT_TRY(number<std::int32_t>(n, "dev", 0));
    const auto sm = REFIT_TRY(number<std::int32_t>(n, "sm", 1));
    if (gpus_.contains(dev))
      return invalid(fmt::format("{}: GPU dev {} appears twice ({})", where(n), dev, gpus_[dev].what));
    if (gpus_.size() == detail::kMaxMachineDevices)
      return out_of_range(
          fmt::format("{}: more than {} GPUs in one machine", where(n), detail::kMaxMachineDevices));
    FoundGpu gpu;
    gpu.what = where(n);
    gpu.bus_id = here.chain.back();
    for (const auto& [other_dev, other] : gpus_)
      if (other.bus_id == gpu.bus_id)
        return invalid(fmt::format("{}: bus id {} is GPU dev {}'s too ({})", where(n), gpu.bus_id, other_dev,
                                   other.what));
    const std::string_view device = parent.attribute("device").value();
    gpu.model = hw::gpu_model_for(sm, device == hw::kH200PciDeviceId ? "H200" : "");
    if (device == hw::kH100Sxm5PciDeviceId) gpu.name = kH100Sxm5;
    gpu.location = here;
    REFIT_TRY(add_links(n, gpu));
    gpus_[dev] = std::move(gpu);
    return {};
  }

  [[nodiscard]] Result<void> add_nic(const pugi::xml_node& n, const PciLocation& here) {
    const bool under_pci = std::string_view(n.parent().name()) == "pci";
    for (const auto net : n.children("net")) {
      const auto name = REFIT_TRY(attribute(net, "name"));
      const auto speed = REFIT_TRY(number<double>(net, "speed", 0.0));  // Mb/s
      if (!(speed >= kMinSpeedMbps && speed <= kMaxSpeedMbps))
        return out_of_range(fmt::format("{}: attribute speed=\"{}\" must be between {} and {} (Mb/s)",
                                        where(net), net.attribute("speed").value(), kMinSpeedMbps,
                                        kMaxSpeedMbps));
      const std::string port = net.attribute("port") ? REFIT_TRY(attribute(net, "port")) : std::string();
      const auto full_name = port.empty() || port == "0" ? name : fmt::format("{}:{}", name, port);
      // NCCL lists a NIC that hangs off no PCIe switch (a socket NIC) under every <cpu>; a name
      // twice anywhere else would be two NICs merged into one.
      if (const auto [seen, fresh] = nic_names_.emplace(full_name, under_pci); !fresh) {
        if (!under_pci && !seen->second) continue;
        return invalid(fmt::format("{}: NIC '{}' is listed twice", where(net), full_name));
      }
      if (nics_.size() == detail::kMaxMachineDevices)
        return out_of_range(
            fmt::format("{}: more than {} NICs in one machine", where(net), detail::kMaxMachineDevices));
      nics_.push_back({.name = full_name,
                       .line_gigabits = speed / 1000.0,
                       .bus_id = under_pci ? here.chain.back() : "",
                       .location = here});
    }
    return {};
  }

  Lines lines_;
  std::map<std::int32_t, FoundGpu> gpus_;  // by NCCL device index
  std::vector<FoundNic> nics_;
  std::map<std::string, bool> nic_names_;  // name -> under a PCIe switch
  std::int32_t cpus_ = 0;
};

}  // namespace

Result<Cluster> import_nccl_topology(std::string_view xml, std::string_view name, std::int32_t min_gpus) {
  // Attribute values end up in names that refit writes as JSON, which must be UTF-8.
  if (const auto bad = first_invalid_utf8(xml))
    return parse_error(fmt::format("line {}: byte {} is not valid UTF-8",
                                   line_of(xml, static_cast<std::ptrdiff_t>(*bad)), *bad));
  pugi::xml_document doc;
  // As a fragment, pugixml keeps text after the root element as a node (read() refuses it)
  // instead of dropping it.
  const auto parsed = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default | pugi::parse_fragment);
  if (!parsed)
    return parse_error(
        fmt::format("line {}: not well-formed XML: {}", line_of(xml, parsed.offset), parsed.description()));
  const auto machine = REFIT_TRY(XmlReader(xml).read(doc));
  const auto node = REFIT_TRY(detail::machine_to_node(machine, std::string(name)));
  const auto gpus_per_node = static_cast<std::int32_t>(node.gpus.size());
  return Cluster::make(detail::replicate_node(node, detail::nodes_for(min_gpus, gpus_per_node)));
}

Result<Cluster> load_nccl_topology_file(const std::filesystem::path& path, std::int32_t min_gpus) {
  const auto text = REFIT_TRY(read_text_file(path));
  return REFIT_TRY_IN(import_nccl_topology(text, path.filename().string(), min_gpus), path.string());
}

}  // namespace refit
