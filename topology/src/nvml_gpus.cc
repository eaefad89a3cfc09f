#include "nvml_gpus.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nvml_api.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"

namespace refit::detail {
namespace {

struct CloseLibrary {
  void operator()(void* handle) const { dlclose(handle); }
};
using LibraryHandle = std::unique_ptr<void, CloseLibrary>;

struct Api {
  nvml::InitFn init = nullptr;
  nvml::ShutdownFn shutdown = nullptr;
  nvml::ErrorStringFn error_string = nullptr;
  nvml::GetCountFn count = nullptr;
  nvml::GetHandleByIndexFn handle = nullptr;
  nvml::GetPciInfoFn pci_info = nullptr;
  nvml::GetNameFn name = nullptr;
  nvml::GetCudaComputeCapabilityFn compute_capability = nullptr;
  nvml::GetNvLinkStateFn link_state = nullptr;
  nvml::GetNvLinkRemotePciInfoFn link_remote_pci = nullptr;
  nvml::GetNvLinkRemoteDeviceTypeFn link_remote_type = nullptr;  // optional (newer drivers)
  nvml::GetGpuFabricInfoVFn fabric_info = nullptr;               // optional (newer drivers)
};

// dlsym gives an object pointer; copying its bits is the portable way to a function pointer.
template <class Fn>
void bind(void* library, const char* symbol, Fn& fn) {
  void* p = dlsym(library, symbol);
  static_assert(sizeof(p) == sizeof(fn));
  std::memcpy(&fn, &p, sizeof(fn));
}

[[nodiscard]] Result<Api> bind_api(void* library, const std::string& path) {
  Api a;
  bind(library, "nvmlInit_v2", a.init);
  bind(library, "nvmlShutdown", a.shutdown);
  bind(library, "nvmlErrorString", a.error_string);
  bind(library, "nvmlDeviceGetCount_v2", a.count);
  bind(library, "nvmlDeviceGetHandleByIndex_v2", a.handle);
  bind(library, "nvmlDeviceGetPciInfo_v3", a.pci_info);
  bind(library, "nvmlDeviceGetName", a.name);
  bind(library, "nvmlDeviceGetCudaComputeCapability", a.compute_capability);
  bind(library, "nvmlDeviceGetNvLinkState", a.link_state);
  bind(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.link_remote_pci);
  bind(library, "nvmlDeviceGetNvLinkRemoteDeviceType", a.link_remote_type);
  bind(library, "nvmlDeviceGetGpuFabricInfoV", a.fabric_info);
  const std::pair<bool, const char*> required[] = {
      {a.init != nullptr, "nvmlInit_v2"},
      {a.shutdown != nullptr, "nvmlShutdown"},
      {a.error_string != nullptr, "nvmlErrorString"},
      {a.count != nullptr, "nvmlDeviceGetCount_v2"},
      {a.handle != nullptr, "nvmlDeviceGetHandleByIndex_v2"},
      {a.pci_info != nullptr, "nvmlDeviceGetPciInfo_v3"},
      {a.name != nullptr, "nvmlDeviceGetName"},
      {a.compute_capability != nullptr, "nvmlDeviceGetCudaComputeCapability"},
      {a.link_state != nullptr, "nvmlDeviceGetNvLinkState"},
      {a.link_remote_pci != nullptr, "nvmlDeviceGetNvLinkRemotePciInfo_v2"}};
  for (const auto& [found, symbol] : required)
    if (!found)
      return invalid(fmt::format("{}: has no {}: not NVML, or one older than refit reads (--nvml-library)",
                                 path, symbol));
  return a;
}

struct ShutdownOnExit {
  const Api& api;
  ~ShutdownOnExit() { api.shutdown(); }
};

// One active NVLink: the remote's bus id and, when NVML says, whether it is a GPU or a switch.
struct Link {
  std::string remote;
  int remote_type = -1;
};

struct ScannedGpu {
  FoundGpu gpu;
  std::vector<Link> links;
};

std::string clique_of(const Api& api, nvml::Device device) {
  if (!api.fabric_info) return {};
  nvml::FabricInfoV2 info{};
  info.version = nvml::kFabricInfoV2Version;
  if (api.fabric_info(device, &info) != nvml::kSuccess || info.status != nvml::kSuccess ||
      info.state != nvml::kFabricStateCompleted)
    return {};
  if (std::all_of(std::begin(info.cluster_uuid), std::end(info.cluster_uuid), [](auto b) { return b == 0; }))
    return {};  // a zero cluster UUID: not part of a multi-node NVLink fabric
  std::string uuid;
  for (const auto b : info.cluster_uuid) uuid += fmt::format("{:02x}", b);
  return fmt::format("{}/{}", uuid, info.clique_id);
}

std::vector<Link> links_of(const Api& api, nvml::Device device) {
  std::vector<Link> links;
  for (unsigned int l = 0; l < nvml::kMaxNvLinks; ++l) {
    int state = 0;
    nvml::PciInfo remote{};
    // A link index the GPU does not have answers an error: it is simply not there.
    if (api.link_state(device, l, &state) != nvml::kSuccess || state != nvml::kEnabled) continue;
    if (api.link_remote_pci(device, l, &remote) != nvml::kSuccess) continue;
    Link link{.remote = normalize_bus_id(remote.bus_id), .remote_type = -1};
    if (api.link_remote_type && api.link_remote_type(device, l, &link.remote_type) != nvml::kSuccess)
      link.remote_type = -1;
    links.push_back(std::move(link));
  }
  return links;
}

[[nodiscard]] Result<ScannedGpu> scan_gpu(const Api& api, unsigned int index) {
  const auto check = [&](nvml::Return r, const char* call) -> Result<void> {
    if (r == nvml::kSuccess) return {};
    return fail(ErrorCode::kRuntime,
                fmt::format("NVML {} failed for GPU {}: {}", call, index, api.error_string(r)));
  };
  nvml::Device device = nullptr;
  nvml::PciInfo pci{};
  char name[96] = {};
  int major = 0;
  int minor = 0;
  REFIT_TRY(check(api.handle(index, &device), "nvmlDeviceGetHandleByIndex_v2"));
  REFIT_TRY(check(api.pci_info(device, &pci), "nvmlDeviceGetPciInfo_v3"));
  REFIT_TRY(check(api.name(device, name, sizeof(name)), "nvmlDeviceGetName"));
  REFIT_TRY(check(api.compute_capability(device, &major, &minor), "nvmlDeviceGetCudaComputeCapability"));
  ScannedGpu s;
  s.gpu.bus_id = printable(normalize_bus_id(pci.bus_id));
  s.gpu.name = printable(std::string_view(name, strnlen(name, sizeof(name))));
  s.gpu.what = fmt::format("GPU {} ({}, {})", index, s.gpu.name, s.gpu.bus_id);
  s.gpu.model = hw::gpu_model_for(major * 10 + minor, s.gpu.name);
  s.gpu.clique = clique_of(api, device);
  s.links = links_of(api, device);
  return s;
}

// Direct links to a listed GPU join the two; NVSwitch links (said so by NVML, or any remote that
// is not a GPU when NVML cannot say) join the node's switch plane.
void classify_links(std::vector<ScannedGpu>& scanned, std::vector<std::string>& notes) {
  std::map<std::string, bool> listed;
  for (const auto& s : scanned) listed[s.gpu.bus_id] = true;
  for (auto& s : scanned) {
    for (const auto& link : s.links) {
      const bool gpu_remote = listed.contains(link.remote);
      if (gpu_remote && link.remote_type != nvml::kRemoteSwitch) {
        s.gpu.peer_links.push_back(link.remote);
      } else if (link.remote_type == nvml::kRemoteSwitch || link.remote_type == -1) {
        ++s.gpu.switch_links;
      } else if (link.remote_type == nvml::kRemoteGpu) {
        notes.push_back(
            fmt::format("{}: NVLink to GPU {}, which NVML does not list: ignored", s.gpu.what, link.remote));
      }  // links to CPUs (IBM NPU) carry no GPU-to-GPU traffic
    }
  }
}

void note_cliques(const std::vector<ScannedGpu>& scanned, std::vector<std::string>& notes) {
  std::map<std::string, std::vector<std::size_t>> cliques;
  for (std::size_t g = 0; g < scanned.size(); ++g)
    if (!scanned[g].gpu.clique.empty()) cliques[scanned[g].gpu.clique].push_back(g);
  for (const auto& [clique, gpus] : cliques)
    notes.push_back(
        fmt::format("GPUs {} are in multi-node NVLink clique {} (cluster UUID/clique id); its GPUs on other "
                    "nodes are not visible from here: describe the whole domain with a preset or a cluster "
                    "file",
                    fmt::join(gpus, ","), clique));
}

}  // namespace

Result<NvmlScan> scan_nvml_gpus(const std::string& library) {
  NvmlScan scan;
  LibraryHandle handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* why = dlerror();
    scan.notes.push_back(fmt::format("no NVIDIA GPU: NVML ({}) could not be loaded: {}", library,
                                     why ? why : "unknown reason"));
    return scan;
  }
  const Api api = REFIT_TRY(bind_api(handle.get(), library));
  if (const auto r = api.init(); r != nvml::kSuccess) {
    scan.notes.push_back(fmt::format("no NVIDIA GPU: NVML did not start: {}", api.error_string(r)));
    return scan;
  }
  const ShutdownOnExit shutdown{api};
  unsigned int count = 0;
  if (const auto r = api.count(&count); r != nvml::kSuccess)
    return fail(ErrorCode::kRuntime,
                fmt::format("NVML nvmlDeviceGetCount_v2 failed: {}", api.error_string(r)));
  if (count == 0) scan.notes.push_back("no NVIDIA GPU: NVML lists none");
  std::vector<ScannedGpu> scanned;
  for (unsigned int i = 0; i < count; ++i) scanned.push_back(REFIT_TRY(scan_gpu(api, i)));
  classify_links(scanned, scan.notes);
  note_cliques(scanned, scan.notes);
  for (auto& s : scanned) scan.gpus.push_back(std::move(s.gpu));
  return scan;
}

}  // namespace refit::detail
