// A fake NVML for the discovery tests. nvmlInit_v2 reads the machine to report from the file
// named by REFIT_FAKE_NVML_CONFIG (test code may read the environment; refit itself may not);
// without it, init fails as NVML does when no driver is loaded. One record per line:
//   gpu <bus id> <sm> <name>                  a GPU (index = order of the gpu lines)
//   link <gpu index> <remote bus id> <gpu|switch|npu>   one active NVLink
//   fabric <gpu index> <32 hex digits cluster uuid> <clique id> <state>
//   fail <NVML function>                      that function returns an error
// Built twice: with REFIT_FAKE_NVML_OLD the optional entry points (remote device type, fabric
// info) are missing, as in older drivers.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nvml_api.h"

namespace {

using refit::nvml::Device;
using refit::nvml::Return;

constexpr Return kUninitialized = 1;
constexpr Return kInvalidArgument = 2;
constexpr Return kNotSupported = 3;
constexpr Return kUnknownError = 999;
constexpr Return kDriverNotLoaded = 9;
constexpr Return kVersionMismatch = 25;

struct FakeLink {
  std::string remote;
  int type = 0;
};

struct FakeGpu {
  std::string bus;
  int sm = 0;
  std::string name;
  std::vector<FakeLink> links;
  bool has_fabric = false;
  unsigned char uuid[16] = {};
  unsigned int clique = 0;
  unsigned char state = 0;
};

struct FakeMachine {
  bool initialized = false;
  std::vector<FakeGpu> gpus;
  std::vector<std::string> failing;
};

FakeMachine& machine() {
  static FakeMachine m;
  return m;
}

bool fails(const char* function) {
  for (const auto& f : machine().failing)
    if (f == function) return true;
  return false;
}

void read_fabric(std::istringstream& in, FakeGpu& gpu) {
  std::string uuid;
  unsigned int state = 0;
  in >> uuid >> gpu.clique >> state;
  for (std::size_t i = 0; i < 16 && 2 * i + 1 < uuid.size(); ++i)
    gpu.uuid[i] = static_cast<unsigned char>(std::stoul(uuid.substr(2 * i, 2), nullptr, 16));
  gpu.state = static_cast<unsigned char>(state);
  gpu.has_fabric = true;
}

bool load(const char* path) {
  std::ifstream file(path);
  if (!file) return false;
  FakeMachine m;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "gpu") {
      FakeGpu g;
      in >> g.bus >> g.sm;
      std::getline(in >> std::ws, g.name);
      m.gpus.push_back(g);
    } else if (kind == "link" || kind == "fabric") {
      std::size_t index = 0;
      in >> index;
      if (index >= m.gpus.size()) return false;
      if (kind == "fabric") {
        read_fabric(in, m.gpus[index]);
        continue;
      }
      FakeLink link;
      std::string type;
      in >> link.remote >> type;
      link.type = type == "gpu" ? 0 : type == "npu" ? 1 : 2;
      m.gpus[index].links.push_back(link);
    } else if (kind == "fail") {
      std::string function;
      in >> function;
      m.failing.push_back(function);
    }
  }
  m.initialized = true;
  machine() = m;
  return true;
}

const FakeGpu* gpu_of(Device d) {
  const auto index = reinterpret_cast<std::uintptr_t>(d);
  if (index == 0 || index > machine().gpus.size()) return nullptr;
  return &machine().gpus[index - 1];
}

// NVML writes bus ids with an 8-digit domain in upper case: "00000000:19:00.0".
void fill_pci(const std::string& bus, refit::nvml::PciInfo* info) {
  std::memset(info, 0, sizeof(*info));
  std::string upper = "0000" + bus;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::snprintf(info->bus_id, sizeof(info->bus_id), "%s", upper.c_str());
}

}  // namespace

extern "C" {

Return nvmlInit_v2() {
  const char* path = std::getenv("REFIT_FAKE_NVML_CONFIG");
  return path && load(path) ? refit::nvml::kSuccess : kDriverNotLoaded;
}

Return nvmlShutdown() {
  machine().initialized = false;
  return refit::nvml::kSuccess;
}

const char* nvmlErrorString(Return r) {
  return r == kDriverNotLoaded ? "Driver Not Loaded" : "Fake NVML error";
}

Return nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!machine().initialized) return kUninitialized;
  *count = static_cast<unsigned int>(machine().gpus.size());
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, Device* device) {
  if (index >= machine().gpus.size()) return kInvalidArgument;
  *device = reinterpret_cast<Device>(static_cast<std::uintptr_t>(index) + 1);
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetPciInfo_v3(Device d, refit::nvml::PciInfo* info) {
  const auto* g = gpu_of(d);
  if (!g) return kInvalidArgument;
  if (fails("nvmlDeviceGetPciInfo_v3")) return kUnknownError;
  fill_pci(g->bus, info);
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetName(Device d, char* name, unsigned int length) {
  const auto* g = gpu_of(d);
  if (!g) return kInvalidArgument;
  std::snprintf(name, length, "%s", g->name.c_str());
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetCudaComputeCapability(Device d, int* major, int* minor) {
  const auto* g = gpu_of(d);
  if (!g) return kInvalidArgument;
  *major = g->sm / 10;
  *minor = g->sm % 10;
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetNvLinkState(Device d, unsigned int link, int* active) {
  const auto* g = gpu_of(d);
  if (!g || link >= refit::nvml::kMaxNvLinks) return kInvalidArgument;
  if (link >= g->links.size()) return kNotSupported;
  *active = refit::nvml::kEnabled;
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned int link, refit::nvml::PciInfo* info) {
  const auto* g = gpu_of(d);
  if (!g || link >= g->links.size()) return kInvalidArgument;
  fill_pci(g->links[link].remote, info);
  return refit::nvml::kSuccess;
}

#ifndef REFIT_FAKE_NVML_OLD
Return nvmlDeviceGetNvLinkRemoteDeviceType(Device d, unsigned int link, int* type) {
  const auto* g = gpu_of(d);
  if (!g || link >= g->links.size()) return kInvalidArgument;
  *type = g->links[link].type;
  return refit::nvml::kSuccess;
}

Return nvmlDeviceGetGpuFabricInfoV(Device d, refit::nvml::FabricInfoV2* info) {
  const auto* g = gpu_of(d);
  if (!g) return kInvalidArgument;
  if (info->version != refit::nvml::kFabricInfoV2Version) return kVersionMismatch;
  if (!g->has_fabric) return kNotSupported;
  std::memcpy(info->cluster_uuid, g->uuid, sizeof(g->uuid));
  info->status = refit::nvml::kSuccess;
  info->clique_id = g->clique;
  info->state = g->state;
  return refit::nvml::kSuccess;
}
#endif

}  // extern "C"
