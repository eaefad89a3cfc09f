#pragma once
// Builds a small sysfs tree in a temporary folder, shaped like Linux's: PCI devices as nested
// folders under devices/pci<domain>:<bus>/, bus/pci/devices/<bus id> links to them, and RDMA
// devices under class/infiniband/<name>/ with a device link and ports/<p>/{state,rate}.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace refit::testing {

class FakeSysfs {
 public:
  FakeSysfs() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() / ("refit_sysfs_" + std::to_string(::getpid()) + "_" +
                                                      test->test_suite_name() + "_" + test->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::filesystem::path& root() const { return root_; }

  // `chain` = {"pci0000:00", "0000:00:01.0", ..., device}; returns the device's folder.
  std::filesystem::path add_pci_device(const std::vector<std::string>& chain, int numa_node = -1) {
    auto dir = root_ / "devices";
    for (const auto& part : chain) dir /= part;
    std::filesystem::create_directories(dir);
    write(dir / "numa_node", std::to_string(numa_node));
    const auto links = root_ / "bus" / "pci" / "devices";
    std::filesystem::create_directories(links);
    std::filesystem::create_directory_symlink(dir, links / chain.back());
    return dir;
  }

  // ports: (state, rate) per port, numbered from 1, e.g. {"4: ACTIVE", "400 Gb/sec (4X NDR)"}.
  void add_rdma_nic(const std::string& name, const std::filesystem::path& pci_device,
                    const std::vector<std::pair<std::string, std::string>>& ports) {
    const auto dir = root_ / "class" / "infiniband" / name;
    std::filesystem::create_directories(dir);
    std::filesystem::create_directory_symlink(pci_device, dir / "device");
    for (std::size_t p = 0; p < ports.size(); ++p) {
      const auto port = dir / "ports" / std::to_string(p + 1);
      std::filesystem::create_directories(port);
      write(port / "state", ports[p].first);
      write(port / "rate", ports[p].second);
    }
  }

  // A file inside the tree (e.g. the fake NVML's machine description).
  std::filesystem::path write_file(const std::string& name, const std::string& text) {
    write(root_ / name, text);
    return root_ / name;
  }

 private:
  static void write(const std::filesystem::path& file, const std::string& text) {
    std::ofstream(file) << text << "\n";
  }

  std::filesystem::path root_;
};

}  // namespace refit::testing
