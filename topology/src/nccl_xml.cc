#include "refit/topology/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "cluster_builder.h"
#include "first_error.h"
#include "found_machine.h"
#include "text_file.h"

namespace refit {
namespace {

using detail::FoundGpu;
using detail::FoundNic;
using detail::PciLocation;

// PCI class codes as NCCL writes them in tclass.
constexpr std::string_view kNvSwitchClass = "0x068000";
bool is_gpu_class(std::string_view c) { return c == "0x030000" || c == "0x030200"; }

std::int64_t line_of(std::string_view text, std::ptrdiff_t offset) {
  if (offset < 0 || static_cast<std::size_t>(offset) > text.size()) return 0;
  return 1 + std::count(text.begin(), text.begin() + offset, '\n');
}

// Walks the XML tree, collecting GPUs and NICs with their place in the PCIe tree.
class XmlReader {
 public:
  explicit XmlReader(std::string_view text) : text_(text) {}

  Result<detail::FoundMachine> read(const pugi::xml_document& doc) {
    const auto root = doc.document_element();
    if (std::string_view(root.name()) != "system")
      return invalid(
          fmt::format("{}: expected <system> as the root element (an NCCL topology dump)", where(root)));
    if (auto ok = walk(root, {}); !ok) return std::unexpected(ok.error());
    if (gpus_.empty()) return invalid("no <gpu> element: the file describes no GPU");
    detail::FoundMachine machine;
    for (auto& [dev, gpu] : gpus_) machine.gpus.push_back(std::move(gpu));  // NCCL device order
    machine.nics = std::move(nics_);
    return machine;
  }

 private:
  // "line 12: <gpu dev="3">": the element and its first attribute, which identifies it.
  std::string where(const pugi::xml_node& n) const {
    const auto a = n.first_attribute();
    return fmt::format("line {}: <{}{}>", line_of(text_, n.offset_debug()), n.name(),
                       a ? fmt::format(" {}=\"{}\"", a.name(), a.value()) : std::string());
  }

  Result<std::string> attribute(const pugi::xml_node& n, const char* name) const {
    const auto a = n.attribute(name);
    if (!a) return invalid(fmt::format("{}: attribute '{}' missing", where(n), name));
    return std::string(a.value());
  }

  template <class T>
  Result<T> number(const pugi::xml_node& n, const char* name, T min) const {
    auto text = attribute(n, name);
    if (!text) return std::unexpected(text.error());
    T v{};
    const auto* end = text->data() + text->size();
    const auto [ptr, ec] = std::from_chars(text->data(), end, v);
    if (text->empty() || ec != std::errc{} || ptr != end)
      return invalid(fmt::format("{}: attribute {}=\"{}\" is not a number", where(n), name, *text));
    if (v < min)
      return invalid(fmt::format("{}: attribute {}=\"{}\" must be >= {}", where(n), name, *text, min));
    return v;
  }

  Result<void> walk(const pugi::xml_node& node, const PciLocation& here) {
    for (const auto child : node.children()) {
      const std::string_view name = child.name();
      Result<void> ok;
      if (name == "cpu") {
        const auto numa = child.attribute("numaid");
        const auto socket = numa ? fmt::format("cpu{}", numa.value()) : fmt::format("cpu#{}", cpus_);
        ++cpus_;
        ok = walk(child, PciLocation{socket, {socket}});
      } else if (name == "pci") {
        auto bus = attribute(child, "busid");
        if (!bus) return std::unexpected(bus.error());
        PciLocation below = here;
        below.chain.push_back(detail::normalize_bus_id(*bus));
        ok = walk(child, below);
      } else if (name == "gpu") {
        ok = add_gpu(child, here);
      } else if (name == "nic") {
        ok = add_nic(child, here);
      }  // other elements (c2c, nvlink outside a gpu, ...) carry nothing refit models
      if (!ok) return ok;
    }
    return {};
  }

  Result<void> add_links(const pugi::xml_node& gpu_node, FoundGpu& gpu) const {
    for (const auto link : gpu_node.children("nvlink")) {
      auto target = attribute(link, "target");
      auto count = number<std::int32_t>(link, "count", 1);
      auto tclass = attribute(link, "tclass");
      if (auto e = detail::first_error(target, count, tclass)) return std::unexpected(*e);
      if (*tclass == kNvSwitchClass) gpu.switch_links += *count;
      if (is_gpu_class(*tclass))
        gpu.peer_links.insert(gpu.peer_links.end(), static_cast<std::size_t>(*count),
                              detail::normalize_bus_id(*target));
    }  // links to CPUs (POWER, Grace C2C) do not join GPUs
    return {};
  }

  Result<void> add_gpu(const pugi::xml_node& n, const PciLocation& here) {
    const auto parent = n.parent();
    if (std::string_view(parent.name()) != "pci" || here.chain.empty())
      return invalid(fmt::format("{}: not inside a <pci busid=...> element", where(n)));
    auto dev = number<std::int32_t>(n, "dev", 0);
    auto sm = number<std::int32_t>(n, "sm", 1);
    if (auto e = detail::first_error(dev, sm)) return std::unexpected(*e);
    if (gpus_.contains(*dev))
      return invalid(fmt::format("{}: GPU dev {} appears twice ({})", where(n), *dev, gpus_[*dev].what));
    FoundGpu gpu;
    gpu.what = where(n);
    gpu.bus_id = here.chain.back();
    const bool h200 = std::string_view(parent.attribute("device").value()) == hw::kH200PciDeviceId;
    gpu.model = hw::gpu_model_for(*sm, h200 ? "H200" : "");
    gpu.location = here;
    if (auto ok = add_links(n, gpu); !ok) return ok;
    gpus_[*dev] = std::move(gpu);
    return {};
  }

  Result<void> add_nic(const pugi::xml_node& n, const PciLocation& here) {
    const bool under_pci = std::string_view(n.parent().name()) == "pci";
    for (const auto net : n.children("net")) {
      auto name = attribute(net, "name");
      auto speed = number<double>(net, "speed", 0.0);  // Mb/s
      if (auto e = detail::first_error(name, speed)) return std::unexpected(*e);
      if (*speed == 0.0) return invalid(fmt::format("{}: attribute speed=\"0\" must be > 0", where(net)));
      const std::string port = net.attribute("port").value();
      const auto full_name = port.empty() || port == "0" ? *name : fmt::format("{}:{}", *name, port);
      // NCCL lists a NIC that hangs off no PCIe switch (a socket NIC) under every <cpu>.
      if (!nic_names_.insert(full_name).second) continue;
      nics_.push_back({full_name, *speed / 1000.0, under_pci ? here.chain.back() : "", here});
    }
    return {};
  }

  std::string_view text_;
  std::map<std::int32_t, FoundGpu> gpus_;  // by NCCL device index
  std::vector<FoundNic> nics_;
  std::set<std::string> nic_names_;
  std::int32_t cpus_ = 0;
};

}  // namespace

Result<Cluster> import_nccl_topology(std::string_view xml, std::string_view name,
                                     const RankPlacementOptions& placement) {
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed)
    return invalid(
        fmt::format("line {}: not well-formed XML: {}", line_of(xml, parsed.offset), parsed.description()));
  auto machine = XmlReader(xml).read(doc);
  if (!machine) return std::unexpected(machine.error());
  auto node = detail::machine_to_node(*machine, std::string(name));
  if (!node) return std::unexpected(node.error());
  const auto gpus_per_node = static_cast<std::int32_t>(node->gpus.size());
  return detail::finish_cluster(detail::replicate_node(*node, detail::nodes_for(placement, gpus_per_node)),
                                placement);
}

Result<Cluster> load_nccl_topology_file(const std::filesystem::path& path,
                                        const RankPlacementOptions& placement) {
  auto text = detail::read_text_file(path);
  if (!text) return std::unexpected(text.error());
  auto cluster = import_nccl_topology(*text, path.filename().string(), placement);
  if (!cluster) return std::unexpected(std::move(cluster.error()).in(path.string()));
  return cluster;
}

}  // namespace refit
