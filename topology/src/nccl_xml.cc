#include "refit/topology/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <pugixml.hpp>

#include "cluster_builder.h"
#include "found_machine.h"
#include "refit/core/try.h"
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

  [[nodiscard]] Result<detail::FoundMachine> read(const pugi::xml_document& doc) {
    const auto root = doc.document_element();
    if (std::string_view(root.name()) != "system")
      return invalid(
          fmt::format("{}: expected <system> as the root element (an NCCL topology dump)", where(root)));
    REFIT_TRY(walk(root, {}));
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

  [[nodiscard]] Result<std::string> attribute(const pugi::xml_node& n, const char* name) const {
    const auto a = n.attribute(name);
    if (!a) return invalid(fmt::format("{}: attribute '{}' missing", where(n), name));
    return std::string(a.value());
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
    if (v < min)
      return out_of_range(fmt::format("{}: attribute {}=\"{}\" must be >= {}", where(n), name, text, min));
    return v;
  }

  [[nodiscard]] Result<void> walk(const pugi::xml_node& node, const PciLocation& here) {
    for (const auto child : node.children()) {
      const std::string_view name = child.name();
      if (name == "cpu") {
        const auto numa = child.attribute("numaid");
        const auto socket = numa ? fmt::format("cpu{}", numa.value()) : fmt::format("cpu#{}", cpus_);
        ++cpus_;
        REFIT_TRY(walk(child, PciLocation{.socket = socket, .chain = {socket}}));
      } else if (name == "pci") {
        const auto bus = REFIT_TRY(attribute(child, "busid"));
        PciLocation below = here;
        below.chain.push_back(detail::normalize_bus_id(bus));
        REFIT_TRY(walk(child, below));
      } else if (name == "gpu") {
        REFIT_TRY(add_gpu(child, here));
      } else if (name == "nic") {
        REFIT_TRY(add_nic(child, here));
      }  // other elements (c2c, nvlink outside a gpu, ...) carry nothing refit models
    }
    return {};
  }

  // The attributes are read in order, so the first bad one is the one reported.
  [[nodiscard]] Result<void> add_links(const pugi::xml_node& gpu_node, FoundGpu& gpu) const {
    for (const auto link : gpu_node.children("nvlink")) {
      const auto target = REFIT_TRY(attribute(link, "target"));
      const auto count = REFIT_TRY(number<std::int32_t>(link, "count", 1));
      const auto tclass = REFIT_TRY(attribute(link, "tclass"));
      if (tclass == kNvSwitchClass) gpu.switch_links += count;
      if (is_gpu_class(tclass))
        gpu.peer_links.insert(gpu.peer_links.end(), static_cast<std::size_t>(count),
                              detail::normalize_bus_id(target));
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
    FoundGpu gpu;
    gpu.what = where(n);
    gpu.bus_id = here.chain.back();
    const bool h200 = std::string_view(parent.attribute("device").value()) == hw::kH200PciDeviceId;
    gpu.model = hw::gpu_model_for(sm, h200 ? "H200" : "");
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
      if (speed == 0.0) return out_of_range(fmt::format("{}: attribute speed=\"0\" must be > 0", where(net)));
      const std::string port = net.attribute("port").value();
      const auto full_name = port.empty() || port == "0" ? name : fmt::format("{}:{}", name, port);
      // NCCL lists a NIC that hangs off no PCIe switch (a socket NIC) under every <cpu>.
      if (!nic_names_.insert(full_name).second) continue;
      nics_.push_back({.name = full_name,
                       .line_gigabits = speed / 1000.0,
                       .bus_id = under_pci ? here.chain.back() : "",
                       .location = here});
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

Result<Cluster> import_nccl_topology(std::string_view xml, std::string_view name, std::int32_t min_gpus) {
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed)
    return parse_error(
        fmt::format("line {}: not well-formed XML: {}", line_of(xml, parsed.offset), parsed.description()));
  const auto machine = REFIT_TRY(XmlReader(xml).read(doc));
  const auto node = REFIT_TRY(detail::machine_to_node(machine, std::string(name)));
  const auto gpus_per_node = static_cast<std::int32_t>(node.gpus.size());
  return Cluster::make(detail::replicate_node(node, detail::nodes_for(min_gpus, gpus_per_node)));
}

Result<Cluster> load_nccl_topology_file(const std::filesystem::path& path, std::int32_t min_gpus) {
  const auto text = REFIT_TRY(detail::read_text_file(path));
  return REFIT_TRY_IN(import_nccl_topology(text, path.filename().string(), min_gpus), path.string());
}

}  // namespace refit
