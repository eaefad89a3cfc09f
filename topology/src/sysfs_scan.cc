#include "sysfs_scan.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>

#include <fmt/format.h>

#include "refit/core/utf8.h"
#include "refit/topology/cluster.h"

namespace refit::detail {
namespace {

namespace fs = std::filesystem;

// Whether `path` lies inside the tree `root` (both canonical).
bool within(const fs::path& root, const fs::path& path) {
  return !root.empty() &&
         std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
}

// The first line of a sysfs attribute, read no further than a few hundred bytes (a link to
// /dev/zero must not be read to the end). Empty for a file that resolves outside the tree `root`
// (canonical) or is not a regular file: a link out of the tree would show another file's first
// line in refit's notes, and a FIFO would block the scan.
std::string first_line(const fs::path& root, const fs::path& file) {
  constexpr std::size_t kMaxLine = 256;
  std::error_code ec;
  const auto real = fs::canonical(file, ec);
  if (ec || !within(root, real) || !fs::is_regular_file(real, ec)) return {};
  std::ifstream in(real);
  std::string line(kMaxLine, '\0');
  in.read(line.data(), static_cast<std::streamsize>(kMaxLine));
  line.resize(static_cast<std::size_t>(in.gcount()));
  line.resize(std::min(line.size(), line.find('\n')));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

// The tree's root, canonical; empty when it does not resolve (nothing is read then).
fs::path canonical_root(const fs::path& sysfs_root) {
  std::error_code ec;
  auto root = fs::canonical(sysfs_root, ec);
  return ec ? fs::path() : root;
}

// "0000:1a:00.0": hex digits around two ':' and a '.' (the domain may be longer than 4 digits).
bool is_bus_id(const std::string& s) {
  const auto c1 = s.find(':');
  const auto c2 = s.find(':', c1 == std::string::npos ? c1 : c1 + 1);
  const auto dot = s.find('.', c2 == std::string::npos ? c2 : c2 + 1);
  if (c1 == std::string::npos || c2 == std::string::npos || dot == std::string::npos) return false;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != c1 && i != c2 && i != dot && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// The host bridge ("pci0000:00") and the bus ids below it, down to the device.
PciLocation location_of(const fs::path& root, const fs::path& device_link) {
  std::error_code ec;
  const auto real = fs::canonical(device_link, ec);
  if (ec || !within(root, real)) return {};
  PciLocation loc;
  for (const auto& part : real) {
    const auto name = part.string();
    if (loc.chain.empty()) {
      if (name.starts_with("pci") && name.find(':') != std::string::npos) loc.chain.push_back(name);
    } else if (is_bus_id(name)) {
      loc.chain.push_back(name);
    } else {
      break;
    }
  }
  const auto numa = first_line(root, real / "numa_node");
  if (!numa.empty() && numa != "-1") loc.socket = "numa" + numa;
  return loc;
}

// "mlx5_2" before "mlx5_10": compare the names with their trailing numbers as numbers.
bool natural_less(const std::string& a, const std::string& b) {
  const auto split = [](const std::string& s) {
    auto i = s.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) --i;
    const auto digits = s.substr(i);
    return std::pair(s.substr(0, i), digits.empty() ? -1L : std::stol(digits.substr(0, 18)));
  };
  return split(a) < split(b);
}

std::vector<std::string> sorted_entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end(), natural_less);
  return names;
}

// One port of an RDMA device, if it is ACTIVE and its rate ("400 Gb/sec (4X NDR)") reads.
void scan_port(const fs::path& root, const fs::path& port_dir, const std::string& name,
               const fs::path& device_link, RdmaScan& scan) {
  const auto state = first_line(root, port_dir / "state");
  if (state.find("ACTIVE") == std::string::npos) {
    scan.notes.push_back(fmt::format("RDMA NIC {}: port state '{}', not used", name, printable(state)));
    return;
  }
  const auto rate = first_line(root, port_dir / "rate");
  double gigabits = 0;
  const auto [ptr, ec] = std::from_chars(rate.data(), rate.data() + rate.size(), gigabits);
  if (ec != std::errc{} || std::string_view(ptr).find("Gb/sec") == std::string_view::npos) {
    scan.notes.push_back(
        fmt::format("RDMA NIC {}: rate '{}' does not read as Gb/sec, not used", name, printable(rate)));
    return;
  }
  // A rate no NIC has (nan, 1e300, 0) would fail the whole discovery later, naming a field of a
  // cluster file nobody wrote; the port is left out like one whose rate does not read.
  const BytesPerSecond line{gigabits * 1e9 / 8};
  if (!(line >= cluster_limits::kMinBandwidth && line <= cluster_limits::kMaxBandwidth)) {
    scan.notes.push_back(fmt::format("RDMA NIC {}: rate '{}' is outside {} to {} Gb/s, not used", name,
                                     printable(rate), cluster_limits::kMinBandwidth.value * 8 / 1e9,
                                     cluster_limits::kMaxBandwidth.value * 8 / 1e9));
    return;
  }
  std::error_code link_ec;
  const auto bus_id = fs::canonical(device_link, link_ec).filename().string();
  scan.nics.push_back({.name = name,
                       .line_gigabits = gigabits,
                       .bus_id = link_ec ? std::string() : printable(bus_id),
                       .location = location_of(root, device_link)});
}

}  // namespace

PciLocation locate_pci_device(const fs::path& sysfs_root, const std::string& bus_id) {
  return location_of(canonical_root(sysfs_root), sysfs_root / "bus" / "pci" / "devices" / bus_id);
}

RdmaScan scan_rdma_nics(const fs::path& sysfs_root) {
  RdmaScan scan;
  const auto dir = sysfs_root / "class" / "infiniband";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    scan.notes.push_back(fmt::format("no RDMA NIC: {} does not exist", dir.string()));
    return scan;
  }
  const auto root = canonical_root(sysfs_root);
  for (const auto& device : sorted_entries(dir))
    for (const auto& port : sorted_entries(dir / device / "ports"))
      scan_port(root, dir / device / "ports" / port, printable(fmt::format("{}:{}", device, port)),
                dir / device / "device", scan);
  if (scan.nics.empty()) scan.notes.push_back(fmt::format("no RDMA NIC: none active under {}", dir.string()));
  return scan;
}

}  // namespace refit::detail
